"""The Prometheus metrics source: WVA's query registry over Prometheus' HTTP API.

Why: with Prometheus in the cluster, the controller reads the vLLM and gateway (EPP) figures from
it instead of scraping pods. Every family is one batched instant query
(`collect.prometheus.queries`), so a cycle costs the same handful of requests whatever the fleet
size.

What it does: `PrometheusSource.read` runs every query of the registry as
`POST {base_url}/api/v1/query` (form `query=...&time=now`), at most `concurrency` at once; each
answer is decoded by `collect.prometheus.answers` and the answers are folded into `PodReading`s
(one per (namespace, pod)) and `ModelReading`s (one per model in scope with at least one series) by
`collect.prometheus.fold`, which holds the rules (times, which pods are kept, how series combine).
`PrometheusSource.instant` runs one query outside the registry the same way (its credentials,
deadlines and cap), for a caller that reads something else (`collect.prometheus.peer`).
Decoding and folding run in the source's worker thread (`collect.worker`) when the answers are
large (`http.OFF_LOOP_BYTES`), so that a fleet of thousands of pods stalls the event loop, which
also renews the Lease, only briefly: the largest answers are decoded a series at a time
(`collect.prometheus.answers`), and the series folded are freed in slices once the reading is
made, as one `json.loads`, or one drop of 10,000 pods' histograms, holds the interpreter lock
throughout.

Bounds: every query is one `http.fetch` with a total deadline of `timeout` seconds (connecting,
sending, the headers and the whole body: a server that drips a byte at a time cannot hold it
longer) and a cap of `max_answer_bytes` on the answer (a larger Content-Length is refused before
reading; otherwise reading stops at the cap). The whole `read`, every query and the wait for a
free slot included, ends within `read_deadline` seconds: a query still unanswered then is a
TIMEOUT. A `read` therefore returns within `read_deadline` plus the time to decode what arrived
(bounded by the cap: about 20 ms per MiB of JSON), whatever the server does.

Credentials: the bearer token (`token_file`, re-read every cycle so rotated tokens work, else
`bearer_token`) is sent over https only. With a token configured and an `http://` base URL,
nothing is sent at all unless `allow_http_credentials` says so: every query fails with a message
naming the rule, so the status shows why instead of an unauthenticated read or a token in clear.

Failures never raise; each query gets at most one `SourceError(target=query name, ...)`:
- UNREACHABLE: connection refused, DNS failure, TLS verification failure, a connection dropped
  mid-answer, a token file that cannot be read or is empty, or a token refused for plain http
  (then nothing is sent);
- TIMEOUT: no complete answer within `timeout` seconds, or not within the read's `read_deadline`;
- HTTP_4XX / HTTP_5XX: the status code, with Prometheus' `errorType: error` text and any
  Retry-After header in the message (the next cycle is the retry);
- BAD_RESPONSE: another non-2xx status, an answer over `max_answer_bytes`, a body that is not
  JSON, not the API's vector shape, or `status: error`;
- PARTIAL_DATA: the answer carried `warnings` (its series are still used), or a kept pod lacks a
  family every vLLM pod exposes (see `collect.prometheus.fold`).
A failed query (any reason but PARTIAL_DATA) leaves its figure None for every pod and model; the
core then holds. The time `now` is the caller's; this module never reads a clock. A `concurrency`
below 1 counts as 1.

TLS: an `ssl.SSLContext` built once from the files (`collect.http.ssl_context`); unreadable
files raise at construction, a configuration error. `server_name` overrides the name used for
SNI and certificate checks through httpx's `sni_hostname` request extension (httpcore passes it
as `server_hostname`).
A caller-supplied client keeps its own TLS settings; headers, deadlines, the cap and `server_name`
still apply. `collect.http` holds the TLS, client, token, bounded-fetch and error-classification
plumbing that this source shares with the pod scraper and the scale-from-zero loop.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from pathlib import Path

import httpx

from llmscaler.collect import http
from llmscaler.collect.prometheus import queries as q
from llmscaler.collect.prometheus.answers import Outcome, failed, outcome, release
from llmscaler.collect.prometheus.fold import assemble
from llmscaler.collect.prometheus.queries import Query
from llmscaler.collect.readings import ModelScope, Reading, SourceError
from llmscaler.collect.worker import Worker
from llmscaler.gc_pause import paused


@dataclass(frozen=True, slots=True)
class PrometheusConfig:
    """How to reach Prometheus, and how long and how much one cycle may read.

    - `timeout`: seconds for one query, from connecting to the answer's last byte (10).
    - `read_deadline`: seconds for a whole `read`, every query included (15). A cycle waits for
      Prometheus at most this long; keep it below the cycle interval.
    - `max_answer_bytes`: the largest answer accepted, compressed or not (32 MiB; an answer for
      10,000 pods is about 2 MiB).
    - `concurrency`: queries in flight at once (4).
    - `allow_http_credentials`: send the bearer token even when `base_url` is `http://` (off:
      with a token and an http URL, nothing is sent and every query says why).
    - TLS: `ca_file` (else the system store), `client_cert_file` / `client_key_file`,
      `server_name` (SNI and certificate check), `insecure_skip_verify` (off).
    - `bearer_token`, or `token_file` (re-read every cycle; wins over `bearer_token`).
    A `timeout` or `read_deadline` that is not a positive finite number, or a `max_answer_bytes`
    below 1, is a ValueError.
    """

    base_url: str
    bearer_token: str | None = None
    token_file: Path | None = None
    ca_file: Path | None = None
    client_cert_file: Path | None = None
    client_key_file: Path | None = None
    server_name: str | None = None
    insecure_skip_verify: bool = False
    timeout: float = 10.0
    concurrency: int = 4
    read_deadline: float = 15.0
    max_answer_bytes: int = 32 * http.MiB
    allow_http_credentials: bool = False

    def __post_init__(self) -> None:
        http.check_seconds(timeout=self.timeout, read_deadline=self.read_deadline)
        http.check_bytes(max_answer_bytes=self.max_answer_bytes)


class PrometheusSource:
    """`MetricsSource` over Prometheus' HTTP API (see the module docstring)."""

    def __init__(self, *, config: PrometheusConfig, client: httpx.AsyncClient | None = None):
        self._config = config
        self._url = config.base_url.rstrip('/') + '/api/v1/query'
        self._http = http.OwnedClient(
            client=client, verify=lambda: http.ssl_context(config=config), timeout=config.timeout
        )
        self._extensions = {'sni_hostname': config.server_name} if config.server_name else {}
        self._worker = Worker(name='prometheus')

    async def aclose(self) -> None:
        """Close the HTTP client if this source created it, and end its worker thread."""
        self._worker.close()
        await self._http.aclose()

    async def read(self, *, scope: tuple[ModelScope, ...], now: float) -> Reading:
        batch = q.build(scope=scope)
        if not batch:
            return Reading()
        headers = self._headers()
        if isinstance(headers, http.Failure):
            return Reading(
                errors=tuple(SourceError(qu.name, headers.reason, headers.message) for qu in batch)
            )
        gate = asyncio.Semaphore(max(1, self._config.concurrency))
        end = asyncio.get_running_loop().time() + self._config.read_deadline
        results = await asyncio.gather(
            *(
                self._run(query=query, now=now, headers=headers, gate=gate, end=end)
                for query in batch
            )
        )
        outcomes = tuple(result for result, _ in results)

        def fold() -> Reading:
            with paused():
                reading = assemble(queries=batch, outcomes=outcomes, now=now)
                # Freed here, in slices, rather than all at once on the loop when read returns.
                for found in outcomes:
                    if found.series is not None:
                        release(found.series)
                return reading

        return await http.parse_off_loop(
            fold, size=sum(size for _, size in results), worker=self._worker
        )

    async def instant(self, *, query: Query, now: float) -> Outcome:
        """One query outside the registry, with the same credentials and bounds (`timeout`
        for the query, `read_deadline` for the whole call); its failure is the outcome's error."""
        headers = self._headers()
        if isinstance(headers, http.Failure):
            return failed(query, headers.reason, headers.message)
        end = asyncio.get_running_loop().time() + self._config.read_deadline
        result, _ = await self._run(
            query=query, now=now, headers=headers, gate=asyncio.Semaphore(1), end=end
        )
        return result

    def _headers(self) -> dict[str, str] | http.Failure:
        """The request headers with this cycle's credentials, or why nothing may be sent."""
        token = http.read_token(
            token_file=self._config.token_file, bearer_token=self._config.bearer_token
        )
        auth = http.authorization(
            token=token, url=self._url, allow_http=self._config.allow_http_credentials
        )
        if isinstance(auth, http.Failure):
            return auth
        return {'Accept': 'application/json', **auth}

    async def _run(
        self,
        *,
        query: Query,
        now: float,
        headers: dict[str, str],
        gate: asyncio.Semaphore,
        end: float,
    ) -> tuple[Outcome, int]:
        """One query's outcome, and the size of its answer."""

        async def send(deadline: float) -> http.Answer | http.Failure:
            # POST with a form body: a scope of many models makes regex matchers longer than the
            # URL limits of proxies and servers (8 KiB is common); the API takes both.
            return await http.fetch(
                client=self._http.client,
                method='POST',
                url=self._url,
                data={'query': query.promql, 'time': f'{now:.3f}'},
                headers=headers,
                extensions=self._extensions,
                deadline=deadline,
                max_bytes=self._config.max_answer_bytes,
                awaited='answer',
                where=self._url,
            )

        answer = await http.within(
            end=end,
            gate=gate,
            deadline=self._config.timeout,
            overall=f'the read deadline of {http.seconds(self._config.read_deadline)}s',
            work=send,
        )
        if isinstance(answer, http.Failure):
            return failed(query, answer.reason, answer.message), 0
        size = len(answer.body)
        decoded = await http.parse_off_loop(
            lambda: outcome(query=query, answer=answer), size=size, worker=self._worker
        )
        return decoded, size
