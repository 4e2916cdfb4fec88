"""What the metric sources hand to the snapshot builder.

Why: the controller reads vLLM and gateway (EPP) metrics either through Prometheus (WVA's query
registry) or by scraping the pods itself (as Kaito's LLMAutoScaler proposal does, no Prometheus).
Both must end in the very same `model.Snapshot`, so both produce these readings, with the windows
already applied (1-minute max of KV usage and queue length, 5-minute rates for token averages, ...),
and one attribution step (`collect.attribution`) turns readings into `ReplicaMetrics` and
`PoolMetrics`.

Bad metrics never crash a source: a value that is NaN or ±Inf is dropped and counted, a family that
could not be read becomes a `SourceError` with a classified reason, and the figure is None in the
reading; the core then holds the variant (`MetricsAvailable=False`) instead of guessing.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import Protocol

from llmscaler.domain.snapshot import LatencyHistogram


class ErrorReason(enum.StrEnum):
    """Why a query or scrape gave nothing usable (the `MetricsAvailable=False` reasons)."""

    UNREACHABLE = 'Unreachable'
    TIMEOUT = 'Timeout'
    HTTP_4XX = 'HTTPClientError'
    HTTP_5XX = 'HTTPServerError'
    BAD_RESPONSE = 'BadResponse'
    """Not JSON, not the Prometheus API shape, or an exposition page that does not parse."""
    PARTIAL_DATA = 'PartialData'
    """The server answered with warnings or a subset of what was asked."""


@dataclass(frozen=True, slots=True)
class SourceError:
    """One failed query (Prometheus) or scrape (pod), classified."""

    target: str
    """The query name (`kv_cache_usage`, ...) or the scraped URL."""
    reason: ErrorReason
    message: str


def label_value(*, labels: tuple[tuple[str, str], ...], name: str) -> str | None:
    """The value of label `name` in sorted (name, value) pairs, or None."""
    for key, value in labels:
        if key == name:
            return value
    return None


@dataclass(frozen=True, slots=True)
class PodReading:
    """One engine instance's figures, windows applied; None where the series was absent.

    `labels` holds the identifying labels seen on its series (sorted pairs), such as
    `llm_d_ai_variant`, `model_name`, `engine`; `observed_at` is the newest sample's time.
    """

    namespace: str
    pod: str
    observed_at: float
    model_name: str = ''
    labels: tuple[tuple[str, str], ...] = ()
    kv_usage: float | None = None
    queue_length: float | None = None
    num_gpu_blocks: int | None = None
    block_size: int | None = None
    avg_input_tokens: float | None = None
    avg_output_tokens: float | None = None
    prefix_cache_hit_rate: float | None = None
    avg_ttft: float | None = None
    avg_itl: float | None = None
    running_requests: float | None = None
    arrival_rate: float | None = None
    ttft_histogram: LatencyHistogram | None = None
    """Requests of the last minute by TTFT (`collect.histograms`); None when not measured."""
    tpot_histogram: LatencyHistogram | None = None
    """Requests of the last minute by their own mean time per output token."""

    def label(self, name: str) -> str | None:
        return label_value(labels=self.labels, name=name)


@dataclass(frozen=True, slots=True)
class ModelReading:
    """Model-level figures: the EPP flow-control queue, arrival rate, request count."""

    model_id: str
    namespace: str
    observed_at: float
    queue_size: float | None = 0.0
    """0 without a flow-control queue (no series); None when its query failed."""
    queue_bytes: float | None = 0.0
    arrival_rate: float | None = None
    request_count: float | None = None
    """Successful requests over the retention period; None when it could not be read."""


@dataclass(frozen=True, slots=True)
class Reading:
    """Everything one source read in one cycle, sorted by (namespace, pod) / (namespace, model)."""

    pods: tuple[PodReading, ...] = ()
    models: tuple[ModelReading, ...] = ()
    errors: tuple[SourceError, ...] = ()
    dropped_non_finite: int = 0


@dataclass(frozen=True, slots=True)
class ModelScope:
    """One model the controller manages: what to read and over which retention period."""

    model_id: str
    namespace: str
    retention_period: float = 600.0
    latency_histograms: bool = False
    """Its analyzer reads the latency histograms (the predictive one): only then are they asked
    of Prometheus, one series per pod and bucket being most of a large fleet's answers."""


class MetricsSource(Protocol):
    """A source of readings (Prometheus, or pod scraping)."""

    async def read(self, *, scope: tuple[ModelScope, ...], now: float) -> Reading: ...
