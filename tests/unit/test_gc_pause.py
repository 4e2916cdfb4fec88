"""`gc_pause`: the cyclic collector off for overlapping blocks, start-up set aside; decisions leave
no cycles."""

from __future__ import annotations

import gc
from collections.abc import Iterator

import pytest

from llmscaler import gc_pause
from llmscaler.config.resolved import (
    AnalyzerSpec,
    Config,
    ModelConfig,
    QueueingModelConfig,
    SaturationConfig,
)
from llmscaler.domain.snapshot import GpuLimit
from llmscaler.domain.state import EMPTY_STATE
from llmscaler.engine import decide
from tests.support.limiter_fixtures import config as limiter_config
from tests.support.limiter_fixtures import two_hot_models
from tests.support.predictive_fixtures import CONFIG as PREDICTIVE
from tests.support.predictive_fixtures import NOW, fleet
from tests.support.strategies import NOW as LIMITER_NOW


@pytest.fixture(autouse=True)
def _collector_restored() -> Iterator[None]:
    enabled = gc.isenabled()
    yield None
    if enabled:
        gc.enable()
    else:  # pragma: no cover - the suite runs with the collector on
        gc.disable()


def test_the_block_runs_without_the_collector_and_it_is_restored() -> None:
    gc.enable()
    with gc_pause.paused():
        assert not gc.isenabled()
    assert gc.isenabled()


def test_it_is_restored_when_the_block_raises() -> None:
    gc.enable()
    with pytest.raises(ValueError, match='boom'), gc_pause.paused():
        raise ValueError('boom')
    assert gc.isenabled()


def test_a_collector_that_was_off_stays_off() -> None:
    gc.disable()
    with gc_pause.paused():
        assert not gc.isenabled()
    assert not gc.isenabled()


def test_overlapping_blocks_resume_the_collector_after_the_last() -> None:
    gc.enable()
    first = gc_pause.paused()
    second = gc_pause.paused()
    first.__enter__()
    second.__enter__()
    assert not gc.isenabled()
    first.__exit__(None, None, None)
    assert not gc.isenabled()  # the second block still runs
    second.__exit__(None, None, None)
    assert gc.isenabled()


def test_a_block_begun_inside_another_does_not_keep_the_collector_off() -> None:
    # The decision core's pause begins while a worker's is on: the collector resumes once both
    # have ended, not never (it was on before the first).
    gc.enable()
    outer = gc_pause.paused()
    outer.__enter__()
    with gc_pause.paused():
        pass
    assert not gc.isenabled()
    outer.__exit__(None, None, None)
    assert gc.isenabled()


def test_start_up_objects_are_set_aside_and_later_ones_are_not() -> None:
    before = [object()]
    try:
        assert gc_pause.set_aside_start_up() >= 1
        after = [object()]
        walked = {id(o) for o in gc.get_objects()}
        # A full pass walks the later list, not the one alive when start-up was set aside.
        assert id(after) in walked
        assert id(before) not in walked
    finally:
        gc.unfreeze()


SLO = QueueingModelConfig(target_ttft=1500.0, target_itl=60.0)
PATHS = {
    'default': Config(),
    'saturation-token': Config(
        default=ModelConfig(saturation=SaturationConfig(analyzer_name='saturation'))
    ),
    'slo-queueing': Config(default=ModelConfig(queueing=SLO)),
    'hybrid': Config(
        default=ModelConfig(
            queueing=SLO,
            saturation=SaturationConfig(analyzers=(AnalyzerSpec(name='queueing-model'),)),
        )
    ),
    'predictive': PREDICTIVE,
}


@pytest.mark.parametrize('path', sorted(PATHS))
def test_decisions_leave_no_reference_cycles(path: str) -> None:
    """What pausing the collector relies on: a decision's garbage is freed by reference
    counting, so the collector finds nothing unreachable after cycles run without it."""
    snapshot = fleet(h100=3, l40s=2, rate=12.0)
    config = PATHS[path]
    gc.collect()
    with gc_pause.paused():
        state = EMPTY_STATE
        for cycle in range(3):
            state = decide(
                snapshot=snapshot, config=config, state=state, now=NOW + 30 * cycle
            ).state
        assert gc.collect() == 0


def test_a_binding_gpu_limiter_leaves_no_reference_cycles() -> None:
    snapshot = two_hot_models((GpuLimit(provider='inventory', accelerator='A100', limit=12),))
    gc.collect()
    with gc_pause.paused():
        outcome = decide(
            snapshot=snapshot,
            config=limiter_config(limiter=True),
            state=EMPTY_STATE,
            now=LIMITER_NOW,
        )
        assert any(d.limited > 0 for d in outcome.decisions)
        assert gc.collect() == 0
