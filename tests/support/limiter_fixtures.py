"""Hot models that ask for more A100s than a GPU budget leaves, and the configuration that turns
the limiter on, shared by the limiter and collector tests."""

from __future__ import annotations

from llmscaler.config.resolved import Config, ModelConfig, SaturationConfig
from llmscaler.domain.snapshot import GpuLimit, PoolMetrics, ReplicaMetrics, Snapshot, Variant
from tests.support.strategies import NOW

NS = 'llm'


def config(*, limiter: bool, analyzer: str = 'saturation', priority: float = 1.0) -> Config:
    return Config(
        default=ModelConfig(
            saturation=SaturationConfig(
                analyzer_name=analyzer, enable_limiter=limiter, priority=priority
            )
        )
    )


def hot_model(model: str, *, current: int = 2, gpus: int = 2, cost: float = 2.0) -> Snapshot:
    """A model whose token analysis asks for several more replicas of one A100 variant."""
    name = f'{model}-a100'
    variant = Variant(
        name=name,
        namespace=NS,
        model_id=model,
        cost=cost,
        accelerator='A100',
        gpus_per_replica=gpus,
        min_replicas=1,
        max_replicas=10,
        current_replicas=current,
        ready_replicas=current,
    )
    replicas = tuple(
        ReplicaMetrics(
            pod=f'{name}-{i}',
            variant=name,
            namespace=NS,
            observed_at=NOW - 5,
            kv_usage=1.0,
            queue_length=20.0,
            num_gpu_blocks=1000,
            block_size=16,
            avg_input_tokens=1000.0,
            avg_output_tokens=200.0,
        )
        for i in range(current)
    )
    pool = PoolMetrics(
        model_id=model, namespace=NS, observed_at=NOW, queue_size=200.0, request_count=50.0
    )
    return Snapshot(variants=(variant,), replicas=replicas, pools=(pool,))


def two_hot_models(limits: tuple[GpuLimit, ...]) -> Snapshot:
    a, b = hot_model('alpha'), hot_model('beta')
    return Snapshot(
        variants=a.variants + b.variants,
        replicas=a.replicas + b.replicas,
        pools=a.pools + b.pools,
        gpu_limits=limits,
    )
