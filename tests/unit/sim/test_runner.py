"""Tests of the simulator's event loop with the real engines and presets.

The policies here are tiny test doubles of the `Policy` protocol: a fixed target that records
the views it is handed, and a scale-from-zero policy that wakes a variant at zero when the
gateway queue it sees is not empty. Defaults of `SimSettings` unless a test says otherwise:
control every 30 s (first at 30), wake every 1 s, scrape every 5 s, lag 10 s, actuation 2 s,
tail 300 s.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from llmscaler.sim.hardware.presets import preset
from llmscaler.sim.runner import SimSettings, check_settings, run
from llmscaler.sim.vocabulary import ControlView, ScaleEvent, SimResult, Trace, VariantSpec
from tests.support.paths import TRACES
from tests.support.prerequisites import need_file


def h100(**overrides: object) -> VariantSpec:
    values: dict[str, object] = {'initial_replicas': 1, 'max_replicas': 4}
    values.update(overrides)
    return preset(name='llama-3.1-8b-h100', variant_name='h100', **values)


def idle_prefill(prompt: int) -> float:
    """The TTFT of a prompt on an idle H100: one prefill step, nothing cached."""
    return h100().perf.step_seconds(decode_seqs=0, prefill_tokens=prompt, context_tokens=0)


def steady(n: int, *, gap: float = 2.0, prompt: int = 500, output: int = 50) -> Trace:
    return Trace(
        name='steady',
        arrivals=np.arange(n, dtype=np.float64) * gap,
        input_tokens=np.full(n, prompt, dtype=np.int64),
        output_tokens=np.full(n, output, dtype=np.int64),
    )


def poisson(*, seed: int, rate: float, duration: float) -> Trace:
    rng = np.random.default_rng(seed)
    n = int(rng.poisson(rate * duration))
    arrivals = np.sort(rng.uniform(0.0, duration, n))
    prompt = np.clip(rng.lognormal(6.6, 1.0, n), 1, 8000).astype(np.int64)
    output = np.clip(rng.lognormal(5.0, 0.9, n), 1, 1000).astype(np.int64)
    return Trace(name='poisson', arrivals=arrivals, input_tokens=prompt, output_tokens=output)


class Fixed:
    """Asks for the same targets every cycle; records every view."""

    def __init__(self, wanted: dict[str, int]) -> None:
        self.wanted = wanted
        self.views: list[ControlView] = []
        self.wakes = 0

    @property
    def name(self) -> str:
        return 'fixed'

    def targets(self, *, view: ControlView) -> dict[str, int]:
        self.views.append(view)
        return dict(self.wanted)

    def wake(self, *, view: ControlView) -> dict[str, int]:
        self.wakes += 1
        return {}


class WakeOnQueue:
    """Never scales on the cycle; wakes every variant at zero when the visible queue is not 0."""

    def __init__(self) -> None:
        self.woke_at: list[float] = []

    @property
    def name(self) -> str:
        return 'wake-on-queue'

    def targets(self, *, view: ControlView) -> dict[str, int]:
        return {}

    def wake(self, *, view: ControlView) -> dict[str, int]:
        queued = sum(p.queue_size or 0.0 for p in view.snapshot.pools)
        if queued <= 0:
            return {}
        asleep = {v.name: 1 for v in view.snapshot.variants if v.current_replicas == 0}
        if asleep:
            self.woke_at.append(view.now)
        return asleep


def finished(result: SimResult) -> bool:
    return all(math.isfinite(r.finished) and not r.failed for r in result.requests)


# ---- a fixed target --------------------------------------------------------------------------


def test_fixed_target_scales_after_the_actuation_delay_and_serves_everything() -> None:
    policy = Fixed({'h100': 2})
    result = run(trace=steady(120), variants=[h100()], policy=policy, settings=SimSettings())
    # decision at the first control tick (30), written 2 s later; later cycles change nothing
    assert result.events == [
        ScaleEvent(time=32.0, variant='h100', before=1, after=2, reason='policy')
    ]
    assert len(result.requests) == 120
    assert finished(result)
    # an idle H100: TTFT = one prefill step of the 500-token prompt (about 20 ms)
    assert [r.ttft for r in result.requests] == pytest.approx([idle_prefill(500)] * 120)
    # last arrival 238, tail 300 → end 538; h100-0000 0 → 538, h100-0001 32 → 538, charged
    # until the last request finishes (238 + one idle request's time), the rest after it
    assert result.duration == 538.0
    done = max(r.finished for r in result.requests)
    assert 238.0 < done < 239.0
    assert result.charged_until == done
    assert result.replica_seconds == pytest.approx({'h100': done + (done - 32.0)})
    assert result.tail_replica_seconds == pytest.approx({'h100': 2 * (538.0 - done)})
    # each request is done in ~0.37 s, so every arrival finds both replicas idle: lowest name
    assert {r.replica for r in result.requests} == {'h100-0000'}
    assert result.policy == 'fixed'
    assert result.trace == 'steady'
    assert result.wall_seconds == 0.0


def test_timeline_counts_existing_and_ready_replicas() -> None:
    result = run(
        trace=steady(120), variants=[h100()], policy=Fixed({'h100': 2}), settings=SimSettings()
    )
    timeline = result.timeline
    assert timeline.times[:4] == [0.0, 10.0, 20.0, 30.0]
    assert result.sample_interval == 10.0
    # created at 32 (exists from the sample at 40), ready at 32 + 90 = 122 (from the one at 130)
    assert timeline.replicas['h100'][:5] == [1, 1, 1, 1, 2]
    assert timeline.ready['h100'][12:14] == [1, 2]
    assert len(timeline.times) == len(timeline.kv_usage) == len(timeline.gateway_queue)
    assert timeline.times[-1] == 530.0
    assert max(timeline.gateway_queue) == 0


def test_the_policy_sees_what_the_fleet_did() -> None:
    policy = Fixed({'h100': 2})
    result = run(trace=steady(120), variants=[h100()], policy=policy, settings=SimSettings())
    views = {v.now: v for v in policy.views}
    assert sorted(views)[:5] == [30.0, 60.0, 90.0, 120.0, 150.0]
    first = views[30.0]
    assert (dict(first.replicas), dict(first.ready)) == ({'h100': 1}, {'h100': 1})
    # at 60 the target is 2 but the new replica is still starting (ready at 122)
    at60 = views[60.0]
    assert (dict(at60.replicas), dict(at60.ready)) == ({'h100': 2}, {'h100': 1})
    variant = at60.snapshot.variants[0]
    assert (variant.current_replicas, variant.ready_replicas, variant.pending_replicas) == (2, 1, 1)
    assert [(m.pod, m.observed_at) for m in at60.snapshot.replicas] == [('h100-0000', 50.0)]
    # at 150: first scraped at 125, visible from 135, newest visible sample 140
    at150 = views[150.0]
    assert [(m.pod, m.observed_at) for m in at150.snapshot.replicas] == [
        ('h100-0000', 140.0),
        ('h100-0001', 140.0),
    ]
    busy = at150.snapshot.replicas[0]
    assert busy.avg_input_tokens == 500.0
    assert busy.avg_output_tokens == 50.0
    assert busy.avg_ttft == pytest.approx(idle_prefill(500))
    pool = at150.snapshot.pools[0]
    # requests finish ~0.37 s after their (even) arrival: by the scrape at 140 those of 0 … 138
    # are done (70); the one arriving at 140 has not started
    done_by_140 = sum(1 for r in result.requests if r.finished <= 140.0)
    assert not any(abs(r.finished - 140.0) < 0.25 for r in result.requests)  # none near 140
    assert pool.request_count == done_by_140 == 70
    # arrivals at 0, 2, …: 43 by the scrape at 85, 71 by 140 → 28 over 55 s
    assert pool.arrival_rate == pytest.approx(28 / 55)
    assert pool.queue_size == 0.0


# ---- scale from zero -------------------------------------------------------------------------


def test_wake_scales_from_zero_and_the_gateway_queue_drains() -> None:
    variant = h100(initial_replicas=0, min_replicas=0, startup_delay=20.0)
    trace = Trace(
        name='two',
        arrivals=np.array([3.0, 4.0]),
        input_tokens=np.array([500, 500], dtype=np.int64),
        output_tokens=np.array([50, 50], dtype=np.int64),
    )
    policy = WakeOnQueue()
    result = run(trace=trace, variants=[variant], policy=policy, settings=SimSettings())
    # queued at 3 and 4; scraped at 5 (queue 2), visible from 15; the wake at 15 decides,
    # written at 17, ready at 17 + 20 = 37 → both dispatched at 37
    assert policy.woke_at[0] == 15.0
    assert result.events == [
        ScaleEvent(time=17.0, variant='h100', before=0, after=1, reason='wake')
    ]
    assert [r.dispatched for r in result.requests] == [37.0, 37.0]
    assert finished(result)
    assert all(r.ttft > 33.0 for r in result.requests)
    queue = dict(zip(result.timeline.times, result.timeline.gateway_queue, strict=True))
    assert (queue[0.0], queue[10.0], queue[30.0], queue[40.0]) == (0, 2, 2, 0)
    # end 4 + 300 = 304; one replica from 17, charged until the second request finishes
    done = max(r.finished for r in result.requests)
    assert result.charged_until == done
    assert result.replica_seconds == pytest.approx({'h100': done - 17.0})
    assert result.tail_replica_seconds == pytest.approx({'h100': 304.0 - done})


def test_queued_requests_fail_after_the_gateway_timeout() -> None:
    variant = h100(initial_replicas=0, min_replicas=0)
    trace = steady(3, gap=50.0)  # 0, 50, 100; nobody wakes the variant
    result = run(
        trace=trace, variants=[variant], policy=Fixed({}), settings=SimSettings(tail=100.0)
    )
    # end 200: deadlines 120 and 170 passed, 220 not yet → unfinished, not failed
    assert [r.failed for r in result.requests] == [True, True, False]
    assert all(math.isnan(r.finished) for r in result.requests)
    assert result.replica_seconds == {'h100': 0.0}
    # A request still waiting is work not done: the whole run is charged.
    assert result.charged_until == 200.0


def test_a_request_timeout_bounds_every_completed_request() -> None:
    # One L40S against three times what it serves: without a time-out, requests wait minutes.
    trace = poisson(seed=5, rate=9.0, duration=120.0)
    variant = preset(name='llama-3.1-8b-l40s', variant_name='l40s', max_replicas=1)
    patient = run(
        trace=trace, variants=[variant], policy=Fixed({}), settings=SimSettings(tail=120.0)
    )
    assert max(r.finished - r.arrival for r in patient.requests if not r.failed) > 60.0
    impatient = run(
        trace=trace,
        variants=[variant],
        policy=Fixed({}),
        settings=SimSettings(tail=120.0, request_timeout=30.0),
    )
    done = [r for r in impatient.requests if not r.failed and math.isfinite(r.finished)]
    failed = [r for r in impatient.requests if r.failed]
    assert done
    assert max(r.finished - r.arrival for r in done) <= 30.0
    assert failed
    assert {r.failure for r in failed} == {'replica-timeout'}
    # Every request that did not complete in time failed, whatever the engine could do.
    assert all(r.failed for r in impatient.requests if not math.isfinite(r.finished))


@settings(max_examples=25, deadline=None)
@given(
    gaps=st.lists(st.floats(min_value=0.0, max_value=3.0), min_size=1, max_size=25),
    outputs=st.lists(st.integers(min_value=1, max_value=400), min_size=25, max_size=25),
    timeout=st.floats(min_value=0.5, max_value=20.0),
    replicas=st.integers(min_value=0, max_value=1),
)
def test_with_a_request_timeout_a_request_completes_in_time_or_fails(
    gaps: list[float], outputs: list[int], timeout: float, replicas: int
) -> None:
    n = len(gaps)
    trace = Trace(
        name='random',
        arrivals=np.cumsum(np.asarray(gaps, dtype=np.float64)),
        input_tokens=np.full(n, 2000, dtype=np.int64),
        output_tokens=np.asarray(outputs[:n], dtype=np.int64),
    )
    variant = preset(
        name='llama-3.1-8b-l4', variant_name='l4', initial_replicas=replicas, max_num_seqs=2
    )
    result = run(
        trace=trace,
        variants=[variant],
        policy=Fixed({}),
        settings=SimSettings(tail=30.0, request_timeout=timeout, wake_period=math.inf),
    )
    for r in result.requests:
        if r.failed:
            assert r.failure in ('queue-timeout', 'replica-timeout')
        else:
            # the run lasts until 30 s after the last arrival, past every deadline
            assert r.finished - r.arrival <= timeout


# ---- engines, determinism, validation --------------------------------------------------------


def outcome(result: SimResult) -> list[tuple[object, ...]]:
    return [
        (r.rid, r.replica, r.dispatched, r.first_token, r.finished, r.failed, r.preemptions)
        for r in result.requests
    ]


def test_two_runs_are_identical() -> None:
    trace = poisson(seed=7, rate=8.0, duration=300.0)
    variants = [h100(initial_replicas=2), preset(name='llama-3.1-8b-l40s', variant_name='l40s')]
    a = run(
        trace=trace, variants=variants, policy=Fixed({'h100': 1, 'l40s': 2}), settings=SimSettings()
    )
    b = run(
        trace=trace, variants=variants, policy=Fixed({'h100': 1, 'l40s': 2}), settings=SimSettings()
    )
    assert outcome(a) == outcome(b)
    assert a.events == b.events
    assert a.replica_seconds == b.replica_seconds
    assert a.timeline == b.timeline
    assert len({r.variant for r in a.requests}) == 2


def test_fast_and_reference_engines_agree() -> None:
    # enough load on small KV caches that batching and preemption happen
    trace = poisson(seed=3, rate=6.0, duration=120.0)
    variant = h100(initial_replicas=2, num_gpu_blocks=400)
    results = [
        run(
            trace=trace,
            variants=[variant],
            policy=Fixed({}),
            settings=SimSettings(engine=engine, tail=600.0),
        )
        for engine in ('fast', 'reference')
    ]
    fast, reference = (outcome(r) for r in results)
    assert len(fast) == len(reference) > 500
    for f, r in zip(fast, reference, strict=True):
        assert f[:2] == r[:2]
        assert f[2:5] == pytest.approx(r[2:5], rel=1e-9, abs=1e-9, nan_ok=True)
    assert sum(r.preemptions for r in results[1].requests) > 0


def test_round_robin_router_setting() -> None:
    result = run(
        trace=steady(6),
        variants=[h100(initial_replicas=3)],
        policy=Fixed({}),
        settings=SimSettings(router='round-robin'),
    )
    assert [r.replica for r in result.requests] == [f'h100-000{i % 3}' for i in range(6)]


def test_an_empty_trace_is_no_work_its_replicas_are_all_tail() -> None:
    empty = Trace(
        name='empty',
        arrivals=np.zeros(0),
        input_tokens=np.zeros(0, dtype=np.int64),
        output_tokens=np.zeros(0, dtype=np.int64),
    )
    result = run(
        trace=empty, variants=[h100(initial_replicas=2)], policy=Fixed({}), settings=SimSettings()
    )
    assert result.requests == []
    assert result.charged_until == 0.0
    assert result.replica_seconds == {'h100': 0.0}
    assert result.tail_replica_seconds == {'h100': 600.0}  # 2 × 300


def test_progress_is_reported_up_to_one() -> None:
    seen: list[float] = []
    run(
        trace=steady(50),
        variants=[h100()],
        policy=Fixed({}),
        settings=SimSettings(),
        progress=seen.append,
    )
    assert seen[-1] == 1.0
    assert seen == sorted(seen)
    assert 5 < len(seen) <= 102


def test_one_trace_needs_variants_of_one_model_in_one_namespace() -> None:
    other = preset(name='llama-3.1-70b-h100-tp4', variant_name='big')
    with pytest.raises(ValueError, match='one trace serves one model'):
        run(trace=steady(2), variants=[h100(), other], policy=Fixed({}), settings=SimSettings())
    elsewhere = preset(name='llama-3.1-8b-l40s', variant_name='l40s', namespace='other')
    with pytest.raises(ValueError, match='one namespace'):
        run(trace=steady(2), variants=[h100(), elsewhere], policy=Fixed({}), settings=SimSettings())
    with pytest.raises(ValueError, match='duplicate'):
        run(trace=steady(2), variants=[h100(), h100()], policy=Fixed({}), settings=SimSettings())
    with pytest.raises(ValueError, match='no variants'):
        run(trace=steady(2), variants=[], policy=Fixed({}), settings=SimSettings())


@pytest.mark.parametrize(
    'arrivals',
    [[0.0, 2.0, 1.0], [0.0, math.nan, 3.0], [-1.0, 0.0, 1.0], [0.0, 1.0, math.inf]],
)
def test_bad_trace(arrivals: list[float]) -> None:
    trace = Trace(
        name='bad',
        arrivals=np.array(arrivals),
        input_tokens=np.full(3, 10, dtype=np.int64),
        output_tokens=np.full(3, 10, dtype=np.int64),
    )
    with pytest.raises(ValueError, match='arrivals must be'):
        run(trace=trace, variants=[h100()], policy=Fixed({}), settings=SimSettings())


def test_unknown_variant_from_the_policy_is_an_error() -> None:
    with pytest.raises(ValueError, match="unknown variant 'a100'"):
        run(trace=steady(2), variants=[h100()], policy=Fixed({'a100': 1}), settings=SimSettings())


@pytest.mark.parametrize(
    ('field', 'value'),
    [
        ('cycle', 0.0),
        ('cycle', math.inf),
        ('scrape_interval', -5.0),
        ('sample_interval', math.nan),
        ('wake_period', 0.0),
        ('gateway_timeout', math.nan),
        ('scrape_lag', -1.0),
        ('actuation_delay', math.inf),
        ('tail', -1.0),
        ('retention_period', 0.0),
        ('request_timeout', 0.0),
        ('request_timeout', -3.0),
        ('request_timeout', math.inf),
        ('request_timeout', math.nan),
    ],
)
def test_bad_settings(field: str, value: float) -> None:
    with pytest.raises(ValueError, match=field):
        check_settings(settings=SimSettings(**{field: value}))  # type: ignore[arg-type]


def test_infinite_wake_period_disables_wake() -> None:
    policy = Fixed({})
    check_settings(settings=SimSettings(wake_period=math.inf, gateway_timeout=math.inf))
    run(
        trace=steady(5),
        variants=[h100()],
        policy=policy,
        settings=SimSettings(wake_period=math.inf),
    )
    assert policy.wakes == 0
    assert len(policy.views) == 10  # control at 30, 60, …, 300; end = 8 + 300 = 308


# ---- a real hour -------------------------------------------------------------------------------


def test_an_hour_of_azure_conversation_traffic_on_eight_replicas_is_served_whole() -> None:
    """How fast is bench/simulate.py's to print (about 1.5 s on one core); here, only that
    every request of a real hour at ×2.5 is served."""
    path = need_file(TRACES / 'AzureLLMInferenceTrace_conv.csv')
    from llmscaler.sim.workload.trace import load_trace

    trace = load_trace(path=path, rate_scale=2.5, seed=1)  # ≈ 48k requests in an hour
    result = run(
        trace=trace,
        variants=[h100(initial_replicas=8, max_replicas=8)],
        policy=Fixed({}),
        settings=SimSettings(),
    )
    assert len(result.requests) > 40_000
    assert finished(result)
