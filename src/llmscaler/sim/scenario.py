"""Scenarios for `llmscaler simulate`: variants, workload, SLO, policies and loop settings.

Why: a user compares policies on *their* fleet and traffic; a scenario file says which. Without
one, the built-in default is a conversation-like workload (the Azure 2023 conversation statistics)
whose load steps up and spikes, served by Llama-3.1-8B on H100 ($3.90/h) and L40S ($1.90/h), sized
to need several replicas of both.

A scenario file is YAML (or JSON):

```yaml
name: my-fleet
variants:
  - {name: h100, preset: llama-3.1-8b-h100, max_replicas: 8}
  - {name: l40s, preset: llama-3.1-8b-l40s, max_replicas: 12, price_per_gpu_hour: 1.5}
workload:
  synthetic: {preset: azure-conv, duration: 3600, rate: 12}
  # or: trace: {path: trace.csv, rate_scale: 2.0, start: 0, duration: 1800, skip_bad: false}
slo: {ttft: 1.0, itl: 0.07}      # optional: derived from the performance model when absent
policies: [default, saturation-token, keda-queue, clairvoyant]
settings: {cycle: 30, scrape_lag: 10, request_timeout: 60}
initial: {h100: 2, l40s: 0}      # replicas at t = 0 (default: each variant's initial_replicas)
# or: warm_start: true           # start at the fleet the first minutes need (below)
seed: 1
```

The document's fields and the command line's changes to it are in `sim.scenario_document`.

Policy names: `default` and `saturation-percentage` (the core's default configuration),
`saturation-token` (the token-based analyzer), `config:FILE` (the core with the settings and
ConfigMaps of FILE, as `llmscaler decide --config` reads them), `keda-queue`, `static:N` or
`static:VARIANT=N,...`, and `clairvoyant`.

Default SLO (when the scenario gives none), derived from the slowest variant's performance model
at idle: TTFT ≤ 5 × the time of one prefill of the workload's p90 prompt, and mean ITL ≤ 3 × one
decode step of a single sequence at the workload's mean context (3 is WVA's SLO multiplier,
a target utilisation of about 2/3), each rounded up to two significant figures.

Start fleet: each variant starts with its `initial_replicas` Ready replicas (1 unless the preset
or the variant says otherwise), or with what `initial` gives for it. With `warm_start` every
policy starts with the fleet the first minutes need (`warm_fleet`): the cheapest mix of variants
whose clairvoyant capacity (`clairvoyant.calibrate`: req/s one replica serves within the SLO)
covers the peak 60-second arrival rate of windows that start within the first WARM_WINDOW
seconds plus the largest start-up delay: the load that arrives before a replica any policy asks
for at the start can be ready, and the minutes a reactive policy takes to see it. So a short
trace measures the steady policy, not how it climbs from a cold start.

What fails: a malformed file, an unknown preset, policy, variant or field gives a
`ScenarioError` with one line naming the file, the field and the valid choices; so does an
explicit `initial_replicas` or `initial` count outside the variant's [min_replicas,
max_replicas], an `initial` naming no variant, or `initial` together with `warm_start`.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np
import pydantic

from llmscaler.config import file as config_file
from llmscaler.config.errors import ConfigFileError
from llmscaler.config.types import Config, ModelConfig, SaturationConfig
from llmscaler.sim import clairvoyant, policies, presets, synthetic, trace
from llmscaler.sim.runner import SimSettings, check_settings
from llmscaler.sim.scenario_document import DEFAULT_DOCUMENT as DEFAULT_DOCUMENT
from llmscaler.sim.scenario_document import DEFAULT_POLICIES as DEFAULT_POLICIES
from llmscaler.sim.scenario_document import ScenarioError as ScenarioError
from llmscaler.sim.scenario_document import (
    ScenarioModel,
    SyntheticModel,
    WorkloadModel,
    describe_error,
)
from llmscaler.sim.scenario_document import VariantModel as VariantModel
from llmscaler.sim.scenario_document import describe_workload as describe_workload
from llmscaler.sim.scenario_document import read_document as read_document
from llmscaler.sim.scenario_document import with_overrides as with_overrides
from llmscaler.sim.types import SLO, Policy, Trace, VariantSpec

WARM_WINDOW = 300.0
"""Seconds after the largest start-up delay whose peak load the warm start fleet covers."""

FIXED_POLICIES = (
    'default',
    'saturation-percentage',
    'saturation-token',
    'keda-queue',
    'clairvoyant',
)


@dataclass(frozen=True, slots=True)
class Scenario:
    """A validated scenario, ready to run."""

    name: str
    variants: tuple[VariantSpec, ...]
    workload: WorkloadModel
    policies: tuple[str, ...]
    settings: SimSettings
    slo: SLO | None = None
    seed: int = 1
    source: str = '<built-in>'
    document: dict[str, Any] = field(default_factory=dict)
    warm_start: bool = False

    @property
    def workload_text(self) -> str:
        """The workload in a few words (`describe_workload`)."""
        return describe_workload(workload=self.workload)


# Types and choices of every setting (`router: random` names the routers there are), checked
# when the scenario is read rather than when the run starts.
_SIM_SETTINGS = pydantic.TypeAdapter(SimSettings)


def _settings(values: dict[str, Any], where: str) -> SimSettings:
    known = set(SimSettings.__dataclass_fields__)
    unknown = sorted(set(values) - known)
    if unknown:
        raise ScenarioError(
            f'{where}: settings.{unknown[0]}: unknown setting; valid: {", ".join(sorted(known))}'
        )
    try:
        settings = _SIM_SETTINGS.validate_python(values)
    except pydantic.ValidationError as exc:
        first = exc.errors(include_url=False)[0]
        field = '.'.join(str(p) for p in first['loc'])
        raise ScenarioError(f'{where}: settings.{field}: {first["msg"]}') from None
    try:
        check_settings(settings=settings)
    except ValueError as exc:  # a range the types do not say (cycle > 0, ...)
        raise ScenarioError(f'{where}: {exc}') from None
    return settings


def _variant(model: VariantModel, *, index: int, namespace: str, where: str) -> VariantSpec:
    overrides = {
        k: v for k, v in model.model_dump().items() if k not in ('name', 'preset') and v is not None
    }
    try:
        spec = presets.preset(name=model.preset, variant_name=model.name)
    except ValueError as exc:
        raise ScenarioError(f'{where}: variants.{index}.preset: {exc}') from None
    return replace(spec, namespace=namespace, **overrides)


def from_document(*, document: dict[str, Any], where: str = '<built-in>') -> Scenario:
    """Validate a scenario document (the decoded YAML)."""
    try:
        model = ScenarioModel.model_validate(document)
    except pydantic.ValidationError as exc:
        raise ScenarioError(describe_error(exc, where)) from None
    if not model.variants:
        raise ScenarioError(f'{where}: variants: at least one variant is needed')
    names = [v.name for v in model.variants]
    if len(set(names)) != len(names):
        raise ScenarioError(f'{where}: variants: duplicate variant names {sorted(names)}')
    variants = tuple(
        _variant(v, index=i, namespace=model.namespace, where=where)
        for i, v in enumerate(model.variants)
    )
    if model.model_id is not None:
        variants = tuple(replace(v, model_id=model.model_id) for v in variants)
    if len({v.model_id for v in variants}) != 1:
        raise ScenarioError(
            f'{where}: variants: all variants must serve one model; presets give '
            f'{sorted({v.model_id for v in variants})}'
        )
    if model.workload.synthetic is not None and model.workload.trace is not None:
        raise ScenarioError(f'{where}: workload: give either synthetic or trace, not both')
    workload = model.workload
    if workload.synthetic is None and workload.trace is None:
        workload = WorkloadModel(synthetic=SyntheticModel())
    for index, name in enumerate(model.policies):
        check_policy_name(name=name, variants=names, where=f'{where}: policies.{index}')
    for index, (given, spec) in enumerate(zip(model.variants, variants, strict=True)):
        if given.initial_replicas is not None:
            _check_initial(
                spec=spec, count=given.initial_replicas, field=f'{where}: variants.{index}'
            )
    if model.initial is not None:
        if model.warm_start:
            raise ScenarioError(f'{where}: initial: give initial or warm_start, not both')
        variants = _with_initial(variants=variants, initial=model.initial, where=where)
    return Scenario(
        name=model.name,
        variants=variants,
        workload=workload,
        policies=tuple(model.policies),
        settings=_settings(model.settings, where),
        slo=SLO(ttft=model.slo.ttft, itl=model.slo.itl) if model.slo is not None else None,
        seed=model.seed,
        source=where,
        document=model.model_dump(mode='json'),
        warm_start=model.warm_start,
    )


def _check_initial(*, spec: VariantSpec, count: int, field: str) -> None:
    if not spec.min_replicas <= count <= spec.max_replicas:
        raise ScenarioError(
            f'{field}.initial_replicas: {count} is outside [{spec.min_replicas}, '
            f'{spec.max_replicas}] (min_replicas, max_replicas of {spec.name})'
        )


def _with_initial(
    *, variants: tuple[VariantSpec, ...], initial: Mapping[str, int], where: str
) -> tuple[VariantSpec, ...]:
    known = {v.name: v for v in variants}
    for name in sorted(initial):
        spec = known.get(name)
        if spec is None:
            raise ScenarioError(
                f'{where}: initial.{name}: no such variant; variants: {", ".join(sorted(known))}'
            )
        count = initial[name]
        if not spec.min_replicas <= count <= spec.max_replicas:
            raise ScenarioError(
                f'{where}: initial.{name}: {count} is outside [{spec.min_replicas}, '
                f'{spec.max_replicas}] (min_replicas, max_replicas)'
            )
    return tuple(
        replace(v, initial_replicas=initial[v.name]) if v.name in initial else v for v in variants
    )


def load(*, path: Path) -> Scenario:
    """Read a scenario file; `ScenarioError` with one line on any problem."""
    return from_document(document=read_document(path=path), where=str(path))


def default() -> Scenario:
    """The built-in scenario (`make run`)."""
    return from_document(document=DEFAULT_DOCUMENT)


def check_policy_name(*, name: str, variants: Sequence[str], where: str) -> None:
    """Raise `ScenarioError` listing the valid names when `name` is not a policy."""
    if name in FIXED_POLICIES or name.startswith('config:'):
        return
    if name.startswith('static:'):
        try:
            policies.parse_static(text=name, variants=variants)
        except ValueError as exc:
            raise ScenarioError(f'{where}: {exc}') from None
        return
    valid = ', '.join((*FIXED_POLICIES, 'static:N', 'static:VARIANT=N,...', 'config:FILE'))
    raise ScenarioError(f'{where}: unknown policy {name!r}; valid: {valid}')


def build_trace(*, scenario: Scenario) -> Trace:
    """The scenario's workload as a trace (`trace.TraceError`/`ScenarioError` on bad input)."""
    spec = scenario.workload.synthetic
    if spec is not None:
        try:
            synth = synthetic.preset(
                name=spec.preset, duration=spec.duration, rate=spec.rate, diurnal=spec.diurnal
            )
        except ValueError as exc:
            raise ScenarioError(f'{scenario.source}: workload.synthetic.preset: {exc}') from None
        if spec.events:
            events = tuple(
                synthetic.RateEvent(start=s, duration=d, multiplier=m) for s, d, m in spec.events
            )
            synth = replace(synth, envelope=replace(synth.envelope, events=events))
        return synthetic.generate(spec=synth, seed=scenario.seed)
    source = scenario.workload.trace
    assert source is not None  # from_document guarantees one of the two
    return trace.load_trace(
        path=Path(source.path),
        fmt=source.format,
        skip_bad=source.skip_bad,
        start=source.start,
        duration=source.duration,
        rate_scale=source.rate_scale,
        seed=scenario.seed,
    )


def round_up(value: float) -> float:
    """Round up to two significant figures."""
    if value <= 0 or not math.isfinite(value):
        return value
    scale = 10.0 ** (math.floor(math.log10(value)) - 1)
    return float(math.ceil(value / scale - 1e-9) * scale)


def derive_slo(*, variants: Sequence[VariantSpec], workload: Trace) -> SLO:
    """Default SLO from the slowest variant at idle (see the module docstring)."""
    p90_input = int(np.percentile(workload.input_tokens, 90)) if len(workload) else 1024
    mean_context = (
        float(np.mean(workload.input_tokens) + np.mean(workload.output_tokens) / 2)
        if len(workload)
        else 1024.0
    )
    ttft = 0.0
    itl = 0.0
    for spec in variants:
        remaining, prefill = p90_input, 0.0
        while remaining > 0:  # chunked prefill: one step per budget-sized chunk
            chunk = min(remaining, spec.max_num_batched_tokens)
            prefill += spec.perf.step_seconds(
                decode_seqs=0, prefill_tokens=chunk, context_tokens=p90_input - remaining
            )
            remaining -= chunk
        decode = spec.perf.step_seconds(
            decode_seqs=1, prefill_tokens=0, context_tokens=round(mean_context)
        )
        ttft = max(ttft, 5 * prefill)
        itl = max(itl, 3 * decode)
    return SLO(ttft=round_up(ttft), itl=round_up(itl))


def core_config(*, name: str) -> Config:
    """The core configuration a fixed policy name stands for."""
    if name == 'saturation-token':
        return Config(default=ModelConfig(saturation=SaturationConfig(analyzer_name='saturation')))
    return Config()


def needs_capacities(*, scenario: Scenario) -> bool:
    """Whether running `scenario` calibrates the variants' capacities (clairvoyant, warm start)."""
    return scenario.warm_start or 'clairvoyant' in scenario.policies


def calibrate_capacities(
    *,
    scenario: Scenario,
    workload: Trace,
    slo: SLO,
    progress: Callable[[float], None] | None = None,
) -> dict[str, float]:
    """Each variant's clairvoyant capacity (`clairvoyant.calibrate`), in req/s.

    `progress(fraction_done)` is called now and then over all the variants.
    """
    count = len(scenario.variants)
    capacities: dict[str, float] = {}
    for index, spec in enumerate(scenario.variants):

        def update(done: float, index: int = index) -> None:
            if progress is not None:
                progress((index + done) / count)

        capacities[spec.name] = clairvoyant.calibrate(
            spec=spec, trace=workload, slo=slo, seed=scenario.seed, progress=update
        )
    return capacities


def warm_fleet(
    *, variants: Sequence[VariantSpec], workload: Trace, capacities: Mapping[str, float]
) -> dict[str, int]:
    """The fleet the first minutes need (see the module docstring), per variant name."""
    delay = max((v.startup_delay for v in variants), default=0.0)
    rates = clairvoyant.sliding_rates(arrivals=workload.arrivals)
    last = min(rates.shape[0], math.floor(delay + WARM_WINDOW) + 1)
    peak = float(rates[:last].max()) if last > 0 else 0.0
    return clairvoyant.cheapest_mix(required=peak, variants=variants, capacities=capacities)


def with_start_fleet(*, scenario: Scenario, initial: Mapping[str, int]) -> Scenario:
    """`scenario` with its variants starting at `initial` replicas (variants left out keep
    theirs); the counts must lie within each variant's bounds (`warm_fleet`'s do)."""
    variants = _with_initial(variants=scenario.variants, initial=initial, where=scenario.source)
    return replace(scenario, variants=variants)


def build_policies(
    *,
    scenario: Scenario,
    workload: Trace,
    slo: SLO,
    capacities: Mapping[str, float] | None = None,
) -> list[Policy]:
    """Instantiate the scenario's policies in the order given. The clairvoyant policy uses
    `capacities` when given, else calibrates them (`calibrate_capacities`)."""
    names = [v.name for v in scenario.variants]
    built: list[Policy] = []
    for name in scenario.policies:
        if name in ('default', 'saturation-percentage', 'saturation-token'):
            built.append(policies.CorePolicy(name=name, config=core_config(name=name)))
        elif name.startswith('config:'):
            path = name.removeprefix('config:')
            try:
                config, errors = config_file.load_config_file(path=path)
            except ConfigFileError as exc:
                raise ScenarioError(f'policy {name}: {exc}') from None
            fatal = [e for e in errors if not e.warning]
            if fatal:
                raise ScenarioError(f'policy {name}: {fatal[0]}')
            built.append(policies.CorePolicy(name=name, config=config))
        elif name == 'keda-queue':
            built.append(policies.KedaQueuePolicy())
        elif name.startswith('static:'):
            built.append(policies.parse_static(text=name, variants=names))
        elif name == 'clairvoyant':
            if capacities is None:
                capacities = calibrate_capacities(scenario=scenario, workload=workload, slo=slo)
            built.append(
                clairvoyant.ClairvoyantPolicy(
                    trace=workload,
                    variants=scenario.variants,
                    slo=slo,
                    cycle=scenario.settings.cycle,
                    capacities=capacities,
                )
            )
        else:
            check_policy_name(name=name, variants=names, where='policies')
    return built
