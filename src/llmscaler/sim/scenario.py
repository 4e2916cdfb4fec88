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
settings: {cycle: 30, scrape_lag: 10}
seed: 1
```

Policy names: `default` and `saturation-percentage` (the core's default configuration),
`saturation-token` (the token-based analyzer), `config:FILE` (the core with the settings and
ConfigMaps of FILE, as `llmscaler decide --config` reads them), `keda-queue`, `static:N` or
`static:VARIANT=N,...`, and `clairvoyant`.

Default SLO (when the scenario gives none), derived from the slowest variant's performance model
at idle: TTFT ≤ 5 × the time of one prefill of the workload's p90 prompt, and mean ITL ≤ 3 × one
decode step of a single sequence at the workload's mean context (3 is WVA's SLO multiplier,
a target utilisation of about 2/3), each rounded up to two significant figures.

What fails: a malformed file, an unknown preset, policy, variant or field gives a
`ScenarioError` with one line naming the file, the field and the valid choices.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Literal

import numpy as np
import pydantic

from llmscaler.config import file as config_file
from llmscaler.config.errors import ConfigFileError
from llmscaler.config.types import Config, ModelConfig, SaturationConfig
from llmscaler.config.yaml_loader import FILE_LIMITS, YamlProblem, load_yaml
from llmscaler.sim import clairvoyant, policies, presets, synthetic, trace
from llmscaler.sim.runner import SimSettings, check_settings
from llmscaler.sim.types import SLO, Policy, Trace, VariantSpec

DEFAULT_POLICIES = ('default', 'keda-queue', 'clairvoyant')
FIXED_POLICIES = (
    'default',
    'saturation-percentage',
    'saturation-token',
    'keda-queue',
    'clairvoyant',
)


class ScenarioError(Exception):
    """One line: `<where>: <field>: <why>`."""


class _Strict(pydantic.BaseModel):
    model_config = pydantic.ConfigDict(extra='forbid', frozen=True)


class VariantModel(_Strict):
    name: str
    preset: str
    min_replicas: int | None = pydantic.Field(default=None, ge=0)
    max_replicas: int | None = pydantic.Field(default=None, ge=0)
    initial_replicas: int | None = pydantic.Field(default=None, ge=0)
    startup_delay: float | None = pydantic.Field(default=None, ge=0)
    price_per_gpu_hour: float | None = pydantic.Field(default=None, ge=0)
    num_gpu_blocks: int | None = pydantic.Field(default=None, gt=0)
    max_num_seqs: int | None = pydantic.Field(default=None, gt=0)
    max_num_batched_tokens: int | None = pydantic.Field(default=None, gt=0)


class SyntheticModel(_Strict):
    preset: str = 'azure-conv'
    duration: float = pydantic.Field(default=3600.0, gt=0)
    rate: float | None = pydantic.Field(default=None, gt=0)
    diurnal: bool = False
    events: list[tuple[float, float, float]] = []


class TraceModel(_Strict):
    path: str
    format: Literal['auto', 'azure', 'csv', 'jsonl'] = 'auto'
    rate_scale: float = pydantic.Field(default=1.0, gt=0)
    start: float | None = pydantic.Field(default=None, ge=0)
    duration: float | None = pydantic.Field(default=None, gt=0)
    skip_bad: bool = False


class WorkloadModel(_Strict):
    synthetic: SyntheticModel | None = None
    trace: TraceModel | None = None


class SLOModel(_Strict):
    ttft: float = pydantic.Field(gt=0)
    itl: float = pydantic.Field(gt=0)


class ScenarioModel(_Strict):
    name: str = 'scenario'
    model_id: str | None = None
    namespace: str = 'default'
    variants: list[VariantModel]
    workload: WorkloadModel = WorkloadModel()
    slo: SLOModel | None = None
    policies: list[str] = list(DEFAULT_POLICIES)
    settings: dict[str, Any] = {}
    seed: int = 1


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


# The default load: about 2.4x the Azure conversation rate with a 20-minute step to 2x that and a
# 3-minute spike, so both the scale-up lag and the scale-down are exercised within an hour.
DEFAULT_DOCUMENT: dict[str, Any] = {
    'name': 'default: conversation-like load on Llama-3.1-8B, H100 and L40S',
    'variants': [
        {'name': 'h100', 'preset': 'llama-3.1-8b-h100', 'max_replicas': 8, 'initial_replicas': 1},
        {'name': 'l40s', 'preset': 'llama-3.1-8b-l40s', 'max_replicas': 12, 'initial_replicas': 1},
    ],
    'workload': {
        'synthetic': {
            'preset': 'azure-conv',
            'duration': 3600.0,
            'rate': 13.0,
            'events': [(1200.0, 1200.0, 2.0), (2800.0, 180.0, 2.5)],
        }
    },
    'policies': list(DEFAULT_POLICIES),
    'seed': 1,
}


def _describe(error: pydantic.ValidationError, where: str) -> str:
    first = error.errors(include_url=False)[0]
    path = '.'.join(str(p) for p in first['loc']) or '(top level)'
    return f'{where}: {path}: {first["msg"]}'


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
        raise ScenarioError(_describe(exc, where)) from None
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
    )


def load(*, path: Path) -> Scenario:
    """Read a scenario file; `ScenarioError` with one line on any problem."""
    return from_document(document=read_document(path=path), where=str(path))


def read_document(*, path: Path) -> dict[str, Any]:
    """The decoded YAML of a scenario file, not yet validated.

    Read with the bounded reader of the configuration files (`config.yaml_loader`, `FILE_LIMITS`:
    size, nesting, node count, no aliases, plain data only), so that any text gives a value or
    one line, never a traceback or an unbounded parse.
    """
    try:
        document = load_yaml(text=path.read_text(encoding='utf-8'), limits=FILE_LIMITS)
    except FileNotFoundError:
        raise ScenarioError(f'{path}: no such file') from None
    except (OSError, UnicodeDecodeError) as exc:
        raise ScenarioError(f'{path}: cannot read: {exc}') from None
    except YamlProblem as exc:
        where = exc.where.replace(',', '') or 'YAML'  # `line L column C`, as always written here
        raise ScenarioError(f'{path}: {where}: {exc.problem}') from None
    if not isinstance(document, dict):
        raise ScenarioError(f'{path}: (top level): a mapping is needed')
    return document


def with_overrides(
    *,
    document: dict[str, Any],
    trace_path: str | None = None,
    trace_format: str | None = None,
    policies: Sequence[str] = (),
    rate_scale: float | None = None,
    start: float | None = None,
    duration: float | None = None,
    seed: int | None = None,
    engine: str | None = None,
    skip_bad: bool = False,
) -> dict[str, Any]:
    """A copy of `document` with the command line's choices applied.

    `--trace` replaces the workload; `--rate-scale`, `--start` and `--duration` apply to a trace,
    and to a synthetic workload as a rate multiplier and a length (`--start` needs a trace).
    """
    result = dict(document)
    workload = dict(result.get('workload') or {})
    if trace_path is not None:
        workload = {'trace': {'path': trace_path}}
    if 'trace' in workload:
        source = dict(workload['trace'])
        for key, value in (
            ('format', trace_format),
            ('rate_scale', rate_scale),
            ('start', start),
            ('duration', duration),
        ):
            if value is not None:
                source[key] = value
        if skip_bad:
            source['skip_bad'] = True
        workload['trace'] = source
    else:
        if start is not None:
            raise ScenarioError('--start: applies to a trace (give --trace FILE)')
        source = dict(workload.get('synthetic') or {})
        if rate_scale is not None:
            preset = synthetic.preset(name=source.get('preset', 'azure-conv'), duration=1.0)
            source['rate'] = float(source.get('rate') or preset.envelope.mean_rate) * rate_scale
        if duration is not None:
            source['duration'] = duration
        workload['synthetic'] = source
    result['workload'] = workload
    if policies:
        result['policies'] = list(policies)
    if seed is not None:
        result['seed'] = seed
    if engine is not None:
        result['settings'] = {**(result.get('settings') or {}), 'engine': engine}
    return result


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


def build_policies(*, scenario: Scenario, workload: Trace, slo: SLO) -> list[Policy]:
    """Instantiate the scenario's policies in the order given."""
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
            capacities = {
                spec.name: clairvoyant.calibrate(
                    spec=spec, trace=workload, slo=slo, seed=scenario.seed
                )
                for spec in scenario.variants
            }
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
