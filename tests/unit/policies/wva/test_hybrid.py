"""`policies.wva.hybrid.arbitrate`: WVA v0.4.2's decision matrix (vectors hybrid-01..04 and
more)."""

from __future__ import annotations

import pytest

from llmscaler.domain.basics import Action
from llmscaler.policies.wva.hybrid import arbitrate


@pytest.mark.parametrize(
    ('capacity', 'model', 'safe', 'target', 'action', 'flags', 'reason'),
    [
        # hybrid-01: capacity up, model down: veto.
        (4, 2, True, 3, Action.NO_CHANGE, (True, True, True), 'capacity veto'),
        # hybrid-02: model down while scale-down is unsafe: safety block.
        (3, 2, False, 3, Action.NO_CHANGE, (True, True, True), 'safety block'),
        # hybrid-03: capacity up, model no change: the capacity target.
        (4, 3, True, 4, Action.SCALE_UP, (False, True, False), 'capacity-driven'),
        # hybrid-04: model up: the model target, whatever capacity says.
        (3, 6, False, 6, Action.SCALE_UP, (False, False, True), 'model-based'),
        (2, 6, True, 6, Action.SCALE_UP, (False, False, True), 'model-based'),
        (4, 6, True, 6, Action.SCALE_UP, (False, False, True), 'model-based'),
        # model down, safe, capacity not up: follow the model.
        (3, 1, True, 1, Action.SCALE_DOWN, (False, False, True), 'model-based'),
        (2, 1, True, 1, Action.SCALE_DOWN, (False, False, True), 'model-based'),
        # No capacity analysis (None) does not block.
        (3, 1, None, 1, Action.SCALE_DOWN, (False, False, True), 'model-based'),
        # Capacity down alone: no change (the model does not agree).
        (2, 3, True, 3, Action.NO_CHANGE, (False, False, False), 'no action'),
        (3, 3, True, 3, Action.NO_CHANGE, (False, False, False), 'no action'),
    ],
)
def test_decision_matrix(
    capacity: int,
    model: int,
    safe: bool | None,
    target: int,
    action: Action,
    flags: tuple[bool, bool, bool],
    reason: str,
) -> None:
    got = arbitrate(current=3, capacity_target=capacity, model_target=model, scale_down_safe=safe)
    assert (got.target, got.action) == (target, action)
    assert (got.safety_override, got.capacity_based, got.model_based) == flags
    assert reason in got.reason
