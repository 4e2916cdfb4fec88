"""The vocabulary's basic pieces: declared ranges, keys, roles, freshness and actions.

Why: every other part of `llmscaler.domain` (the snapshot, the state, the signals) and the
analyzers speak of these: the declared range of each figure, the keys that name a model and a
variant, P/D roles, freshness classes and the actions a decision takes.

What fails: nothing raises; `finite` turns NaN and ±Inf into None, `positive_or_zero` turns
them (and None, 0 and negatives) into 0.0.
"""

from __future__ import annotations

import enum
from math import isfinite
from typing import Annotated, Final, Literal

from annotated_types import Ge, Le

# Read by the JSON face (llmscaler.io) when it validates input: unknown keys are errors, so a
# misspelt field is reported instead of silently ignored; types are strict (no "3" for 3, no true
# for 1, no 3.0 for an int); NaN and ±Inf are refused. A plain dict keeps the core free of any
# validation library.
STRICT_KEYS = {'extra': 'forbid', 'strict': True, 'allow_inf_nan': False}

_INF: Final = float('inf')

COUNT_MAX: Final = 2**31 - 1
"""Upper bound of every count (replicas, blocks, tokens per step): Kubernetes' int32."""

Count = Annotated[int, Ge(0), Le(COUNT_MAX)]
"""A count of replicas or GPUs: 0 to 2^31 - 1."""
PositiveCount = Annotated[int, Ge(1), Le(COUNT_MAX)]
"""A size that cannot be 0 (maximum replicas, KV blocks, block size, parallel sizes)."""
Fraction = Annotated[float, Ge(0.0), Le(1.0)]
"""A share in [0, 1] (KV-cache usage, prefix-cache hit rate)."""
NonNegative = Annotated[float, Ge(0.0)]
"""A finite figure that cannot be negative (queue lengths, token lengths, rates, latencies)."""

REQUIRED_REPLICA_FIGURES: Final = ('kv_usage', 'queue_length')
"""The figures every analyzer needs from every replica: without one, the replica is not reporting.
The token analyzer also needs the KV-cache size (`num_gpu_blocks` × `block_size`) or a stored
capacity for the variant; it names the replicas it cannot size (`TokenAnalysis.unsized`)."""
REQUIRED_POOL_FIGURES: Final = ('queue_size', 'queue_bytes')
"""The gateway queue's figures: a model without a flow-control queue reports 0, so None means it
could not be read, and the model holds rather than size on an empty queue it did not see."""

Role = Literal['both', 'prefill', 'decode']
"""P/D role of a variant: the `llm-d.ai/role` pod-template label; anything else is `both`."""

ROLES: tuple[Role, ...] = ('both', 'decode', 'prefill')
"""All roles in the order WVA processes them (sorted by name)."""

EngineKind = Literal['vllm', 'sglang', 'unknown']


def group_key(*, model_id: str, namespace: str) -> str:
    """The key that groups variants into one model: `modelID|namespace` as in WVA."""
    return f'{model_id}|{namespace}'


def variant_key(*, namespace: str, name: str) -> str:
    """The key of one variant across the whole snapshot: `namespace/name`."""
    return f'{namespace}/{name}'


def positive_or_zero(value: float | None) -> float:
    """`value` when it is a finite number above 0, otherwise 0.0 (None, NaN, ±Inf, ≤ 0)."""
    # One chained comparison (NaN and ±Inf fail it): this runs several times per replica per
    # cycle, and half the cost of `finite` and a test.
    return value if value is not None and 0.0 < value < _INF else 0.0


def finite(value: float | None) -> float | None:
    """Return `value` when it is a finite number, otherwise None (NaN and ±Inf count as absent)."""
    if value is None or not isfinite(value):  # a module global: one lookup, not two
        return None
    return value


class Freshness(enum.StrEnum):
    """Age class of a metric sample, as WVA's collector has it (fresh < 1 m, stale < 2 m, ...)."""

    FRESH = 'fresh'
    STALE = 'stale'
    UNAVAILABLE = 'unavailable'


class Action(enum.StrEnum):
    """What a decision does to a variant's replica count."""

    SCALE_UP = 'scale_up'
    SCALE_DOWN = 'scale_down'
    NO_CHANGE = 'no_change'
    HOLD = 'hold'
    """No decision could be made safely (missing/stale metrics, bad config); target = current."""
