"""`devcluster.rest.Rest` against a loopback TLS server that aborts its first handshakes."""

from __future__ import annotations

import socket
import ssl
import threading
from collections.abc import Iterator
from contextlib import contextmanager

import httpx
import pytest

from llmscaler.devcluster.rest import CONNECT_RETRIES, Rest
from tests.support.pki import Pki, make_pki

DEPLOYMENT = {
    'apiVersion': 'apps/v1',
    'kind': 'Deployment',
    'metadata': {'name': 'd', 'namespace': 'ns'},
}


@pytest.fixture(scope='module')
def pki(tmp_path_factory: pytest.TempPathFactory) -> Pki:
    return make_pki(tmp_path_factory)


class AbortingServer:
    """Closes its first `aborts` connections before the handshake ends; answers the next
    requests with their own body (201)."""

    def __init__(self, *, pki: Pki, aborts: int) -> None:
        self.aborts = aborts
        self.connections = 0
        self.requests: list[str] = []
        self._context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        self._context.load_cert_chain(str(pki.server_cert), str(pki.server_key))
        self._listener = socket.create_server(('127.0.0.1', 0))
        self.url = f'https://127.0.0.1:{self._listener.getsockname()[1]}'

    def serve(self) -> None:
        while True:
            try:
                conn, _ = self._listener.accept()
            except OSError:  # closed: the test is over
                return
            self.connections += 1
            if self.connections <= self.aborts:
                conn.close()
                continue
            with self._context.wrap_socket(conn, server_side=True) as tls:
                self._answer(tls)

    def _answer(self, tls: ssl.SSLSocket) -> None:
        data = b''
        while b'\r\n\r\n' not in data:
            data += tls.recv(65536)
        head, _, body = data.partition(b'\r\n\r\n')
        lines = head.decode().split('\r\n')
        length = next(
            (
                int(line.split(':')[1])
                for line in lines
                if line.lower().startswith('content-length')
            ),
            0,
        )
        while len(body) < length:
            body += tls.recv(65536)
        self.requests.append(lines[0])
        tls.sendall(
            b'HTTP/1.1 201 Created\r\nContent-Type: application/json\r\n'
            + f'Content-Length: {len(body)}\r\nConnection: close\r\n\r\n'.encode()
            + body
        )

    def close(self) -> None:
        self._listener.close()


@contextmanager
def aborting(pki: Pki, *, aborts: int) -> Iterator[tuple[AbortingServer, Rest]]:
    server = AbortingServer(pki=pki, aborts=aborts)
    thread = threading.Thread(target=server.serve, daemon=True)
    thread.start()
    rest = Rest(url=server.url, ca=pki.ca, cert=pki.client_cert, key=pki.client_key)
    try:
        yield server, rest
    finally:
        rest.close()
        server.close()
        thread.join(timeout=5)


def test_a_handshake_the_server_aborts_is_opened_again_and_the_request_sent_once(
    pki: Pki,
) -> None:
    with aborting(pki, aborts=CONNECT_RETRIES) as (server, rest):
        assert rest.create(DEPLOYMENT) == DEPLOYMENT
    assert server.connections == CONNECT_RETRIES + 1
    assert server.requests == ['POST /apis/apps/v1/namespaces/ns/deployments HTTP/1.1']


def test_a_server_that_aborts_every_handshake_fails_the_call_after_the_retries(pki: Pki) -> None:
    with (
        aborting(pki, aborts=CONNECT_RETRIES + 1) as (server, rest),
        pytest.raises(httpx.ConnectError),
    ):
        rest.create(DEPLOYMENT)
    assert server.connections == CONNECT_RETRIES + 1
    assert server.requests == []
