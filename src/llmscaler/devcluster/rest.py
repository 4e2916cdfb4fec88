"""A small synchronous client of a real kube-apiserver for the development cluster's own use.

Why: on the real control plane, the cluster harness (creating Deployments, VAs and nodes, and
the kubelet emulation reporting pod status) talks to the API server over HTTPS as any other
client does, with the admin certificate. It needs five verbs on a handful of kinds, with the
same error type the fake API raises (`ApiError` with the HTTP status), so callers handle a
404 or a 409 the same way on both backends; the controller's own client stays the product's.

What: `Rest(url=..., ca=..., cert=..., key=...)` with `get`, `list`, `create`, `patch` (a JSON
merge patch, optionally of a subresource) and `delete` (optionally with a grace period of 0 and
the uid as precondition). Kinds are resolved through the fake API's resource table
(`fakeapi.resources`), which names every kind the project reads or writes.

What fails: every verb raises `ApiError` with the answer's status and message for a non-2xx
answer, and for a kind the table does not hold (code 404, as the server would answer). A
connection that fails to open (refused, or a TLS handshake the server aborts) is opened up to
`CONNECT_RETRIES` more times; then, as every other httpx error (timeout: 10 s per request), its
error propagates.
"""

from __future__ import annotations

import json
import ssl
from pathlib import Path
from typing import Any

import httpx

from llmscaler.devcluster.fakeapi import resources
from llmscaler.devcluster.fakeapi.semantics import ApiError

__all__ = ['CONNECT_RETRIES', 'Rest']

Obj = dict[str, Any]

CONNECT_RETRIES = 2
"""Further attempts to open a connection that failed before any request was sent."""


class Rest:
    """Admin access to a real API server (see the module docstring)."""

    def __init__(self, *, url: str, ca: Path, cert: Path, key: Path) -> None:
        context = ssl.create_default_context(cafile=str(ca))
        context.load_cert_chain(str(cert), str(key))
        # A connection the server refuses mid-handshake (a TLS alert, seen under load from many
        # threads at once) sent nothing: opening it again is safe for every verb.
        transport = httpx.HTTPTransport(verify=context, retries=CONNECT_RETRIES)
        self._client = httpx.Client(base_url=url, transport=transport, timeout=10)

    def close(self) -> None:
        self._client.close()

    @staticmethod
    def path(*, api_version: str, kind: str, namespace: str | None, name: str | None = None) -> str:
        """The REST path of a collection (`name` None) or of one object."""
        resource = resources.by_kind(api_version=api_version, kind=kind)
        if resource is None:
            raise ApiError(404, f'the resource table has no {kind} in {api_version}')
        prefix = '/api/v1' if api_version == 'v1' else f'/apis/{api_version}'
        where = f'/namespaces/{namespace}' if resource.namespaced and namespace else ''
        return f'{prefix}{where}/{resource.plural}' + (f'/{name}' if name else '')

    def _send(self, method: str, path: str, **kwargs: Any) -> Obj:
        response = self._client.request(method, path, **kwargs)
        if response.status_code >= 300:
            try:
                message = str(response.json().get('message', response.text))
            except ValueError:
                message = response.text
            raise ApiError(response.status_code, f'{method} {path}: {message}')
        body: Obj = response.json() if response.content else {}
        return body

    def raw(self, *, method: str, path: str, body: Obj | None = None) -> Obj:
        """Any verb on any path (a kind the resource table does not hold: Namespace, ...)."""
        return self._send(method, path, **({'json': body} if body is not None else {}))

    def get(self, *, api_version: str, kind: str, namespace: str | None, name: str) -> Obj:
        path = self.path(api_version=api_version, kind=kind, namespace=namespace, name=name)
        return self._send('GET', path)

    def list(
        self, *, api_version: str, kind: str, namespace: str | None, selector: str | None = None
    ) -> list[Obj]:
        path = self.path(api_version=api_version, kind=kind, namespace=namespace)
        params = {'labelSelector': selector} if selector else {}
        items: list[Obj] = self._send('GET', path, params=params).get('items', [])
        return sorted(items, key=lambda item: str(item['metadata']['name']))

    def create(self, obj: Obj) -> Obj:
        meta = obj['metadata']
        path = self.path(
            api_version=obj['apiVersion'], kind=obj['kind'], namespace=meta.get('namespace')
        )
        return self._send('POST', path, json=obj)

    def patch(
        self,
        *,
        api_version: str,
        kind: str,
        namespace: str | None,
        name: str,
        patch: Obj,
        subresource: str = '',
    ) -> Obj:
        """A JSON merge patch (lists are replaced, not merged)."""
        path = self.path(api_version=api_version, kind=kind, namespace=namespace, name=name)
        return self._send(
            'PATCH',
            path + (f'/{subresource}' if subresource else ''),
            content=json.dumps(patch),
            headers={'Content-Type': 'application/merge-patch+json'},
        )

    def delete(
        self,
        *,
        api_version: str,
        kind: str,
        namespace: str | None,
        name: str,
        now: bool = False,
        uid: str | None = None,
    ) -> None:
        """Delete; `now` skips the grace period (a kubelet confirming its container is gone)."""
        path = self.path(api_version=api_version, kind=kind, namespace=namespace, name=name)
        options: Obj = {'kind': 'DeleteOptions', 'apiVersion': 'v1'}
        if now:
            options['gracePeriodSeconds'] = 0
        if uid is not None:
            options['preconditions'] = {'uid': uid}
        self._send(
            'DELETE',
            path,
            content=json.dumps(options),
            headers={'Content-Type': 'application/json'},
        )
