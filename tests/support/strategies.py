"""Hypothesis strategies for whole snapshots, shared by the engine property tests."""

from __future__ import annotations

import dataclasses

from hypothesis import strategies as st

from llmscaler.domain.snapshot import EngineParams, PoolMetrics, ReplicaMetrics, Snapshot, Variant

NOW = 10_000.0
NAMESPACE = 'ns'


@st.composite
def variants_of_model(draw: st.DrawFn, *, model: str) -> list[Variant]:
    count = draw(st.integers(min_value=1, max_value=3))
    names = draw(
        st.lists(
            st.sampled_from(['a100', 'h100', 'l40s', 'l4', 'a10g']),
            min_size=count,
            max_size=count,
            unique=True,
        )
    )
    variants = []
    for name in names:
        min_replicas = draw(st.integers(min_value=0, max_value=2))
        max_replicas = draw(st.integers(min_value=max(1, min_replicas), max_value=8))
        current = draw(st.integers(min_value=0, max_value=max_replicas))
        pending = draw(st.integers(min_value=0, max_value=current))
        variants.append(
            Variant(
                name=f'{model}-{name}',
                namespace=NAMESPACE,
                model_id=model,
                cost=draw(st.sampled_from([1.0, 2.0, 3.9, 10.0])),
                accelerator=name.upper(),
                min_replicas=min_replicas,
                max_replicas=max_replicas,
                current_replicas=current,
                ready_replicas=current - pending,
                pending_replicas=pending,
                engine=EngineParams(max_num_seqs=draw(st.sampled_from([64, 256]))),
            )
        )
    return variants


@st.composite
def replica_of(
    draw: st.DrawFn, *, variant: Variant, index: int, now: float, blocks: int
) -> ReplicaMetrics:
    return ReplicaMetrics(
        pod=f'{variant.name}-{index}',
        variant=variant.name,
        namespace=variant.namespace,
        observed_at=now - draw(st.sampled_from([0.0, 5.0, 30.0])),
        kv_usage=draw(st.floats(min_value=0.0, max_value=1.0)),
        queue_length=float(draw(st.integers(min_value=0, max_value=20))),
        num_gpu_blocks=blocks,
        block_size=16,
        avg_input_tokens=draw(st.sampled_from([200.0, 1000.0, 3000.0])),
        avg_output_tokens=draw(st.sampled_from([50.0, 250.0, 800.0])),
        prefix_cache_hit_rate=0.1,
    )


@st.composite
def snapshots(draw: st.DrawFn, *, now: float = NOW, balanced: bool = False) -> Snapshot:
    """1-3 models of 1-3 variants each, every ready replica with fresh metrics.

    `balanced`: every replica of a variant reports the same figures (an evenly balancing router),
    so capacity estimates learned from them (the k2 history) do not drift from cycle to cycle.
    """
    models = draw(
        st.lists(st.sampled_from(['m1', 'm2', 'm3']), min_size=1, max_size=3, unique=True)
    )
    variants: list[Variant] = []
    replicas: list[ReplicaMetrics] = []
    pools: list[PoolMetrics] = []
    for model in models:
        group = draw(variants_of_model(model=model))
        variants.extend(group)
        for variant in group:
            # One hardware configuration per variant: every replica has the same KV capacity.
            blocks = draw(st.sampled_from([1_700, 11_500, 27_500]))
            for index in range(variant.ready_replicas):
                replica = draw(replica_of(variant=variant, index=index, now=now, blocks=blocks))
                if balanced and index > 0:
                    replica = dataclasses.replace(replicas[-1], pod=replica.pod)
                replicas.append(replica)
        pools.append(
            PoolMetrics(
                model_id=model,
                namespace=NAMESPACE,
                observed_at=now,
                queue_size=float(draw(st.integers(min_value=0, max_value=10))),
                queue_bytes=0.0,
                request_count=draw(st.sampled_from([None, 0.0, 100.0])),
            )
        )
    return Snapshot(variants=tuple(variants), replicas=tuple(replicas), pools=tuple(pools))
