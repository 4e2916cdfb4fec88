"""Object storage of the fake kube-apiserver: resourceVersions, write rules, history, watchers.

Why: the controller's correctness hinges on optimistic concurrency and on the split between
main-resource, `/status` and `/scale` writes; this module is where the fake keeps its objects by
those rules, whatever HTTP request (`server`) asked for the write.

What it computes: one global counter gives every write (create, update, delete) the next
resourceVersion. Create sets uid, generation 1 and creationTimestamp. Generation is bumped only
when the object minus metadata (and minus status, for kinds with a status subresource) changes.
A write whose object carries a metadata.resourceVersion other than the stored one fails 409
Conflict; a write without one is unconditional. Kinds with a status subresource drop `.status`
on create and keep the stored `.status` on main-resource writes; `/status` writes keep everything
but `.status`.

Resources that share a storage (core v1 and events.k8s.io/v1 Events, `resources.storage_of`)
share one set of objects and one name space: each is stored in its storage's form and read in
the form of the resource it is read through (`conversion`); watch events carry the storage's
resource and form, and a watch converts them (`watch.Selection`).

History: the last `history_limit` events are kept for watches; a watch from an older
resourceVersion is answered 410 Expired. `compacted` is the highest resourceVersion no longer
covered by history.
"""

from __future__ import annotations

import asyncio
import copy
import datetime
import uuid
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from llmscaler.devcluster.fakeapi.conversion import served, stored_form
from llmscaler.devcluster.fakeapi.resources import Resource, ScaleMap, storage_of
from llmscaler.devcluster.fakeapi.semantics import ApiError

Obj = dict[str, Any]


@dataclass(frozen=True, slots=True)
class Event:
    resource: Resource
    type: str
    object: Obj
    old: Obj | None = None
    """The state before a MODIFIED (a watch with a selector reports an object that stops or
    starts matching as DELETED or ADDED)."""

    @property
    def rv(self) -> int:
        return int(self.object['metadata']['resourceVersion'])


def _dig(obj: Obj, path: tuple[str, ...]) -> Any:
    node: Any = obj
    for key in path:
        if not isinstance(node, dict):
            return None
        node = node.get(key)
    return node


def _set(obj: Obj, path: tuple[str, ...], value: Any) -> None:
    node = obj
    for key in path[:-1]:
        node = node.setdefault(key, {})
    node[path[-1]] = value


def _now() -> str:
    return datetime.datetime.now(datetime.UTC).strftime('%Y-%m-%dT%H:%M:%SZ')


class Store:
    def __init__(self, *, history_limit: int = 1000) -> None:
        self.rv = 0
        self.compacted = 0
        self._objects: dict[tuple[str, str], dict[tuple[str, str], Obj]] = {}
        self._history: deque[Event] = deque()
        self._history_limit = history_limit
        self.watchers: set[asyncio.Queue[Event | str | None]] = set()

    def _bucket(self, resource: Resource) -> dict[tuple[str, str], Obj]:
        storage = storage_of(resource)
        return self._objects.setdefault((storage.group, storage.plural), {})

    def _emit(self, resource: Resource, kind: str, obj: Obj, old: Obj | None = None) -> None:
        event = Event(storage_of(resource), kind, copy.deepcopy(obj), old)
        self._history.append(event)
        while len(self._history) > self._history_limit:
            self.compacted = self._history.popleft().rv
        for queue in self.watchers:
            queue.put_nowait(event)

    def compact(self) -> None:
        """Forget all history, so any watch from an earlier resourceVersion gets 410."""
        self._history.clear()
        self.compacted = self.rv

    def history_since(self, rv: int) -> list[Event]:
        if rv < self.compacted:
            raise ApiError(410, f'too old resource version: {rv} ({self.compacted + 1})')
        return [e for e in self._history if e.rv > rv]

    def list(
        self,
        resource: Resource,
        namespace: str | None,
        where: Callable[[Obj], bool] | None = None,
    ) -> list[Obj]:
        """Copies of the stored objects as `resource` serves them, sorted; only those `where`
        accepts (it must not write)."""
        bucket = self._bucket(resource)
        keys = sorted(k for k in bucket if namespace is None or k[0] == namespace)
        shown = (served(resource, bucket[k]) for k in keys)
        return [copy.deepcopy(obj) for obj in shown if where is None or where(obj)]

    def get(self, resource: Resource, namespace: str, name: str) -> Obj:
        return served(resource, self._stored(resource, namespace, name))

    def _stored(self, resource: Resource, namespace: str, name: str) -> Obj:
        """A copy of the object in its storage's form."""
        obj = self._bucket(resource).get((namespace, name))
        if obj is None:
            raise ApiError(404, f'{resource.plural}.{resource.group} "{name}" not found')
        return copy.deepcopy(obj)

    def _spec_of(self, resource: Resource, obj: Obj) -> Obj:
        dropped = ('metadata', 'status') if resource.status else ('metadata',)
        return {k: v for k, v in obj.items() if k not in dropped}

    def create(self, resource: Resource, namespace: str, obj: Obj, *, keep_status: bool) -> Obj:
        obj = stored_form(resource, copy.deepcopy(obj))
        meta = obj.setdefault('metadata', {})
        if not meta.get('name') and meta.get('generateName'):
            meta['name'] = meta['generateName'] + uuid.uuid4().hex[:5]
        name = meta.get('name')
        if not name:
            raise ApiError(422, 'metadata.name: Required value: name or generateName is required')
        if resource.namespaced:
            if meta.get('namespace', namespace) != namespace:
                raise ApiError(400, 'the namespace of the object does not match the request')
            meta['namespace'] = namespace
        bucket = self._bucket(resource)
        if (namespace, name) in bucket:
            raise ApiError(
                409,
                f'{resource.plural}.{resource.group} "{name}" already exists',
                reason='AlreadyExists',
            )
        if resource.status and not keep_status:
            obj.pop('status', None)
        self.rv += 1
        storage = storage_of(resource)
        obj['apiVersion'], obj['kind'] = storage.group_version, storage.kind
        meta.update(
            uid=str(uuid.uuid4()),
            resourceVersion=str(self.rv),
            generation=1,
            creationTimestamp=_now(),
        )
        bucket[(namespace, name)] = obj
        self._emit(resource, 'ADDED', obj)
        return served(resource, copy.deepcopy(obj))

    def update(self, resource: Resource, namespace: str, name: str, obj: Obj, *, part: str) -> Obj:
        """Replace the object; `part` is 'main' or 'status' (which fields the write may change)."""
        old = self._stored(resource, namespace, name)
        obj = stored_form(resource, obj)
        meta = obj.get('metadata') or {}
        if meta.get('name', name) != name:
            raise ApiError(400, 'the name of the object does not match the name on the URL')
        sent_rv = meta.get('resourceVersion')
        if sent_rv not in (None, '') and str(sent_rv) != old['metadata']['resourceVersion']:
            raise ApiError(
                409,
                f'Operation cannot be fulfilled on {resource.plural}.{resource.group} '
                f'"{name}": the object has been modified; please apply your changes to the '
                'latest version and try again',
            )
        if part == 'status':
            new = copy.deepcopy(old)
            if 'status' in obj:
                new['status'] = copy.deepcopy(obj['status'])
            else:
                new.pop('status', None)
        else:
            new = copy.deepcopy(obj)
            new['metadata'] = {**meta}
            if resource.status:
                new.pop('status', None)
                if 'status' in old:
                    new['status'] = old['status']
        storage = storage_of(resource)
        new['apiVersion'], new['kind'] = storage.group_version, storage.kind
        kept = ('uid', 'creationTimestamp', 'namespace', 'name', 'generation')
        new['metadata'].update({k: old['metadata'][k] for k in kept if k in old['metadata']})
        if self._spec_of(resource, new) != self._spec_of(resource, old):
            new['metadata']['generation'] = old['metadata']['generation'] + 1
        new['metadata']['resourceVersion'] = old['metadata']['resourceVersion']
        if new == old:
            # A no-op write keeps the resourceVersion, as the apiserver does.
            return served(resource, old)
        self.rv += 1
        new['metadata']['resourceVersion'] = str(self.rv)
        self._bucket(resource)[(namespace, name)] = new
        self._emit(resource, 'MODIFIED', new, old)
        return served(resource, copy.deepcopy(new))

    def delete(self, resource: Resource, namespace: str, name: str) -> Obj:
        old = self._stored(resource, namespace, name)
        del self._bucket(resource)[(namespace, name)]
        self.rv += 1
        old['metadata']['resourceVersion'] = str(self.rv)
        self._emit(resource, 'DELETED', old)
        return served(resource, old)


def to_scale(scale: ScaleMap, obj: Obj) -> Obj:
    meta = obj['metadata']
    status: Obj = {'replicas': _dig(obj, scale.status_replicas) or 0}
    selector = _dig(obj, scale.selector)
    if scale.selector_is_match_labels and isinstance(selector, dict):
        selector = ','.join(f'{k}={selector[k]}' for k in sorted(selector))
    if selector:
        status['selector'] = selector
    return {
        'kind': 'Scale',
        'apiVersion': 'autoscaling/v1',
        'metadata': {
            k: meta[k]
            for k in ('name', 'namespace', 'uid', 'resourceVersion', 'creationTimestamp')
            if k in meta
        },
        'spec': {'replicas': _dig(obj, scale.spec_replicas) or 0},
        'status': status,
    }


def from_scale(scale: ScaleMap, obj: Obj, scale_obj: Any) -> Obj:
    """The main object with the Scale's spec.replicas written through, carrying its RV."""
    replicas = _dig(scale_obj, ('spec', 'replicas')) if isinstance(scale_obj, dict) else None
    if not isinstance(replicas, int) or isinstance(replicas, bool) or replicas < 0:
        raise ApiError(422, f'Scale.spec.replicas: Invalid value: {replicas!r}')
    new = copy.deepcopy(obj)
    _set(new, scale.spec_replicas, replicas)
    sent_rv = _dig(scale_obj, ('metadata', 'resourceVersion'))
    new['metadata']['resourceVersion'] = sent_rv
    return new
