"""Scale-from-zero within the GPU budget when the limiter is on.

Worked example: model `m` in `llm` has `cheap` (variantCost 5, minReplicas 2, 1 H100 GPU per
replica) and `dear` (variantCost 12, minReplicas 0, 2 L40S GPUs per replica), both at zero. With
3 H100 and 4 L40S free, `cheap` is woken to 2 (2 GPUs <= 3). With 1 H100 free, `cheap` would need
2: `dear` is woken to 1 (2 L40S <= 4) and the ScaledFromZero event says why. With 1 H100 and 1
L40S free, neither fits: nothing is written, a ResourceConstrained Warning names both shortfalls,
`wva_decisions_limited_total` counts it, and the model is not looked at again for `quiet` seconds.
Without the limiter, the budget is never computed.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import replace
from typing import Any

import pytest

from llmscaler.config.resolved import Config, ModelConfig, SaturationConfig
from llmscaler.controller.from_zero.budget import fit, gpu_budgets
from llmscaler.domain.snapshot import GpuLimit, PoolMetrics, Variant
from llmscaler.enforce.scale_from_zero import wake
from llmscaler.optimize.constraints import Budgets
from tests.support.from_zero_harness import NS, Harness, harness, queued, va

LIMITED = Config(default=ModelConfig(saturation=SaturationConfig(enable_limiter=True)))
LIMITED_TOTAL = 'wva_decisions_limited_total'


def inventory(h100: int, l40s: int) -> tuple[GpuLimit, ...]:
    return (
        GpuLimit(provider='inventory', accelerator='H100', limit=h100),
        GpuLimit(provider='inventory', accelerator='L40S', limit=l40s),
    )


def variant(name: str, *, cost: float, accelerator: str, gpus: int, minimum: int) -> Variant:
    return Variant(
        name=name,
        namespace=NS,
        model_id='m',
        cost=cost,
        accelerator=accelerator,
        gpus_per_replica=gpus,
        min_replicas=minimum,
        max_replicas=4,
    )


VARIANTS = (
    variant('cheap', cost=5, accelerator='H100', gpus=1, minimum=2),
    variant('dear', cost=12, accelerator='L40S', gpus=2, minimum=0),
)
POOLS = (PoolMetrics(model_id='m', namespace=NS, observed_at=0.0, queue_size=3.0),)


def fitted(config: Config, limits: tuple[GpuLimit, ...]) -> Any:
    asked: list[int] = []

    def budgets() -> Budgets:
        asked.append(1)
        return gpu_budgets(limits=limits, config=config, variants=VARIANTS)

    result = fit(
        wakes=wake(variants=VARIANTS, pools=POOLS),
        variants=VARIANTS,
        pools=POOLS,
        config=config,
        limits_fn=budgets,
    )
    return result, len(asked)


@pytest.mark.parametrize(
    ('h100', 'l40s', 'woken'),
    [(3, 4, ('cheap', 2)), (2, 0, ('cheap', 2)), (1, 4, ('dear', 1)), (1, 2, ('dear', 1))],
)
def test_the_cheapest_variant_that_fits_is_woken(h100: int, l40s: int, woken: object) -> None:
    result, asked = fitted(LIMITED, inventory(h100, l40s))
    [order] = result.wakes
    assert (order.variant, order.target) == woken
    assert asked == 1
    assert result.held == ()
    if woken == ('dear', 1):
        assert result.passed_over == {f'{NS}/dear': f'cheap needs 2 H100 GPUs, {h100} free'}


def test_no_variant_fits_holds_and_says_why() -> None:
    result, _ = fitted(LIMITED, inventory(1, 1))
    assert result.wakes == ()
    [held] = result.held
    assert (held.variant, held.model_id) == ('cheap', 'm')
    assert held.message == (
        'scale-from-zero held: no variant of m fits the GPU budget '
        '(cheap needs 2 H100 GPUs, 1 free; dear needs 2 L40S GPUs, 1 free)'
    )


def test_other_models_gpus_count_and_unknown_types_are_unlimited() -> None:
    # 3 H100 on the Nodes, 2 held by another model's replica: 1 free, so dear is woken.
    busy = variant('other', cost=1, accelerator='H100', gpus=2, minimum=1)
    other = replace(busy, model_id='o', current_replicas=1)
    budgets = gpu_budgets(limits=inventory(3, 4), config=LIMITED, variants=(*VARIANTS, other))
    assert budgets.available(accelerator='H100', namespace=NS) == 1
    # No inventory known (informers not synced): nothing limits, the cheapest is woken.
    result, _ = fitted(LIMITED, ())
    assert [o.variant for o in result.wakes] == ['cheap']


def test_without_the_limiter_no_budget_is_read() -> None:
    result, asked = fitted(Config(), inventory(0, 0))
    assert [o.variant for o in result.wakes] == ['cheap']
    assert asked == 0


# --- the loop against the fake API ------------------------------------------------------------


def gpu_deployment(name: str, *, product: str, gpus: int) -> dict[str, Any]:
    labels = {'app': name}
    container = {
        'name': 'vllm',
        'image': 'vllm/vllm-openai',
        'resources': {'limits': {'nvidia.com/gpu': str(gpus)}},
    }
    return {
        'apiVersion': 'apps/v1',
        'kind': 'Deployment',
        'metadata': {'name': name, 'namespace': NS, 'labels': labels},
        'spec': {
            'replicas': 0,
            'selector': {'matchLabels': labels},
            'template': {
                'metadata': {'labels': labels},
                'spec': {
                    'nodeSelector': {'nvidia.com/gpu.product': product},
                    'containers': [container],
                },
            },
        },
    }


@pytest.fixture
async def h() -> AsyncIterator[Harness]:
    async with harness(
        gpu_deployment('cheap', product='H100', gpus=1),
        gpu_deployment('dear', product='L40S', gpus=2),
        va('cheap', cost='5', min_replicas=2),
        va('dear', cost='12'),
    ) as made:
        yield made


async def test_the_loop_wakes_within_the_budget_then_holds(h: Harness) -> None:
    limits = {'now': inventory(1, 4)}
    h.epp.body = queued(3)
    loop = h.loop(
        config_fn=lambda: LIMITED, limits_fn=lambda world, config: limits['now'], quiet=5.0
    )
    [woken] = await loop.tick()
    assert (woken.variant, woken.target) == ('dear', 1)
    assert (h.replicas('cheap'), h.replicas('dear')) == (0, 1)
    [event] = h.stored_events()
    assert event['reason'] == 'ScaledFromZero'
    assert event['note'] == (
        '0 -> 1: 3 requests queued for m; cheapest variant within the GPU budget, dear, woken '
        '(cheap needs 2 H100 GPUs, 1 free)'
    )

    await h.scale_back_to_zero('dear')
    h.refresh()
    await h.clock.advance(10.0)
    limits['now'] = inventory(1, 1)
    assert await loop.tick() == ()
    assert (h.replicas('cheap'), h.replicas('dear')) == (0, 0)
    held = [e for e in h.stored_events() if e['reason'] == 'ResourceConstrained']
    assert [(e['type'], e['regarding']['name']) for e in held] == [('Warning', 'cheap')]
    assert 'no variant of m fits the GPU budget' in held[0]['note']
    counted = h.family(LIMITED_TOTAL)
    labels = {'variant_name': 'cheap', 'namespace': NS, 'limiter_name': 'gpu-limiter'}
    assert counted == {(LIMITED_TOTAL, tuple(sorted(labels.items()))): 1.0}
    # Held models wait `quiet` seconds before the next look: no event per 100 ms tick.
    assert await loop.tick() == ()
    assert len([e for e in h.stored_events() if e['reason'] == 'ResourceConstrained']) == 1
    # GPUs freed: after the quiet time the cheapest variant is woken.
    limits['now'] = inventory(2, 1)
    await h.clock.advance(10.0)
    [woken] = await loop.tick()
    assert (woken.variant, woken.target) == ('cheap', 2)
