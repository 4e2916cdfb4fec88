"""What the pod-scraping source keeps of the pages it read: every pod's series windows, and the
work that fills them and reads them.

Why apart from the fetching: parsing a page and adding it to the windows, and computing a reading
from a thousand pods' windows, is Python work that holds the interpreter lock; in a thread beside
the event loop it made the loop wait its turn (lag p99 80 to 97 ms, max up to 189 ms with ten
pods at every cap, docs/reliability.md). `PodStore` is therefore an object of its own, with no
I/O, that `collect.scrape.source` keeps in a process of its own (`collect.in_process`): the
loop sends it page bodies and gets back errors and readings. Everything it takes and gives
crosses a pipe, so its methods take plain values (keys, URLs, bytes) and give small ones.

What it keeps: windows keyed by (namespace, pod) and series; `_created` series, and histogram
buckets other than the two latency histograms' (`collect.histograms`), are not kept (no query
reads them); a series not updated for its horizon is forgotten, and so is an untargeted pod with
no series left. The request counters are kept for `request_count_horizon`, the latency buckets
for two minutes (at most `histograms.MAX_SAMPLES` samples each), the others for `horizon`. Pages
are parsed by one `exposition.Parser` per family set (vLLM, EPP) that remembers the label sets of
earlier pages. The errors and the non-finite count of the last scrape, and the time of the first,
are kept here too, so that a store started afresh (its process ended) reads as one that has
never scraped.

Caps: a page is refused, whole, when it crosses a cap of `PageLimits` (checked by the parser
while reading) or would take the pod's kept series over `max_series_per_pod` or
`max_series_chars_per_pod` characters. The refusal is a BAD_RESPONSE naming the pod and the cap
("page of pod llm/a-0 refused: line 1: a line over 65536 characters (max_line_length)"), and the
pod's kept series are dropped with it, so its readings are missing at once (the core holds its
model) rather than a minute's leftovers; the next page within the caps starts its windows afresh.

What fails: nothing raises. A page that gave no wanted sample while it had parse errors, was not
UTF-8, or was a vLLM page without one vLLM series is a BAD_RESPONSE; parse errors beside good
samples, or a vLLM page lacking KV usage, queue length, running or cache_config_info, a
PARTIAL_DATA. A failed page adds nothing and makes the pod's present series stale.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from llmscaler.collect import histograms
from llmscaler.collect.exposition import EPP_FAMILIES, VLLM_FAMILIES, Page, PageLimits, Parser
from llmscaler.collect.readings import ErrorReason, ModelScope, Reading, SourceError
from llmscaler.collect.scrape.reading import (
    REQUEST_SUCCESS,
    Kind,
    PodSeries,
    SeriesKey,
    compute_reading,
)
from llmscaler.collect.windows import SeriesWindow
from llmscaler.gc_pause import paused

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

PodKey = tuple[str, str]
"""(namespace, pod)."""


@dataclass(frozen=True, slots=True)
class Scraped:
    """One pod's page as the source hands it over: who it is and its body (or why there is none).

    `hint` names the model of series without a `model_name` label.
    """

    key: PodKey
    url: str
    kind: Kind
    hint: str
    body: bytes | None = None
    failure: SourceError | None = None


@dataclass(frozen=True, slots=True)
class Absorbed:
    """What one pod's page left: its error, and how many non-finite samples it dropped."""

    error: SourceError | None = None
    dropped: int = 0


@dataclass(frozen=True, slots=True)
class _Parsed:
    """A page parsed and judged: its samples, its error, or the cap it crossed."""

    error: SourceError | None = None
    page: Page | None = None
    refusal: str | None = None


class PodStore:
    """Every scraped pod's windows, and the scrape's own errors (see the module docstring)."""

    def __init__(
        self,
        *,
        limits: PageLimits,
        horizon: float,
        request_count_horizon: float,
        max_series_per_pod: int,
        max_series_chars_per_pod: int,
    ) -> None:
        self._horizon = horizon
        self._history = max(horizon, request_count_horizon)
        self._max_series = max_series_per_pod
        self._max_chars = max_series_chars_per_pod
        # One Parser per family set: the label sets of a kind's pages come back on every scrape.
        self._parsers: dict[Kind, Parser] = {
            'vllm': Parser(families=VLLM_FAMILIES, limits=limits),
            'epp': Parser(families=EPP_FAMILIES, limits=limits),
        }
        self._pods: dict[PodKey, PodSeries] = {}
        self._errors: tuple[SourceError, ...] = ()
        self._dropped = 0
        self._first_scrape: float | None = None

    @property
    def series_count(self) -> int:
        """How many series windows are held."""
        return sum(len(pod.series) for pod in self._pods.values())

    def absorb(self, scraped: Scraped, /, *, now: float) -> Absorbed:
        """Add one pod's page to its windows, within the caps, or mark its series stale."""
        pod = self._pods.setdefault(scraped.key, PodSeries(scraped.kind, ''))
        pod.kind, pod.hint = scraped.kind, scraped.hint
        if scraped.body is None:
            return self._add(scraped=scraped, pod=pod, now=now, parsed=_Parsed(scraped.failure))
        with paused():
            parser = self._parsers[pod.kind]
            parsed = parse_page(url=scraped.url, kind=pod.kind, body=scraped.body, parser=parser)
            absorbed = self._add(scraped=scraped, pod=pod, now=now, parsed=parsed)
            # Dropped before the collector resumes: the first collection after it would
            # otherwise walk every sample of the page (a third of a million containers at the
            # label cap, tens of milliseconds).
            del parsed
        return absorbed

    def finish(
        self, *, now: float, targeted: Sequence[PodKey], absorbed: Sequence[Absorbed]
    ) -> int:
        """End a scrape of the pods `targeted` that left `absorbed`: forget the pods no longer
        targeted once their series are stale, keep the scrape's errors; the series count."""
        kept = set(targeted)
        for key in [key for key in self._pods if key not in kept]:
            pod = self._pods[key]
            _forget_stale(pod=pod, now=now)
            if not pod.series:
                del self._pods[key]
        if self._first_scrape is None and targeted:
            self._first_scrape = now
        errors = [result.error for result in absorbed if result.error is not None]
        self._errors = tuple(sorted(errors, key=lambda e: (e.target, e.reason)))
        self._dropped = sum(result.dropped for result in absorbed)
        return self.series_count

    def reading(self, *, scope: tuple[ModelScope, ...], now: float) -> Reading:
        """The figures of the models in `scope` at `now`, from the kept windows."""
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

    def _window(self, name: str) -> SeriesWindow:
        if name in _KEPT_BUCKETS:
            return SeriesWindow(horizon=histograms.HORIZON, max_samples=histograms.MAX_SAMPLES)
        horizon = self._history if name == REQUEST_SUCCESS else self._horizon
        return SeriesWindow(horizon=horizon)

    def _add(self, *, scraped: Scraped, pod: PodSeries, now: float, parsed: _Parsed) -> Absorbed:
        # Stale series first, so that series past their horizon leave room under the caps (all
        # their samples are older than the horizon: nothing the page could add to is lost).
        _forget_stale(pod=pod, now=now)
        refusal = parsed.refusal
        if parsed.page is not None and refusal is None:
            refusal = self._over_pod_caps(pod=pod, page=parsed.page)
        if refusal is not None:
            # The pod's kept series go too: its readings are missing, not a minute's leftovers.
            pod.series.clear()
            pod.chars = 0
            pod.present_at = None
            namespace, name = scraped.key
            message = f'page of pod {namespace}/{name} refused: {refusal}'
            return Absorbed(error=SourceError(scraped.url, ErrorReason.BAD_RESPONSE, message))
        page = parsed.page
        if page is None:
            pod.present_at = None
            return Absorbed(error=parsed.error)
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
        return Absorbed(error=parsed.error, dropped=page.dropped_non_finite)

    def _over_pod_caps(self, *, pod: PodSeries, page: Page) -> str | None:
        """Which per-pod cap the page would cross, counting its series not kept yet."""
        series = pod.series
        new = [(s.name, s.labels) for s in page.samples if (s.name, s.labels) not in series]
        if len(series) + len(new) > self._max_series:
            return (
                f'{len(series)} series kept and {len(new)} new, '
                f'over {self._max_series} (max_series_per_pod)'
            )
        chars = pod.chars + sum(series_chars(key) for key in new)
        if chars > self._max_chars:
            return (
                f'series of {chars} characters, over {self._max_chars} (max_series_chars_per_pod)'
            )
        return None


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


def parse_page(*, url: str, kind: Kind, body: bytes, parser: Parser) -> _Parsed:
    """The page parsed and judged: its samples, its error, or the page cap it crossed."""
    text: bytes | str = body
    utf8 = True
    try:
        text = body.decode('utf-8')
    except UnicodeDecodeError:
        utf8 = False
    page = parser.parse(page=text)
    if page.refused is not None:
        return _Parsed(refusal=page.refused)

    def error(reason: ErrorReason, message: str) -> SourceError:
        return SourceError(url, reason, message)

    if not page.samples:
        if page.errors:
            message = 'no usable sample: ' + '; '.join(page.errors[:3])
            return _Parsed(error=error(ErrorReason.BAD_RESPONSE, message))
        if not utf8:
            return _Parsed(error=error(ErrorReason.BAD_RESPONSE, 'page is not UTF-8'))
        if kind == 'vllm':
            message = 'no vLLM series on the page (names escaped to underscores?)'
            return _Parsed(error=error(ErrorReason.BAD_RESPONSE, message))
        return _Parsed(page=page)
    problems = list(page.errors[:3])
    if kind == 'vllm':
        names = {sample.name for sample in page.samples}
        missing = [what for options, what in _VLLM_ALWAYS if names.isdisjoint(options)]
        if missing:
            problems.append('no ' + ', '.join(missing))
    if problems:
        return _Parsed(page=page, error=error(ErrorReason.PARTIAL_DATA, '; '.join(problems)))
    return _Parsed(page=page)
