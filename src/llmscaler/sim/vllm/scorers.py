"""The inference gateway's prefix-aware scoring of a model's engines, compiled with them.

Why: with the `prefix-aware` router (`sim.fleet.gateway`) every arrival scores every routable
replica of its model with the endpoint picker's prefix-cache, queue and KV-cache scorers, and
each score reads the replica's engine: its waiting requests, its KV usage, its prefix cache.
That loop runs a few hundred thousand times an hour of traffic. Here, beside the engines, it is
compiled with them (`sim.native`) and reads them without one interpreter call per replica and
score; the gateway keeps the router's semantics (its docstring) and calls `best_scored`.

The scores (the gateway's docstring says where they come from), each in [0, 1], summed with
weights `PREFIX_WEIGHT`, `QUEUE_WEIGHT` and `KV_WEIGHT` (3, 2, 2; configurable in the real
endpoint picker, fixed here): the prefix score is the share of the prompt the engine's prefix
cache holds (0 without a cache or for a request without block ids); the queue score is (most
waiting − waiting) / (most − fewest waiting) over the engines (1 when all wait equally); the
KV-cache score is 1 − KV usage.

What fails: nothing raises for engines of this package; an empty sequence of engines raises
ValueError (the gateway never scores without a routable replica).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from llmscaler.sim.vllm.base import EngineBase
from llmscaler.sim.vocabulary import SimRequest

PREFIX_WEIGHT = 3.0
"""Weight of the prefix score (cached share of the prompt) in `prefix-aware` routing."""
QUEUE_WEIGHT = 2.0
"""Weight of the queue score (fewest waiting requests) in `prefix-aware` routing."""
KV_WEIGHT = 2.0
"""Weight of the KV-cache score (1 − KV usage) in `prefix-aware` routing."""


def best_scored(*, engines: Sequence[EngineBase], request: SimRequest | None) -> int:
    """The index of the engine of the highest weighted score, the first of equal scores (the
    gateway passes them in name order); without a request, the queue and KV-cache scores
    only."""
    if not engines:
        raise ValueError('no engine to score')
    low = high = engines[0].waiting
    for engine in engines:
        queue = engine.waiting
        if queue < low:
            low = queue
        elif queue > high:
            high = queue
    prefixed = request is not None and request.prefix is not None
    memo: dict[int, Sequence[int]] = {}
    best, best_score = 0, -math.inf
    for index, engine in enumerate(engines):
        queue = engine.waiting
        score = QUEUE_WEIGHT * ((high - queue) / (high - low) if high > low else 1.0)
        score += KV_WEIGHT * (1.0 - engine.kv_usage)
        if prefixed:
            assert request is not None
            score += PREFIX_WEIGHT * engine.cached_prefix(request, memo) / request.input_tokens
        if score > best_score:
            best, best_score = index, score
    return best
