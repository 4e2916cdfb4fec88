"""A fake Prometheus for the Prometheus source's tests: its instant-query endpoint on a
loopback port, answering canned JSON chosen by the exact query string and logging every request.

Prometheus computes the windows and ratios itself; the canned answers are what a real server
returns (`sample`, `vector`, `scraped`), and the source must pass them on unchanged.
"""

from __future__ import annotations

import asyncio
import json
import ssl
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

import pytest
from aiohttp import web

from llmscaler.collect.prometheus.queries import build
from llmscaler.collect.prometheus.source import PrometheusConfig, PrometheusSource
from llmscaler.collect.readings import ErrorReason, ModelScope, PodReading, Reading
from llmscaler.devcluster import loopback

NOW = 1_700_000_000.0
LLAMA = 'meta-llama/Llama-3.1-8B'
SCOPE = (
    ModelScope(model_id=LLAMA, namespace='ns-a', latency_histograms=True),
    ModelScope(model_id='qwen', namespace='ns-b'),
)
QUERIES = {query.name: query.promql for query in build(scope=SCOPE)}
# One query per registry family plus one request-count query for the single retention (600 s).
# test_collect_queries pins the family list; here the count must not grow with pods or models.
REGISTRY_SIZE = len(QUERIES)


@dataclass
class Canned:
    body: str
    status: int = 200
    headers: dict[str, str] = field(default_factory=dict)
    delay: float = 0.0


def sample(value: str, /, **labels: str) -> dict[str, Any]:
    """One series of an instant vector, stamped with the evaluation time as Prometheus does."""
    return {'metric': labels, 'value': [NOW, value]}


def at(ts: float, series: dict[str, Any]) -> dict[str, Any]:
    return {**series, 'value': [ts, series['value'][1]]}


def scraped(age: float, /, **labels: str) -> dict[str, Any]:
    """A `last_sample` series: the scrape time `NOW - age` is the value, the stamp is still NOW.

    Prometheus writes timestamps with millisecond precision, as does this.
    """
    return sample(f'{NOW - age:.3f}', **labels)


def vector(*samples: dict[str, Any], warnings: list[str] | None = None) -> Canned:
    body: dict[str, Any] = {
        'status': 'success',
        'data': {'resultType': 'vector', 'result': list(samples)},
    }
    if warnings:
        body['warnings'] = warnings
    return Canned(json.dumps(body))


def prometheus_error(error_type: str, error: str) -> str:
    return json.dumps({'status': 'error', 'errorType': error_type, 'error': error})


@dataclass(frozen=True)
class Logged:
    query: str
    time: str
    authorization: str | None


class FakePrometheus:
    """Prometheus' instant-query endpoint on 127.0.0.1 with an ephemeral port."""

    def __init__(self) -> None:
        self.canned: dict[str, Canned] = {}
        self.log: list[Logged] = []
        self.delay = 0.0
        self.in_flight = 0
        self.max_in_flight = 0
        self.url = ''
        self._served: loopback.Served | None = None

    def answer(self, name: str, canned: Canned, *, scope: tuple[ModelScope, ...] = SCOPE) -> None:
        promql = {query.name: query.promql for query in build(scope=scope)}[name]
        self.canned[promql] = canned

    async def _handle(self, request: web.Request) -> web.Response:
        form = await request.post()
        query = str(form.get('query', ''))
        self.log.append(
            Logged(query, str(form.get('time', '')), request.headers.get('Authorization'))
        )
        canned = self.canned.get(query, vector())
        self.in_flight += 1
        self.max_in_flight = max(self.max_in_flight, self.in_flight)
        try:
            await asyncio.sleep(max(canned.delay, self.delay))
        finally:
            self.in_flight -= 1
        return web.Response(
            status=canned.status,
            text=canned.body,
            headers=canned.headers,
            content_type='application/json',
        )

    async def start(self, *, tls: ssl.SSLContext | None = None) -> None:
        app = web.Application()
        app.router.add_post('/api/v1/query', self._handle)
        self._served = await loopback.serve(app, tls=tls)
        self.url = self._served.url

    async def stop(self) -> None:
        if self._served is not None:
            await self._served.close()


@pytest.fixture
async def prom() -> AsyncIterator[FakePrometheus]:
    server = FakePrometheus()
    await server.start()
    yield server
    await server.stop()


async def read(
    config: PrometheusConfig, scope: tuple[ModelScope, ...] = SCOPE, now: float = NOW
) -> Reading:
    source = PrometheusSource(config=config)
    try:
        return await source.read(scope=scope, now=now)
    finally:
        await source.aclose()


def pod(reading: Reading, namespace: str, name: str) -> PodReading:
    (found,) = [p for p in reading.pods if (p.namespace, p.pod) == (namespace, name)]
    return found


def reasons(reading: Reading) -> dict[str, ErrorReason]:
    return {error.target: error.reason for error in reading.errors}
