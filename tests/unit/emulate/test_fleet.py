"""The emulated pods and gateway without the network, driven by a fake clock.

Worked numbers use the 8B-H100 preset with a linear step model that keeps the arithmetic
visible: step = 7 ms + 0.042 ms · decoding seqs + 24 µs · prefill tokens + 0.052 µs · context
tokens; 27 500 KV blocks of 16 tokens (one kept back).
"""

from __future__ import annotations

import math

import pytest

from llmscaler.emulate.fleet import ReplicaUnavailable
from llmscaler.emulate.load import PoissonLoad, TraceLoad
from llmscaler.sim.hardware.presets import preset
from llmscaler.sim.workload.trace import load_trace
from tests.support.emulate_fixtures import LINEAR, T0, FakeClock, emulator, h100, trace_of
from tests.support.paths import DATA


class Recorder:
    """A Listener that records what it was told."""

    def __init__(self) -> None:
        self.progress_seen: list[int] = []
        self.finished: tuple[int, str] | None = None
        self.rejected: tuple[int, str] | None = None

    def progress(self, *, tokens: int) -> None:
        self.progress_seen.append(tokens)

    def finish(self, *, tokens: int, reason: str) -> None:
        self.finished = (tokens, reason)

    def reject(self, *, status: int, message: str) -> None:
        self.rejected = (status, message)


# ---- the replica model behind the pages ------------------------------------------------------


def test_itl_histogram_equals_the_engine_counters_once_requests_are_done() -> None:
    clock = FakeClock()
    trace = trace_of([0.0, 0.01, 0.02], inputs=[100, 2000, 30], outputs=[50, 7, 1])
    emu = emulator(clock, replicas=1, load=TraceLoad(trace=trace))
    clock.t = T0 + 10.0
    emu.tick()
    pod = emu.pod(0)
    assert pod is not None
    c, h = pod.engine.counters, pod.stats.histograms['vllm:inter_token_latency_seconds']
    # (50 − 1) + (7 − 1) + (1 − 1) = 55 gaps.
    assert h.count == c.itl_count == 55
    assert math.isclose(h.total, c.itl_sum)
    assert pod.stats.success == {'stop': 3, 'length': 0, 'abort': 0}


def test_load_requests_cut_at_the_length_limit_finish_with_length() -> None:
    # 10 blocks: 9 usable × 16 = 144 tokens. 100 + 100 is cut to 44 outputs; 200 is refused.
    clock = FakeClock()
    trace = trace_of([0.0, 0.0, 0.0], inputs=[100, 200, 10], outputs=[100, 5, 5])
    emu = emulator(clock, replicas=1, spec=h100(num_gpu_blocks=10), load=TraceLoad(trace=trace))
    assert emu.limit == 144
    clock.t = T0 + 30.0
    emu.tick()
    pod = emu.pod(0)
    assert pod is not None
    assert pod.stats.success == {'stop': 1, 'length': 1, 'abort': 0}
    assert pod.engine.counters.generation_tokens_total == 44 + 5
    assert not pod.inflight


def test_pace_is_the_decode_step_at_the_current_batch_and_context() -> None:
    clock = FakeClock()
    emu = emulator(clock, replicas=1)
    pod = emu.pod(0)
    assert pod is not None
    # Idle: 1 decoding seq (at least), no context: 7 + 0.042 = 7.042 ms.
    assert pod.pace() == pytest.approx(7.042e-3)
    emu.submit(input_tokens=100, max_tokens=50, listener=Recorder(), slot=0)
    clock.t = T0 + 0.020
    emu.tick()
    # Prefill step 7 + 100 × 0.024 ≈ 9.4 ms, then one decode step: 101-102 tokens in 7 blocks,
    # context 7 × 16 = 112 tokens: 7.042 + 112 × 0.052e-3 = 7.047824 ms.
    assert (pod.engine.running, pod.engine.free_blocks) == (1, 27_499 - 7)
    assert pod.pace() == pytest.approx(7.047824e-3)


# ---- the gateway ---------------------------------------------------------------------------------


def test_least_loaded_routing_ties_go_to_the_lowest_slot() -> None:
    emu = emulator(FakeClock(), replicas=3)
    for _ in range(5):
        emu.submit(input_tokens=10, max_tokens=10, listener=Recorder())
    assert [p.engine.in_flight for p in emu.pods] == [2, 2, 1]
    page = emu.epp_page()
    assert 'pod_name="llama-3.1-8b-h100-0",port="0",status="success"' in page


def test_queue_without_replicas_counts_arrivals_and_bytes_until_a_scale_up() -> None:
    clock = FakeClock()
    load = PoissonLoad(rate=1.0, input_tokens=100, output_tokens=10)
    emu = emulator(clock, replicas=0, load=load, seed=7)
    assert (emu.replicas, emu.slots, emu.pods) == (0, (), ())
    assert emu.metrics_page(slot=0) is None
    listener = Recorder()
    emu.submit(input_tokens=3, max_tokens=2, listener=listener, size_bytes=55)
    # The submitted request weighs its body (55 bytes), load requests 4 bytes per prompt token.
    assert (emu.queue_size, emu.queue_bytes) == (1, 55)
    clock.t = T0 + 3.0
    emu.tick()
    n = emu.queue_size - 1
    assert n > 0
    assert emu.queue_bytes == 55 + n * 100 * 4
    emu.scale(replicas=1)
    assert (emu.queue_size, emu.queue_bytes) == (0, 0)
    assert 'inference_extension_flow_control_queue_size{' in emu.epp_page()
    clock.t = T0 + 10.0
    emu.tick()
    assert listener.finished == (2, 'length')


# ---- scaling -------------------------------------------------------------------------------------


def test_a_draining_pod_survives_a_scale_up_of_its_slot() -> None:
    clock = FakeClock()
    emu = emulator(clock, replicas=2)
    listener = Recorder()
    emu.submit(input_tokens=10, max_tokens=100, listener=listener, slot=1)
    emu.scale(replicas=1)
    with pytest.raises(ReplicaUnavailable):
        emu.submit(input_tokens=10, max_tokens=1, listener=Recorder(), slot=1)
    emu.scale(replicas=2)
    assert [p.name for p in emu.pods] == [
        'llama-3.1-8b-h100-0',
        'llama-3.1-8b-h100-2',
        'llama-3.1-8b-h100-1',  # the draining one, without a slot
    ]
    clock.t = T0 + 5.0
    emu.tick()
    assert listener.finished == (100, 'length')
    assert [p.name for p in emu.pods] == ['llama-3.1-8b-h100-0', 'llama-3.1-8b-h100-2']


def test_scale_down_drains_the_high_slots_and_reaps_them_when_empty() -> None:
    clock = FakeClock()
    emu = emulator(clock, replicas=3)
    emu.submit(input_tokens=10, max_tokens=5, listener=Recorder(), slot=1)
    emu.scale(replicas=1)
    # Slot 2 is empty and goes at once; slot 1 drains until its request is done.
    assert (emu.replicas, emu.slots) == (1, (0, 1))
    pod = emu.pod(1)
    assert pod is not None
    assert pod.draining
    with pytest.raises(ReplicaUnavailable, match='replica slot 7 is not serving'):
        emu.submit(input_tokens=1, max_tokens=1, listener=Recorder(), slot=7)
    clock.t = T0 + 1.0
    emu.tick()
    assert emu.slots == (0,)
    assert emu.pod(1) is None


# ---- requests and their listeners ----------------------------------------------------------------


def test_progress_is_paced_and_the_finish_carries_the_last_token() -> None:
    clock = FakeClock()
    emu = emulator(clock, replicas=1)
    listener = Recorder()
    emu.submit(input_tokens=3, max_tokens=20, listener=listener, slot=0)
    for k in range(1, 40):
        clock.t = T0 + 0.005 * k
        emu.tick()
    seen = listener.progress_seen
    assert seen == sorted(seen)
    assert seen[0] == 1
    assert max(seen) <= 19
    assert len(seen) > 5  # announced over time, not all at once
    assert listener.finished == (20, 'length')
    pod = emu.pod(0)
    assert pod is not None
    # TTFT seen once, at the first tick after the first token.
    assert pod.stats.histograms['vllm:time_to_first_token_seconds'].count == 1


def test_single_token_request_gets_no_progress_only_a_finish() -> None:
    clock = FakeClock()
    emu = emulator(clock, replicas=1)
    listener = Recorder()
    emu.submit(input_tokens=3, max_tokens=1, listener=listener, slot=0)
    clock.t = T0 + 1.0
    emu.tick()
    assert listener.progress_seen == []
    assert listener.finished == (1, 'length')


def test_a_detached_request_goes_on_unheard() -> None:
    clock = FakeClock()
    emu = emulator(clock, replicas=1)
    listener = Recorder()
    rid = emu.submit(input_tokens=3, max_tokens=4, listener=listener, slot=0)
    emu.detach(rid)
    emu.detach(rid + 100)  # unknown ids are ignored
    clock.t = T0 + 1.0
    emu.tick()
    assert (listener.progress_seen, listener.finished) == ([], None)
    pod = emu.pod(0)
    assert pod is not None
    assert pod.stats.success['length'] == 1


def test_rejections_and_abort_reach_the_listener() -> None:
    emu = emulator(FakeClock(), replicas=1, spec=h100(num_gpu_blocks=10))
    too_long = Recorder()
    emu.submit(input_tokens=200, max_tokens=1, listener=too_long, slot=0)  # > 144 tokens
    assert too_long.rejected == (400, 'the request does not fit the model')
    waiting = Recorder()
    emu.submit(input_tokens=10, max_tokens=5, listener=waiting, slot=0)
    emu.abort_all()
    assert waiting.rejected == (503, 'the emulator is stopping')


# ---- clock and construction ----------------------------------------------------------------------


def test_clock_going_back_is_held_and_nan_fails() -> None:
    clock = FakeClock()
    emu = emulator(clock, replicas=1, wall_start=1.7e9)
    clock.t = T0 + 5.0
    assert emu.tick() == T0 + 5.0
    clock.t = T0 + 1.0
    assert emu.tick() == T0 + 5.0
    assert (emu.now, emu.wall_time) == (T0 + 5.0, 1.7e9 + 5.0)
    clock.t = math.nan
    with pytest.raises(ValueError, match='NaN'):
        emu.tick()


def test_bad_construction_and_scale() -> None:
    with pytest.raises(ValueError, match='replicas'):
        emulator(FakeClock(), replicas=-1)
    with pytest.raises(ValueError, match='num_gpu_blocks'):
        emulator(FakeClock(), replicas=0, spec=h100(num_gpu_blocks=1))
    with pytest.raises(ValueError, match='NaN'):
        emulator(FakeClock(math.nan), replicas=0)
    emu = emulator(FakeClock(), replicas=1)
    with pytest.raises(ValueError, match='replicas must be >= 0, got -2'):
        emu.scale(replicas=-2)
    assert emu.replicas == 1


def test_a_mooncake_trace_with_prefix_caching_shows_its_hits_on_the_page() -> None:
    mooncake = load_trace(path=DATA / 'mooncake-sample.jsonl')
    pages = []
    for caching in (True, False):
        clock = FakeClock()
        spec = preset(
            name='llama-3.1-8b-h100',
            variant_name='llama-3.1-8b-h100',
            perf=LINEAR,
            prefix_caching=caching,
        )
        emu = emulator(clock, replicas=1, spec=spec, load=TraceLoad(trace=mooncake))
        clock.t = T0 + 30.0
        emu.tick()
        page = emu.metrics_page(slot=0)
        assert page is not None
        pages.append(page)

    def value(page: str, name: str) -> float:
        line = next(x for x in page.splitlines() if x.startswith(name + '{'))
        return float(line.rsplit(' ', 1)[1])

    cached, plain = pages
    # The same 5,296 cached tokens as the engine test of the trace (one replica, in order).
    assert value(cached, 'vllm:prefix_cache_hits_total') == 5296
    assert value(cached, 'vllm:prefix_cache_queries_total') == 9648
    assert value(plain, 'vllm:prefix_cache_hits_total') == 0


# ---- pages shown broken -------------------------------------------------------------------------


def test_show_sample_replaces_every_sample_of_the_name_on_one_slot_until_undone() -> None:
    clock = FakeClock()
    emu = emulator(
        clock, replicas=2, load=PoissonLoad(rate=20.0, input_tokens=100, output_tokens=10)
    )
    clock.t = T0 + 5.0
    name = 'vllm:time_to_first_token_seconds_sum'

    def samples(slot: int, wanted: str) -> list[str]:
        page = emu.metrics_page(slot=slot)
        assert page is not None
        return [
            line.rpartition(' ')[2]
            for line in page.splitlines()
            if line.partition('{')[0].partition(' ')[0] == wanted
        ]

    real = samples(0, name)
    assert len(real) == 1
    assert real != ['NaN']
    count = 'vllm:time_to_first_token_seconds_count'
    counted = samples(0, count)
    emu.show_sample(slot=0, name=name, value=math.nan)
    assert samples(0, name) == ['NaN']
    assert samples(1, name) != ['NaN']  # the other slot shows its own
    # Other samples of the family, and other families, are untouched.
    assert samples(0, count) == counted
    emu.show_sample(slot=0, name='vllm:request_success_total', value=-1.0)
    assert set(samples(0, 'vllm:request_success_total')) == {'-1.0'}
    emu.show_sample(slot=0, name=name, value=None)
    emu.show_sample(slot=0, name='vllm:request_success_total', value=None)
    assert samples(0, name) != ['NaN']
    assert '-1.0' not in samples(0, 'vllm:request_success_total')


def test_show_page_serves_a_planted_page_on_one_slot_until_undone() -> None:
    clock = FakeClock()
    emu = emulator(clock, replicas=2, load=PoissonLoad(rate=1.0, input_tokens=10, output_tokens=5))
    clock.t = T0 + 1.0
    own = emu.metrics_page(slot=0)
    assert own is not None
    emu.show_page(slot=0, page='vllm:num_requests_waiting{a="b",a="b"} 1\n')
    assert emu.metrics_page(slot=0) == 'vllm:num_requests_waiting{a="b",a="b"} 1\n'
    assert emu.metrics_page(slot=1) != emu.metrics_page(slot=0)  # the other slot: its own
    emu.show_page(slot=0, page=None)
    again = emu.metrics_page(slot=0)
    assert again is not None
    assert again.startswith('# HELP')
