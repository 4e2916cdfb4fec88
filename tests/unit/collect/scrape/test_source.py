"""Tests of the pod-scraping source against real loopback HTTP(S) servers serving /metrics pages.

Pages (`tests.support.scrape_pages`) and their hand-worked figures are those of
`test_collect_scrape_reading` (the figures are computed by `collect.scrape.reading`, tested
there); here they show that scraping feeds the windows: what is fetched, kept, classified and
forgotten, with the HTTP client, TLS and tokens.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import math
import os
import signal
import socket
import ssl
import subprocess
import time
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from aiohttp import web
from aiohttp.test_utils import TestServer

from llmscaler.analyze.validity import histogram_violation
from llmscaler.collect.readings import ErrorReason, MetricsSource, ModelScope, Reading, SourceError
from llmscaler.collect.scrape.reading import Kind
from llmscaler.collect.scrape.source import (
    ACCEPT,
    PodScrapeSource,
    ScrapeConfig,
    ScrapeTarget,
    pod_url,
)
from llmscaler.domain.snapshot import LatencyHistogram
from tests.support.loop_gaps import gaps as loop_gaps
from tests.support.pki import Pki, make_pki
from tests.support.prerequisites import need_program
from tests.support.processes import alive, children
from tests.support.raw_http import RawServer, claims, drip, endless
from tests.support.scrape_pages import (
    MODEL,
    NS,
    SCOPE,
    TIMES,
    check_gateway_figures,
    epp_page,
    epp_pages,
    example_page,
    read,
    scrape_values,
    scraped,
)
from tests.support.waiting import eventually

TEXT = 'text/plain; version=0.0.4; charset=utf-8'


# --- a fleet of fake pods behind one loopback server ------------------------------------------


@dataclass
class Reply:
    body: bytes = b''
    status: int = 200
    content_type: str = TEXT
    delay: float = 0.0
    token: str | None = None
    """When set, requests without `Authorization: Bearer <token>` get 401."""


@dataclass
class Fleet:
    replies: dict[str, Reply] = field(default_factory=dict)
    headers: dict[str, dict[str, str]] = field(default_factory=dict)
    in_flight: int = 0
    max_in_flight: int = 0

    async def handle(self, request: web.Request) -> web.StreamResponse:
        pod = request.match_info['pod']
        self.headers[pod] = dict(request.headers)
        self.in_flight += 1
        self.max_in_flight = max(self.max_in_flight, self.in_flight)
        try:
            reply = self.replies[pod]
            if reply.delay:
                await asyncio.sleep(reply.delay)
            if reply.token is not None and (
                request.headers.get('Authorization') != f'Bearer {reply.token}'
            ):
                return web.Response(status=401, text='Unauthorized')
            headers = {'Content-Type': reply.content_type}
            if 300 <= reply.status < 400:
                headers['Location'] = '/elsewhere'
            return web.Response(body=reply.body, status=reply.status, headers=headers)
        finally:
            self.in_flight -= 1


async def start(fleet: Fleet, tls: ssl.SSLContext | None = None) -> TestServer:
    app = web.Application()
    app.router.add_get('/{pod}/metrics', fleet.handle)
    server = TestServer(app, host='127.0.0.1')
    await server.start_server(ssl=tls)
    return server


@pytest.fixture
async def fleet() -> AsyncIterator[tuple[Fleet, TestServer]]:
    pods = Fleet()
    server = await start(pods)
    yield pods, server
    await server.close()


def target(
    server: TestServer, pod: str, *, namespace: str = NS, kind: Kind = 'vllm', model_name: str = ''
) -> ScrapeTarget:
    url = str(server.make_url(f'/{pod}/metrics'))
    return ScrapeTarget(namespace=namespace, pod=pod, url=url, kind=kind, model_name=model_name)


async def scrape_series(
    source: PodScrapeSource, fleet: Fleet, pages: Callable[[int], dict[str, bytes]]
) -> None:
    for i, now in enumerate(TIMES):
        for pod, body in pages(i).items():
            fleet.replies[pod] = Reply(body=body)
        assert await source.scrape(now=now) == []


def source_for(targets: list[ScrapeTarget], **config: Any) -> PodScrapeSource:
    return PodScrapeSource(config=ScrapeConfig(**config), targets_fn=lambda: targets)


# --- windows across scrapes -------------------------------------------------------------------


async def test_scraping_feeds_the_windows_the_reading_is_computed_from(
    fleet: tuple[Fleet, TestServer],
) -> None:
    pods, server = fleet
    source = source_for([target(server, 'p1')])
    try:
        await scrape_series(source, pods, lambda i: {'p1': example_page(scrape_values(i))})
        # Every window as a scrape fills it (buckets and `_created` series left out), and the
        # figures of `test_collect_scrape_reading` worked out by hand.
        pure = scraped(lambda i: {'p1': example_page(scrape_values(i))})
        for now in (1045.0, 1080.0):
            assert await source.read(scope=SCOPE, now=now) == read(pure, now=now)
        reading = await source.read(scope=SCOPE, now=1045.0)
        (pod,) = reading.pods
        assert (pod.kv_usage, pod.queue_length, pod.running_requests) == (0.9, 3.0, 38.0)
        assert pod.avg_input_tokens == pytest.approx(150.0)
        assert reading.models == ()  # 45 s of scraping < the 60 s retention
        # 80 s after the first scrape the request count is known: the example page's counters
        # stood still, so it is 0
        (model,) = (await source.read(scope=SCOPE, now=1080.0)).models
        assert model.request_count == 0.0
    finally:
        await source.aclose()


async def test_a_partial_page_is_used_with_the_targets_model_name(
    fleet: tuple[Fleet, TestServer],
) -> None:
    pods, server = fleet
    pods.replies['hinted'] = Reply(
        body=b'vllm:num_requests_waiting 4\nvllm:kv_cache_usage_perc 0.1\n'
    )
    source = source_for([target(server, 'hinted', model_name=MODEL)])
    try:
        errors = await source.scrape(now=1000.0)
        # the unlabelled page lacks running and cache_config_info: partial, but used
        assert [(e.reason, e.message) for e in errors] == [
            (ErrorReason.PARTIAL_DATA, 'no running, cache_config_info')
        ]
        (pod,) = (await source.read(scope=SCOPE, now=1000.0)).pods
        assert (pod.pod, pod.model_name, pod.queue_length, pod.kv_usage) == (
            'hinted',
            MODEL,
            4.0,
            0.1,
        )
    finally:
        await source.aclose()


# --- bounded concurrency ----------------------------------------------------------------------


async def test_scraping_many_pods_keeps_to_the_concurrency_bound(
    fleet: tuple[Fleet, TestServer],
) -> None:
    pods, server = fleet
    names = [f'pod-{i:02d}' for i in range(12)]
    for name in names:
        pods.replies[name] = Reply(body=example_page({}), delay=0.05)
    source = source_for([target(server, name) for name in names], concurrency=3)
    try:
        assert await source.scrape(now=1000.0) == []
        assert pods.max_in_flight == 3
        reading = await source.read(scope=SCOPE, now=1000.0)
        assert [p.pod for p in reading.pods] == names
        assert pods.headers['pod-00']['Accept'] == ACCEPT
        assert 'Authorization' not in pods.headers['pod-00']
    finally:
        await source.aclose()


# --- errors -----------------------------------------------------------------------------------


def closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(('127.0.0.1', 0))
        port: int = sock.getsockname()[1]
    return port


async def test_every_failure_is_classified_and_other_pods_are_unaffected(
    fleet: tuple[Fleet, TestServer],
) -> None:
    pods, server = fleet
    malformed = b'vllm:num_requests_waiting{model_name="m" 3\nvllm:kv_cache_usage_perc{} abc\n'
    pods.replies.update(
        {
            'good': Reply(body=example_page({'vllm:kv_cache_usage_perc': 0.7})),
            'e404': Reply(status=404, body=b'not found'),
            'e500': Reply(status=500, body=b'boom'),
            'e503': Reply(status=503, body=b'busy'),
            'redirect': Reply(status=302),
            'hangs': Reply(body=example_page({}), delay=5.0),
            'html': Reply(body=b'<html>hello</html>', content_type='text/html'),
            'prose': Reply(body=b'this is not a metrics page\n'),
            'malformed': Reply(body=malformed),
            'binary': Reply(body=b'\xff\xfe\x00\x81garbage\xc3\x28\n'),
            'huge': Reply(body=example_page({}) * 3),
        }
    )
    targets = [target(server, name) for name in pods.replies]
    refused = ScrapeTarget(
        namespace=NS, pod='refused', url=pod_url(ip='127.0.0.1', port=closed_port())
    )
    source = source_for([*targets, refused], timeout=0.5, max_page_bytes=len(example_page({})) * 2)
    try:
        errors = await source.scrape(now=1000.0)
        names = {t.url: t.pod for t in [*targets, refused]}
        by_pod = {names[e.target]: e.reason for e in errors}
        assert len(by_pod) == len(errors)
        assert by_pod == {
            'e404': ErrorReason.HTTP_4XX,
            'e500': ErrorReason.HTTP_5XX,
            'e503': ErrorReason.HTTP_5XX,
            'redirect': ErrorReason.BAD_RESPONSE,
            'hangs': ErrorReason.TIMEOUT,
            'html': ErrorReason.BAD_RESPONSE,
            'prose': ErrorReason.BAD_RESPONSE,
            'malformed': ErrorReason.BAD_RESPONSE,
            'binary': ErrorReason.BAD_RESPONSE,
            'huge': ErrorReason.BAD_RESPONSE,
            'refused': ErrorReason.UNREACHABLE,
        }
        messages = {names[e.target]: e.message for e in errors}
        assert messages['binary'] == 'page is not UTF-8'
        assert messages['malformed'].startswith('no usable sample: line 1: malformed sample line')
        assert 'not metrics' in messages['html']
        reading = await source.read(scope=SCOPE, now=1000.0)
        assert [(p.pod, p.kv_usage) for p in reading.pods] == [('good', 0.7)]
        assert reading.errors == tuple(errors)
    finally:
        await source.aclose()


async def test_a_failed_scrape_makes_instant_figures_stale_but_keeps_the_window(
    fleet: tuple[Fleet, TestServer],
) -> None:
    pods, server = fleet
    source = source_for([target(server, 'p1')])
    try:
        pods.replies['p1'] = Reply(body=example_page({'vllm:kv_cache_usage_perc': 0.8}))
        assert await source.scrape(now=1000.0) == []
        pods.replies['p1'] = Reply(status=500)
        (error,) = await source.scrape(now=1015.0)
        assert error.reason is ErrorReason.HTTP_5XX
        (pod,) = (await source.read(scope=SCOPE, now=1015.0)).pods
        assert pod.kv_usage == 0.8  # the 1-min max still holds the sample of 1000
        assert pod.observed_at == 1000.0
        # Prometheus marks a failed target's series stale: instant queries return nothing
        assert (pod.running_requests, pod.num_gpu_blocks, pod.block_size) == (None, None, None)
    finally:
        await source.aclose()


async def test_non_finite_samples_are_dropped_and_counted(fleet: tuple[Fleet, TestServer]) -> None:
    pods, server = fleet
    page = example_page({'vllm:kv_cache_usage_perc': math.nan, 'vllm:num_requests_waiting': 2.0})
    pods.replies['p1'] = Reply(body=page)
    source = source_for([target(server, 'p1')])
    try:
        (error,) = await source.scrape(now=1000.0)
        assert (error.reason, error.message) == (ErrorReason.PARTIAL_DATA, 'no KV usage')
        reading = await source.read(scope=SCOPE, now=1000.0)
        assert reading.dropped_non_finite == 1
        assert (reading.pods[0].kv_usage, reading.pods[0].queue_length) == (None, 2.0)
    finally:
        await source.aclose()


# --- history kept ----------------------------------------------------------------------------


async def test_the_history_kept_is_the_longer_horizon(fleet: tuple[Fleet, TestServer]) -> None:
    pods, server = fleet
    pods.replies['p1'] = Reply(body=example_page({}))
    source = source_for([target(server, 'p1')], request_count_horizon=300.0)
    try:
        await source.scrape(now=1000.0)
        scope = (ModelScope(model_id=MODEL, namespace=NS, retention_period=900.0),)
        (error,) = (await source.read(scope=scope, now=2000.0)).errors
        # max(horizon 360, request_count_horizon 300)
        assert error.message.endswith('the 360s of history kept')
    finally:
        await source.aclose()


async def test_series_are_forgotten_after_their_horizon(fleet: tuple[Fleet, TestServer]) -> None:
    pods, server = fleet
    pods.replies['p1'] = Reply(body=example_page({}))
    targets = [target(server, 'p1')]
    source = PodScrapeSource(
        config=ScrapeConfig(horizon=100.0, request_count_horizon=200.0),
        targets_fn=lambda: list(targets),
    )
    try:
        await source.scrape(now=1000.0)
        # 60 series of the wanted families; `_created` and the other histograms' buckets are
        # not kept: running, waiting, KV, prefix hits and queries (5), request_success × 3
        # reasons (3), _sum and _count of prompt, generation, TTFT and ITL (8),
        # cache_config_info (1), and the buckets of TTFT (23) and of the per-request TPOT (20)
        assert source.series_count == 17 + 23 + 20
        targets.clear()
        # 100 s later: only the request counters and the latency buckets (kept 120 s) are left
        await source.scrape(now=1100.0)
        assert source.series_count == 3 + 23 + 20
        await source.scrape(now=1200.0)
        assert source.series_count == 0
    finally:
        await source.aclose()


# --- latency histograms ----------------------------------------------------------------------

TTFT_BOUNDS = ('0.1', '1.0', '+Inf')
TPOT_BOUNDS = ('0.025', '0.05', '+Inf')


def latency_page(ttft: tuple[float, ...], tpot: tuple[float, ...]) -> bytes:
    """A small vLLM page: the four families every page has, and the two latency histograms'
    cumulative bucket counts (at TTFT_BOUNDS and TPOT_BOUNDS)."""
    lab = f'engine="0",model_name="{MODEL}"'
    lines = [
        f'vllm:num_requests_running{{{lab}}} 1.0',
        f'vllm:num_requests_waiting{{{lab}}} 0.0',
        f'vllm:kv_cache_usage_perc{{{lab}}} 0.1',
        'vllm:cache_config_info{block_size="16",engine="0",num_gpu_blocks="100"} 1.0',
    ]
    for name, bounds, counts in (
        ('vllm:time_to_first_token_seconds', TTFT_BOUNDS, ttft),
        ('vllm:request_time_per_output_token_seconds', TPOT_BOUNDS, tpot),
    ):
        lines.append(f'# TYPE {name} histogram')
        for le, count in zip(bounds, counts, strict=True):
            lines.append(f'{name}_bucket{{{lab},le="{le}"}} {count!r}')
        lines.append(f'{name}_count{{{lab}}} {counts[-1]!r}')
        lines.append(f'{name}_sum{{{lab}}} 1.0')
    return ('\n'.join(lines) + '\n').encode()


async def test_latency_histograms_are_the_last_minutes_increase_across_scrapes(
    fleet: tuple[Fleet, TestServer],
) -> None:
    pods, server = fleet
    source = source_for([target(server, 'p1')])

    async def scrape_at(now: float, ttft: tuple[float, ...], tpot: tuple[float, ...]) -> None:
        pods.replies['p1'] = Reply(body=latency_page(ttft, tpot))
        assert await source.scrape(now=now) == []

    # The model's analyzer reads the histograms (the predictive one); SCOPE's does not.
    readers = tuple(dataclasses.replace(entry, latency_histograms=True) for entry in SCOPE)

    async def histograms(now: float) -> tuple[object, object]:
        (pod,) = (await source.read(scope=readers, now=now)).pods
        return pod.ttft_histogram, pod.tpot_histogram

    try:
        # Every 5 s from 1000; the server had counted requests before scraping began. Per scrape:
        # TTFT +1 at or below 0.1 s, +2 at or below 1 s, +3 in all; TPOT +1, +2, +2.
        for i in range(13):  # 1000 .. 1060
            await scrape_at(
                1000.0 + 5 * i,
                (100.0 + i, 150.0 + 2 * i, 200.0 + 3 * i),
                (50.0 + i, 60.0 + 2 * i, 60.0 + 2 * i),
            )
            if i == 6:  # 30 s of a minute seen, the counters not starting at 0: not measured
                assert await histograms(1030.0) == (None, None)
        ttft, tpot = await histograms(1060.0)
        # (1000, 1060] holds 1005 .. 1060: 11 steps over 55 s, the start 5 s before the first
        # sample (within 1.1 steps): extrapolated to 60 s, 12 steps' worth.
        assert isinstance(ttft, LatencyHistogram)
        assert isinstance(tpot, LatencyHistogram)
        assert (ttft.bounds, tpot.bounds) == ((0.1, 1.0), (0.025, 0.05))
        assert ttft.counts == pytest.approx((12.0, 24.0))
        assert ttft.total == pytest.approx(36.0)
        assert tpot.counts == pytest.approx((12.0, 24.0))
        assert tpot.total == pytest.approx(24.0)
        assert histogram_violation(ttft) == histogram_violation(tpot) == ''
        # Not computed for a model whose analyzer does not read them.
        (unread,) = (await source.read(scope=SCOPE, now=1060.0)).pods
        assert (unread.ttft_histogram, unread.tpot_histogram) == (None, None)
        # The server restarts at 1065, its counters from 0: no histogram while the drop is in
        # the minute, measured again once it has left it.
        for i in range(13):  # 1065 .. 1125
            await scrape_at(1065.0 + 5 * i, (float(i), 2.0 * i, 3.0 * i), (0.0, i, 2.0 * i))
            if i == 0:
                assert await histograms(1065.0) == (None, None)
            if i == 11:
                assert await histograms(1119.0) == (None, None)  # 1060's sample in range
        ttft, tpot = await histograms(1125.0)
        assert isinstance(ttft, LatencyHistogram)
        assert isinstance(tpot, LatencyHistogram)
        assert ttft.counts == pytest.approx((12.0, 24.0))
        assert ttft.total == pytest.approx(36.0)
        assert tpot.counts == pytest.approx((0.0, 12.0))
        assert tpot.total == pytest.approx(24.0)
    finally:
        await source.aclose()


# --- the gateway (EPP) ------------------------------------------------------------------------


@pytest.fixture(scope='module')
def tls_files(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    openssl = need_program('openssl')
    folder = tmp_path_factory.mktemp('tls')
    cert, key = folder / 'cert.pem', folder / 'key.pem'
    subprocess.run(
        [
            *(openssl, 'req', '-x509', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:prime256v1'),
            *('-nodes', '-keyout', str(key), '-out', str(cert), '-days', '2'),
            *('-subj', '/CN=127.0.0.1', '-addext', 'subjectAltName=IP:127.0.0.1,DNS:pods.test'),
        ],
        check=True,
        capture_output=True,
    )
    return cert, key


@pytest.fixture
async def secure_fleet(tls_files: tuple[Path, Path]) -> AsyncIterator[tuple[Fleet, TestServer]]:
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.load_cert_chain(certfile=tls_files[0], keyfile=tls_files[1])
    pods = Fleet()
    server = await start(pods, tls=context)
    yield pods, server
    await server.close()


async def test_gateway_over_https_with_a_bearer_token(
    fleet: tuple[Fleet, TestServer],
    secure_fleet: tuple[Fleet, TestServer],
    tls_files: tuple[Path, Path],
    tmp_path: Path,
) -> None:
    plain, server = fleet
    secure, tls_server = secure_fleet
    token_file = tmp_path / 'token'
    token_file.write_text('s3cret\n')
    targets = [
        target(server, 'p1'),
        target(server, 'p2'),
        target(tls_server, 'epp', kind='epp'),
    ]
    assert targets[2].url.startswith('https://127.0.0.1:')
    config = ScrapeConfig(token_file=token_file, ca_file=tls_files[0])
    source = PodScrapeSource(config=config, targets_fn=lambda: targets)
    try:
        for i, now in enumerate(TIMES):
            pages = epp_pages(i)
            secure.replies['epp'] = Reply(body=pages.pop('epp'), token='s3cret')
            plain.replies.update({pod: Reply(body=body) for pod, body in pages.items()})
            assert await source.scrape(now=now) == []
        check_gateway_figures(await source.read(scope=SCOPE, now=1045.0))
        assert secure.headers['epp']['Authorization'] == 'Bearer s3cret'
        assert 'Authorization' not in plain.headers['p1']  # vLLM pods get no token

        token_file.write_text('rotated')  # re-read every scrape
        (error,) = await source.scrape(now=1060.0)
        assert (error.reason, error.message) == (ErrorReason.HTTP_4XX, 'HTTP 401')
        secure.replies['epp'].token = 'rotated'
        assert await source.scrape(now=1075.0) == []

        token_file.unlink()
        (error,) = await source.scrape(now=1090.0)
        assert error.reason is ErrorReason.UNREACHABLE
        assert error.message.startswith('bearer token file unreadable, nothing sent')
    finally:
        await source.aclose()


async def test_https_certificates_are_verified_unless_told_otherwise(
    secure_fleet: tuple[Fleet, TestServer],
) -> None:
    pods, server = secure_fleet
    pods.replies['epp'] = Reply(body=epp_page(queue=[('0', MODEL, 1.0)], attempts=[]))
    targets = [target(server, 'epp', kind='epp')]
    strict = PodScrapeSource(config=ScrapeConfig(), targets_fn=lambda: targets)
    lax = PodScrapeSource(
        config=ScrapeConfig(insecure_skip_verify=True), targets_fn=lambda: targets
    )
    try:
        (error,) = await strict.scrape(now=1000.0)
        assert error.reason is ErrorReason.UNREACHABLE
        assert 'CERTIFICATE_VERIFY_FAILED' in error.message
        assert await lax.scrape(now=1000.0) == []
        (model,) = (await lax.read(scope=SCOPE, now=1000.0)).models
        assert model.queue_size == 1.0
    finally:
        await strict.aclose()
        await lax.aclose()


async def test_plain_http_gateway_gets_no_request_while_a_token_is_configured(
    fleet: tuple[Fleet, TestServer],
) -> None:
    pods, server = fleet
    pods.replies['epp'] = Reply(body=epp_page(queue=[], attempts=[]))
    pods.replies['p1'] = Reply(body=example_page({}))
    epp = target(server, 'epp', kind='epp')
    source = PodScrapeSource(
        config=ScrapeConfig(bearer_token='s3cret'),
        targets_fn=lambda: [epp, target(server, 'p1')],
    )
    try:
        (error,) = await source.scrape(now=1000.0)
        # Neither the token in clear nor an unauthenticated request in its place.
        assert 'epp' not in pods.headers
        assert error == SourceError(
            epp.url,
            ErrorReason.UNREACHABLE,
            f'credentials are not sent in clear: {epp.url} is not https, nothing sent '
            '(use https, or opt in with allow_http_credentials)',
        )
        # vLLM pages never carry the token, so they are read whatever the scheme.
        assert 'Authorization' not in pods.headers['p1']
    finally:
        await source.aclose()


async def test_the_opt_in_sends_the_token_to_a_plain_http_gateway(
    fleet: tuple[Fleet, TestServer],
) -> None:
    pods, server = fleet
    pods.replies['epp'] = Reply(body=epp_page(queue=[], attempts=[]), token='s3cret')
    source = PodScrapeSource(
        config=ScrapeConfig(bearer_token='s3cret', allow_http_credentials=True),
        targets_fn=lambda: [target(server, 'epp', kind='epp')],
    )
    try:
        # a gateway page may hold none of the wanted families (flow control off): not an error
        assert await source.scrape(now=1000.0) == []
        assert pods.headers['epp']['Authorization'] == 'Bearer s3cret'
        assert (await source.read(scope=SCOPE, now=1000.0)).models == ()
    finally:
        await source.aclose()


async def test_without_a_token_a_plain_http_gateway_is_read(
    fleet: tuple[Fleet, TestServer],
) -> None:
    pods, server = fleet
    pods.replies['epp'] = Reply(body=epp_page(queue=[('0', MODEL, 2.0)], attempts=[]))
    source = source_for([target(server, 'epp', kind='epp')])
    try:
        assert await source.scrape(now=1000.0) == []
        assert 'Authorization' not in pods.headers['epp']
        (model,) = (await source.read(scope=SCOPE, now=1000.0)).models
        assert model.queue_size == 2.0
    finally:
        await source.aclose()


async def test_server_name_names_the_certificate_to_expect(
    secure_fleet: tuple[Fleet, TestServer], tls_files: tuple[Path, Path]
) -> None:
    pods, server = secure_fleet
    pods.replies['epp'] = Reply(body=epp_page(queue=[], attempts=[]), token='s3cret')
    targets = [target(server, 'epp', kind='epp')]
    named = ScrapeConfig(ca_file=tls_files[0], server_name='pods.test', bearer_token='s3cret')
    other = ScrapeConfig(ca_file=tls_files[0], server_name='other.test', bearer_token='s3cret')
    good = PodScrapeSource(config=named, targets_fn=lambda: targets)
    bad = PodScrapeSource(config=other, targets_fn=lambda: targets)
    try:
        assert await good.scrape(now=1000.0) == []
        assert pods.headers['epp']['Authorization'] == 'Bearer s3cret'
        pods.headers.clear()
        (error,) = await bad.scrape(now=1000.0)
        assert error.reason is ErrorReason.UNREACHABLE
        assert 'other.test' in error.message
        assert pods.headers == {}
    finally:
        await good.aclose()
        await bad.aclose()


@pytest.fixture(scope='module')
def pki(tmp_path_factory: pytest.TempPathFactory) -> Pki:
    return make_pki(tmp_path_factory)


async def test_client_certificate(pki: Pki) -> None:
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH, cafile=pki.ca)
    context.load_cert_chain(pki.server_cert, pki.server_key)
    context.verify_mode = ssl.CERT_REQUIRED
    pods = Fleet()
    server = await start(pods, tls=context)
    pods.replies['p1'] = Reply(body=example_page({}))
    targets = [target(server, 'p1')]
    with_cert = ScrapeConfig(
        ca_file=pki.ca, client_cert_file=pki.client_cert, client_key_file=pki.client_key
    )
    sources = [
        PodScrapeSource(config=with_cert, targets_fn=lambda: targets),
        PodScrapeSource(config=ScrapeConfig(ca_file=pki.ca), targets_fn=lambda: targets),
    ]
    try:
        assert await sources[0].scrape(now=1000.0) == []
        (error,) = await sources[1].scrape(now=1000.0)
        assert error.reason is ErrorReason.UNREACHABLE
    finally:
        for source in sources:
            await source.aclose()
        await server.close()


# --- deadlines and size caps ------------------------------------------------------------------


def raw_target(server: RawServer, pod: str, kind: Kind = 'vllm') -> ScrapeTarget:
    return ScrapeTarget(namespace=NS, pod=pod, url=f'{server.url}/{pod}/metrics', kind=kind)


async def timed_scrape(source: PodScrapeSource, *, guard: float) -> tuple[list[SourceError], float]:
    """`scrape` and its duration; `guard` seconds turn a hang into a failure, not a wait."""
    started = time.monotonic()
    try:
        errors = await asyncio.wait_for(source.scrape(now=1000.0), timeout=guard)
    finally:
        await source.aclose()
    return errors, time.monotonic() - started


async def test_a_dripping_page_ends_at_the_timeout() -> None:
    async with RawServer(drip(every=0.2)) as server:
        source = source_for([raw_target(server, 'p1')], timeout=0.5)
        (error,), took = await timed_scrape(source, guard=1.5)
    assert took < 1.5
    assert error.reason is ErrorReason.TIMEOUT
    assert error.message.startswith('no complete page within 0.5s (')


async def test_the_scrape_deadline_bounds_the_whole_scrape() -> None:
    # Six pages, two at a time, would take 5 s each; the scrape as a whole gets 0.6 s.
    async with RawServer(drip(every=0.2)) as server:
        targets = [raw_target(server, f'p{i}') for i in range(6)]
        source = source_for(targets, timeout=5.0, concurrency=2, scrape_deadline=0.6)
        errors, took = await timed_scrape(source, guard=1.8)
        assert len(server.seen) == 2
    assert took < 1.8
    assert [e.target for e in errors] == sorted(t.url for t in targets)
    assert {e.reason for e in errors} == {ErrorReason.TIMEOUT}
    messages = [e.message for e in errors]
    assert sum(m.endswith('; the scrape deadline of 0.6s ran out') for m in messages) == 2
    not_sent = 'not sent: the scrape deadline of 0.6s ran out before a slot was free'
    assert messages.count(not_sent) == 4


async def test_an_endless_page_is_cut_at_the_cap() -> None:
    async with RawServer(endless()) as server:
        source = source_for([raw_target(server, 'p1')], timeout=5.0, max_page_bytes=64 * 1024)
        (error,), took = await timed_scrape(source, guard=15.0)
        await eventually(lambda: server.dropped == 1, 'the page to be dropped')
    assert took < 5.0
    assert (error.reason, error.message) == (ErrorReason.BAD_RESPONSE, 'body over 65536 bytes')


async def test_a_page_announced_over_the_cap_is_refused_unread() -> None:
    # The body never comes: reading it would end in a timeout, not in this error.
    async with RawServer(claims(10**6)) as server:
        source = source_for([raw_target(server, 'p1')], timeout=2.0, max_page_bytes=1000)
        (error,), took = await timed_scrape(source, guard=6.0)
    assert took < 1.0
    assert (error.reason, error.message) == (
        ErrorReason.BAD_RESPONSE,
        'body over 1000 bytes (Content-Length 1000000), not read',
    )


# --- small helpers ----------------------------------------------------------------------------


def test_pod_url_brackets_ipv6() -> None:
    assert pod_url(ip='10.0.0.7', port=8000) == 'http://10.0.0.7:8000/metrics'
    assert pod_url(ip='fd00::7', port=9090, scheme='https') == 'https://[fd00::7]:9090/metrics'


def test_defaults() -> None:
    config = ScrapeConfig()
    assert (config.timeout, config.concurrency, config.horizon) == (2.0, 32, 360.0)
    assert (config.insecure_skip_verify, config.bearer_token, config.token_file) == (
        False,
        None,
        None,
    )
    assert (config.scrape_deadline, config.max_page_bytes) == (15.0, 16 * 1024 * 1024)
    assert (config.vllm_scheme, config.epp_scheme, config.allow_http_credentials) == (
        'http',
        'http',
        False,
    )
    assert (
        config.max_line_length,
        config.max_labels,
        config.max_series_per_page,
        config.max_series_per_pod,
        config.max_series_chars_per_pod,
    ) == (65536, 128, 10_000, 20_000, 4 * 1024 * 1024)


@pytest.mark.parametrize(
    ('field', 'value', 'message'),
    [
        ('timeout', -2.0, 'timeout must be a positive number of seconds, not -2.0'),
        ('scrape_deadline', math.inf, 'scrape_deadline must be a positive number of seconds'),
        ('max_page_bytes', 0, 'max_page_bytes must be a whole number of bytes of at least 1'),
        ('vllm_scheme', 'ftp', "vllm_scheme must be http or https, not 'ftp'"),
        ('epp_scheme', 'HTTPS', "epp_scheme must be http or https, not 'HTTPS'"),
        ('max_line_length', 0, 'max_line_length must be a whole number of at least 1, not 0'),
        ('max_labels', -1, 'max_labels must be a whole number of at least 1, not -1'),
        ('max_series_per_page', 1.5, 'max_series_per_page must be a whole number of at least 1'),
        ('max_series_per_pod', 0, 'max_series_per_pod must be a whole number of at least 1'),
        ('max_series_chars_per_pod', True, 'max_series_chars_per_pod must be a whole number'),
    ],
)
def test_invalid_settings_are_refused(field: str, value: object, message: str) -> None:
    with pytest.raises(ValueError, match=f'^{message}'):
        ScrapeConfig(**{field: value})  # type: ignore[arg-type]


async def test_empty_scope_and_no_targets() -> None:
    source = PodScrapeSource(config=ScrapeConfig(), targets_fn=lambda: [])
    as_source: MetricsSource = source  # mypy checks that the protocol is met
    try:
        assert await source.scrape(now=1.0) == []
        assert await as_source.read(scope=(), now=1.0) == Reading()
        assert await as_source.read(scope=SCOPE, now=1.0) == Reading()
    finally:
        await source.aclose()


# --- caps ---------------------------------------------------------------------------------------


def waiting_page(count: int, *, start: int = 0, pad: str = '') -> bytes:
    """A page of `count` queue-length series with distinct `engine` labels."""
    return ''.join(
        f'vllm:num_requests_waiting{{engine="{i}{pad}",model_name="{MODEL}"}} 1\n'
        for i in range(start, start + count)
    ).encode()


def refusals(errors: list[SourceError]) -> list[SourceError]:
    """The errors of pages refused for a cap (a page of queue lengths alone is partial too)."""
    return [error for error in errors if ' refused: ' in error.message]


PAGE_CAPS = [
    pytest.param(
        {'max_line_length': 1000},
        'vllm:num_requests_waiting{a="' + 'x' * 1000 + '"} 1\n',
        'a line over 1000 characters (max_line_length)',
        id='line',
    ),
    pytest.param(
        {'max_labels': 40},
        'vllm:num_requests_waiting{' + ','.join(['a="b"'] * 41) + '} 1\n',
        'a sample with 41 labels, over 40 (max_labels)',
        id='labels',
    ),
    pytest.param(
        {'max_series_per_page': 125},
        waiting_page(10).decode(),
        'more than 125 series (max_series_per_page)',
        id='series',
    ),
    pytest.param(
        {'max_series_chars_per_pod': 15_000},
        waiting_page(40, pad='x' * 40).decode(),
        'characters (max_series_chars)',
        id='page characters',
    ),
]


@pytest.mark.parametrize(('caps', 'hostile', 'message'), PAGE_CAPS)
async def test_a_page_over_a_cap_is_refused_naming_the_pod_and_its_readings_go(
    fleet: tuple[Fleet, TestServer], caps: dict[str, int], hostile: str, message: str
) -> None:
    pods, server = fleet
    good = example_page({'vllm:kv_cache_usage_perc': 0.5})
    # The example page (401 lines of at most 632 characters, 118 series of at most 24 labels,
    # 13,065 characters of series) is within every cap under test.
    source = source_for([target(server, 'bad'), target(server, 'good')], **caps)
    try:
        pods.replies = {'bad': Reply(body=good), 'good': Reply(body=good)}
        assert await source.scrape(now=1000.0) == []
        assert len((await source.read(scope=SCOPE, now=1000.0)).pods) == 2
        pods.replies['bad'] = Reply(body=good + hostile.encode())
        (error,) = await source.scrape(now=1015.0)
        assert error.target == target(server, 'bad').url
        assert error.reason is ErrorReason.BAD_RESPONSE
        assert error.message.startswith(f'page of pod {NS}/bad refused: line '), error.message
        assert message in error.message
        reading = await source.read(scope=SCOPE, now=1015.0)
        # Missing at once, not the minute's leftovers of the earlier page.
        assert [p.pod for p in reading.pods] == ['good']
        assert reading.pods[0].kv_usage == 0.5
        # Within the caps again: read as usual.
        pods.replies['bad'] = Reply(body=good)
        assert await source.scrape(now=1030.0) == []
        assert len((await source.read(scope=SCOPE, now=1030.0)).pods) == 2
    finally:
        await source.aclose()


async def test_series_over_the_pods_cap_across_pages_are_refused(
    fleet: tuple[Fleet, TestServer],
) -> None:
    pods, server = fleet
    source = source_for([target(server, 'p1')], max_series_per_pod=10)
    try:
        pods.replies['p1'] = Reply(body=waiting_page(6))
        assert not refusals(await source.scrape(now=1000.0))
        assert not refusals(await source.scrape(now=1015.0))  # the same series again: no new ones
        assert source.series_count == 6
        pods.replies['p1'] = Reply(body=waiting_page(6, start=6))  # churn: six new series
        (error,) = refusals(await source.scrape(now=1030.0))
        assert error.message == (
            f'page of pod {NS}/p1 refused: 6 series kept and 6 new, over 10 (max_series_per_pod)'
        )
        assert source.series_count == 0
        assert (await source.read(scope=SCOPE, now=1030.0)).pods == ()
        # Dropped with the refusal, so the next page starts afresh.
        assert not refusals(await source.scrape(now=1045.0))
        assert source.series_count == 6
    finally:
        await source.aclose()


async def test_series_characters_over_the_pods_cap_across_pages_are_refused(
    fleet: tuple[Fleet, TestServer],
) -> None:
    pods, server = fleet
    one = len(waiting_page(1, pad='x' * 50))  # a page of one series: its text and ` 1\n`
    source = source_for([target(server, 'p1')], max_series_chars_per_pod=(one - 3) * 5)
    try:
        pods.replies['p1'] = Reply(body=waiting_page(3, pad='x' * 50))
        assert not refusals(await source.scrape(now=1000.0))
        pods.replies['p1'] = Reply(body=waiting_page(2, start=3, pad='x' * 50))
        assert not refusals(await source.scrape(now=1015.0))  # exactly at the cap
        pods.replies['p1'] = Reply(body=waiting_page(1, start=5, pad='x' * 50))
        (error,) = refusals(await source.scrape(now=1030.0))
        assert error.message.endswith(
            f'series of {(one - 3) * 6} characters, over {(one - 3) * 5} (max_series_chars_per_pod)'
        ), error.message
        assert source.series_count == 0
    finally:
        await source.aclose()


async def test_forgotten_series_leave_room_under_the_pods_caps(
    fleet: tuple[Fleet, TestServer],
) -> None:
    pods, server = fleet
    source = source_for([target(server, 'p1')], max_series_per_pod=8, horizon=60.0)
    try:
        pods.replies['p1'] = Reply(body=waiting_page(6))
        assert not refusals(await source.scrape(now=1000.0))
        pods.replies['p1'] = Reply(body=waiting_page(6, start=6))
        # The first six are past their horizon by now: forgotten before the page is counted.
        pods.replies['p1'] = Reply(body=waiting_page(6, start=6))
        assert not refusals(await source.scrape(now=1100.0))
        assert source.series_count == 6
    finally:
        await source.aclose()


async def test_a_large_page_is_parsed_without_holding_the_event_loop(
    fleet: tuple[Fleet, TestServer],
) -> None:
    # 100,000 series, every cap lifted: seconds of parsing and window updates, in the store's
    # process.
    pods, server = fleet
    pods.replies['p1'] = Reply(body=waiting_page(100_000))
    source = source_for(
        [target(server, 'p1')],
        max_series_per_page=10**6,
        max_series_per_pod=10**6,
        max_series_chars_per_pod=10**9,
        timeout=30.0,
    )
    try:
        async with loop_gaps(every=0.005) as gaps:
            started = time.perf_counter()
            assert not refusals(await source.scrape(now=1000.0))
            took = time.perf_counter() - started
            assert source.series_count == 100_000
            await asyncio.sleep(0.05)  # the probe's turn: a gap is counted when it ends
    finally:
        await source.aclose()
    # Held for the whole parse, the loop would not tick for the whole scrape; in a thread, it
    # would wait for the interpreter lock. What remains is the page's reading and sending.
    assert took > 0.8, took
    assert max(gaps) < min(0.2, took / 4), (max(gaps), took)


async def test_a_store_process_that_ends_starts_afresh_and_nothing_raises(
    fleet: tuple[Fleet, TestServer], caplog: pytest.LogCaptureFixture
) -> None:
    pods, server = fleet
    pods.replies['p1'] = Reply(body=waiting_page(6))
    before = children(os.getpid())
    source = source_for([target(server, 'p1', model_name=MODEL)])
    try:
        assert not refusals(await source.scrape(now=1000.0))
        (child,) = children(os.getpid()) - before
        os.kill(child, signal.SIGKILL)
        await eventually(lambda: not alive(child), 'the store process ended')
        with caplog.at_level(logging.WARNING, logger='llmscaler.collect.in_process'):
            assert not refusals(await source.scrape(now=1015.0))
        assert f'process {child} killed by signal 9' in caplog.text
        # The new process holds this scrape's series only: one sample each, as if new.
        assert source.series_count == 6
        (pod,) = (await source.read(scope=SCOPE, now=1015.0)).pods
        assert pod.queue_length == 1.0
        assert children(os.getpid()) - before != {child}
    finally:
        await source.aclose()
    assert not children(os.getpid()) - before
