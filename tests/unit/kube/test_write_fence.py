"""`fence_writes` against the fake apiserver over loopback: a refused write never reaches the
server and fails as a transport error; reads, watches and the Lease always go through."""

from __future__ import annotations

import httpx2
import pytest
from lightkube import AsyncClient
from lightkube.models.coordination_v1 import LeaseSpec
from lightkube.models.meta_v1 import ObjectMeta
from lightkube.resources.coordination_v1 import Lease
from lightkube.resources.core_v1 import ConfigMap
from lightkube.types import PatchType

from llmscaler.devcluster.fakeapi.server import FakeAPI
from llmscaler.kube.client import describe_error, make_client
from llmscaler.kube.write_fence import WriteFenced, fence_writes

NS = 'llm'


class Gate:
    """The refusal the fence asks for; counts how often it was asked."""

    def __init__(self) -> None:
        self.reason: str | None = 'frozen past the deadline'
        self.asked = 0

    def __call__(self) -> str | None:
        self.asked += 1
        return self.reason


def configmap(name: str) -> ConfigMap:
    return ConfigMap(metadata=ObjectMeta(name=name, namespace=NS), data={'k': 'v'})


async def test_a_refused_write_never_reaches_the_server(api: FakeAPI, client: AsyncClient) -> None:
    gate = Gate()
    fence_writes(client, refusal=gate)
    before = len(api.requests)
    with pytest.raises(WriteFenced) as caught:
        await client.create(configmap('a'))
    assert len(api.requests) == before
    assert gate.asked == 1
    assert describe_error(caught.value) == (
        f'WriteFenced: POST /api/v1/namespaces/{NS}/configmaps not sent: frozen past the deadline'
    )
    # Callers treat it as a failed connection: the errors they already catch include it.
    assert isinstance(caught.value, httpx2.HTTPError)


async def test_every_state_changing_method_is_fenced(api: FakeAPI, client: AsyncClient) -> None:
    gate = Gate()
    gate.reason = None
    fence_writes(client, refusal=gate)
    await client.create(configmap('a'))
    gate.reason = 'not the holder'
    attempts = [
        client.create(configmap('b')),
        client.patch(
            ConfigMap, 'a', {'data': {'k': 'w'}}, namespace=NS, patch_type=PatchType.MERGE
        ),
        client.replace(configmap('a')),
        client.delete(ConfigMap, 'a', namespace=NS),
    ]
    for attempt in attempts:
        with pytest.raises(WriteFenced):
            await attempt
    sent = [r.method for r in api.requests if '/configmaps' in r.path]
    assert sent == ['POST']  # only the write made while the gate was open
    # The write that went out was asked twice (handed over, then before its headers); each
    # refused one once.
    assert gate.asked == 2 + len(attempts)


class LateGate(Gate):
    """Open when a write is handed to the client, closed by the time its headers would go
    (while `closing`; else always open)."""

    closing = True

    def __call__(self) -> str | None:
        self.asked += 1
        late = self.closing and self.asked % 2 == 0
        return 'the Lease lapsed while connecting' if late else None


async def test_a_write_is_asked_again_just_before_its_headers_go(
    api: FakeAPI, client: AsyncClient
) -> None:
    gate = LateGate()
    fence_writes(client, refusal=gate)
    with pytest.raises(WriteFenced, match='the Lease lapsed while connecting'):
        await client.create(configmap('late'))
    assert [r for r in api.requests if '/configmaps' in r.path] == []
    assert gate.asked == 2
    # The connection it was to use is closed, not left half-used: the client goes on working.
    gate.closing = False
    await client.create(configmap('later'))
    names = [c.metadata and c.metadata.name async for c in client.list(ConfigMap, namespace=NS)]
    assert names == ['later']


async def test_a_trace_the_caller_set_still_sees_every_event(api: FakeAPI) -> None:
    made = make_client(server=api.url, timeout=5.0)
    gate = Gate()
    gate.reason = None
    fence_writes(made, refusal=gate)
    seen: list[str] = []

    async def trace(event: str, info: dict[str, object]) -> None:
        seen.append(event)

    http = made._client._client  # the connection `fence_writes` hooks (see its TypeError)
    try:
        response = await http.post(
            f'{api.url}/api/v1/namespaces/{NS}/configmaps',
            json={'apiVersion': 'v1', 'kind': 'ConfigMap', 'metadata': {'name': 'traced'}},
            extensions={'trace': trace},
        )
    finally:
        await made.aclose()
    assert response.status_code == 201
    assert 'http11.send_request_headers.started' in seen
    assert gate.asked == 2


async def test_reads_and_watches_are_never_asked(api: FakeAPI, client: AsyncClient) -> None:
    gate = Gate()
    fence_writes(client, refusal=gate)
    api.seed(
        {
            'apiVersion': 'v1',
            'kind': 'ConfigMap',
            'metadata': {'name': 'seen', 'namespace': NS},
            'data': {'k': 'v'},
        }
    )
    assert (await client.get(ConfigMap, 'seen', namespace=NS)).data == {'k': 'v'}
    names = [c.metadata and c.metadata.name async for c in client.list(ConfigMap, namespace=NS)]
    assert names == ['seen']
    async for _, obj in client.watch(ConfigMap, namespace=NS):
        assert obj.metadata is not None
        assert obj.metadata.name == 'seen'
        break
    assert gate.asked == 0


async def test_the_lease_is_written_whatever_the_gate_says(
    api: FakeAPI, client: AsyncClient
) -> None:
    gate = Gate()
    fence_writes(client, refusal=gate)
    lease = Lease(
        metadata=ObjectMeta(name='lock', namespace=NS), spec=LeaseSpec(holderIdentity='a')
    )
    created = await client.create(lease)
    created.spec.holderIdentity = None  # type: ignore[union-attr]
    await client.replace(created)
    stored = api.get(api_version='coordination.k8s.io/v1', kind='Lease', namespace=NS, name='lock')
    assert stored['spec'].get('holderIdentity') is None
    assert gate.asked == 0


def test_a_client_without_the_expected_connection_is_refused() -> None:
    class Elsewhere:
        _client = object()

    with pytest.raises(TypeError, match='cannot fence writes'):
        fence_writes(Elsewhere(), refusal=Gate())  # type: ignore[arg-type]
