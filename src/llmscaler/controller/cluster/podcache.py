"""The pods the controller reads: only where VariantAutoscalings need them, and only what it reads.

Why: a pod object is a few KB (spec, env, volumes, managed fields, container statuses) and a
cluster has tens of thousands; caching every pod of the cluster in a controller limited to 1 GiB
is a memory bomb. The controller needs pods for two things only: attribution (an inference pod's
owner chain up to a VA's scale target, which lives in the VA's namespace) and the gateway (EPP)
pages (pods with the EPP labels, wherever they are). So:

- `slim_pod` keeps exactly the fields `controller.cluster.pods` reads (labels, the owner references'
  kind/name/controller, the `prometheus.io/port` and `/path` annotations, deletionTimestamp,
  phase, podIP and the Ready condition) and drops the rest before the pod is cached;
- `PodCache` watches pods with as few objects as the configuration allows (below), behind the
  one reading surface of an informer (`items`, `get`, `version`, `synced`, `last_error`, `run`).

Which pods are watched:

- `selector` given (`--pod-selector`): one informer with that label selector over the watched
  scope, plus the EPP pods (`epp_selector`) over the same scope unless the selector already
  implies them;
- a single watched namespace and no selector: every pod of that namespace (EPP pods included);
- every namespace and no selector (the default): one informer per namespace that holds a
  VariantAutoscaling, started when the namespace gains its first VA and stopped when it loses its
  last, plus one cluster-wide informer for the EPP pods. Each informer holds one watch (one HTTP
  connection of the API client's pool, shared with every other request), so above
  `namespace_limit` namespaces a single cluster-wide pod informer (slim pods) replaces them;
  `namespace_limit` 0 always watches every pod. A change of informers keeps the old ones until
  the new ones have listed, so readers never see a gap.

A pod seen by two informers (an EPP pod in a VA's namespace) is listed once: the namespace's or
the cluster-wide copy wins over the EPP one.

`synced` is set once the VA cache has listed and every pod informer wanted then has listed; it
stays set (readiness and the first cycle wait for it). A namespace that gains its first VA later
gets its informer at once, but its pods are missing until that informer's first list: during that
window the VA's ready replicas report no metrics and the core holds the variant (never down), and
the next cycle after the list sees them. `pending()` names the informers that have not listed yet.

What fails: nothing raises in `run()` except cancellation; each informer logs, backs off and
retries on its own (see `kube.informer`), and `last_error` is the first informer's error in name
order. `namespace_limit` below 0 is refused with ValueError.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Coroutine, Mapping
from typing import Any, Final

from lightkube import AsyncClient
from lightkube.resources.core_v1 import Pod

from llmscaler.clock import Clock
from llmscaler.controller.cluster.pods import PATH_ANNOTATION, PORT_ANNOTATION
from llmscaler.kube.client import ObjectRef
from llmscaler.kube.informer import MODIFIED, Informer, Key, Obj

log = logging.getLogger(__name__)

_META_KEYS: Final = ('namespace', 'name', 'resourceVersion', 'labels', 'deletionTimestamp')
_OWNER_KEYS: Final = ('kind', 'name', 'controller')
_ANNOTATIONS: Final = (PORT_ANNOTATION, PATH_ANNOTATION)
_STATUS_KEYS: Final = ('phase', 'podIP')
_CONDITION_KEYS: Final = ('type', 'status')

# Informer ranks: a pod seen by several is taken from the lowest rank.
_NAMESPACE, _SCOPE, _EPP = 0, 1, 2
_ChildKey = tuple[int, str]


def _pick(source: Mapping[str, Any], keys: tuple[str, ...]) -> dict[str, Any]:
    return {key: source[key] for key in keys if key in source}


def slim_pod(obj: Obj) -> Obj:
    """The fields of a pod that `controller.cluster.pods` reads, and nothing else.

    Values are kept as they are (a malformed field stays malformed, so the readers judge it the
    same way); only keys that no reader looks at are dropped.
    """
    slim: Obj = _pick(obj, ('apiVersion', 'kind'))
    meta = obj.get('metadata')
    if isinstance(meta, Mapping):
        kept = _pick(meta, _META_KEYS)
        annotations = meta.get('annotations')
        if isinstance(annotations, Mapping):
            kept['annotations'] = _pick(annotations, _ANNOTATIONS)
        refs = meta.get('ownerReferences')
        if isinstance(refs, list):
            kept['ownerReferences'] = [
                _pick(ref, _OWNER_KEYS) for ref in refs if isinstance(ref, Mapping)
            ]
        slim['metadata'] = kept
    status = obj.get('status')
    if isinstance(status, Mapping):
        kept = _pick(status, _STATUS_KEYS)
        conditions = status.get('conditions')
        if isinstance(conditions, list):
            kept['conditions'] = [
                _pick(c, _CONDITION_KEYS)
                for c in conditions
                if isinstance(c, Mapping) and c.get('type') == 'Ready'
            ]
        slim['status'] = kept
    return slim


def _implies(selector: Mapping[str, str], wanted: Mapping[str, str]) -> bool:
    """Whether every pod matching `wanted` also matches `selector` (equality pairs)."""
    return all(wanted.get(key) == value for key, value in selector.items())


class PodCache:
    """The controller's pods, from one or more informers (see the module docstring)."""

    def __init__(
        self,
        *,
        client: AsyncClient,
        clock: Clock,
        vas: Informer,
        scope: str | None,
        selector: Mapping[str, str],
        epp_selector: Mapping[str, str],
        namespace_limit: int,
        retry_delay: float = 1.0,
        max_retry_delay: float = 30.0,
    ) -> None:
        if namespace_limit < 0:
            raise ValueError(f'namespace_limit must be >= 0, not {namespace_limit}')
        self._client = client
        self._clock = clock
        self._vas = vas
        self._scope = scope
        self._selector = dict(selector)
        self._epp = dict(epp_selector)
        self._limit = namespace_limit
        self._retry = (retry_delay, max_retry_delay)
        self._follow = scope is None and not selector
        """Whether the pod informers follow the namespaces that hold VAs."""
        self._with_epp = bool(self._epp) and (
            self._follow or not _implies(self._selector, self._epp)
        )
        self._children: dict[_ChildKey, Informer] = {}
        self._tasks: dict[_ChildKey, asyncio.Task[None]] = {}
        self._retired = 0
        self._memo: tuple[int, tuple[Obj, ...]] | None = None
        self._wake = asyncio.Event()
        self.synced = asyncio.Event()
        """Set once the VAs and every pod informer wanted then have listed; stays set."""
        if self._follow:
            vas.subscribe(self._va_event)

    # -- reading -----------------------------------------------------------------------------

    @property
    def name(self) -> str:
        return 'pods'

    @property
    def version(self) -> int:
        """Grows on every change of any informer's store and whenever informers come or go."""
        return self._retired + sum(child.version for child in self._children.values())

    @property
    def last_error(self) -> str | None:
        for key in sorted(self._children):
            child = self._children[key]
            if child.last_error is not None:
                return f'{child.name}: {child.last_error}'
        return None

    @property
    def relists(self) -> int:
        return sum(child.relists for child in self._children.values())

    def informers(self) -> tuple[Informer, ...]:
        """The pod informers of the moment, in precedence order (`pods/<namespace>` first)."""
        return tuple(self._children[key] for key in sorted(self._children))

    def pending(self) -> tuple[str, ...]:
        """The pod informers that have not listed yet (their pods are missing from `items`)."""
        return tuple(
            self._children[key].name
            for key in sorted(self._children)
            if not self._children[key].synced.is_set()
        )

    def get(self, *, namespace: str, name: str) -> Obj | None:
        for key in sorted(self._children):
            found = self._children[key].get(namespace=namespace, name=name)
            if found is not None:
                return found
        return None

    def items(self) -> tuple[Obj, ...]:
        """Every cached pod once, sorted by (namespace, name)."""
        version = self.version
        if self._memo is None or self._memo[0] != version:
            keys = sorted(self._children)
            if len(keys) == 1:
                merged = self._children[keys[0]].items()
            else:
                found: dict[Key, Obj] = {}
                for key in keys:
                    for obj in self._children[key].items():
                        ref = ObjectRef.of(obj)
                        found.setdefault((ref.namespace, ref.name), obj)
                merged = tuple(found[k] for k in sorted(found))
            self._memo = (version, merged)
        return self._memo[1]

    def __len__(self) -> int:
        return len(self.items())

    # -- the loop ----------------------------------------------------------------------------

    async def run(self) -> None:
        """Keep the wanted pod informers running until cancelled (they stop with it)."""
        try:
            while True:
                self._wake.clear()
                waits = await self._reconcile()
                await _first(self._wake.wait(), *waits)
        finally:
            tasks = list(self._tasks.values())
            self._tasks.clear()
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)

    def _va_event(self, kind: str, obj: Obj) -> None:
        # A VA's namespace never changes, so only additions and deletions move the set.
        if kind != MODIFIED:
            self._wake.set()

    def _wanted(self) -> tuple[dict[_ChildKey, tuple[str | None, Mapping[str, str]]], bool]:
        """(informer key → (namespace, selector), whether the VA namespaces are known)."""
        wanted: dict[_ChildKey, tuple[str | None, Mapping[str, str]]] = {}
        if self._with_epp:
            wanted[(_EPP, '')] = (self._scope, self._epp)
        if not self._follow:
            wanted[(_SCOPE, '')] = (self._scope, self._selector)
            return wanted, True
        if not self._vas.synced.is_set():
            return wanted, False
        namespaces = sorted({ObjectRef.of(obj).namespace for obj in self._vas.items()})
        if len(namespaces) > self._limit:
            wanted[(_SCOPE, '')] = (None, {})
        else:
            wanted.update({(_NAMESPACE, ns): (ns, {}) for ns in namespaces})
        return wanted, True

    async def _reconcile(self) -> list[Coroutine[Any, Any, Any]]:
        """Start the wanted informers, retire the others once those have listed; what to await."""
        wanted, known = self._wanted()
        for key, (namespace, selector) in sorted(wanted.items()):
            if key not in self._children:
                self._children[key] = self._informer(key, namespace, selector)
                self._retired += 1  # the version moves although the new store is empty
                log.info('watching %s', _describe(key, namespace, selector))
            if key not in self._tasks:
                self._tasks[key] = asyncio.create_task(self._children[key].run())
        waits: list[Coroutine[Any, Any, Any]] = []
        if not known:
            waits.append(self._vas.synced.wait())
        unsynced = [
            self._children[key] for key in wanted if not self._children[key].synced.is_set()
        ]
        waits += [child.synced.wait() for child in unsynced]
        if known and not unsynced:
            stopped = []
            for key in sorted(set(self._children) - set(wanted)):
                child = self._children.pop(key)
                self._retired += child.version + 1
                task = self._tasks.pop(key, None)
                if task is not None:
                    task.cancel()
                    stopped.append(task)
                log.info('no longer watching pods through informer %s', child.name)
            await asyncio.gather(*stopped, return_exceptions=True)
            self.synced.set()
        return waits

    def _informer(
        self, key: _ChildKey, namespace: str | None, selector: Mapping[str, str]
    ) -> Informer:
        rank, where = key
        name = {_NAMESPACE: f'pods/{where}', _SCOPE: 'pods', _EPP: 'pods-epp'}[rank]
        return Informer(
            client=self._client,
            resource=Pod,
            clock=self._clock,
            namespace=namespace,
            labels=selector,
            name=name,
            retry_delay=self._retry[0],
            max_retry_delay=self._retry[1],
            transform=slim_pod,
        )


def _describe(key: _ChildKey, namespace: str | None, selector: Mapping[str, str]) -> str:
    if key[0] == _NAMESPACE:
        return f'the pods of namespace {namespace}, which holds a VariantAutoscaling'
    what = 'the EPP pods' if key[0] == _EPP else 'the pods'
    labels = ','.join(f'{k}={v}' for k, v in sorted(selector.items()))
    where = f'namespace {namespace}' if namespace is not None else 'every namespace'
    return f'{what} labelled {labels} in {where}' if labels else f'{what} of {where}'


async def _first(*waits: Coroutine[Any, Any, Any]) -> None:
    """Return when the first of `waits` returns; the others are cancelled."""
    tasks = [asyncio.ensure_future(wait) for wait in waits]
    try:
        await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
