"""`llmscaler.io`'s state files: each policy's state validated against its type, files from
before policies kept their own state still read, and bad ones refused with one line."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest

from llmscaler import io
from llmscaler.analyze.learning.rate_forecast import RateSample
from llmscaler.analyze.slo.capacity import VariantLearning
from llmscaler.domain.snapshot import Snapshot
from llmscaler.domain.state import EMPTY_STATE, State
from llmscaler.engine import decide
from llmscaler.policies.predictive.state import PredictiveState
from tests.support.engine_fixtures import MODEL, NS
from tests.support.predictive_fixtures import CONFIG, NOW, fleet, own_state

GROUP = f'{MODEL}|{NS}'


def decided(snapshot: Snapshot, *, state: State, now: float) -> State:
    """The state after one cycle on `snapshot` read 5 s before `now`."""
    snapshot = dataclasses.replace(
        snapshot,
        replicas=tuple(dataclasses.replace(r, observed_at=now - 5) for r in snapshot.replicas),
        pools=tuple(dataclasses.replace(p, observed_at=now - 5) for p in snapshot.pools),
    )
    return decide(snapshot=snapshot, config=CONFIG, state=state, now=now).state


def written(tmp_path: Path, data: object) -> Path:
    path = tmp_path / 'state.json'
    path.write_text(json.dumps(data))
    return path


def test_a_predictive_state_survives_the_round_trip(tmp_path: Path) -> None:
    state = EMPTY_STATE
    for k in range(3):
        state = decided(fleet(h100=2, l40s=1, rate=5.0), state=state, now=NOW + 30 * k)
    assert len(own_state(state).samples) == 3
    assert own_state(state).learning
    assert own_state(state).mix == pytest.approx((1000.0, 200.0))
    back = io.load_state(path=written(tmp_path, io.dump_state(state=state)))
    assert back == state
    assert isinstance(own_state(back), PredictiveState)


def test_a_state_file_of_the_previous_format_becomes_the_predictive_state(tmp_path: Path) -> None:
    old = {
        'last_desired': [[f'{NS}/h100', 2]],
        'forecast': [[GROUP, [{'at': 100.0, 'rate': 5.0, 'need': 6.0}]]],
        'learning': [
            [f'{NS}/h100', {'scale': 0.8, 'demonstrated': 3.0}],
            ['elsewhere/x', {'scale': 0.5, 'demonstrated': 1.0}],
        ],
    }
    state = io.load_state(path=written(tmp_path, old))
    assert state.last_desired == ((f'{NS}/h100', 2),)
    assert state.policy_states('predictive') == {
        GROUP: PredictiveState(
            samples=(RateSample(at=100.0, rate=5.0, need=6.0),),
            learning=((f'{NS}/h100', VariantLearning(scale=0.8, demonstrated=3.0)),),
        )
    }


@pytest.mark.parametrize(
    ('policies', 'expected'),
    [
        ([['nope', []]], "policies.0.0: unknown policy 'nope'"),
        (
            [['saturation-token', [[GROUP, {}]]]],
            'policies.0.1: policy saturation-token keeps no state',
        ),
        (
            [['predictive', [[GROUP, {'samples': [{'at': 1.0, 'rate': -1.0}]}]]]],
            'policies.0.1.0.1.samples.0.rate: Input should be greater than or equal to 0',
        ),
        (
            [['predictive', [[GROUP, {'sampels': []}]]]],
            'policies.0.1.0.1.sampels: Unexpected keyword argument',
        ),
    ],
)
def test_a_bad_policy_state_is_refused_with_its_path(
    tmp_path: Path, policies: object, expected: str
) -> None:
    path = written(tmp_path, {'policies': policies})
    with pytest.raises(io.InputError) as caught:
        io.load_state(path=path)
    assert str(caught.value).startswith(f'{path}: {expected}')
    assert '\n' not in str(caught.value)


def test_a_model_gone_from_the_snapshot_leaves_no_policy_state() -> None:
    state = decided(fleet(h100=2, l40s=1, rate=5.0), state=EMPTY_STATE, now=NOW)
    assert state.policy_states('predictive')
    assert decided(Snapshot(), state=state, now=NOW + 30) == State()
