"""The Prometheus source over HTTPS: certificate verification, SNI, client certificates.

Against the fake Prometheus (tests/support/fake_prometheus.py) served with TLS, with a throw-away CA
made by the openssl command line for each run (tests/support/pki.py).
"""

from __future__ import annotations

import ssl
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from llmscaler.collect.prometheus.source import PrometheusConfig, PrometheusSource
from llmscaler.collect.readings import ErrorReason
from tests.support.fake_prometheus import REGISTRY_SIZE, FakePrometheus, read
from tests.support.pki import Pki, make_pki


def test_missing_ca_file_fails_at_construction(tmp_path: Path) -> None:
    config = PrometheusConfig(base_url='https://prometheus:9090', ca_file=tmp_path / 'none.pem')
    with pytest.raises(FileNotFoundError):
        PrometheusSource(config=config)


@pytest.fixture(scope='module')
def pki(tmp_path_factory: pytest.TempPathFactory) -> Pki:
    return make_pki(tmp_path_factory)


@pytest.fixture
async def tls_prom(pki: Pki) -> AsyncIterator[tuple[FakePrometheus, list[str | None]]]:
    """An HTTPS fake Prometheus that records the SNI names it is offered."""
    server_names: list[str | None] = []
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.load_cert_chain(pki.server_cert, pki.server_key)

    def record(_sock: ssl.SSLObject, name: str | None, _ctx: ssl.SSLContext) -> None:
        server_names.append(name)

    context.sni_callback = record
    server = FakePrometheus()
    await server.start(tls=context)
    yield server, server_names
    await server.stop()


async def test_tls_verified_with_the_ca_file(
    tls_prom: tuple[FakePrometheus, list[str | None]], pki: Pki
) -> None:
    prom, _ = tls_prom
    reading = await read(PrometheusConfig(base_url=prom.url, ca_file=pki.ca))
    assert reading.errors == ()
    assert len(prom.log) == REGISTRY_SIZE


async def test_a_token_goes_over_https_without_any_opt_in(
    tls_prom: tuple[FakePrometheus, list[str | None]], pki: Pki
) -> None:
    prom, _ = tls_prom
    reading = await read(PrometheusConfig(base_url=prom.url, ca_file=pki.ca, bearer_token='s3cret'))
    assert reading.errors == ()
    assert [entry.authorization for entry in prom.log] == ['Bearer s3cret'] * REGISTRY_SIZE


async def test_tls_fails_without_the_ca_file_unless_skipping_verification(
    tls_prom: tuple[FakePrometheus, list[str | None]],
) -> None:
    prom, _ = tls_prom
    reading = await read(PrometheusConfig(base_url=prom.url))
    assert {e.reason for e in reading.errors} == {ErrorReason.UNREACHABLE}
    assert 'CERTIFICATE_VERIFY_FAILED' in reading.errors[0].message
    assert prom.log == []
    reading = await read(PrometheusConfig(base_url=prom.url, insecure_skip_verify=True))
    assert reading.errors == ()
    assert len(prom.log) == REGISTRY_SIZE


async def test_server_name_overrides_sni_and_hostname_check(
    tls_prom: tuple[FakePrometheus, list[str | None]], pki: Pki
) -> None:
    prom, server_names = tls_prom
    config = PrometheusConfig(base_url=prom.url, ca_file=pki.ca, server_name='prometheus.test')
    reading = await read(config)
    assert reading.errors == ()
    assert set(server_names) == {'prometheus.test'}
    # The certificate names prometheus.test and 127.0.0.1, not this name.
    config = PrometheusConfig(base_url=prom.url, ca_file=pki.ca, server_name='other.test')
    reading = await read(config)
    assert {e.reason for e in reading.errors} == {ErrorReason.UNREACHABLE}
    assert 'other.test' in reading.errors[0].message


async def test_client_certificate(pki: Pki) -> None:
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH, cafile=pki.ca)
    context.load_cert_chain(pki.server_cert, pki.server_key)
    context.verify_mode = ssl.CERT_REQUIRED
    server = FakePrometheus()
    await server.start(tls=context)
    try:
        with_cert = PrometheusConfig(
            base_url=server.url,
            ca_file=pki.ca,
            client_cert_file=pki.client_cert,
            client_key_file=pki.client_key,
        )
        assert (await read(with_cert)).errors == ()
        reading = await read(PrometheusConfig(base_url=server.url, ca_file=pki.ca))
    finally:
        await server.stop()
    assert len(reading.errors) == REGISTRY_SIZE
    assert {e.reason for e in reading.errors} == {ErrorReason.UNREACHABLE}
