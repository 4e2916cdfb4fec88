"""The controller's metric families, read back from their exposition, and its HTTP endpoints."""

from __future__ import annotations

import asyncio
import contextlib
import socket

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from llmscaler.controller.publish import (
    MAX_HEAD,
    METRICS_CONTENT_TYPE,
    AvailabilityRow,
    ControllerMetrics,
    HttpEndpoints,
    ReplicaRow,
    ShadowRow,
    health_route,
    metrics_route,
    parse_bind_address,
)
from llmscaler.version import version

Series = dict[tuple[str, tuple[tuple[str, str], ...]], float]
REPLICA_FAMILIES = (
    'wva_desired_replicas',
    'wva_current_replicas',
    'wva_desired_ratio',
    'inferno_desired_replicas',
    'inferno_current_replicas',
    'inferno_desired_ratio',
)


def series(metrics: ControllerMetrics) -> Series:
    """Every sample of the rendered page, keyed (sample name, sorted labels)."""
    found: Series = {}
    for family in text_string_to_metric_families(metrics.render().decode()):
        for sample in family.samples:
            found[(sample.name, tuple(sorted(sample.labels.items())))] = sample.value
    return found


def replica_labels(variant: str, namespace: str, accelerator: str) -> tuple[tuple[str, str], ...]:
    return (('accelerator_type', accelerator), ('namespace', namespace), ('variant_name', variant))


def replica_series(metrics: ControllerMetrics) -> Series:
    return {key: value for key, value in series(metrics).items() if key[0] in REPLICA_FAMILIES}


def test_replica_gauges_and_aliases() -> None:
    metrics = ControllerMetrics()
    metrics.set_replicas(
        rows=[
            ReplicaRow(variant='a', namespace='llm', accelerator='H100', current=2, desired=3),
            ReplicaRow(variant='b', namespace='llm', accelerator='', current=0, desired=2),
            ReplicaRow(variant='c', namespace='pd', accelerator='unknown', current=4, desired=1),
        ]
    )
    got = replica_series(metrics)
    a = replica_labels('a', 'llm', 'H100')
    b = replica_labels('b', 'llm', 'unresolved')
    c = replica_labels('c', 'pd', 'unresolved')
    for prefix in ('wva', 'inferno'):
        assert got[(f'{prefix}_desired_replicas', a)] == 3.0
        assert got[(f'{prefix}_current_replicas', a)] == 2.0
        assert got[(f'{prefix}_desired_ratio', a)] == 1.5
        # current 0: the ratio is the desired count itself.
        assert got[(f'{prefix}_desired_ratio', b)] == 2.0
        assert got[(f'{prefix}_current_replicas', b)] == 0.0
        assert got[(f'{prefix}_desired_ratio', c)] == 0.25
    assert len(got) == 18


def test_set_replicas_removes_gone_variants_and_old_accelerators() -> None:
    metrics = ControllerMetrics()
    metrics.set_replicas(
        rows=[
            ReplicaRow(variant='a', namespace='llm', accelerator='', current=1, desired=1),
            ReplicaRow(variant='b', namespace='llm', accelerator='L4', current=1, desired=2),
        ]
    )
    metrics.set_replicas(
        rows=[ReplicaRow(variant='a', namespace='llm', accelerator='A100', current=1, desired=4)]
    )
    got = replica_series(metrics)
    assert sorted({labels for _, labels in got}) == [replica_labels('a', 'llm', 'A100')]
    assert got[('wva_desired_replicas', replica_labels('a', 'llm', 'A100'))] == 4.0
    assert len(got) == 6
    metrics.set_replicas(rows=[])
    assert replica_series(metrics) == {}


def test_duplicate_rows_publish_one_series_per_variant() -> None:
    rows = [
        ReplicaRow(variant='a', namespace='llm', accelerator='L4', current=1, desired=2),
        ReplicaRow(variant='a', namespace='llm', accelerator='H100', current=1, desired=5),
    ]
    first, second = ControllerMetrics(), ControllerMetrics()
    first.set_replicas(rows=rows)
    second.set_replicas(rows=rows[::-1])
    assert replica_series(first) == replica_series(second)
    assert len(replica_series(first)) == 6


def availability(metrics: ControllerMetrics) -> dict[tuple[str, str, str], float]:
    """`llmscaler_metrics_available` by (namespace, variant, model)."""
    return {
        (dict(labels)['namespace'], dict(labels)['variant_name'], dict(labels)['model_id']): value
        for (name, labels), value in series(metrics).items()
        if name == 'llmscaler_metrics_available'
    }


def test_metrics_available_per_variant_and_gone_variants_removed() -> None:
    metrics = ControllerMetrics()
    metrics.set_metrics_available(
        rows=[
            AvailabilityRow(variant='a', namespace='llm', model_id='m/8b', available=True),
            AvailabilityRow(variant='b', namespace='llm', model_id='m/8b', available=False),
        ]
    )
    assert availability(metrics) == {('llm', 'a', 'm/8b'): 1.0, ('llm', 'b', 'm/8b'): 0.0}
    metrics.set_metrics_available(
        rows=[AvailabilityRow(variant='b', namespace='llm', model_id='m/8b', available=True)]
    )
    assert availability(metrics) == {('llm', 'b', 'm/8b'): 1.0}
    metrics.set_metrics_available(rows=[])
    assert availability(metrics) == {}


def test_a_variant_listed_twice_is_unavailable_if_either_row_says_so() -> None:
    rows = [
        AvailabilityRow(variant='a', namespace='llm', model_id='m', available=True),
        AvailabilityRow(variant='a', namespace='llm', model_id='m', available=False),
    ]
    for order in (rows, rows[::-1]):
        metrics = ControllerMetrics()
        metrics.set_metrics_available(rows=order)
        assert availability(metrics) == {('llm', 'a', 'm'): 0.0}


def shadow_series(metrics: ControllerMetrics) -> Series:
    return {k: v for k, v in series(metrics).items() if k[0].startswith('llmscaler_shadow')}


def test_shadow_gauges_comparisons_and_gone_variants_removed() -> None:
    metrics = ControllerMetrics()
    rows = [
        ShadowRow(
            replicas=ReplicaRow(
                variant='a', namespace='llm', accelerator='H100', current=2, desired=3
            ),
            peer=2,
        ),
        ShadowRow(
            replicas=ReplicaRow(variant='b', namespace='llm', accelerator='', current=1, desired=1),
            peer=None,
        ),
    ]
    metrics.set_shadow(rows=rows)
    metrics.set_shadow(rows=rows[:1])
    got = shadow_series(metrics)
    a = replica_labels('a', 'llm', 'H100')
    assert got[('llmscaler_shadow_desired_replicas', a)] == 3
    assert got[('llmscaler_shadow_current_replicas', a)] == 2
    peer = (('namespace', 'llm'), ('variant_name', 'a'))
    assert got[('llmscaler_shadow_peer_desired_replicas', peer)] == 2
    # b is gone from the gauges; its comparisons, counted once, stay.
    assert (
        'llmscaler_shadow_desired_replicas',
        replica_labels('b', 'llm', 'unresolved'),
    ) not in got

    def count(variant: str, against: str, result: str) -> float:
        labels = (('against', against), ('namespace', 'llm'), ('result', result),
                  ('variant_name', variant))  # fmt: skip
        return got.get(('llmscaler_shadow_comparisons_total', labels), 0.0)

    assert count('a', 'current', 'above') == count('a', 'peer', 'above') == 2
    assert count('b', 'current', 'equal') == 1
    assert count('b', 'peer', 'equal') == count('b', 'peer', 'below') == 0
    metrics.set_shadow(
        rows=[
            ShadowRow(
                replicas=ReplicaRow(
                    variant='a', namespace='llm', accelerator='H100', current=2, desired=1
                ),
                peer=None,
            )
        ]
    )
    got = shadow_series(metrics)
    assert ('llmscaler_shadow_peer_desired_replicas', peer) not in got
    assert count('a', 'current', 'below') == 1
    # Nothing an HPA reads: the replica gauges of the autoscaler beside it are not published.
    assert replica_series(metrics) == {}


def test_counters_histograms_and_gauges() -> None:
    metrics = ControllerMetrics()
    metrics.scaled(variant='a', namespace='llm', direction='up', reason='saturation')
    metrics.scaled(variant='a', namespace='llm', direction='up', reason='saturation')
    metrics.scaled(variant='a', namespace='llm', direction='down', reason='idle')
    metrics.decisions(action='scale_up', count=3)
    metrics.decisions(action='scale_up', count=2)
    metrics.decisions(action='hold', count=0)
    metrics.error(component='collector', error_type='Timeout')
    metrics.cycle(seconds=0.02, status='success')
    metrics.cycle(seconds=20.0, status='success')
    metrics.cycle(seconds=0.5, status='error')
    metrics.from_zero(seconds=0.3)
    metrics.leader(is_leader=True)
    metrics.models(count=7)
    got = series(metrics)
    up = (
        ('direction', 'up'),
        ('namespace', 'llm'),
        ('reason', 'saturation'),
        ('variant_name', 'a'),
    )
    assert got[('wva_replica_scaling_total', up)] == 2.0
    down = (('direction', 'down'), ('namespace', 'llm'), ('reason', 'idle'), ('variant_name', 'a'))
    assert got[('wva_replica_scaling_total', down)] == 1.0
    assert got[('llmscaler_decisions_total', (('action', 'scale_up'),))] == 5.0
    assert got[('llmscaler_decisions_total', (('action', 'hold'),))] == 0.0
    error = (('component', 'collector'), ('error_type', 'Timeout'))
    assert got[('wva_errors_total', error)] == 1.0
    ok = (('status', 'success'),)
    assert got[('wva_optimization_duration_seconds_count', ok)] == 2.0
    assert got[('wva_optimization_duration_seconds_sum', ok)] == pytest.approx(20.02)
    assert got[('wva_optimization_duration_seconds_bucket', (('le', '0.01'), *ok))] == 0.0
    assert got[('wva_optimization_duration_seconds_bucket', (('le', '0.025'), *ok))] == 1.0
    assert got[('wva_optimization_duration_seconds_bucket', (('le', '10.0'), *ok))] == 1.0
    assert got[('wva_optimization_duration_seconds_bucket', (('le', '+Inf'), *ok))] == 2.0
    failed = (('status', 'error'),)
    assert got[('wva_optimization_duration_seconds_count', failed)] == 1.0
    assert got[('llmscaler_scale_from_zero_seconds_count', ())] == 1.0
    assert got[('llmscaler_scale_from_zero_seconds_bucket', (('le', '0.25'),))] == 0.0
    assert got[('llmscaler_scale_from_zero_seconds_bucket', (('le', '0.5'),))] == 1.0
    assert got[('llmscaler_scale_from_zero_seconds_bucket', (('le', '5.0'),))] == 1.0
    assert got[('llmscaler_leader', ())] == 1.0
    assert got[('wva_models_processed', ())] == 7.0
    metrics.leader(is_leader=False)
    assert series(metrics)[('llmscaler_leader', ())] == 0.0


def test_families_exist_before_any_observation() -> None:
    names = {f.name for f in text_string_to_metric_families(ControllerMetrics().render().decode())}
    assert {
        'wva_replica_scaling',
        'wva_optimization_duration_seconds',
        'llmscaler_decisions',
        'wva_errors',
        'llmscaler_scale_from_zero_seconds',
        'llmscaler_leader',
        'llmscaler_lease_renewals',
        'llmscaler_lease_renewal_lateness_seconds',
        'wva_models_processed',
        *REPLICA_FAMILIES,
    } <= names


def test_lease_renewals_are_counted_by_outcome_with_their_lateness() -> None:
    metrics = ControllerMetrics()
    metrics.lease_renewal(late=0.0, ok=True)
    metrics.lease_renewal(late=2.0, ok=False)
    got = series(metrics)
    assert got[('llmscaler_lease_renewals_total', (('outcome', 'renewed'),))] == 1.0
    assert got[('llmscaler_lease_renewals_total', (('outcome', 'failed'),))] == 1.0
    assert got[('llmscaler_lease_renewal_lateness_seconds_count', ())] == 2.0
    assert got[('llmscaler_lease_renewal_lateness_seconds_bucket', (('le', '1.0'),))] == 1.0


def test_registries_are_private() -> None:
    first, second = ControllerMetrics(), ControllerMetrics()
    first.models(count=3)
    assert series(second)[('wva_models_processed', ())] == 0.0
    assert first.registry is not second.registry


def test_negative_decision_count_is_a_programming_error() -> None:
    with pytest.raises(ValueError, match='negative'):
        ControllerMetrics().decisions(action='hold', count=-1)


def test_health_route() -> None:
    state = {'ok': True, 'why': ''}

    def check() -> tuple[bool, str]:
        return bool(state['ok']), str(state['why'])

    route = health_route(check)
    assert route() == (200, 'text/plain; charset=utf-8', b'ok')
    state.update(ok=False, why='informers not synced')
    assert route() == (503, 'text/plain; charset=utf-8', b'informers not synced')

    def broken() -> tuple[bool, str]:
        raise RuntimeError('boom')

    status, _, body = health_route(broken)()
    assert status == 503
    assert b'boom' in body


@pytest.mark.parametrize(
    ('text', 'expected'),
    [
        (':8080', ('0.0.0.0', 8080)),
        ('127.0.0.1:0', ('127.0.0.1', 0)),
        ('[::1]:9', ('::1', 9)),
        ('[::]:8443', ('::', 8443)),
        ('localhost:8081', ('localhost', 8081)),
        ('metrics.svc.local:65535', ('metrics.svc.local', 65535)),
        (' :8080\n', ('0.0.0.0', 8080)),
        (':0', ('0.0.0.0', 0)),
        ('0', None),
        ('', None),
    ],
)
def test_parse_bind_address(text: str, expected: tuple[str, int] | None) -> None:
    assert parse_bind_address(text) == expected


@pytest.mark.parametrize(
    'text',
    [
        '8080',
        ':',
        ':65536',
        ':-1',
        ':http',
        '::1:9',
        '[::1]',
        '[nope]:9',
        '[127.0.0.1]:9',
        '300.1.1.1:80',
        'bad host:80',
        'host_name:80',
        'http://host:80',
    ],
)
def test_parse_bind_address_rejects(text: str) -> None:
    with pytest.raises(ValueError, match='bind address'):
        parse_bind_address(text)


# --- HTTP --------------------------------------------------------------------------------------


async def test_endpoints_serve_routes_over_http() -> None:
    metrics = ControllerMetrics()
    metrics.models(count=2)
    health = {'ok': True}
    calls = []

    def failing() -> tuple[int, str, bytes]:
        calls.append(1)
        raise RuntimeError('route bug')

    routes = {
        '/metrics': metrics_route(metrics=metrics),
        '/healthz': health_route(lambda: (health['ok'], 'lease lost')),
        '/broken': failing,
    }
    async with (
        HttpEndpoints(host='127.0.0.1', port=0, routes=routes) as endpoints,
        httpx.AsyncClient(base_url=f'http://127.0.0.1:{endpoints.port}') as client,
    ):
        assert endpoints.port > 0
        page = await client.get('/metrics')
        assert page.status_code == 200
        assert page.headers['content-type'] == METRICS_CONTENT_TYPE
        families = {f.name: f for f in text_string_to_metric_families(page.text)}
        assert families['wva_models_processed'].samples[0].value == 2.0

        healthy = await client.get('/healthz')
        assert (healthy.status_code, healthy.text) == (200, 'ok')
        assert healthy.headers['content-type'].startswith('text/plain')
        health['ok'] = False
        sick = await client.get('/healthz')
        assert (sick.status_code, sick.text) == (503, 'lease lost')

        assert (await client.get('/nope')).status_code == 404
        assert (await client.get('/metrics/')).status_code == 404
        posted = await client.post('/metrics', content=b'x')
        assert posted.status_code == 405
        assert posted.headers['allow'] == 'GET, HEAD'
        head = await client.head('/healthz')
        assert head.status_code == 503
        assert head.content == b''

        assert (await client.get('/broken')).status_code == 500
        assert calls == [1]
        # The server survives a failing route.
        assert (await client.get('/metrics')).status_code == 200
    with pytest.raises(RuntimeError, match='not serving'):
        _ = endpoints.port


async def test_endpoints_stop_listening_on_exit() -> None:
    async with HttpEndpoints(host='127.0.0.1', port=0, routes={}) as endpoints:
        port = endpoints.port
    async with httpx.AsyncClient() as client:
        with pytest.raises(httpx.ConnectError):
            await client.get(f'http://127.0.0.1:{port}/metrics')


async def test_port_in_use_fails_on_enter() -> None:
    async with HttpEndpoints(host='127.0.0.1', port=0, routes={}) as first:
        second = HttpEndpoints(host='127.0.0.1', port=first.port, routes={})
        with pytest.raises(OSError, match='in use'):
            await second.__aenter__()
        with pytest.raises(RuntimeError):
            _ = second.port


async def test_endpoints_on_ipv6_loopback() -> None:
    try:
        with socket.socket(socket.AF_INET6, socket.SOCK_STREAM) as probe:
            probe.bind(('::1', 0))
    except OSError:
        pytest.skip('no IPv6 loopback here')
    routes = {'/healthz': health_route(lambda: (True, ''))}
    async with (
        HttpEndpoints(host='::1', port=0, routes=routes) as endpoints,
        httpx.AsyncClient() as client,
    ):
        response = await client.get(f'http://[::1]:{endpoints.port}/healthz')
        assert (response.status_code, response.text) == (200, 'ok')


def test_routes_must_be_paths() -> None:
    with pytest.raises(ValueError, match='must start with /'):
        HttpEndpoints(host='127.0.0.1', port=0, routes={'metrics': lambda: (200, 'x', b'')})


async def exchange(port: int, request: bytes, *, then_wait: float = 0.0) -> bytes:
    """Send `request` as raw bytes, wait `then_wait` seconds, and read the answer to its end."""
    reader, writer = await asyncio.open_connection('127.0.0.1', port)
    try:
        writer.write(request)
        await writer.drain()
        await asyncio.sleep(then_wait)
        return await asyncio.wait_for(reader.read(), 5.0)
    finally:
        writer.close()
        with contextlib.suppress(ConnectionError):
            await writer.wait_closed()


def status_of(answer: bytes) -> int:
    return int(answer.split(b' ', 2)[1])


OK_ROUTES = {'/healthz': health_route(lambda: (True, ''))}


@pytest.mark.parametrize(
    ('request_bytes', 'status'),
    [
        (b'GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n', 200),
        (b'GET /healthz?verbose=1 HTTP/1.1\r\n\r\n', 200),
        (b'GET /health%7A HTTP/1.0\r\n\r\n', 200),
        (b'GET http://x:1/healthz HTTP/1.1\r\n\r\n', 200),
        (b'GET /healthz HTTP/1.1\r\nContent-Length: 3\r\n\r\nabc', 200),
        (b'GET  /healthz HTTP/1.1\r\n\r\n', 400),
        (b'GET /healthz\r\n\r\n', 400),
        (b'GET /healthz HTTP/1.1\r\nno colon\r\n\r\n', 400),
        (b'GET /healthz HTTP/1.1\r\n folded: x\r\n\r\n', 400),
        (b'GET /healthz HTTP/1.1\r\nContent-Length: -1\r\n\r\n', 400),
        (b'GET /healthz HTTP/2.0\r\n\r\n', 505),
        (b'POST /healthz HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n', 411),
        (b'POST /healthz HTTP/1.1\r\nContent-Length: 65537\r\n\r\n', 413),
        (b'GET /healthz HTTP/1.1\r\nX: ' + b'a' * MAX_HEAD + b'\r\n\r\n', 431),
    ],
)
async def test_requests_are_read_within_bounds(request_bytes: bytes, status: int) -> None:
    async with HttpEndpoints(host='127.0.0.1', port=0, routes=OK_ROUTES) as endpoints:
        answer = await exchange(endpoints.port, request_bytes)
    assert status_of(answer) == status
    head, _, body = answer.partition(b'\r\n\r\n')
    assert b'\r\nConnection: close' in head
    assert f'Content-Length: {len(body)}'.encode() in head
    if status == 200:
        assert body == b'ok'


async def test_head_answers_carry_no_body() -> None:
    async with HttpEndpoints(host='127.0.0.1', port=0, routes=OK_ROUTES) as endpoints:
        found = await exchange(endpoints.port, b'HEAD /healthz HTTP/1.1\r\n\r\n')
        missing = await exchange(endpoints.port, b'HEAD /nope HTTP/1.1\r\n\r\n')
    assert found.endswith(b'Content-Length: 2\r\nConnection: close\r\n\r\n')
    assert status_of(missing) == 404
    assert missing.endswith(b'\r\n\r\n')


async def test_a_slow_client_gets_408_and_does_not_hold_up_others() -> None:
    async with HttpEndpoints(
        host='127.0.0.1', port=0, routes=OK_ROUTES, read_timeout=0.5
    ) as endpoints:
        slow = asyncio.create_task(exchange(endpoints.port, b'GET /healthz HTTP/1.1\r\n'))
        await asyncio.sleep(0.1)
        # While the slow request is still being waited for, another one is answered.
        prompt = await exchange(endpoints.port, b'GET /healthz HTTP/1.1\r\n\r\n')
        assert not slow.done()
        assert status_of(prompt) == 200
        answer = await asyncio.wait_for(slow, 2.0)
    assert status_of(answer) == 408


async def test_a_client_that_does_not_read_its_answer_is_dropped() -> None:
    big = b'#' * (64 * 1024 * 1024)
    routes = {'/big': lambda: (200, 'text/plain', big)}
    async with HttpEndpoints(
        host='127.0.0.1', port=0, routes=routes, write_timeout=0.2
    ) as endpoints:
        try:
            answer = await exchange(endpoints.port, b'GET /big HTTP/1.1\r\n\r\n', then_wait=1.0)
        except ConnectionResetError:
            answer = b''
    # The server gave up before the whole page reached the client.
    assert len(answer) < len(big)


def test_build_info_and_the_process_families() -> None:
    families = {
        f.name: f for f in text_string_to_metric_families(ControllerMetrics().render().decode())
    }
    (build,) = families['llmscaler_build_info'].samples
    assert build.value == 1.0
    assert build.labels['version'] == version()
    assert build.labels['python'].count('.') == 2
    for name in (
        'process_cpu_seconds',
        'process_resident_memory_bytes',
        'process_start_time_seconds',
    ):
        (sample,) = families[name].samples
        assert sample.value > 0, name
