"""A scenario as a document: its fields and their types, the built-in one, and the command line's
changes to it.

Why: `llmscaler simulate` reads a scenario from a YAML file, or starts from the built-in one, and
applies the command line's options on top. All of that works on plain data, before any preset
is looked up: this module is the shape of a scenario (its fields and their types) and the edits
to it; what a document means once the presets fill in its variants is `sim.scenario.loader`'s.

The fields (`ScenarioModel`): `name`, `model_id`, `namespace`, `variants` (each a preset and
overrides of its fields), `workload` (`synthetic` or `trace`), `slo`, `policies`, `settings`
(the fields of `SimSettings`, `request_timeout` among them), `initial` (replicas per
variant at t = 0), `warm_start` (start at the fleet the first minutes need), `inventory` (GPUs
per accelerator type) and `seed`. A fleet of several models gives `models` instead of
`variants` and `model_id` (`ServedModel`: each a `name`, an optional `model_id`, its `variants`,
its `workload` and `slo`), or one `workload` trace at the top level, split by its model column.

What fails: `read_document` and `with_overrides` raise `ScenarioError` with one line naming the
file or the option, the field and why; `describe_workload` never fails.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import pydantic

from llmscaler.config.yaml_loader import FILE_LIMITS, YamlProblem, load_yaml
from llmscaler.sim.workload import synthetic

DEFAULT_POLICIES = (
    'default',
    'predictive',
    'keda-queue',
    'hpa-kv',
    'kaito-realtime',
    'clairvoyant',
)


class ScenarioError(Exception):
    """One line: `<where>: <field>: <why>`."""


class _Strict(pydantic.BaseModel):
    model_config = pydantic.ConfigDict(extra='forbid', frozen=True)


class VariantModel(_Strict):
    name: str
    preset: str
    role: Literal['both', 'prefill', 'decode'] | None = None
    min_replicas: int | None = pydantic.Field(default=None, ge=0)
    max_replicas: int | None = pydantic.Field(default=None, ge=0)
    initial_replicas: int | None = pydantic.Field(default=None, ge=0)
    startup_delay: float | None = pydantic.Field(default=None, ge=0)
    price_per_gpu_hour: float | None = pydantic.Field(default=None, ge=0)
    num_gpu_blocks: int | None = pydantic.Field(default=None, gt=0)
    max_num_seqs: int | None = pydantic.Field(default=None, gt=0)
    max_num_batched_tokens: int | None = pydantic.Field(default=None, gt=0)


class SharedPrefixModel(_Strict):
    """Shared system prompts and multi-turn sessions (`sim.workload.prefixes.PrefixSpec`)."""

    system_prompts: int = pydantic.Field(default=0, ge=0)
    system_tokens: int = pydantic.Field(default=1000, ge=1)
    skew: float = pydantic.Field(default=1.0, ge=0)
    followup: float = pydantic.Field(default=0.0, ge=0, lt=1)
    open_sessions: int = pydantic.Field(default=100, ge=1)


class SyntheticModel(_Strict):
    preset: str = 'azure-conv'
    duration: float = pydantic.Field(default=3600.0, gt=0)
    rate: float | None = pydantic.Field(default=None, gt=0)
    diurnal: bool = False
    events: list[tuple[float, float, float]] = []
    prefixes: SharedPrefixModel | None = None


class TraceModel(_Strict):
    path: str
    format: Literal['auto', 'azure', 'csv', 'jsonl'] = 'auto'
    model: str | None = None
    """Only the rows whose model column holds this (a file of several models)."""
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


class ServedModel(_Strict):
    """One model of a fleet of several: its variants, its workload, its SLO."""

    name: str = pydantic.Field(min_length=1)
    model_id: str | None = None
    variants: list[VariantModel]
    workload: WorkloadModel | None = None
    slo: SLOModel | None = None


class ScenarioModel(_Strict):
    name: str = 'scenario'
    model_id: str | None = None
    namespace: str = 'default'
    variants: list[VariantModel] = []
    models: list[ServedModel] = []
    workload: WorkloadModel = WorkloadModel()
    slo: SLOModel | None = None
    policies: list[str] = list(DEFAULT_POLICIES)
    settings: dict[str, Any] = {}
    initial: dict[str, pydantic.NonNegativeInt] | None = None
    warm_start: bool = False
    inventory: dict[str, pydantic.NonNegativeInt] | None = None
    seed: pydantic.NonNegativeInt = 1


# The default load: about 2.4x the Azure conversation rate with a 20-minute step to 2x that and a
# 3-minute spike, so both the scale-up lag and the scale-down are exercised within an hour.
DEFAULT_DOCUMENT: dict[str, Any] = {
    'name': 'default: Llama-3.1-8B on H100 and L40S',
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


def describe_error(error: pydantic.ValidationError, where: str) -> str:
    """The first problem pydantic found, as `<where>: <field path>: <message>`."""
    first = error.errors(include_url=False)[0]
    path = '.'.join(str(p) for p in first['loc']) or '(top level)'
    return f'{where}: {path}: {first["msg"]}'


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


def parse_initial(*, text: str) -> dict[str, int]:
    """`h100=3,l40s=0` → {'h100': 3, 'l40s': 0}; `ScenarioError` naming `--initial` otherwise.

    The names are checked against the variants later (`sim.scenario.loader`), with the bounds.
    """
    counts: dict[str, int] = {}
    for part in text.split(','):
        name, sep, number = (p.strip() for p in part.partition('='))
        if not sep or not name:
            raise ScenarioError(
                '--initial: expected VARIANT=N[,VARIANT=N...], e.g. h100=3,l40s=0; '
                f'got {text[:60]!r}'
            )
        if not number.isdigit() or len(number) > 6:
            raise ScenarioError(
                f'--initial: {name}: replicas must be a whole number >= 0, got {number[:20]!r}'
            )
        if name in counts:
            raise ScenarioError(f'--initial: {name}: given twice')
        counts[name] = int(number)
    return counts


@dataclass(frozen=True, slots=True)
class _WorkloadChange:
    """The command line's changes to one workload (`with_overrides`)."""

    trace_format: str | None
    rate_scale: float | None
    start: float | None
    duration: float | None
    skip_bad: bool

    def apply(self, *, workload: dict[str, Any]) -> dict[str, Any]:
        workload = dict(workload)
        if 'trace' in workload:
            source = dict(workload['trace'])
            for key, value in (
                ('format', self.trace_format),
                ('rate_scale', self.rate_scale),
                ('start', self.start),
                ('duration', self.duration),
            ):
                if value is not None:
                    source[key] = value
            if self.skip_bad:
                source['skip_bad'] = True
            workload['trace'] = source
            return workload
        if self.start is not None:
            raise ScenarioError('--start: applies to a trace (give --trace FILE)')
        source = dict(workload.get('synthetic') or {})
        if self.rate_scale is not None:
            try:
                preset = synthetic.preset(name=source.get('preset', 'azure-conv'), duration=1.0)
            except ValueError as exc:
                raise ScenarioError(f'--rate-scale: workload.synthetic.preset: {exc}') from None
            rate = source.get('rate') or preset.envelope.mean_rate
            if isinstance(rate, bool) or not isinstance(rate, int | float):
                raise ScenarioError(
                    f'--rate-scale: workload.synthetic.rate: {rate!r} is not a number'
                )
            source['rate'] = float(rate) * self.rate_scale
        if self.duration is not None:
            source['duration'] = self.duration
        workload['synthetic'] = source
        return workload


def _without_workload(model: object) -> object:
    if isinstance(model, dict):
        return {k: v for k, v in model.items() if k != 'workload'}
    return model


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
    request_timeout: float | None = None,
    initial: str | None = None,
    warm_start: bool = False,
    prefix_caching: bool = False,
) -> dict[str, Any]:
    """A copy of `document` with the command line's choices applied.

    `--trace` replaces the workload (of a fleet of several models: every model's, by one trace
    split by its model column); `--rate-scale`, `--start` and `--duration` apply to a trace, and
    to a synthetic workload as a rate multiplier and a length (`--start` needs a trace); with
    several models, to each model's workload. `--initial` replaces the document's `initial`;
    `--warm-start` sets `warm_start`; `--request-timeout` sets `settings.request_timeout`
    (seconds); `--prefix-caching` sets `settings.prefix_caching`.
    """
    result = dict(document)
    change = _WorkloadChange(
        trace_format=trace_format,
        rate_scale=rate_scale,
        start=start,
        duration=duration,
        skip_bad=skip_bad,
    )
    models = result.get('models')
    if isinstance(models, list) and models:
        shared = result.get('workload')
        if trace_path is not None:
            shared = {'trace': {'path': trace_path}}
            models = [_without_workload(m) for m in models]
        if isinstance(shared, dict) and shared:
            result['workload'] = change.apply(workload=shared)
        result['models'] = [
            {**m, 'workload': change.apply(workload=dict(m['workload']))}
            if isinstance(m, dict) and isinstance(m.get('workload'), dict)
            else m
            for m in models
        ]
    else:
        workload = dict(result.get('workload') or {})
        if trace_path is not None:
            workload = {'trace': {'path': trace_path}}
        result['workload'] = change.apply(workload=workload)
    if policies:
        result['policies'] = list(policies)
    if seed is not None:
        result['seed'] = seed
    settings = dict(result.get('settings') or {})
    if engine is not None:
        settings['engine'] = engine
    if request_timeout is not None:
        settings['request_timeout'] = request_timeout
    if prefix_caching:
        settings['prefix_caching'] = True
    if settings:
        result['settings'] = settings
    if initial is not None:
        result['initial'] = parse_initial(text=initial)
    if warm_start:
        result['warm_start'] = True
    return result


def describe_workload(*, workload: WorkloadModel) -> str:
    """The workload in a few words, e.g. 'trace conv.csv ×4, from 60 s, for 1800 s' or
    'synthetic azure-conv at 13 req/s, 2 rate events'."""
    source = workload.trace
    if source is not None:
        words = [f'trace {Path(source.path).name}']
        if source.model is not None:
            words[0] += f' (model {source.model})'
        if source.rate_scale != 1.0:
            words[0] += f' ×{source.rate_scale:g}'
        if source.start is not None:
            words.append(f'from {source.start:g} s')
        if source.duration is not None:
            words.append(f'for {source.duration:g} s')
        return ', '.join(words)
    spec = workload.synthetic if workload.synthetic is not None else SyntheticModel()
    words = [f'synthetic {spec.preset}' + (f' at {spec.rate:g} req/s' if spec.rate else '')]
    if spec.diurnal:
        words.append('diurnal')
    if spec.events:
        words.append(f'{len(spec.events)} rate event' + ('s' if len(spec.events) > 1 else ''))
    return ', '.join(words)
