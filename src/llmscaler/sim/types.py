"""Shared vocabulary of the simulator: traces, variant hardware specs, requests, results.

Why: the simulator's parts (trace loading, the vLLM replica model, the cluster and its control
loop, the policies, the report) are written and tested separately; these types are the contract
between them. Times are seconds of simulated time from the start of the trace (float); token
counts are ints.

Nothing here does I/O.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Literal, Protocol

import numpy as np
import numpy.typing as npt

from llmscaler.model import Role, Snapshot

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]


@dataclass(frozen=True, slots=True)
class Trace:
    """A request trace: arrival times (s from 0, non-decreasing) and token lengths (>= 1)."""

    name: str
    arrivals: FloatArray
    input_tokens: IntArray
    output_tokens: IntArray
    skipped_rows: int = 0
    """Malformed rows skipped while loading (only when skipping was asked for)."""

    def __len__(self) -> int:
        return int(self.arrivals.shape[0])

    @property
    def duration(self) -> float:
        return float(self.arrivals[-1]) if len(self) else 0.0


@dataclass(frozen=True, slots=True)
class PerfModel:
    """Per-step latency of one vLLM replica (reference/vllm.md §5.1), per TP group.

    step = overhead + decode_per_seq × decoding sequences + prefill_per_token × prefill tokens
           + kv_read_per_token × context tokens read by attention (all scheduled requests)

    All in seconds. The context term is why ITL grows with load on top of β·B.
    """

    step_overhead: float
    decode_per_seq: float
    prefill_per_token: float
    kv_read_per_token: float

    def step_seconds(self, *, decode_seqs: int, prefill_tokens: int, context_tokens: int) -> float:
        return (
            self.step_overhead
            + self.decode_per_seq * decode_seqs
            + self.prefill_per_token * prefill_tokens
            + self.kv_read_per_token * context_tokens
        )


@dataclass(frozen=True, slots=True)
class VariantSpec:
    """One simulated variant: a model on one hardware configuration, with its cost and bounds."""

    name: str
    preset: str
    model_id: str
    accelerator: str
    gpus_per_replica: int
    price_per_gpu_hour: float
    num_gpu_blocks: int
    perf: PerfModel
    block_size: int = 16
    max_num_seqs: int = 256
    max_num_batched_tokens: int = 8192
    max_model_len: int = 8192
    startup_delay: float = 90.0
    min_replicas: int = 0
    max_replicas: int = 10
    initial_replicas: int = 1
    role: Role = 'both'
    namespace: str = 'default'
    model: str = ''
    """The scenario's name of the model this variant serves ('' = its `model_id`): several
    models may run in one fleet, each behind its own gateway (`model_name`)."""

    @property
    def model_name(self) -> str:
        """The name of the model this variant serves: `model`, or `model_id` when unnamed."""
        return self.model or self.model_id

    @property
    def cost_per_hour(self) -> float:
        """Dollars per replica-hour."""
        return self.price_per_gpu_hour * self.gpus_per_replica

    @property
    def kv_capacity_tokens(self) -> int:
        return self.num_gpu_blocks * self.block_size


Failure = Literal['', 'queue-timeout', 'replica-timeout', 'rejected']
"""Why a request failed: timed out in the gateway queue; timed out in a replica (waiting or
running: the client gave up, see `sim.cluster`); refused by the replica (longer than its
model or KV cache holds). Empty for a request that did not fail, or failed for a reason the
simulator did not record."""


@dataclass(slots=True, eq=False)
class SimRequest:
    """One request's life in the simulator; the simulator fills in the times as they happen.

    `first_token` is the time the first output token was produced (TTFT = first_token − arrival);
    `finished` the time the last one was. A failed request has `failed` set and `failure` says
    why; it has no finish time, except one whose client gave up during the engine step that
    would have finished it (`replica-timeout`).
    """

    rid: int
    arrival: float
    input_tokens: int
    output_tokens: int
    dispatched: float = math.nan
    first_token: float = math.nan
    finished: float = math.nan
    failed: bool = False
    failure: Failure = ''
    variant: str = ''
    replica: str = ''
    preemptions: int = 0
    model: str = ''
    """The model it asks for (`VariantSpec.model_name`); '' goes to a one-model fleet's."""

    @property
    def ttft(self) -> float:
        return self.first_token - self.arrival

    @property
    def mean_itl(self) -> float:
        """Mean inter-token latency; NaN for a single-token output (no inter-token gap)."""
        if self.output_tokens <= 1:
            return math.nan
        return (self.finished - self.first_token) / (self.output_tokens - 1)


@dataclass(frozen=True, slots=True)
class SLO:
    """Latency targets a request must meet to count as attained (seconds)."""

    ttft: float
    itl: float


@dataclass(frozen=True, slots=True)
class ScaleEvent:
    """One change of a variant's replica target, applied at `time`."""

    time: float
    variant: str
    before: int
    after: int
    reason: str


@dataclass(slots=True)
class Timeline:
    """Per-sample series of one run, sampled every `SimResult.sample_interval` seconds.

    `replicas[v]` counts replicas of variant v that exist (cost accrues), `ready[v]` the ready
    ones; `kv_usage` and `waiting` are fleet means/sums of the replica gauges; `gateway_queue`
    is the EPP flow-control queue (of every model). The other series are only filled where they
    mean something: `gateway_queues[m]` per model in a fleet of several models; with a GPU
    inventory, `gpus[a]` the GPUs of accelerator type a bound to replicas and `unbound[v]` the
    replicas of variant v waiting for GPUs (created, not counted in `replicas`).
    """

    times: list[float] = field(default_factory=list)
    replicas: dict[str, list[int]] = field(default_factory=dict)
    ready: dict[str, list[int]] = field(default_factory=dict)
    kv_usage: list[float] = field(default_factory=list)
    waiting: list[int] = field(default_factory=list)
    running: list[int] = field(default_factory=list)
    gateway_queue: list[int] = field(default_factory=list)
    gateway_queues: dict[str, list[int]] = field(default_factory=dict)
    gpus: dict[str, list[int]] = field(default_factory=dict)
    unbound: dict[str, list[int]] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class GpuWait:
    """A replica that waited for GPUs: created at `asked` (the scale-up), bound to GPUs at
    `bound` (NaN when it never was); `until` is `bound`, or the time it was removed while
    waiting, or the end of the run."""

    variant: str
    replica: str
    asked: float
    bound: float
    until: float

    @property
    def seconds(self) -> float:
        return self.until - self.asked


@dataclass(slots=True)
class SimResult:
    """Everything one policy's run produced, for the report."""

    policy: str
    trace: str
    duration: float
    requests: list[SimRequest]
    variants: tuple[VariantSpec, ...]
    replica_seconds: dict[str, float]
    """Seconds of replica existence per variant (creation to removal): cost = hours × $/h."""
    events: list[ScaleEvent]
    timeline: Timeline
    sample_interval: float
    wall_seconds: float = 0.0
    inventory: dict[str, int] = field(default_factory=dict)
    """GPUs per accelerator type the fleet could use (empty: no limit)."""
    gpu_waits: list[GpuWait] = field(default_factory=list)
    """Replicas that waited for GPUs, in the order they were created."""
    notes: list[str] = field(default_factory=list)
    """What the report should say about this run beyond its figures (one line each)."""


@dataclass(frozen=True, slots=True)
class ControlView:
    """What a policy sees at a control instant.

    `snapshot` is exactly what the controller would build from Prometheus at `now` (windows,
    scrape lag and all) and is the only input of the core policies. `replicas` is each variant's
    current target (the scale subresource's `spec.replicas`) and `ready` its ready replicas;
    baselines that read the cluster directly (the clairvoyant one) may use them too.
    """

    now: float
    snapshot: Snapshot
    replicas: Mapping[str, int]
    ready: Mapping[str, int]


class Policy(Protocol):
    """A scaling policy under test: the core with some configuration, or a baseline.

    `targets` runs every control cycle and returns the desired replicas per variant name (variants
    it leaves out keep their target). `wake` runs on the short scale-from-zero period and returns
    targets for variants to wake (usually empty).
    """

    @property
    def name(self) -> str: ...

    def targets(self, *, view: ControlView) -> dict[str, int]: ...

    def wake(self, *, view: ControlView) -> dict[str, int]: ...
