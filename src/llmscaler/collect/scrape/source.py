"""The pod-scraping metrics source: vLLM and gateway (EPP) pages read directly, no Prometheus.

Why: the built-in scraper of Kaito's LLMAutoScaler proposal lets a cluster without Prometheus
autoscale. This source fetches every pod's `/metrics` page itself, keeps the recent samples in local
windows (`collect.windows`), and computes from them the same `Reading` as the Prometheus source
computes with WVA's queries (`collect.scrape.reading` has the computations and their correspondence
with the queries), so attribution and the core cannot tell the sources apart.

The controller calls `scrape(now=...)` every scrape interval and `read(scope=..., now=...)` every
cycle; `read` never fetches. Windows are keyed by (namespace, pod, series); `_created` series,
and histogram buckets other than the two latency histograms' (`collect.histograms`), are not kept
(no query reads them); a series not updated for its horizon is forgotten, and so is an untargeted
pod with no series left. The request counters are kept for `request_count_horizon`, the latency
buckets for two minutes (at most `histograms.MAX_SAMPLES` samples each), the others for
`horizon`. Pages are parsed by one `exposition.Parser` per family set (vLLM, EPP) that remembers
the label sets of earlier pages.

Off the event loop: the loop also renews the leader's Lease, and a page of hundreds of thousands
of series once held it for seconds. So each pod's page is parsed, checked against the caps and
added to the pod's windows in the source's worker thread (`collect.worker`: one per source, so
that it adds one thread competing with the loop), and `read` computes the reading there too;
the loop only fetches and gathers. The threads run Python code, which gives
the loop its turn every few milliseconds (the interpreter's switch interval), and no single step
of theirs is longer than one capped line.

Caps (`ScrapeConfig`): a page is refused, whole, when a line of a wanted family is longer than
`max_line_length`, a sample has more than `max_labels` labels, the page has more than
`max_series_per_page` series, or its series would take the pod's kept series over
`max_series_per_pod` or `max_series_chars_per_pod` characters. The refusal is a BAD_RESPONSE
naming the pod and the cap ("page of pod llm/a-0 refused: line 1: a line over 65536 characters
(max_line_length)"), and the pod's kept series are dropped with it, so its readings are missing
at once (the core holds its model) rather than a minute's leftovers; the next page within the
caps starts its windows afresh.

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
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

import httpx

from llmscaler.collect import histograms, http
from llmscaler.collect.exposition import (
    EPP_FAMILIES,
    VLLM_FAMILIES,
    Page,
    PageLimits,
    Parser,
    check_counts,
)
from llmscaler.collect.readings import ErrorReason, ModelScope, Reading, SourceError
from llmscaler.collect.scrape.reading import (
    REQUEST_SUCCESS,
    Kind,
    PodSeries,
    SeriesKey,
    compute_reading,
)
from llmscaler.collect.windows import SeriesWindow
from llmscaler.collect.worker import Worker
from llmscaler.gc_pause import paused

ACCEPT = 'text/plain;version=0.0.4'
"""The 0.0.4 text format keeps the colons of vLLM names; prometheus-client 0.26 answers an
OpenMetrics Accept header without `escaping=` with underscores instead (`_get_escaping` in
prometheus_client/exposition.py)."""
_TEXT_TYPES = ('text/plain', 'application/openmetrics-text')
_UNUSED_SUFFIXES = ('_bucket', '_created')
_KEPT_BUCKETS = frozenset(histograms.FIELDS)
# The TPOT family is read for its buckets only.
_UNUSED = frozenset(
    {
        'vllm:request_time_per_output_token_seconds_sum',
        'vllm:request_time_per_output_token_seconds_count',
    }
)
_VLLM_ALWAYS = (
    (('vllm:kv_cache_usage_perc', 'vllm:gpu_cache_usage_perc'), 'KV usage'),
    (('vllm:num_requests_waiting',), 'queue length'),
    (('vllm:num_requests_running',), 'running'),
    (('vllm:cache_config_info',), 'cache_config_info'),
)


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


@dataclass(frozen=True, slots=True)
class _Fetched:
    """A page read (or not) and parsed: its samples, its error, or the cap it crossed."""

    error: SourceError | None = None
    page: Page | None = None
    refusal: str | None = None


@dataclass(frozen=True, slots=True)
class _Absorbed:
    """What one pod's page left: its error, and how many non-finite samples it dropped."""

    error: SourceError | None = None
    dropped: int = 0


class PodScrapeSource:
    """`MetricsSource` that scrapes the pods itself (see the module docstring)."""

    def __init__(
        self,
        *,
        config: ScrapeConfig,
        targets_fn: Callable[[], Sequence[ScrapeTarget]],
        client: httpx.AsyncClient | None = None,
    ) -> None:
        self._config = config
        self._targets_fn = targets_fn
        # A client per pod (`http.OriginClients`), each keeping its connection between scrapes.
        self._clients = http.OriginClients(
            client=client, verify=lambda: http.ssl_context(config=config), timeout=config.timeout
        )
        # One Parser per family set: the label sets of a kind's pages come back on every scrape.
        limits = config.page_limits()
        self._parsers: dict[Kind, Parser] = {
            'vllm': Parser(families=VLLM_FAMILIES, limits=limits),
            'epp': Parser(families=EPP_FAMILIES, limits=limits),
        }
        self._pods: dict[tuple[str, str], PodSeries] = {}
        self._worker = Worker(name='scrape')
        self._errors: tuple[SourceError, ...] = ()
        self._dropped = 0
        self._first_scrape: float | None = None

    async def aclose(self) -> None:
        """Close the HTTP client if this source created it, and end its worker thread."""
        self._worker.close()
        await self._clients.aclose()

    @property
    def series_count(self) -> int:
        """How many series windows are held (for the controller's own metrics)."""
        return sum(len(pod.series) for pod in self._pods.values())

    async def scrape(self, *, now: float) -> list[SourceError]:
        """Fetch every target's page once and add its samples to the windows.

        Each pod's page is parsed and added to its windows in a worker thread (its stale series
        forgotten there too), so that no page, however large or hostile, holds the event loop:
        the loop only fetches, and gathers what the threads found.
        """
        targets: dict[tuple[str, str], ScrapeTarget] = {}
        for target in sorted(self._targets_fn(), key=lambda t: (t.namespace, t.pod, t.url)):
            targets.setdefault((target.namespace, target.pod), target)
        token = http.read_token(
            token_file=self._config.token_file, bearer_token=self._config.bearer_token
        )
        await self._clients.forget_idle(now=now)
        gate = asyncio.Semaphore(max(1, self._config.concurrency))
        ordered = [targets[key] for key in sorted(targets)]
        end = asyncio.get_running_loop().time() + self._config.scrape_deadline
        for target in ordered:
            pod = self._pods.setdefault((target.namespace, target.pod), PodSeries(target.kind, ''))
            pod.kind, pod.hint = target.kind, target.model_name
        absorbed = await asyncio.gather(
            *(self._scrape_pod(target=t, token=token, gate=gate, end=end, now=now) for t in ordered)
        )
        errors = [result.error for result in absorbed if result.error is not None]
        gone = [key for key in self._pods if key not in targets]
        if gone:
            await self._worker.run(lambda: self._forget(now=now, keys=gone))
        if self._first_scrape is None and targets:
            self._first_scrape = now
        self._errors = tuple(sorted(errors, key=lambda e: (e.target, e.reason)))
        self._dropped = sum(result.dropped for result in absorbed)
        return list(self._errors)

    async def read(self, *, scope: tuple[ModelScope, ...], now: float) -> Reading:
        """The figures of the models in `scope` at `now`, from the kept windows (computed in a
        worker thread: a thousand pods' windows take a while)."""
        return await self._worker.run(lambda: self._reading(scope=scope, now=now))

    def _reading(self, *, scope: tuple[ModelScope, ...], now: float) -> Reading:
        with paused():
            return compute_reading(
                pods=self._pods,
                scope=scope,
                now=now,
                history=self._history,
                scraping_since=self._first_scrape,
                errors=self._errors,
                dropped_non_finite=self._dropped,
            )

    @property
    def _history(self) -> float:
        """How long the request counters are kept."""
        return max(self._config.horizon, self._config.request_count_horizon)

    # --- scraping ------------------------------------------------------------------------------

    def _window(self, name: str) -> SeriesWindow:
        if name in _KEPT_BUCKETS:
            return SeriesWindow(horizon=histograms.HORIZON, max_samples=histograms.MAX_SAMPLES)
        horizon = self._history if name == REQUEST_SUCCESS else self._config.horizon
        return SeriesWindow(horizon=horizon)

    async def _scrape_pod(
        self,
        *,
        target: ScrapeTarget,
        token: http.Token,
        gate: asyncio.Semaphore,
        end: float,
        now: float,
    ) -> _Absorbed:
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
            failed = _Fetched(SourceError(target.url, body.reason, body.message))
            return await self._worker.run(
                lambda: self._absorb(target=target, now=now, fetched=failed)
            )
        return await self._worker.run(lambda: self._absorb_page(target=target, body=body, now=now))

    def _absorb_page(self, *, target: ScrapeTarget, body: bytes, now: float) -> _Absorbed:
        """Parse the page and add it to the pod's windows (in a worker thread)."""
        with paused():
            parser = self._parsers[target.kind]
            fetched = parse_page(target=target, body=body, parser=parser)
            absorbed = self._absorb(target=target, now=now, fetched=fetched)
            # Dropped before the collector resumes: the first collection after it would
            # otherwise walk every sample of the page (a third of a million containers at the
            # label cap, tens of milliseconds with the interpreter lock held).
            del fetched
        return absorbed

    def _absorb(self, *, target: ScrapeTarget, now: float, fetched: _Fetched) -> _Absorbed:
        """Add one pod's page to its windows, within the pod's caps (in a worker thread)."""
        pod = self._pods[(target.namespace, target.pod)]
        # First, so that series past their horizon leave room under the caps (all their
        # samples are older than the horizon: nothing the page could add to is lost).
        _forget_stale(pod=pod, now=now)
        refusal = fetched.refusal
        if fetched.page is not None and refusal is None:
            refusal = self._over_pod_caps(pod=pod, page=fetched.page)
        if refusal is not None:
            # The pod's kept series go too: its readings are missing, not a minute's leftovers.
            pod.series.clear()
            pod.chars = 0
            pod.present_at = None
            message = f'page of pod {target.namespace}/{target.pod} refused: {refusal}'
            error = SourceError(target.url, ErrorReason.BAD_RESPONSE, message)
            return _Absorbed(error=error)
        page = fetched.page
        if page is None:
            pod.present_at = None
            return _Absorbed(error=fetched.error)
        for sample in page.samples:
            name = sample.name
            if name in _UNUSED or (name.endswith(_UNUSED_SUFFIXES) and name not in _KEPT_BUCKETS):
                continue
            key = (name, sample.labels)
            record = pod.series.get(key)
            if record is None:
                record = pod.series[key] = self._window(name).record
                pod.chars += series_chars(key)
            SeriesWindow.of(record).add(t=now, value=sample.value)
        pod.present_at = now
        return _Absorbed(error=fetched.error, dropped=page.dropped_non_finite)

    def _over_pod_caps(self, *, pod: PodSeries, page: Page) -> str | None:
        """Which per-pod cap the page would cross, counting its series not kept yet."""
        series = pod.series
        new = [(s.name, s.labels) for s in page.samples if (s.name, s.labels) not in series]
        count_limit = self._config.max_series_per_pod
        if len(series) + len(new) > count_limit:
            return (
                f'{len(series)} series kept and {len(new)} new, '
                f'over {count_limit} (max_series_per_pod)'
            )
        chars_limit = self._config.max_series_chars_per_pod
        chars = pod.chars + sum(series_chars(key) for key in new)
        if chars > chars_limit:
            return f'series of {chars} characters, over {chars_limit} (max_series_chars_per_pod)'
        return None

    def _forget(self, *, now: float, keys: Iterable[tuple[str, str]]) -> None:
        """Drop the stale series of pods no longer targeted, then those left empty."""
        for key in keys:
            pod = self._pods[key]
            _forget_stale(pod=pod, now=now)
            if not pod.series:
                del self._pods[key]


def _forget_stale(*, pod: PodSeries, now: float) -> None:
    """Drop the pod's series not seen for their horizon."""
    for key, record in list(pod.series.items()):
        window = SeriesWindow.of(record)
        if window.last_seen <= now - window.horizon:
            del pod.series[key]
            pod.chars -= series_chars(key)


def series_chars(key: SeriesKey) -> int:
    """The characters of a series' `name{labels}` text as a page writes it (no escapes)."""
    name, labels = key
    if not labels:
        return len(name)
    # The braces, per label `="` and `"`, and the commas between labels.
    return len(name) + 1 + sum(len(k) + len(v) + 4 for k, v in labels)


def parse_page(*, target: ScrapeTarget, body: bytes, parser: Parser) -> _Fetched:
    """The page parsed and judged: its samples, its error, or the page cap it crossed."""
    text: bytes | str = body
    utf8 = True
    try:
        text = body.decode('utf-8')
    except UnicodeDecodeError:
        utf8 = False
    page = parser.parse(page=text)
    if page.refused is not None:
        return _Fetched(refusal=page.refused)

    def error(reason: ErrorReason, message: str) -> SourceError:
        return SourceError(target.url, reason, message)

    if not page.samples:
        if page.errors:
            message = 'no usable sample: ' + '; '.join(page.errors[:3])
            return _Fetched(error=error(ErrorReason.BAD_RESPONSE, message))
        if not utf8:
            return _Fetched(error=error(ErrorReason.BAD_RESPONSE, 'page is not UTF-8'))
        if target.kind == 'vllm':
            message = 'no vLLM series on the page (names escaped to underscores?)'
            return _Fetched(error=error(ErrorReason.BAD_RESPONSE, message))
        return _Fetched(page=page)
    problems = list(page.errors[:3])
    if target.kind == 'vllm':
        names = {sample.name for sample in page.samples}
        missing = [what for options, what in _VLLM_ALWAYS if names.isdisjoint(options)]
        if missing:
            problems.append('no ' + ', '.join(missing))
    if problems:
        return _Fetched(page=page, error=error(ErrorReason.PARTIAL_DATA, '; '.join(problems)))
    return _Fetched(page=page)
