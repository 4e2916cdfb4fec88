"""The `limiters:` list of the saturation ConfigMap's `default` entry: GPU inventory and quotas.

Why: with `enableLimiter: true` the GPUs a model may add are bounded by the nodes (the
inventory) and, on a shared cluster, by quotas — a cap per accelerator type for the whole
cluster, or per namespace for tenants. WVA (v0.9.0, internal/config/) reads its limiter modes
from `limiters:` in the global `default` entry of `wva-saturation-scaling-config`, so users keep
that key; this module validates it and turns quotas into the `GpuLimit`s the core merges.

The format (one entry per provider, keys as WVA spells them):

    limiters:
      - type: gpu-inventory        # alias `inventory`; `name:` is accepted for `type:`
      - type: quota
        scope: namespace           # `cluster` (default): `quotas` caps the whole cluster;
                                   # `namespace`: every namespace gets its own `quotas` pool
        quotas: {NVIDIA-A100-SXM4-80GB: 16, NVIDIA-L4: -1}     # GPUs; -1 = unlimited
        namespaceQuotas:           # a namespace's own pool (overrides `quotas` for it)
          team-a: {NVIDIA-A100-SXM4-80GB: 4}

A namespace with a pool may use only the types its pool lists (a closed allow-list;
`optimize.constraints`). Without a `limiters:` key the inventory alone applies (WVA's default);
`limiters: []` names no provider, so the limiter has nothing to go by and limits nothing. With
both providers listed, both apply and the tighter wins (WVA lets the quota replace the
inventory, so a quota above the cluster's real GPUs was believed).

What fails: `parse_limiters` raises `LimiterInvalid` with a one-line message and the path below
`limiters` for anything else: an entry that is not a mapping, an unknown or repeated type, an
unknown key (WVA's `exclude` is refused rather than ignored), a quota field on an inventory
entry, a count that is not a whole number in [-1, 2^31 - 1] (booleans and floats are refused),
an empty accelerator or namespace name.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Final, Literal

from llmscaler.domain.basics import COUNT_MAX
from llmscaler.domain.snapshot import UNLIMITED_GPUS, GpuLimit

INVENTORY: Final = 'gpu-inventory'
QUOTA: Final = 'quota'
PROVIDER_QUOTA: Final = 'quota'
"""`GpuLimit.provider` of the limits a quota gives."""
_TYPES: Final = {'gpu-inventory': INVENTORY, 'inventory': INVENTORY, 'quota': QUOTA}
_INVENTORY_KEYS: Final = frozenset({'type', 'name'})
_QUOTA_KEYS: Final = frozenset({'type', 'name', 'scope', 'quotas', 'namespaceQuotas'})

Counts = tuple[tuple[str, int], ...]


class LimiterInvalid(Exception):
    """A `limiters:` value that breaks its rule: `path` below `limiters`, the offending value."""

    def __init__(self, message: str, *, path: str = '', value: object = None) -> None:
        super().__init__(message)
        self.message = message
        self.path = path
        self.value = value


@dataclass(frozen=True, slots=True)
class Quota:
    """One quota provider: cluster caps or a pool per namespace, and namespaces' own pools."""

    scope: Literal['cluster', 'namespace'] = 'cluster'
    quotas: Counts = ()
    namespace_quotas: tuple[tuple[str, Counts], ...] = ()


@dataclass(frozen=True, slots=True)
class Limiters:
    """The providers `limiters:` names: the node inventory and at most one quota."""

    inventory: bool = True
    quota: Quota | None = None

    def quota_limits(self, *, namespaces: Iterable[str]) -> tuple[GpuLimit, ...]:
        """The quota's `GpuLimit`s; a `namespace`-scoped quota gives every one of
        `namespaces` without its own pool a pool of `quotas`."""
        quota = self.quota
        if quota is None:
            return ()
        own = dict(quota.namespace_quotas)
        limits: list[GpuLimit] = []
        if quota.scope == 'cluster':
            limits += _limits(quota.quotas, namespace='')
        else:
            for namespace in sorted(set(namespaces) - set(own)):
                limits += _limits(quota.quotas, namespace=namespace)
        for namespace in sorted(own):
            limits += _limits(own[namespace], namespace=namespace)
        return tuple(limits)


def _limits(counts: Counts, *, namespace: str) -> list[GpuLimit]:
    return [
        GpuLimit(provider=PROVIDER_QUOTA, accelerator=acc, limit=n, namespace=namespace)
        for acc, n in counts
    ]


def _shown_type(value: object) -> str:
    names = {bool: 'a boolean', str: 'a string', list: 'a list', dict: 'a mapping'}
    return 'null' if value is None else names.get(type(value), type(value).__name__)


def _count(value: object, path: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise LimiterInvalid(
            f'must be a whole number of GPUs, not {_shown_type(value)}', path=path, value=value
        )
    if not UNLIMITED_GPUS <= value <= COUNT_MAX:
        raise LimiterInvalid(
            f'must be in [{UNLIMITED_GPUS}, {COUNT_MAX}] GPUs (-1 = unlimited)',
            path=path,
            value=value,
        )
    return value


def _name(value: object, path: str, what: str) -> str:
    if not isinstance(value, str) or not value.strip():
        raise LimiterInvalid(f'{what} must be a non-empty string', path=path, value=value)
    return value


def _counts(value: object, path: str) -> Counts:
    if not isinstance(value, Mapping):
        raise LimiterInvalid(
            f'must be a mapping of accelerator to GPUs, not {_shown_type(value)}',
            path=path,
            value=value,
        )
    out: dict[str, int] = {}
    for key in sorted(value, key=str):
        accelerator = _name(key, path, 'an accelerator name')
        out[accelerator] = _count(value[key], f'{path}.{accelerator}')
    return tuple(sorted(out.items()))


def _quota(entry: Mapping[object, object], path: str) -> Quota:
    scope = entry.get('scope', 'cluster')
    if scope not in ('cluster', 'namespace'):
        raise LimiterInvalid("must be 'cluster' or 'namespace'", path=f'{path}.scope', value=scope)
    quotas = _counts(entry.get('quotas', {}), f'{path}.quotas')
    raw = entry.get('namespaceQuotas', {})
    if not isinstance(raw, Mapping):
        raise LimiterInvalid(
            f'must be a mapping of namespace to quotas, not {_shown_type(raw)}',
            path=f'{path}.namespaceQuotas',
            value=raw,
        )
    pools: dict[str, Counts] = {}
    for key in sorted(raw, key=str):
        namespace = _name(key, f'{path}.namespaceQuotas', 'a namespace')
        pools[namespace] = _counts(raw[key], f'{path}.namespaceQuotas.{namespace}')
    return Quota(
        scope='namespace' if scope == 'namespace' else 'cluster',
        quotas=quotas,
        namespace_quotas=tuple(sorted(pools.items())),
    )


def parse_limiters(value: object) -> Limiters:
    """The validated `limiters:` list (see the module docstring); raises `LimiterInvalid`."""
    if not isinstance(value, list):
        raise LimiterInvalid(f'must be a list, not {_shown_type(value)}', value=value)
    seen: set[str] = set()
    quota: Quota | None = None
    for index, entry in enumerate(value):
        path = f'[{index}]'
        if not isinstance(entry, Mapping):
            raise LimiterInvalid(
                f'must be a mapping, not {_shown_type(entry)}', path=path, value=entry
            )
        kind_name = entry.get('type', entry.get('name'))
        if 'type' in entry and 'name' in entry and entry['type'] != entry['name']:
            raise LimiterInvalid('type and name differ', path=path, value=entry['name'])
        kind = _TYPES.get(kind_name) if isinstance(kind_name, str) else None
        if kind is None:
            raise LimiterInvalid(
                "type must be 'gpu-inventory' (or 'inventory') or 'quota'",
                path=f'{path}.type',
                value=kind_name,
            )
        if kind in seen:
            raise LimiterInvalid(f'{kind} is listed twice', path=f'{path}.type', value=kind_name)
        seen.add(kind)
        allowed = _QUOTA_KEYS if kind == QUOTA else _INVENTORY_KEYS
        for key in sorted(entry, key=str):
            if key not in allowed:
                raise LimiterInvalid(
                    f'unknown field for a {kind} limiter', path=f'{path}.{key}', value=entry[key]
                )
        if kind == QUOTA:
            quota = _quota(entry, path)
    return Limiters(inventory=INVENTORY in seen, quota=quota)
