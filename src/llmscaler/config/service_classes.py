"""WVA v0.4's `service-classes-config`: per-model SLO targets grouped in prioritised classes.

Why: before `wva-queueing-model-config` carried `targetTTFT`/`targetITL`, WVA (v0.4) read the
SLOs of its model-based path from this ConfigMap, and users still ship it (WVA's main branch
deploys it and reads nothing from it). Each data key (any name, e.g. `premium.yaml`) holds one
class:

    name: Premium          # the class's name, non-empty
    priority: 1            # integer in [0, 1,000,000]; lower is more important (WVA: 1 first)
    data:                  # the models of the class
      - model: meta/llama0-70b   # a modelID, every namespace
        slo-ttft: 500            # ms, in (0, 1 h]
        slo-tpot: 80             # ms per output token (the ITL target), in (0, 1 h]

`parse_service_classes` gives one `ClassTarget` per model. A model listed by several classes
takes the most important class (lowest priority number, then class name), and the others are
reported as warnings. A ConfigMap in the controller namespace applies to every namespace; a
copy in another namespace applies to that namespace's models and wins there
(`llmscaler.config.build`, which also says how these targets rank against
`wva-queueing-model-config`'s). Service classes give targets only: the SLO path is still
selected by `wva-queueing-model-config`.

Deliberate deviation: both targets are required per model (WVA v0.4 read a missing one as 0,
"not considered"); the SLO analyzer sizes against both, as the queueing-model ConfigMap's rule
"targetTTFT and targetITL together" says.

What fails: nothing raises for bad data. A class with a YAML error, a wrong type, an unknown
field or a value out of range is rejected whole with a one-line `ConfigError` naming the
ConfigMap, key, field and value; the other classes still load. The reading limits are those of
the other ConfigMaps (`llmscaler.config.yaml_loader`).
"""

from __future__ import annotations

from dataclasses import dataclass

from llmscaler.config.configmap_entries import ConfigMapSource, data_size
from llmscaler.config.errors import ConfigError, show_value
from llmscaler.config.fields import WEIGHT_MAX, Invalid, latency_ms, type_name
from llmscaler.config.yaml_loader import (
    CONFIGMAP_MAX_BYTES,
    CONFIGMAP_MAX_NODES,
    NodeBudget,
    YamlProblem,
    load_yaml,
)

SERVICE_CLASSES_CONFIGMAP = 'service-classes-config'
_CLASS_FIELDS = ('name', 'priority', 'data')
_MODEL_FIELDS = ('model', 'slo-ttft', 'slo-tpot')


@dataclass(frozen=True, slots=True)
class ClassTarget:
    """One model's targets from its service class; times in milliseconds."""

    model_id: str
    ttft: float
    itl: float
    """`slo-tpot`: time per output token, the mean inter-token latency."""
    service_class: str
    priority: int
    key: str
    """The data key the class was read from."""


@dataclass(frozen=True, slots=True)
class _Class:
    name: str
    priority: int
    targets: tuple[tuple[str, float, float], ...]


def _priority(value: object) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise Invalid(f'must be an integer, not {type_name(value)}')
    if not 0 <= value <= WEIGHT_MAX:
        raise Invalid(f'must be in [0, {WEIGHT_MAX:.15g}]')
    return value


def _model(index: int, raw: object) -> tuple[str, float, float]:
    where = f'[{index}]'
    if not isinstance(raw, dict):
        raise Invalid(f'must be a mapping, not {type_name(raw)}', path=where, value=raw)
    for name in sorted(raw, key=str):
        if name not in _MODEL_FIELDS:
            raise Invalid('unknown field', path=f'{where}.{name}', value=raw[name])
    model = raw.get('model')
    if not isinstance(model, str) or not model:
        raise Invalid('must be a non-empty string', path=f'{where}.model', value=model)
    times: list[float] = []
    for name in ('slo-ttft', 'slo-tpot'):
        if name not in raw:
            raise Invalid('is required (both slo-ttft and slo-tpot)', path=f'{where}.{name}')
        try:
            times.append(latency_ms(raw[name]))
        except Invalid as exc:
            raise Invalid(exc.message, path=f'{where}.{name}', value=raw[name]) from exc
    return model, times[0], times[1]


def _parse_class(text: object, budget: NodeBudget) -> _Class:
    """One class, or `Invalid` with the field path of its first problem."""
    if not isinstance(text, str):
        raise Invalid(f'data value must be a string, not {type_name(text)}')
    try:
        doc = load_yaml(text=text, budget=budget)
    except YamlProblem as exc:
        where = f' ({exc.where})' if exc.where else ''
        raise Invalid(f'YAML not accepted{where}: {exc.problem}') from exc
    if not isinstance(doc, dict):
        raise Invalid(f'class must be a YAML mapping, not {type_name(doc)}', value=doc)
    for name in sorted(doc, key=str):
        if name not in _CLASS_FIELDS:
            raise Invalid('unknown field', path=str(name), value=doc[name])
    for name in _CLASS_FIELDS:
        if name not in doc:
            raise Invalid('is required', path=name)
    name = doc['name']
    if not isinstance(name, str) or not name:
        raise Invalid('must be a non-empty string', path='name', value=name)
    try:
        priority = _priority(doc['priority'])
    except Invalid as exc:
        raise Invalid(exc.message, path='priority', value=doc['priority']) from exc
    models = doc['data']
    if not isinstance(models, list):
        raise Invalid(f'must be a list, not {type_name(models)}', path='data', value=models)
    targets: list[tuple[str, float, float]] = []
    seen: set[str] = set()
    for index, raw in enumerate(models):
        try:
            target = _model(index, raw)
        except Invalid as exc:
            raise Invalid(exc.message, path=f'data{exc.path}', value=exc.value) from exc
        if target[0] in seen:
            raise Invalid('model listed twice in the class', path=f'data[{index}].model')
        seen.add(target[0])
        targets.append(target)
    return _Class(name=name, priority=priority, targets=tuple(targets))


def parse_service_classes(
    *, source: ConfigMapSource
) -> tuple[tuple[ClassTarget, ...], tuple[ConfigError, ...]]:
    """Each model's targets (sorted by model ID) and the problems found (see the docstring)."""
    size = data_size(data=source.data)
    if size > CONFIGMAP_MAX_BYTES:
        message = f'data holds {size} bytes, over the limit of {CONFIGMAP_MAX_BYTES}; rejected'
        return (), (ConfigError(source=source.source, message=message),)
    budget = NodeBudget(total=CONFIGMAP_MAX_NODES, scope='the whole ConfigMap')
    errors: list[ConfigError] = []
    chosen: dict[str, ClassTarget] = {}
    for key in sorted(source.data):
        parsed: _Class | None = None
        try:
            parsed = _parse_class(source.data[key], budget)
        except Invalid as exc:
            shown = '' if exc.value is None else show_value(exc.value)
            errors.append(
                ConfigError(
                    source=source.source, key=key, field=exc.path, value=shown, message=exc.message
                )
            )
        except Exception as exc:  # one class's surprise must not cost the others
            message = f'class could not be read ({type(exc).__name__})'
            errors.append(ConfigError(source=source.source, key=key, message=message))
        if budget.exhausted:
            message = f'more than {CONFIGMAP_MAX_NODES} YAML nodes in all entries; rejected'
            return (), (*errors, ConfigError(source=source.source, message=message))
        if parsed is None:
            continue
        for model, ttft, itl in parsed.targets:
            target = ClassTarget(
                model_id=model,
                ttft=ttft,
                itl=itl,
                service_class=parsed.name,
                priority=parsed.priority,
                key=key,
            )
            held = chosen.get(model)
            if held is not None:
                keep, drop = sorted(
                    (held, target), key=lambda t: (t.priority, t.service_class, t.key)
                )
                chosen[model] = keep
                errors.append(
                    ConfigError(
                        source=source.source,
                        key=drop.key,
                        field='data.model',
                        value=model,
                        message=(
                            f'model also in class {keep.service_class!r} (priority '
                            f'{keep.priority}), whose targets are used'
                        ),
                        warning=True,
                    )
                )
            else:
                chosen[model] = target
    return tuple(chosen[m] for m in sorted(chosen)), tuple(errors)
