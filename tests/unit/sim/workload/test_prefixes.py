"""Prefix-sharing workloads end to end: Mooncake traces, synthetic sessions, prefix-aware routing,
the observed hit rate and the emulator's counters."""

from __future__ import annotations

import dataclasses
import math
from pathlib import Path

import numpy as np
import pytest

from llmscaler.emulate.exposition import RequestStats, render_replica
from llmscaler.sim.hardware.presets import preset
from llmscaler.sim.policies.core import StaticPolicy
from llmscaler.sim.report.summary import summarize
from llmscaler.sim.runner import SimSettings, run
from llmscaler.sim.scenario.document import with_overrides
from llmscaler.sim.scenario.loader import from_document
from llmscaler.sim.vllm.base import ReplicaCounters
from llmscaler.sim.vllm.fast import FastReplica
from llmscaler.sim.vllm.reference import ReferenceReplica
from llmscaler.sim.vocabulary import SLO, ControlView, SimRequest, Trace, VariantSpec
from llmscaler.sim.workload import synthetic
from llmscaler.sim.workload.formats import TraceError
from llmscaler.sim.workload.prefixes import PrefixSpec, add_prefixes, chain_ids
from llmscaler.sim.workload.trace import load_trace, scale_rate
from tests.support.paths import DATA
from tests.support.sim_fixtures import LINEAR, drive

MOONCAKE = DATA / 'mooncake-sample.jsonl'


def h100(**overrides: object) -> VariantSpec:
    return preset(name='llama-3.1-8b-h100', variant_name='h100', **overrides)


def requests_of(trace: Trace) -> list[SimRequest]:
    assert trace.prefixes is not None
    return [
        SimRequest(
            rid=i,
            arrival=float(trace.arrivals[i]),
            input_tokens=int(trace.input_tokens[i]),
            output_tokens=int(trace.output_tokens[i]),
            prefix=trace.prefixes[i],
            prefix_block=trace.prefix_block,
        )
        for i in range(len(trace))
    ]


# ---- Mooncake traces ---------------------------------------------------------------------------


@pytest.mark.parametrize('cls', [ReferenceReplica, FastReplica], ids=['ref', 'fast'])
def test_a_mooncake_trace_hits_where_its_hash_ids_agree(cls: type[ReferenceReplica]) -> None:
    trace = load_trace(path=MOONCAKE)
    assert trace.prefix_block == 512
    assert trace.arrivals.tolist() == pytest.approx([0, 0.25, 0.4, 1.1, 1.15, 1.9, 2.6, 2.65])
    ids = trace.prefixes
    assert ids is not None
    # Chained: rows 1 and 2 share ids 0, 1 and so their first two chained ids, not the third.
    assert ids[1][:2] == ids[0][:2]
    assert ids[1][2] != ids[0][2]
    e = cls(spec=h100(perf=LINEAR, prefix_caching=True), name='h100-0', now=0.0)
    rs = requests_of(trace)
    drive(e, rs, probes=())
    # 16-token engine blocks. Row 2 (1300 tokens) finds the two 512-token blocks it shares with
    # row 1: 1024. Row 4 (2400) shares row 1's four ids; row 1 cached its full blocks up to
    # token 1792 (1800 tokens). Row 5 (512, all of block 0) recomputes its last block: 496.
    # Row 6 (1100) shares row 3's two ids; row 3 cached 688 of its 700 tokens. Row 7 (1536)
    # has row 2's ids; row 2 cached 1296 of its 1300. Rows 1, 3 and 8 share nothing.
    assert [r.cached_tokens for r in rs] == [0, 1024, 0, 1792, 496, 688, 1296, 0]
    c = e.counters
    assert c.prefix_cache_hits_total == 5296
    assert c.prefix_cache_queries_total == int(trace.input_tokens.sum()) == 9648


def test_mooncake_rows_without_good_hash_ids_are_malformed(tmp_path: Path) -> None:
    path = tmp_path / 'bad.jsonl'
    first = '{"timestamp": 0, "input_length": 10, "output_length": 1, "hash_ids": [1]}\n'
    for row, why in (
        ('{"timestamp": 5, "input_length": 10, "output_length": 1}', "missing key 'hash_ids'"),
        (
            '{"timestamp": 5, "input_length": 10, "output_length": 1, "hash_ids": ["a"]}',
            'hash_ids must be a list of integers',
        ),
    ):
        path.write_text(first + row + '\n')
        with pytest.raises(TraceError, match=f'bad.jsonl:2: {why}'):
            load_trace(path=path)
        skipped = load_trace(path=path, skip_bad=True)
        assert (len(skipped), skipped.skipped_rows) == (1, 1)


def test_windows_and_rate_scaling_keep_each_request_s_ids() -> None:
    trace = load_trace(path=MOONCAKE, start=1.0)
    assert trace.prefixes is not None
    assert trace.input_tokens.tolist() == [2400, 512, 1100, 1536, 300]
    assert [len(p) for p in trace.prefixes] == [5, 1, 3, 3, 1]
    doubled = scale_rate(trace=trace, factor=2.0, seed=3)
    assert doubled.prefixes is not None
    by_length = {int(n): p for n, p in zip(trace.input_tokens, trace.prefixes, strict=True)}
    for n, p in zip(doubled.input_tokens, doubled.prefixes, strict=True):
        assert by_length[int(n)] == p


# ---- synthetic system prompts and sessions -----------------------------------------------------


def test_chain_ids_follow_the_segments_block_by_block() -> None:
    a = chain_ids([(7, 20), (1, 30)], 16)
    b = chain_ids([(7, 20), (2, 30)], 16)
    c = chain_ids([(7, 16), (1, 34)], 16)
    assert len(a) == len(b) == 4  # 50 tokens: three full blocks and a partial one
    assert a[0] == b[0] == c[0]  # tokens 0–15: the same 16 tokens of segment 7
    assert a[1] != b[1]  # tokens 16–31 hold different user texts
    assert a[1] != c[1]  # same lengths, but segment 7 ends at another place


def base_trace(n: int = 400) -> Trace:
    spec = synthetic.preset(name='azure-conv', duration=600.0, rate=n / 600.0)
    return synthetic.generate(spec=spec, seed=5)


def test_system_prompts_and_sessions_are_seeded_and_keep_arrivals() -> None:
    plain = base_trace()
    spec = PrefixSpec(system_prompts=4, system_tokens=800, followup=0.5, open_sessions=20)
    one = add_prefixes(trace=plain, spec=spec, seed=5, max_model_len=8192)
    two = add_prefixes(trace=plain, spec=spec, seed=5, max_model_len=8192)
    other = add_prefixes(trace=plain, spec=spec, seed=6, max_model_len=8192)
    assert one.prefixes is not None
    assert two.prefixes is not None
    assert other.prefixes is not None
    assert one.prefixes.tolist() == two.prefixes.tolist() != other.prefixes.tolist()
    assert np.array_equal(one.arrivals, plain.arrivals)
    assert np.array_equal(one.output_tokens, plain.output_tokens)
    assert bool(np.all(one.input_tokens + one.output_tokens <= 8192))
    assert one.prefix_block == 16
    prefixes = one.prefixes.tolist()
    inputs = one.input_tokens.tolist()
    users = plain.input_tokens.tolist()
    outputs = plain.output_tokens.tolist()
    followups = 0
    for i, ids in enumerate(prefixes):
        # A first turn is a system prompt and the user text; a follow-up resends an earlier
        # request's prompt and answer: its ids start with that prompt's full blocks.
        if inputs[i] in (800 + users[i], users[i]):  # (no room for a system prompt: alone)
            continue
        followups += 1
        earlier = [j for j in range(i) if inputs[i] == inputs[j] + outputs[j] + users[i]]
        assert any(prefixes[j][: inputs[j] // 16] == ids[: inputs[j] // 16] for j in earlier)
    assert 0.3 * len(prefixes) < followups < 0.6 * len(prefixes)
    # Every first turn with a system prompt starts with one of the four: 50 blocks of 800 tokens.
    heads = {ids[49] for i, ids in enumerate(prefixes) if inputs[i] == 800 + users[i]}
    assert len(heads) == 4


def test_a_synthetic_spec_with_prefixes_keeps_its_lengths_without() -> None:
    spec = synthetic.preset(name='azure-conv', duration=300.0)
    plain = synthetic.generate(spec=spec, seed=2)
    shared = synthetic.generate(
        spec=dataclasses.replace(spec, prefixes=PrefixSpec(system_prompts=2)), seed=2
    )
    assert plain.prefixes is None
    assert shared.prefixes is not None
    assert np.array_equal(plain.arrivals, shared.arrivals)
    assert bool(np.all(shared.input_tokens >= plain.input_tokens))


@pytest.mark.parametrize(
    'field', ['system_prompts=-1', 'skew=-0.5', 'followup=1.0', 'open_sessions=0', 'block=0']
)
def test_bad_prefix_specs_are_refused(field: str) -> None:
    name, value = field.split('=')
    with pytest.raises(ValueError, match=name):
        PrefixSpec(**{name: float(value) if '.' in value else int(value)})  # type: ignore[arg-type]


# ---- prefix-aware routing and the observed hit rate --------------------------------------------


class Recording:
    """Four replicas from the first cycle on; records every view."""

    def __init__(self) -> None:
        self.views: list[ControlView] = []
        self.static = StaticPolicy(targets={'h100': 4}, name='static')

    @property
    def name(self) -> str:
        return 'recording'

    def targets(self, *, view: ControlView) -> dict[str, int]:
        self.views.append(view)
        return self.static.targets(view=view)

    def wake(self, *, view: ControlView) -> dict[str, int]:
        return {}


def shared_run(*, router: str, caching: bool) -> tuple[float | None, Recording]:
    spec = synthetic.preset(name='azure-conv', duration=600.0, rate=8.0)
    spec = dataclasses.replace(
        spec, prefixes=PrefixSpec(system_prompts=12, system_tokens=1500, skew=0.5)
    )
    trace = synthetic.generate(spec=spec, seed=4)
    policy = Recording()
    settings = SimSettings(router=router, prefix_caching=caching, tail=60.0)  # type: ignore[arg-type]
    result = run(
        trace=trace,
        variants=[h100(initial_replicas=4, num_gpu_blocks=2000)],
        policy=policy,
        settings=settings,
    )
    summary = summarize(result=result, slo=SLO(ttft=1.0, itl=0.1))
    assert summary.completed == summary.requests
    return summary.prefix_hit_rate, policy


def test_prefix_aware_routing_finds_more_cached_prefixes_than_least_loaded() -> None:
    off, off_policy = shared_run(router='least-loaded', caching=False)
    least, least_policy = shared_run(router='least-loaded', caching=True)
    aware, _ = shared_run(router='prefix-aware', caching=True)
    assert off is None
    assert least is not None
    assert aware is not None
    # Twelve 1500-token system prompts over four replicas of 2000 blocks (32k tokens): with
    # least-loaded routing each replica sees every prompt and evicts; routed by prefix, each
    # prompt stays on the replicas that hold it.
    assert 0.3 < least < aware
    # The snapshot's hit rate is the counters' ratio; absent without prefix caching.
    late = least_policy.views[-1].snapshot.replicas
    assert late
    assert all(r.prefix_cache_hit_rate is not None for r in late)
    rates = [r.prefix_cache_hit_rate for r in late]
    assert all(0.0 < rate < 1.0 for rate in rates if rate is not None)
    assert all(r.prefix_cache_hit_rate is None for r in off_policy.views[-1].snapshot.replicas)


def test_scenarios_and_the_command_line_turn_prefix_caching_on() -> None:
    document = {
        'variants': [{'name': 'h100', 'preset': 'llama-3.1-8b-h100'}],
        'workload': {
            'synthetic': {
                'duration': 60,
                'prefixes': {'system_prompts': 3, 'system_tokens': 500, 'followup': 0.3},
            }
        },
        'settings': {'router': 'prefix-aware'},
    }
    setup = from_document(document=with_overrides(document=document, prefix_caching=True))
    assert setup.settings.prefix_caching
    assert setup.settings.router == 'prefix-aware'
    assert not from_document(document=document).settings.prefix_caching


# ---- the emulator's counters -------------------------------------------------------------------


def test_the_emulator_shows_the_engine_s_prefix_counters_when_caching() -> None:
    counters = ReplicaCounters(
        prompt_tokens_total=900, prefix_cache_queries_total=1000, prefix_cache_hits_total=480
    )

    def value(page: str, name: str) -> float:
        line = next(x for x in page.splitlines() if x.startswith(name + '{'))
        return float(line.rsplit(' ', 1)[1])

    for caching, queries, hits in ((True, 1000, 480), (False, 900, 0)):
        spec = h100(prefix_caching=caching)
        page = render_replica(
            model_name='m',
            spec=spec,
            running=0,
            waiting=0,
            kv_usage=0.0,
            counters=counters,
            stats=RequestStats(max_model_len=spec.max_model_len),
            created=0.0,
        )
        assert value(page, 'vllm:prefix_cache_queries_total') == queries
        assert value(page, 'vllm:prefix_cache_hits_total') == hits
        assert not math.isnan(value(page, 'vllm:prefix_cache_hits_total'))
