"""Shared vocabulary of the simulator: traces, variant hardware specs, requests, results.

Why: the simulator's parts (trace loading, the vLLM replica model, the cluster and its control
loop, the policies, the report) are written and tested separately; these types are the contract
between them. Times are seconds of simulated time from the start of the trace (float); token
counts are ints.

Nothing here does I/O.
"""

from __future__ import annotations

import math
import operator
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, fields
from typing import Literal, Protocol

import numpy as np
import numpy.typing as npt

from llmscaler.domain.basics import Role
from llmscaler.domain.snapshot import Snapshot

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]
ObjectArray = npt.NDArray[np.object_]


def object_array(items: Sequence[object]) -> ObjectArray:
    """A 1-d numpy array of Python objects (tuples stay elements, not rows)."""
    out = np.empty(len(items), dtype=object)
    for i, item in enumerate(items):
        out[i] = item
    return out


@dataclass(frozen=True, slots=True)
class Trace:
    """A request trace: arrival times (s from 0, non-decreasing) and token lengths (>= 1)."""

    name: str
    arrivals: FloatArray
    input_tokens: IntArray
    output_tokens: IntArray
    skipped_rows: int = 0
    """Malformed rows skipped while loading (only when skipping was asked for)."""
    prefixes: ObjectArray | None = None
    """Per request, the chained hash ids of its prompt's blocks of `prefix_block` tokens (a
    sequence of ints, `SimRequest.prefix`; the readers give 64-bit `array`s), aligned with
    `arrivals`; None: no prompt is known to share anything (prefix caching never hits)."""
    prefix_block: int = 512
    """Tokens per hash id of `prefixes` (Mooncake's traces: 512)."""

    def __len__(self) -> int:
        return int(self.arrivals.shape[0])

    @property
    def duration(self) -> float:
        return float(self.arrivals[-1]) if len(self) else 0.0


@dataclass(frozen=True, slots=True)
class PerfModel:
    """Seconds one engine step of one vLLM replica (a TP group) lasts: a per-kernel roofline.

    A step runs the linear layers (every weight read once, FLOPs for every batched token) and
    then attention (every scheduled request's cached KV read, FLOPs for every query-key pair),
    one after the other on the GPU; each is bound by the larger of its memory time and its
    compute time. Around them come a fixed per-step cost (CPU scheduling, kernel launches, the
    TP all-reduces' latency) and the TP all-reduces' bytes:

        step = step_overhead + comm_per_token·T
             + max_p(weight_read + token_traffic·T, decode_per_seq·D + prefill_per_token·P)
             + max(kv_read_per_token·C, attention_per_pair·A)

    max_p(m, c) = (m^p + c^p)^(1/p) with p = `sharpness`: the plain max at p = inf; a finite p
    makes the linear layers' two bounds meet smoothly, as GEMMs near the ridge point reach
    neither peak (at m = c the linear layers take 2^(1/p) × either bound).

    D = decoding sequences (one token each), P = prefill tokens, T = D + P, C = context tokens
    read (Σ tokens already computed of every scheduled request), A = attention (query, key)
    pairs (a decoding request at c computed tokens: c + 1; a prefill chunk of n tokens after c:
    n·c + n(n+1)/2). All terms are seconds; `sim.hardware.stepmodel` derives them from the GPU's
    datasheet, the model's shape and the fitted efficiencies.

    With only the first four terms (the others 0) this is the linear step
    overhead + β·D + δ·P + κ·C, which small hand-checked tests use.
    """

    step_overhead: float
    decode_per_seq: float
    """Compute seconds per decoding sequence: linear-layer and LM-head FLOPs of one token."""
    prefill_per_token: float
    """Compute seconds per prefill token: linear-layer FLOPs of one token."""
    kv_read_per_token: float
    """Memory seconds per context token read by attention (KV bytes per token per GPU)."""
    weight_read: float = 0.0
    """Memory seconds to read the weights once (per GPU)."""
    token_traffic: float = 0.0
    """Memory seconds per batched token: activations between kernels and the new KV written."""
    attention_per_pair: float = 0.0
    """Compute seconds per attention (query, key) pair."""
    comm_per_token: float = 0.0
    """Seconds per batched token of the TP all-reduces (0 without tensor parallelism)."""
    sharpness: float = math.inf
    """p of the linear layers' smooth maximum (>= 1; inf: the plain max)."""

    def step_seconds(
        self,
        *,
        decode_seqs: int,
        prefill_tokens: int,
        context_tokens: int,
        attention_pairs: int | None = None,
    ) -> float:
        """One step's duration. `attention_pairs` None estimates them from the rest, exact for
        a decode-only step and for a single prefill chunk after `context_tokens` cached ones."""
        if attention_pairs is None:
            n = prefill_tokens
            attention_pairs = (
                decode_seqs + n * context_tokens + n * (n + 1) // 2
                if n
                else decode_seqs + context_tokens
            )
        tokens = decode_seqs + prefill_tokens
        memory = self.weight_read + self.token_traffic * tokens
        compute = self.decode_per_seq * decode_seqs + self.prefill_per_token * prefill_tokens
        high, low = (memory, compute) if memory >= compute else (compute, memory)
        p = self.sharpness
        linear = high if p == math.inf or low == 0 else high * (1 + (low / high) ** p) ** (1 / p)
        attention = max(
            self.kv_read_per_token * context_tokens, self.attention_per_pair * attention_pairs
        )
        return self.step_overhead + self.comm_per_token * tokens + linear + attention

    def decode_line(self, *, seqs: int, context: int) -> tuple[float, float, int]:
        """A run of decode-only steps as a line: (t0, a, h) such that the j-th step from now
        (j = 0, 1, …) over `seqs` sequences reading `context` + j·seqs tokens lasts t0 + a·j
        for every j < h (h = -1: for every j).

        Within such a run only the attention term changes; it switches at most once, from its
        compute bound to its memory bound, as the context grows (the memory time grows by
        kv_read_per_token per token, the compute time by attention_per_pair per pair, plus a
        fixed seqs pairs): h is the first step of the memory bound when the run starts on the
        compute bound.
        """
        n, kv, ap = seqs, self.kv_read_per_token, self.attention_per_pair
        t0 = self.step_seconds(
            decode_seqs=n, prefill_tokens=0, context_tokens=context, attention_pairs=context + n
        )
        if kv * context >= ap * (context + n):
            return t0, kv * n, -1  # the memory bound only gains as the context grows
        if kv <= ap:
            return t0, ap * n, -1

        # kv·(context + j·n) >= ap·(context + j·n + n) from j ≈ (ap·n/(kv − ap) − context)/n;
        # the loops settle it with the very comparison `step_seconds` makes.
        def memory_bound(j: int) -> bool:
            c = context + j * n
            return kv * c >= ap * (c + n)

        h = max(1, math.ceil((ap * n / (kv - ap) - context) / n))
        while h > 1 and memory_bound(h - 1):
            h -= 1
        while not memory_bound(h):
            h += 1
        return t0, ap * n, h


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
    prefix_caching: bool = False
    """Whether its engines keep vLLM's automatic prefix cache (`sim.vllm.prefix_cache`); off by
    default, so that runs without it stay as they were."""

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
running: the client gave up, see `sim.fleet.cluster`); refused by the replica (longer than its
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
    prefix: Sequence[int] | None = None
    """Chained hash ids of its prompt's blocks of `prefix_block` tokens: id i stands for the
    prompt's first (i + 1)·prefix_block tokens (the last block may be partial), so two prompts
    share their first m blocks exactly when their first m ids are equal. None: shares nothing."""
    prefix_block: int = 512
    cached_tokens: int = 0
    """Prompt tokens its (last) admission found in the replica's prefix cache."""
    kv_ready: int = 0
    """Prompt tokens whose KV comes with the request, computed elsewhere (a decode replica
    receiving a prefill replica's KV): its first admission starts with them computed."""

    @property
    def ttft(self) -> float:
        return self.first_token - self.arrival

    @property
    def mean_itl(self) -> float:
        """Mean inter-token latency; NaN for a single-token output (no inter-token gap)."""
        if self.output_tokens <= 1:
            return math.nan
        return (self.finished - self.first_token) / (self.output_tokens - 1)

    def __reduce__(self) -> tuple[type[SimRequest], tuple[object, ...]]:
        # A kept run crosses from a sweep's worker with every request: its fields as the
        # constructor's arguments pickle and load in under half the time of the default state.
        return SimRequest, _request_fields(self)


_request_fields = operator.attrgetter(*(f.name for f in fields(SimRequest)))


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
    """Seconds of replica existence per variant (creation to removal) until the work was done
    (`charged_until`): what is charged, cost = hours × $/h."""
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
    charged_until: float = math.nan
    """When the run's work was done (s; `sim.runner.charged_until`): replicas are charged until
    then (NaN: until `duration`). A trace cut from continuous traffic says nothing of the load
    after its end, and a policy is not charged for not knowing that it ends."""
    tail_replica_seconds: dict[str, float] = field(default_factory=dict)
    """Seconds of replica existence per variant after `charged_until`: reported, not charged."""


@dataclass(frozen=True, slots=True)
class ControlView:
    """What a policy sees at a control instant.

    `snapshot` is exactly what the controller would build from Prometheus at `now` (windows,
    scrape lag and all) and is the only input of the core policies' cycles. `replicas` is each
    variant's current target (the scale subresource's `spec.replicas`) and `ready` its ready
    replicas; baselines that read the cluster directly (the clairvoyant one) may use them too.
    `gateways` is what the controller's short poll reads straight from each model's gateway at
    `now`, by model group (`modelID|namespace`): requests arrived so far, and queued (the fast
    path for bursts counts on it).
    """

    now: float
    snapshot: Snapshot
    replicas: Mapping[str, int]
    ready: Mapping[str, int]
    gateways: Mapping[str, tuple[int, int]] = field(default_factory=dict)


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
