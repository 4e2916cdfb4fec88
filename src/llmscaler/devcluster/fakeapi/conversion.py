"""One stored object served under two API versions: core v1 Events and events.k8s.io/v1 Events.

Why: kube-apiserver keeps one set of Events and serves each through both APIs, renaming fields
on the way (pkg/apis/events/v1's conversion in Kubernetes): an Event the controller records
through events.k8s.io/v1 is what `kubectl describe` lists through core v1, and the reverse. A fake
that kept them apart would let a test pass that reads the wrong API, and hide from `kubectl
describe` what the controller recorded.

What: a `Resource` whose `stored_in` names another group/version shares that resource's storage;
`stored_form` turns an object sent through it into the storage's form, `served` turns a stored
object into the form of the resource it is read through. Field renames, core v1 ⇄ events.k8s.io/v1:
involvedObject ⇄ regarding, message ⇄ note, reportingComponent ⇄ reportingController, source ⇄
deprecatedSource, firstTimestamp ⇄ deprecatedFirstTimestamp, lastTimestamp ⇄
deprecatedLastTimestamp, count ⇄ deprecatedCount; the other fields keep their names. For every
other resource both are the identity.

What fails: nothing; an unknown field passes through unchanged, as the fake keeps what it is sent.
"""

from __future__ import annotations

from typing import Any, Final

from llmscaler.devcluster.fakeapi.resources import Resource, storage_of

Obj = dict[str, Any]

# core v1 name → events.k8s.io/v1 name.
_EVENT_FIELDS: Final = (
    ('involvedObject', 'regarding'),
    ('message', 'note'),
    ('reportingComponent', 'reportingController'),
    ('source', 'deprecatedSource'),
    ('firstTimestamp', 'deprecatedFirstTimestamp'),
    ('lastTimestamp', 'deprecatedLastTimestamp'),
    ('count', 'deprecatedCount'),
)


def _renamed(obj: Obj, pairs: tuple[tuple[str, str], ...], *, api_version: str) -> Obj:
    names = dict(pairs)
    return {names.get(key, key): value for key, value in obj.items()} | {'apiVersion': api_version}


def stored_form(resource: Resource, obj: Obj) -> Obj:
    """`obj`, sent through `resource`, as its storage keeps it (a new dict when renamed)."""
    storage = storage_of(resource)
    if storage is resource:
        return obj
    return _renamed(obj, _EVENT_FIELDS, api_version=storage.group_version)


def served(resource: Resource, obj: Obj) -> Obj:
    """A stored `obj` as read through `resource` (unchanged when already in that form)."""
    if storage_of(resource) is resource or obj.get('apiVersion') == resource.group_version:
        return obj
    back = tuple((new, old) for old, new in _EVENT_FIELDS)
    return _renamed(obj, back, api_version=resource.group_version)
