"""An in-process fake kube-apiserver over real HTTP, for the demo and for testing the controller.

Why: no kube-apiserver runs here, and the controller's correctness hinges on wire semantics
(discovery, optimistic concurrency, `/status` and `/scale` subresources, watch streams and 410s)
that a mock of the client would not check. `async with FakeAPI() as api:` serves on 127.0.0.1,
on `port` (default 0: an ephemeral port), at `api.url`; kubectl works against it with
`--server=<url>`. It starts only where the CRDs of deploy/base/crds can be read (a source
checkout): FileNotFoundError says where it looked (`table.CRD_DIR`).

Served: discovery (`/api`, `/api/v1`, `/apis`, `/apis/<g>/<v>`, `/version`) and namespaced CRUD,
`/status`, `/scale`, list and watch for the kinds in `resources.RESOURCES`. Storage rules live in
`store.Store`. Errors are metav1.Status JSON with `reason` and `code`.

Patches: merge patch and JSON patch everywhere; strategic merge patch on built-in kinds is applied
as a merge patch (list merge keys are not modelled) and answers 415 on custom resources, as the
apiserver does; apply patches (server-side apply) answer 415. A patch whose result carries a stale
metadata.resourceVersion answers 409.

Watch: `?watch=true` streams events (`watch.serve_watch`: replay, history, in-stream 410,
bookmarks every `bookmark_interval` seconds and on `bookmark()`, `timeoutSeconds`, objects
entering or leaving a label selector). Lists and watches select with `watch.Selection`.

Tables: a GET that asks for a meta.k8s.io/v1 Table (as `kubectl get` does) gets one for custom
resources whose CRD is in deploy/base/crds (`table.negotiate`); otherwise the plain object.

Fault injection: `fail()` (500, 429 with Retry-After, 409, 410 ... for the next N matching
requests; `clear_faults()` ends them), `latency`, `drop_watches()`, `force_watch_gone()`. Every
request is appended to `requests` (method, path, query, content type, body, client, arrival
time) before faults and latency apply, in the order the store sees them (without `latency`);
its entry is replaced by one with the answer's status once answered (a watch: when its stream
ends).

Clients: no request is authenticated, but the bearer token a request carries is recorded as its
`client`, so that a test running several controllers can tell whose request each one was (each
`process.ControllerProcess` gets a kubeconfig with its own token).
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import time
from dataclasses import dataclass
from types import TracebackType
from typing import Any

from aiohttp import web

from llmscaler.devcluster import loopback
from llmscaler.devcluster.fakeapi import resources, table, validation
from llmscaler.devcluster.fakeapi.resources import Resource
from llmscaler.devcluster.fakeapi.semantics import ApiError, json_patch, merge_patch, status_body
from llmscaler.devcluster.fakeapi.store import Obj, Store, from_scale, to_scale
from llmscaler.devcluster.fakeapi.watch import BOOKMARK, Selection, serve_watch

MERGE = 'application/merge-patch+json'
JSON_PATCH = 'application/json-patch+json'
STRATEGIC = 'application/strategic-merge-patch+json'


@dataclass(frozen=True, slots=True)
class RecordedRequest:
    method: str
    path: str
    query: dict[str, str]
    content_type: str
    body: bytes
    client: str = ''
    """The bearer token the request carried ('' without one): who sent it."""
    at: float = 0.0
    """When the request arrived, in seconds of some clock: the fake's time.monotonic() once its
    body had been read; the real API server's audit timestamp (Unix seconds). Compare only the
    `at` of two requests of the same log."""
    status: int | None = None
    """The HTTP status answered; None until then."""

    def json(self) -> Any:
        return json.loads(self.body)


@dataclass(slots=True)
class Fault:
    status: int
    method: str | None
    path_prefix: str
    remaining: int
    retry_after: int


@dataclass(frozen=True, slots=True)
class Target:
    resource: Resource
    namespace: str | None
    name: str | None = None
    sub: str | None = None


def _json(obj: Any, status: int = 200, headers: dict[str, str] | None = None) -> web.Response:
    # Exactly `application/json`, no charset parameter, as the apiserver sends it: clients such
    # as lightkube compare the header verbatim to decide whether the body is a metav1.Status.
    response = web.Response(status=status, body=json.dumps(obj).encode(), headers=headers)
    response.headers['Content-Type'] = 'application/json'
    return response


def _error(err: ApiError, headers: dict[str, str] | None = None) -> web.Response:
    body = status_body(code=err.code, reason=err.reason, message=err.message, details=err.details)
    return _json(body, err.code, headers)


def _parse_target(parts: list[str]) -> Target | None:
    if parts[:2] == ['api', 'v1']:
        group, version, rest = '', 'v1', parts[2:]
    elif parts[:1] == ['apis'] and len(parts) >= 3:
        group, version, rest = parts[1], parts[2], parts[3:]
    else:
        return None
    namespace: str | None = None
    if len(rest) >= 3 and rest[0] == 'namespaces':
        namespace, rest = rest[1], rest[2:]
    if not 1 <= len(rest) <= 3:
        return None
    resource = resources.find(group=group, version=version, plural=rest[0])
    if resource is None:
        return None
    # A namespaced kind is named only inside its namespace; a cluster-scoped one (Node) never
    # is, and one of its objects is stored under the namespace ''.
    if not resource.namespaced:
        if namespace is not None:
            return None
        namespace = '' if len(rest) > 1 else None
    elif namespace is None and len(rest) > 1:
        return None
    name = rest[1] if len(rest) > 1 else None
    sub = rest[2] if len(rest) > 2 else None
    if sub not in (None, 'status', 'scale') or (sub == 'status' and not resource.status):
        return None
    if sub == 'scale' and resource.scale is None:
        return None
    return Target(resource, namespace, name, sub)


class FakeAPI:
    def __init__(
        self, *, history_limit: int = 1000, bookmark_interval: float = 1.0, port: int = 0
    ) -> None:
        self.port = port
        self.store = Store(history_limit=history_limit)
        self.requests: list[RecordedRequest] = []
        self.latency = 0.0
        self.bookmark_interval = bookmark_interval
        self._faults: list[Fault] = []
        self._gone_watches = 0
        self._served: loopback.Served | None = None
        self.url = ''
        self.unserved: set[str] = set()
        """API versions (`group/version`) answered as not served: 404, absent from discovery."""

    async def __aenter__(self) -> FakeAPI:
        # Read the CRDs now, so that a missing deploy/ fails the start, not every `kubectl get`.
        table.require_crds()
        app = web.Application()
        app.router.add_route('*', '/{tail:.*}', self._handle)
        self._served = await loopback.serve(app, port=self.port)
        self.url = self._served.url
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.drop_watches()
        if self._served is not None:
            await self._served.close()

    # -- fault injection and test helpers ---------------------------------------------------

    def fail(
        self,
        *,
        status: int,
        method: str | None = None,
        path_prefix: str = '',
        times: int = 1,
        retry_after: int = 1,
    ) -> None:
        """Answer the next `times` requests matching method and path prefix with `status`."""
        self._faults.append(Fault(status, method, path_prefix, times, retry_after))

    def clear_faults(self) -> None:
        """Forget the faults `fail()` set up that have not been used up yet."""
        self._faults.clear()

    def drop_watches(self) -> None:
        """End every open watch stream now (the client sees the chunked body end)."""
        for queue in self.store.watchers:
            queue.put_nowait(None)

    def force_watch_gone(self, *, times: int = 1) -> None:
        """The next `times` watch requests get an in-stream ERROR 410, whatever their RV."""
        self._gone_watches += times

    def bookmark(self) -> None:
        """Send a BOOKMARK at the current resourceVersion to watches that allow bookmarks."""
        for queue in self.store.watchers:
            queue.put_nowait(BOOKMARK)

    def seed(self, obj: Obj) -> Obj:
        """Store an object directly, status included (as if a kube controller had written it)."""
        resource = resources.by_kind(api_version=obj['apiVersion'], kind=obj['kind'])
        if resource is None:
            raise KeyError(f'unknown kind {obj["apiVersion"]} {obj["kind"]}')
        namespace = obj['metadata'].get('namespace', 'default')
        return self.store.create(resource, namespace, obj, keep_status=True)

    def store_resource(self, obj: Obj) -> Resource:
        resource = resources.by_kind(api_version=obj['apiVersion'], kind=obj['kind'])
        if resource is None:
            raise KeyError(f'unknown kind {obj["apiVersion"]} {obj["kind"]}')
        return resource

    def get(self, *, api_version: str, kind: str, namespace: str, name: str) -> Obj:
        resource = resources.by_kind(api_version=api_version, kind=kind)
        if resource is None:
            raise KeyError(f'unknown kind {api_version} {kind}')
        return self.store.get(resource, namespace, name)

    def requests_to(self, *, method: str, path: str) -> list[RecordedRequest]:
        return [r for r in self.requests if r.method == method and r.path == path]

    # -- HTTP ------------------------------------------------------------------------------

    def _take_fault(self, method: str, path: str) -> Fault | None:
        for fault in self._faults:
            if fault.method not in (None, method) or not path.startswith(fault.path_prefix):
                continue
            fault.remaining -= 1
            if fault.remaining <= 0:
                self._faults.remove(fault)
            return fault
        return None

    async def _handle(self, request: web.Request) -> web.StreamResponse:
        body = await request.read()
        scheme, _, token = request.headers.get('Authorization', '').partition(' ')
        index = len(self.requests)
        recorded = RecordedRequest(
            request.method,
            request.path,
            dict(request.query),
            request.headers.get('Content-Type', ''),
            body,
            client=token if scheme.lower() == 'bearer' else '',
            at=time.monotonic(),
        )
        self.requests.append(recorded)
        response = await self._answer(request, body)
        # A test may have cleared the log meanwhile: only our own entry is replaced.
        if index < len(self.requests) and self.requests[index] is recorded:
            self.requests[index] = dataclasses.replace(recorded, status=response.status)
        return response

    async def _answer(self, request: web.Request, body: bytes) -> web.StreamResponse:
        if self.latency > 0:
            await asyncio.sleep(self.latency)
        fault = self._take_fault(request.method, request.path)
        if fault is not None:
            headers = {'Retry-After': str(fault.retry_after)} if fault.status == 429 else None
            return _error(ApiError(fault.status, f'injected fault {fault.status}'), headers)
        try:
            return await self._dispatch(request, body)
        except ApiError as err:
            return _error(err)

    async def _dispatch(self, request: web.Request, body: bytes) -> web.StreamResponse:
        parts = [p for p in request.path.split('/') if p]
        if request.method == 'GET':
            doc = self._discovery(parts)
            if doc is not None:
                return _json(doc)
        target = _parse_target(parts)
        if target is not None and target.resource.group_version in self.unserved:
            target = None
        if target is None:
            raise ApiError(404, f'the server could not find the requested resource {request.path}')
        q = request.query
        if target.name is None:
            if request.method == 'GET' and q.get('watch') in ('true', '1'):
                selection = Selection.of(
                    resource=target.resource, namespace=target.namespace, query=q
                )
                gone = self._gone_watches > 0
                self._gone_watches -= 1 if gone else 0
                return await serve_watch(
                    request,
                    store=self.store,
                    selection=selection,
                    gone=gone,
                    bookmark_interval=self.bookmark_interval,
                )
            if request.method == 'GET':
                listed = self._list(target, q)
                accept = request.headers.get('Accept', '')
                return _json(
                    table.negotiate(accept=accept, query=q, resource=target.resource, body=listed)
                )
            if request.method == 'POST' and (
                target.namespace is not None or not target.resource.namespaced
            ):
                strict = q.get('fieldValidation') == 'Strict'
                created = validation.admit(target.resource, _load(body), strict=strict)
                return _json(
                    self.store.create(
                        target.resource, target.namespace or '', created, keep_status=False
                    ),
                    201,
                )
            raise ApiError(405, f'{request.method} is not supported on collections here')
        assert target.namespace is not None
        result = self._object(
            request.method,
            target,
            target.namespace,
            target.name,
            body,
            request.headers.get('Content-Type', ''),
            strict=q.get('fieldValidation') == 'Strict',
        )
        if request.method == 'GET' and target.sub is None:
            accept = request.headers.get('Accept', '')
            result = table.negotiate(accept=accept, query=q, resource=target.resource, body=result)
        return _json(result)

    def _discovery(self, parts: list[str]) -> dict[str, Any] | None:
        if parts == ['api']:
            return resources.api_versions()
        if parts == ['api', 'v1']:
            return resources.api_resource_list(group='', version='v1')
        if parts == ['apis']:
            return resources.api_group_list()
        if parts == ['version']:
            return {
                'major': '1',
                'minor': '32',
                'gitVersion': 'v1.32.0-fakeapi',
                'platform': 'linux/amd64',
            }
        if (
            len(parts) == 3
            and parts[0] == 'apis'
            and resources.has_group_version(group=parts[1], version=parts[2])
            and f'{parts[1]}/{parts[2]}' not in self.unserved
        ):
            return resources.api_resource_list(group=parts[1], version=parts[2])
        return None

    def _list(self, target: Target, q: Any) -> Obj:
        r = target.resource
        selection = Selection.of(resource=r, namespace=target.namespace, query=q)
        items = self.store.list(r, target.namespace, selection.matches)
        return {
            'kind': f'{r.kind}List',
            'apiVersion': r.group_version,
            'metadata': {'resourceVersion': str(self.store.rv)},
            'items': items,
        }

    def _patch(self, resource: Resource, current: Obj, body: bytes, content_type: str) -> Obj:
        media = content_type.split(';')[0].strip()
        if (media == STRATEGIC and resource.builtin) or media == MERGE:
            return dict(merge_patch(current, _load(body, dict_only=False)))
        if media == JSON_PATCH:
            patched = json_patch(current, _load(body, dict_only=False))
            if not isinstance(patched, dict):
                raise ApiError(422, 'a JSON patch must leave an object')
            return patched
        raise ApiError(
            415,
            f'the body of the request was in an unknown format - accepted '
            f'media types include: {JSON_PATCH}, {MERGE}'
            + (f', {STRATEGIC}' if resource.builtin else ''),
        )

    def _object(
        self,
        method: str,
        target: Target,
        ns: str,
        name: str,
        body: bytes,
        content_type: str,
        *,
        strict: bool,
    ) -> Obj:
        r, store = target.resource, self.store
        if target.sub == 'scale':
            assert r.scale is not None
            if method == 'GET':
                return to_scale(r.scale, store.get(r, ns, name))
            current = store.get(r, ns, name)
            if method == 'PUT':
                scale_obj = _load(body)
            elif method == 'PATCH':
                scale_obj = self._patch(r, to_scale(r.scale, current), body, content_type)
            else:
                raise ApiError(405, f'{method} is not supported on /scale')
            new = from_scale(r.scale, current, scale_obj)
            return to_scale(r.scale, store.update(r, ns, name, new, part='main'))
        part = 'status' if target.sub == 'status' else 'main'
        if method == 'GET':
            return store.get(r, ns, name)
        if method == 'PUT':
            old = store.get(r, ns, name)
            replaced = validation.admit(r, _load(body), old=old, part=part, strict=strict)
            return store.update(r, ns, name, replaced, part=part)
        if method == 'PATCH':
            old = store.get(r, ns, name)
            patched = self._patch(r, old, body, content_type)
            admitted = validation.admit(r, patched, old=old, part=part, strict=strict)
            return store.update(r, ns, name, admitted, part=part)
        if method == 'DELETE' and part == 'main':
            return store.delete(r, ns, name)
        raise ApiError(405, f'{method} is not supported here')


def _load(body: bytes, *, dict_only: bool = True) -> Any:
    try:
        value = json.loads(body)
    except ValueError as err:
        raise ApiError(400, f'the request body is not valid JSON: {err}') from err
    if dict_only and not isinstance(value, dict):
        raise ApiError(400, 'the request body must be a JSON object')
    return value
