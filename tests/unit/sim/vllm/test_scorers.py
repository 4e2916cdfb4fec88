"""Tests of the prefix-aware router's scores over engines (`sim.vllm.scorers`)."""

from __future__ import annotations

import dataclasses

import pytest

from llmscaler.sim.vllm.scorers import best_scored
from llmscaler.sim.vocabulary import SimRequest
from tests.support.sim_fixtures import ENGINES, Engine, engine, h100


def prompt(rid: int, *, ids: tuple[int, ...], at: float = 0.0) -> SimRequest:
    return SimRequest(
        rid=rid, arrival=at, input_tokens=1024, output_tokens=2, prefix=ids, prefix_block=512
    )


def served(cls: type[Engine], *ids: int) -> Engine:
    """An idle engine with prefix caching whose cache holds the prompt of block ids `ids`."""
    e = engine(cls, dataclasses.replace(h100(), prefix_caching=True))
    if ids:
        e.submit(request=prompt(0, ids=ids), now=0.0)
        e.advance(until=0.5)
    return e


@ENGINES
def test_the_engine_holding_the_prompt_wins(cls: type[Engine]) -> None:
    empty, holder = served(cls), served(cls, 7, 8)
    ask = prompt(1, ids=(7, 8), at=1.0)
    assert best_scored(engines=[empty, holder], request=ask) == 1
    assert best_scored(engines=[holder, empty], request=ask) == 0
    # Another prompt, or none: equal scores, the first engine.
    assert best_scored(engines=[empty, holder], request=prompt(2, ids=(9, 10))) == 0
    assert best_scored(engines=[empty, holder], request=None) == 0


@ENGINES
def test_fewer_waiting_wins_without_a_cached_prefix(cls: type[Engine]) -> None:
    busy, idle = served(cls), served(cls)
    for rid in range(3):
        busy.submit(request=prompt(rid, ids=(100 + rid,)), now=1.0)
    assert busy.waiting == 3
    assert best_scored(engines=[busy, idle], request=prompt(9, ids=(1,))) == 1
    # The queue score (2) outweighs a half-cached prompt (3 · 1/2): the idle engine still wins.
    holder = served(cls, 1)
    for rid in range(3):
        holder.submit(request=prompt(rid, ids=(200 + rid,)), now=1.0)
    assert best_scored(engines=[holder, served(cls)], request=prompt(9, ids=(1, 2), at=1.0)) == 1


def test_no_engine_raises() -> None:
    with pytest.raises(ValueError, match='no engine'):
        best_scored(engines=[], request=None)
