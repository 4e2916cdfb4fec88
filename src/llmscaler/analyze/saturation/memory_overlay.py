"""The token analyzer's view of the decision memory: its own writes over the caller's mappings.

Why: `saturation.tokens.analyze` reads the k2 history and the capacity knowledge of the whole
cycle and writes a few keys for its model. Copying the memory per model would make a cycle over
many models quadratic; writing to the caller's mappings would make a model's analysis leak into
the memory before the engine accepted its decision. This module is the overlay between the two.

What it holds: `Overlay`, a read-only view of one mapping of updates over a base mapping (a key
in the updates hides the same key in the base), and `AnalysisMemory`, the pair of overlays and
their update dicts for one call (`analysis_memory`). Nothing here raises or copies the base.
"""

from __future__ import annotations

from collections.abc import ItemsView, Iterator, Mapping
from dataclasses import dataclass
from typing import TypeVar, overload

from llmscaler.domain.state import CapacityRecord, K2Sample

_V = TypeVar('_V')
_D = TypeVar('_D')


class Overlay(Mapping[str, _V]):
    """Read-only view of `updates` over `base`: a key in `updates` hides the same key in `base`.

    Like `collections.ChainMap`, but over read-only mappings and with a cheaper `get`, the
    analyzer's hot path: a lookup is O(1) and copies nothing. A scan (iteration, `items`, `len`)
    merges the two mappings first, in C, which beats a Python-level lookup per key.
    """

    __slots__ = ('_base', '_updates')

    def __init__(self, *, updates: Mapping[str, _V], base: Mapping[str, _V]) -> None:
        self._updates = updates
        self._base = base

    def __getitem__(self, key: str) -> _V:
        if key in self._updates:
            return self._updates[key]
        return self._base[key]

    @overload
    def get(self, key: str, /) -> _V | None: ...
    @overload
    def get(self, key: str, /, default: _V | _D) -> _V | _D: ...
    def get(self, key: str, /, default: object = None) -> object:
        if key in self._updates:
            return self._updates[key]
        return self._base.get(key, default)

    def __contains__(self, key: object) -> bool:
        return key in self._updates or key in self._base

    def _merged(self) -> dict[str, _V]:
        return {**self._base, **self._updates}

    def __iter__(self) -> Iterator[str]:
        return iter(self._merged())

    def __len__(self) -> int:
        return len(self._merged())

    def items(self) -> ItemsView[str, _V]:
        return self._merged().items()


@dataclass(frozen=True, slots=True)
class AnalysisMemory:
    """One call's view of the memory: reads see this call's writes over the caller's mappings;
    writes go to the update dicts only, which are local to the call (the caller's are never
    touched)."""

    history_updates: dict[str, tuple[K2Sample, ...]]
    knowledge_updates: dict[str, CapacityRecord]
    history: Mapping[str, tuple[K2Sample, ...]]
    knowledge: Mapping[str, CapacityRecord]


def analysis_memory(
    *, history: Mapping[str, tuple[K2Sample, ...]], knowledge: Mapping[str, CapacityRecord]
) -> AnalysisMemory:
    history_updates: dict[str, tuple[K2Sample, ...]] = {}
    knowledge_updates: dict[str, CapacityRecord] = {}
    return AnalysisMemory(
        history_updates=history_updates,
        knowledge_updates=knowledge_updates,
        history=Overlay(updates=history_updates, base=history),
        knowledge=Overlay(updates=knowledge_updates, base=knowledge),
    )
