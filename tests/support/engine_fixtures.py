"""Builders of `engine.decide()` inputs and a view of its output, shared by the engine,
predictive, capacity-floor and simulator-policy tests (one model, `MODEL`, in namespace `NS`)."""

from __future__ import annotations

from llmscaler.domain.snapshot import Decision, ReplicaMetrics, Variant
from tests.support.strategies import NOW

MODEL = 'meta/llama-3.1-8b'
NS = 'llm'


def variant(name: str, **kw: object) -> Variant:
    fields: dict[str, object] = {
        'name': name,
        'namespace': NS,
        'model_id': MODEL,
        'min_replicas': 0,
        'max_replicas': 10,
    }
    fields.update(kw)
    return Variant(**fields)  # type: ignore[arg-type]


def replica(name: str, pod: int, *, age: float = 5.0, **kw: object) -> ReplicaMetrics:
    fields: dict[str, object] = {
        'pod': f'{name}-{pod}',
        'variant': name,
        'namespace': NS,
        'observed_at': NOW - age,
        'kv_usage': 0.0,
        'queue_length': 0.0,
        'num_gpu_blocks': 1000,
        'block_size': 16,
        'avg_input_tokens': 1000.0,
        'avg_output_tokens': 200.0,
    }
    fields.update(kw)
    return ReplicaMetrics(**fields)  # type: ignore[arg-type]


def by_name(decisions: tuple[Decision, ...]) -> dict[str, Decision]:
    return {d.variant: d for d in decisions}
