"""The record type of a published vLLM measurement (sim/hardware/published.py holds the records).

Why: the replica model is only as good as the numbers it reproduces. Each record is one
published figure with the setup it was measured in (model, GPU, TP, weight format, vLLM
version and notable flags), the workload (lengths, and how they are known), the load (a
Poisson rate, a concurrency, a batch, all prompts at once), which statistic it is, and how it
was read (printed by a benchmark tool, stated loosely in prose, derived by us, a published fit
evaluated at a point). docs/fidelity-sources.md says what each source is and how far to trust it.

What fails: constructing a record that is incomplete or inconsistent (a non-positive value, a
unit that does not fit the figure, a length basis that says "unstated" with a number or the
reverse, a load without the value its kind needs) raises ValueError at import, so a bad row
never reaches a fit.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum
from types import MappingProxyType

from llmscaler.sim.hardware.datasheets import GPUS, MODELS, Precision, same_shape


class Figure(StrEnum):
    """What was measured."""

    TTFT = 'ttft'
    """Time to first token, from the client sending the request."""
    TPOT = 'tpot'
    """A request's decode time over its output tokens after the first (vllm bench's TPOT)."""
    ITL = 'itl'
    """Gap between consecutive streamed outputs (one decode step unless steps are batched)."""
    OUTPUT_THROUGHPUT = 'output_throughput'
    """Generated tokens per second over the run."""
    REQUEST_THROUGHPUT = 'request_throughput'
    """Completed requests per second over the run."""


class Unit(StrEnum):
    MS = 'ms'
    TOKENS_PER_S = 'tokens/s'
    REQUESTS_PER_S = 'requests/s'


UNIT_OF: Mapping[Figure, Unit] = MappingProxyType(
    {
        Figure.TTFT: Unit.MS,
        Figure.TPOT: Unit.MS,
        Figure.ITL: Unit.MS,
        Figure.OUTPUT_THROUGHPUT: Unit.TOKENS_PER_S,
        Figure.REQUEST_THROUGHPUT: Unit.REQUESTS_PER_S,
    }
)


class Statistic(StrEnum):
    MEAN = 'mean'
    MEDIAN = 'median'
    P99 = 'p99'
    RUN = 'run'
    """A throughput over the whole run."""
    FIT = 'fit'
    """A published linear fit evaluated at this record's load."""
    UNSPECIFIED = 'unspecified'
    """The source does not say which statistic it printed."""


class Provenance(StrEnum):
    PRINTED = 'printed'
    """Printed by a benchmark tool or in a results table, copied as is."""
    STATED_APPROX = 'stated-approx'
    """A rounded number in prose ("about 75 tokens/s")."""
    DERIVED = 'derived'
    """Computed by us from published numbers (the notes say how)."""
    FIT = 'fit'
    """A published fit (not a measurement at this point) evaluated by us."""


class Basis(StrEnum):
    """How a workload's mean token length is known."""

    FIXED = 'fixed'
    """Every request has exactly this length (random dataset, --ignore-eos, range ratio 0)."""
    STATED_MEAN = 'stated-mean'
    DERIVED_MEAN = 'derived-mean'
    """Computed from published totals (e.g. output tokens/s ÷ requests/s)."""
    ESTIMATED_MEAN = 'estimated-mean'
    """Not published for this run; estimated from a comparable published run (see notes)."""
    UNSTATED = 'unstated'


class LoadKind(StrEnum):
    SINGLE = 'single-request'
    """One request in flight at a time."""
    CONCURRENCY = 'concurrency'
    """Closed loop with `value` requests in flight."""
    POISSON_RATE = 'poisson-rate'
    """Open loop, Poisson arrivals at `value` requests/s."""
    BATCH = 'batch'
    """A decode step over `value` running sequences."""
    ALL_AT_ONCE = 'all-at-once'
    """All `value` prompts sent at t = 0 (request rate inf): saturation throughput."""
    MLPERF_SERVER = 'mlperf-server'
    """MLPerf Server scenario: the highest Poisson rate meeting its latency bounds."""


class Regime(StrEnum):
    """The load regime a record checks (the validation table wants each one)."""

    LIGHT = 'light-load'
    MODERATE = 'moderate-load'
    SATURATION = 'saturation'
    LONG_PROMPT = 'long-prompt'


LONG_PROMPT_TOKENS = 8192


@dataclass(frozen=True, slots=True)
class Source:
    title: str
    url: str
    date: str
    """YYYY, YYYY-MM or YYYY-MM-DD as published."""
    publisher: str


@dataclass(frozen=True, slots=True)
class Setup:
    model_id: str
    """A key of hardware.MODELS."""
    gpu: str
    """A key of hardware.GPUS."""
    tp: int
    weights: Precision
    kv_cache: Precision | None
    """None when the source does not say (vLLM's default is the weights' 16-bit type)."""
    vllm_version: str | None
    engine: str
    """Notable engine settings (flags, defaults that matter), as published."""


@dataclass(frozen=True, slots=True)
class Workload:
    name: str
    input_tokens: float | None
    input_basis: Basis
    output_tokens: float | None
    output_basis: Basis
    note: str = ''


@dataclass(frozen=True, slots=True)
class Load:
    kind: LoadKind
    value: float | None = None


@dataclass(frozen=True, slots=True)
class Measurement:
    """One published figure with its setup; see the module docstring."""

    key: str
    source: Source
    setup: Setup
    workload: Workload
    load: Load
    figure: Figure
    statistic: Statistic
    value: float
    unit: Unit
    provenance: Provenance
    uncertainty: float
    """Relative reading uncertainty: 0 for a printed number or a fit evaluated exactly, the
    rounding or reading error otherwise. It says nothing of run-to-run noise or of a fit's own
    error, which the sources do not report."""
    notes: str

    def __post_init__(self) -> None:
        problems = _problems(self)
        if problems:
            raise ValueError(f'published record {self.key!r}: {"; ".join(problems)}')


def _problems(m: Measurement) -> list[str]:
    out: list[str] = []
    if not m.key or not m.source.url.startswith('https://') or not m.source.title:
        out.append('needs a key, a source title and an https URL')
    if not m.source.date[:4].isdigit():
        out.append(f'source date {m.source.date!r} does not start with a year')
    if m.setup.model_id not in MODELS:
        out.append(f'unknown model {m.setup.model_id!r}')
    if m.setup.gpu not in GPUS:
        out.append(f'unknown GPU {m.setup.gpu!r}')
    if m.setup.tp < 1:
        out.append(f'TP {m.setup.tp} < 1')
    if not (math.isfinite(m.value) and m.value > 0):
        out.append(f'value {m.value} is not positive')
    if UNIT_OF[m.figure] is not m.unit:
        out.append(f'{m.figure} is in {UNIT_OF[m.figure]}, not {m.unit}')
    if not 0 <= m.uncertainty < 1:
        out.append(f'uncertainty {m.uncertainty} outside [0, 1)')
    if m.provenance is Provenance.PRINTED and m.uncertainty != 0:
        out.append('a printed number is read exactly (uncertainty 0)')
    if m.provenance in (Provenance.STATED_APPROX, Provenance.DERIVED) and m.uncertainty == 0:
        out.append(f'a {m.provenance} number needs its reading uncertainty')
    for what, tokens, basis in (
        ('input', m.workload.input_tokens, m.workload.input_basis),
        ('output', m.workload.output_tokens, m.workload.output_basis),
    ):
        if (tokens is None) != (basis is Basis.UNSTATED):
            out.append(f'{what} length {tokens} does not match its basis {basis}')
        if tokens is not None and not tokens >= 1:
            out.append(f'{what} length {tokens} < 1')
    needs_value = m.load.kind not in (LoadKind.SINGLE, LoadKind.MLPERF_SERVER)
    if needs_value != (m.load.value is not None and m.load.value > 0):
        out.append(f'load {m.load.kind} needs {"a positive" if needs_value else "no"} value')
    if not m.notes:
        out.append('needs notes on how it was read')
    return out


def regime(m: Measurement) -> Regime:
    """The regime `m` checks: a long prompt first, then by its load."""
    if m.workload.input_tokens is not None and m.workload.input_tokens >= LONG_PROMPT_TOKENS:
        return Regime.LONG_PROMPT
    kind, value = m.load.kind, m.load.value
    if kind is LoadKind.SINGLE or (kind in (LoadKind.CONCURRENCY, LoadKind.BATCH) and value == 1):
        return Regime.LIGHT
    if kind in (LoadKind.ALL_AT_ONCE, LoadKind.MLPERF_SERVER):
        return Regime.SATURATION
    return Regime.MODERATE


PRESET_SETUPS: Mapping[str, tuple[str, str, int]] = MappingProxyType(
    {
        'llama-3.1-8b-h100': ('meta-llama/Llama-3.1-8B-Instruct', 'H100', 1),
        'llama-3.1-8b-a100': ('meta-llama/Llama-3.1-8B-Instruct', 'A100', 1),
        'llama-3.1-8b-l40s': ('meta-llama/Llama-3.1-8B-Instruct', 'L40S', 1),
        'llama-3.1-8b-l4': ('meta-llama/Llama-3.1-8B-Instruct', 'L4', 1),
        'llama-3.1-70b-h100-tp4': ('meta-llama/Llama-3.1-70B-Instruct', 'H100', 4),
        'llama-3.1-70b-h100-tp8': ('meta-llama/Llama-3.1-70B-Instruct', 'H100', 8),
    }
)
"""The presets' (model, GPU, TP), as in sim/hardware/presets.py."""

_GPU_FAMILY = {'A100-40GB': 'A100', 'H100-PCIe': 'H100'}


def preset_match(m: Measurement) -> tuple[str, bool] | None:
    """The preset `m` speaks for and whether exactly (same shape, GPU, TP, BF16 weights), or
    None. A relative (a 40 GB A100, FP8 weights) counts as inexact."""
    family = _GPU_FAMILY.get(m.setup.gpu, m.setup.gpu)
    for name, (model_id, gpu, tp) in sorted(PRESET_SETUPS.items()):
        if tp != m.setup.tp or family != gpu:
            continue
        if not same_shape(MODELS[model_id], MODELS[m.setup.model_id]):
            continue
        exact = m.setup.gpu == gpu and m.setup.weights is Precision.BF16
        return name, exact
    return None
