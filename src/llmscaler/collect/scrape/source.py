"""The pod-scraping metrics source: vLLM and gateway (EPP) pages read directly, no Prometheus.

Why: the built-in scraper of Kaito's LLMAutoScaler proposal lets a cluster without Prometheus
autoscale. This source fetches every pod's `/metrics` page itself, keeps the recent samples in local
windows (`collect.windows`), and computes from them the same `Reading` as the Prometheus source
computes with WVA's queries (`collect.scrape.reading` has the computations and their correspondence
with the queries), so attribution and the core cannot tell the sources apart.

The controller calls `scrape(now=...)` every scrape interval and `read(scope=..., now=...)` every
cycle; `read` never fetches. What is kept of the pages, how long, and the caps a page or a pod's
series must stay within, are `collect.scrape.store`'s.

Off the event loop, and off its interpreter: the loop also renews the leader's Lease, and a page
of hundreds of thousands of series once held it for seconds; parsed in a thread beside it, ten
pages at every cap still held it 80 to 190 ms at a time, as the thread holds the interpreter lock
the loop waits for. So the store (the windows, the parsers, the reading computed from them)
lives in a child process of the source's own (`collect.in_process`), started at the first
scrape: the loop fetches the pages, hands their bodies over, and gathers what comes back. Should
the child end (killed for its memory, a crash), the pods whose pages were on their way get a
BAD_RESPONSE saying so, the next call starts a new child whose windows start afresh (a warning
is logged), and the figures that need history (rates) are missing until the windows hold it
again, so the core holds their models rather than decide on made-up figures. A source of few
small pages (an InferencePool's EPPs) keeps its store in a worker thread instead
(`in_process=False`).

Connections: each pod is read by an HTTP client of its own (`http.OriginClients`), which keeps
its connection alive between scrapes and is closed once the pod has gone unread for a minute;
in one client shared by a thousand pods, every request scanned the whole pool on the loop.

Bounds: every page is one `fetch_page` (`http.fetch`): a total deadline of `timeout` seconds
(connecting, TLS, the headers and the whole body: a pod that drips a byte at a time cannot hold it
longer) and a cap of `max_page_bytes` (a larger Content-Length is refused before reading;
otherwise reading stops at the cap; compressed pages are capped as inflated too). The whole
`scrape`, the wait for a free slot included, ends within `scrape_deadline` seconds: a page not in
by then is a TIMEOUT for its pod. So a `scrape` returns within `scrape_deadline` plus the time to
parse the pages that came in (bounded by the cap).

Failures never raise; each target gets at most one `SourceError(target=url)` per scrape:
UNREACHABLE (refused, DNS, TLS, dropped connection, unreadable or empty token file, a token
refused for plain http), TIMEOUT (no complete page within `timeout`, or not within the scrape's
`scrape_deadline`), HTTP_4XX / HTTP_5XX, BAD_RESPONSE (another status, a body over
`max_page_bytes` or that does not decompress, a content type that is not a text exposition, or a
page that gave no wanted sample while it had parse errors, was not UTF-8, or was a vLLM page
without one vLLM series) and PARTIAL_DATA (parse errors beside good samples, or a vLLM page
lacking KV usage, queue length, running or cache_config_info). A failed scrape adds nothing
and makes the pod's present series stale; the samples already kept still serve the windows. NaN
and ±Inf samples are dropped and counted (`Reading.dropped_non_finite`, last scrape). A
`concurrency` below 1 counts as 1.

The bearer token (`token_file`, re-read every scrape so rotated tokens work, else `bearer_token`)
is sent to EPP targets only (vLLM pods need none), and over https only: with a token configured,
an `http://` EPP target gets no request at all (UNREACHABLE, saying why) unless
`allow_http_credentials` opts in. The URLs' schemes are the configuration's (`vllm_scheme`,
`epp_scheme`: `controller.cluster.pods` builds the targets with them). TLS: `ca_file` (else the
system store), `client_cert_file` / `client_key_file`, `server_name` (SNI and certificate check, for
pods whose certificates name a service rather than the pod IP), `insecure_skip_verify`.
"""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

import httpx

from llmscaler.collect import http
from llmscaler.collect.exposition import PageLimits, check_counts
from llmscaler.collect.in_process import Ended, InProcess
from llmscaler.collect.readings import ErrorReason, ModelScope, Reading, SourceError
from llmscaler.collect.scrape.reading import Kind, compute_reading
from llmscaler.collect.scrape.store import Absorbed, PodKey, PodStore, Scraped
from llmscaler.collect.worker import InThread

ACCEPT = 'text/plain;version=0.0.4'
"""The 0.0.4 text format keeps the colons of vLLM names; prometheus-client 0.26 answers an
OpenMetrics Accept header without `escaping=` with underscores instead (`_get_escaping` in
prometheus_client/exposition.py)."""
_TEXT_TYPES = ('text/plain', 'application/openmetrics-text')


@dataclass(frozen=True, slots=True)
class ScrapeTarget:
    """One pod's metrics endpoint; `model_name` names the model of series without that label."""

    namespace: str
    pod: str
    url: str
    kind: Kind = 'vllm'
    model_name: str = ''


def pod_url(*, ip: str, port: int, scheme: str = 'http', path: str = '/metrics') -> str:
    """`scheme://ip:port/path`, with an IPv6 address in brackets."""
    host = f'[{ip}]' if ':' in ip else ip
    return f'{scheme}://{host}:{port}{path}'


Scheme = Literal['http', 'https']
SCHEMES: tuple[Scheme, ...] = ('http', 'https')


@dataclass(frozen=True, slots=True)
class ScrapeConfig:
    """How pod and gateway (EPP) pages are read, by this source and by the scale-from-zero loop.

    Times are seconds.
    - `timeout`: one page, from connecting to its last byte (2).
    - `scrape_deadline`: a whole `scrape`, every page included (15). A cycle waits for the pods at
      most this long; keep it below the cycle interval.
    - `max_page_bytes`: the largest page accepted, compressed or not (16 MiB).
    - `concurrency`: pages in flight at once (32).
    - `vllm_scheme`, `epp_scheme`: `http` (default) or `https`, for the vLLM and the EPP pages.
    - `allow_http_credentials`: send the bearer token to an `http://` EPP page (off: nothing is
      sent to such a page while a token is configured, and its error says why).
    - TLS: `ca_file` (else the system store), `client_cert_file` / `client_key_file`,
      `server_name` (SNI and certificate check), `insecure_skip_verify` (off).
    - `bearer_token`, or `token_file` (re-read every scrape; wins over `bearer_token`): sent to
      EPP pages only.
    - `horizon`: how long samples are kept (360); `request_count_horizon`: the request counters
      (3600).
    - Caps of one page (`exposition.PageLimits`): `max_line_length` characters of a line
      (64 KiB), `max_labels` per sample (128), `max_series_per_page` (10,000); and of one pod's
      kept series, this page's and the earlier ones' still within their horizon:
      `max_series_per_pod` (20,000) and `max_series_chars_per_pod` characters of their
      `name{labels}` texts (4 MiB, also the cap of one page's). A page over any of them is
      refused: its pod's series are dropped and its readings are missing.
    A deadline that is not a positive finite number, a cap below 1 or another scheme is a
    ValueError.
    """

    timeout: float = 2.0
    concurrency: int = 32
    bearer_token: str | None = None
    token_file: Path | None = None
    ca_file: Path | None = None
    insecure_skip_verify: bool = False
    horizon: float = 360.0
    request_count_horizon: float = 3600.0
    max_page_bytes: int = 16 * http.MiB
    scrape_deadline: float = 15.0
    vllm_scheme: Scheme = 'http'
    epp_scheme: Scheme = 'http'
    client_cert_file: Path | None = None
    client_key_file: Path | None = None
    server_name: str | None = None
    allow_http_credentials: bool = False
    max_line_length: int = 64 * 1024
    max_labels: int = 128
    max_series_per_page: int = 10_000
    max_series_per_pod: int = 20_000
    max_series_chars_per_pod: int = 4 * http.MiB

    def __post_init__(self) -> None:
        http.check_seconds(timeout=self.timeout, scrape_deadline=self.scrape_deadline)
        http.check_bytes(max_page_bytes=self.max_page_bytes)
        for name, scheme in (('vllm_scheme', self.vllm_scheme), ('epp_scheme', self.epp_scheme)):
            if scheme not in SCHEMES:
                raise ValueError(f'{name} must be http or https, not {scheme!r}')
        check_counts(
            max_series_per_pod=self.max_series_per_pod,
            max_series_chars_per_pod=self.max_series_chars_per_pod,
        )
        self.page_limits()  # the page's caps check themselves

    def page_limits(self) -> PageLimits:
        """The caps of one page; its series characters are capped as the pod's."""
        return PageLimits(
            max_line_length=self.max_line_length,
            max_labels=self.max_labels,
            max_series_per_page=self.max_series_per_page,
            max_series_chars=self.max_series_chars_per_pod,
        )


def _page_failure(status: int, headers: httpx.Headers) -> http.Failure | None:
    """A status or a content type that makes the page useless, seen before its body is read."""
    failure = http.status_failure(status=status)
    if failure is not None:
        return http.Failure(*failure)
    media = headers.get('content-type', '').split(';')[0].strip().lower()
    if media and media not in _TEXT_TYPES:
        return http.Failure(ErrorReason.BAD_RESPONSE, f'content type {media!r} is not metrics')
    return None


async def fetch_page(
    *,
    client: httpx.AsyncClient,
    target: ScrapeTarget,
    config: ScrapeConfig,
    token: http.Token,
    deadline: float,
) -> bytes | http.Failure:
    """One page's body, or its failure; the only way pages are read (here and scale-from-zero).

    `deadline` is the page's total time (`http.fetch`), `config` gives the size cap, the server
    name and the credential rule: `token` (from `http.read_token`) goes to EPP pages only and to
    an `http://` one only with `allow_http_credentials`.
    """
    headers = {'Accept': ACCEPT}
    if target.kind == 'epp':
        auth = http.authorization(
            token=token, url=target.url, allow_http=config.allow_http_credentials
        )
        if isinstance(auth, http.Failure):
            return auth
        headers.update(auth)
    answer = await http.fetch(
        client=client,
        url=target.url,
        headers=headers,
        extensions={'sni_hostname': config.server_name} if config.server_name else None,
        deadline=deadline,
        max_bytes=config.max_page_bytes,
        inspect=_page_failure,
        awaited='page',
    )
    if isinstance(answer, http.Failure):
        return answer
    return answer.body


class PodScrapeSource:
    """`MetricsSource` that scrapes the pods itself (see the module docstring).

    `in_process` (default): the store in a child process of its own; else in a worker thread
    (`collect.worker.InThread`), for a source of few small pages that is not worth a process
    (an InferencePool's EPP pages, one source per pool).
    """

    def __init__(
        self,
        *,
        config: ScrapeConfig,
        targets_fn: Callable[[], Sequence[ScrapeTarget]],
        client: httpx.AsyncClient | None = None,
        in_process: bool = True,
    ) -> None:
        self._config = config
        self._targets_fn = targets_fn
        # A client per pod (`http.OriginClients`), each keeping its connection between scrapes.
        self._clients = http.OriginClients(
            client=client, verify=lambda: http.ssl_context(config=config), timeout=config.timeout
        )
        store = functools.partial(
            PodStore,
            limits=config.page_limits(),
            horizon=config.horizon,
            request_count_horizon=config.request_count_horizon,
            max_series_per_pod=config.max_series_per_pod,
            max_series_chars_per_pod=config.max_series_chars_per_pod,
        )
        self._store: InProcess[PodStore] | InThread[PodStore] = (
            InProcess(factory=store) if in_process else InThread(factory=store, name='scrape')
        )
        self._series_count = 0

    async def aclose(self) -> None:
        """Close the HTTP client if this source created it, and end the store's process."""
        self._store.close()
        await self._clients.aclose()

    @property
    def series_count(self) -> int:
        """How many series windows were held at the end of the last scrape."""
        return self._series_count

    async def scrape(self, *, now: float) -> list[SourceError]:
        """Fetch every target's page once and hand it to the store, which adds its samples to
        the windows (and forgets the stale series) in its own process."""
        targets: dict[PodKey, ScrapeTarget] = {}
        for target in sorted(self._targets_fn(), key=lambda t: (t.namespace, t.pod, t.url)):
            targets.setdefault((target.namespace, target.pod), target)
        token = http.read_token(
            token_file=self._config.token_file, bearer_token=self._config.bearer_token
        )
        await self._clients.forget_idle(now=now)
        gate = asyncio.Semaphore(max(1, self._config.concurrency))
        ordered = [targets[key] for key in sorted(targets)]
        end = asyncio.get_running_loop().time() + self._config.scrape_deadline
        absorbed = await asyncio.gather(
            *(self._scrape_pod(target=t, token=token, gate=gate, end=end, now=now) for t in ordered)
        )
        finish = functools.partial(PodStore.finish, now=now, targeted=sorted(targets))
        self._series_count = 0
        # Twice at most: should the child have ended with the pages, a new one holds nothing
        # yet and is told of the scrape's errors.
        for _ in range(2):
            try:
                self._series_count = await self._store.call(finish, absorbed=absorbed)
                break
            except Ended:
                continue
        errors = [result.error for result in absorbed if result.error is not None]
        return sorted(errors, key=lambda e: (e.target, e.reason))

    async def read(self, *, scope: tuple[ModelScope, ...], now: float) -> Reading:
        """The figures of the models in `scope` at `now`, from the kept windows (computed in the
        store's process: a thousand pods' windows take a while)."""
        try:
            return await self._store.call(PodStore.reading, scope=scope, now=now)
        except Ended as ended:
            # Nothing is kept any more: every reading is missing, and the reading says why.
            error = SourceError('pod scraping', ErrorReason.BAD_RESPONSE, _ended(ended))
            return compute_reading(
                pods={}, scope=scope, now=now, history=0.0, scraping_since=None, errors=(error,)
            )

    async def _scrape_pod(
        self,
        *,
        target: ScrapeTarget,
        token: http.Token,
        gate: asyncio.Semaphore,
        end: float,
        now: float,
    ) -> Absorbed:
        async def get(deadline: float) -> bytes | http.Failure:
            return await fetch_page(
                client=self._clients.client_for(url=target.url, now=now),
                target=target,
                config=self._config,
                token=token,
                deadline=deadline,
            )

        body = await http.within(
            end=end,
            gate=gate,
            deadline=self._config.timeout,
            overall=f'the scrape deadline of {http.seconds(self._config.scrape_deadline)}s',
            work=get,
        )
        if isinstance(body, http.Failure):
            page, failure = None, SourceError(target.url, body.reason, body.message)
        else:
            page, failure = body, None
        scraped = Scraped(
            key=(target.namespace, target.pod),
            url=target.url,
            kind=target.kind,
            hint=target.model_name,
            body=page,
            failure=failure,
        )
        try:
            return await self._store.call(PodStore.absorb, scraped, now=now)
        except Ended as ended:
            message = f'page of pod {target.namespace}/{target.pod} lost: {_ended(ended)}'
            return Absorbed(error=SourceError(target.url, ErrorReason.BAD_RESPONSE, message))


def _ended(ended: Ended) -> str:
    return f'the scrape process ended ({ended}); its windows start afresh'
