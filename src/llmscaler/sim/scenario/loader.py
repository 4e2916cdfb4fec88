"""Scenarios for `llmscaler simulate`: models, variants, workloads, SLO, policies, GPUs, settings.

Why: a user compares policies on *their* fleet and traffic; a scenario file says which. Without
one, the built-in default is a conversation-like workload (the Azure 2023 conversation statistics)
whose load steps up and spikes, served by Llama-3.1-8B on H100 ($3.90/h) and L40S ($1.90/h), sized
to need several replicas of both.

A scenario file is YAML (or JSON). One model:

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
inventory: {H100: 16, L40S: 8}   # optional: GPUs per accelerator type (absent: unlimited)
seed: 1
```

Several models share one fleet (and its inventory) with `models` in place of `variants`:

```yaml
models:
  - name: chat
    variants: [{name: chat-h100, preset: llama-3.1-8b-h100, max_replicas: 6}]
    workload: {synthetic: {preset: azure-conv, rate: 10}}
    slo: {ttft: 1.0, itl: 0.07}  # optional: the scenario's `slo`, else derived per model
  - name: big
    model_id: meta-llama/Llama-3.1-70B-Instruct   # optional: the presets' model id
    variants: [{name: big-h100, preset: llama-3.1-70b-h100-tp4, max_replicas: 3}]
    workload: {trace: {path: mixed.csv, model: big}}   # the rows of one model of a file
# or, instead of a workload per model: workload: {trace: {path: mixed.csv}}, split by the
# file's model column (a row belongs to the model whose name, else whose model id, it holds)
inventory: {H100: 16}
```

The document's fields and the command line's changes to it are in `sim.scenario.document`, which
checks the shape of a scenario (fields and their types); whether its parts fit together is only
known once the presets give each variant its model id, role, accelerator and replica range, and
is checked here before a `Scenario` is handed out:

- Settings: every key a field of `SimSettings`, of its type and choices, within the ranges
  `check_settings` sets (`sim.runner`).
- Models: variant names unique across models, one model per model id, a model's roles all `both`
  or `prefill` and `decode`, and a known KV size when disaggregated; neither clairvoyant nor a
  warm start for a disaggregated model.
- Inventory (`check_inventory`): only accelerators some variant runs on, and room for the start
  fleet; start counts: within the variant's [min_replicas, max_replicas].

Turning a scenario into workloads, SLOs, capacities, a start fleet and policies is
`sim.scenario.setup`'s.

Policy names: `default` and `saturation-percentage` (the core's default configuration),
`saturation-token` (the token-based analyzer), `config:FILE` (the core with the settings and
ConfigMaps of FILE, as `llmscaler decide --config` reads them), `keda-queue` and `hpa-kv` (the
HPA peers of `sim.policies.peers`), `static:N` (N on
the first variant of each model) or `static:VARIANT=N,...`, and `clairvoyant`.

Start fleet: each variant starts with its `initial_replicas` Ready replicas (1 unless the preset
or the variant says otherwise), or with what `initial` gives for it; with `warm_start` every
policy starts with the fleet the first minutes need (`sim.scenario.setup.warm_start_fleet`).

P/D roles: a variant may say its `role`. A model's variants are all `both` (each replica serves
requests whole) or `prefill` and `decode` (disaggregated: a request's prefill on a prefill
replica, its KV over the link of `settings.kv_link_gbps`/`kv_link_latency`, its decode on a
decode replica; `sim.fleet.disagg`); the snapshot carries the roles, which the token analyzer reads.
The clairvoyant policy and the warm start calibrate whole requests and are refused for a
disaggregated model.

What fails: a malformed file, an unknown preset, policy, variant, accelerator or field gives a
`ScenarioError` with one line naming the file, the field and the valid choices; so does an
explicit `initial_replicas` or `initial` count outside the variant's [min_replicas,
max_replicas], an `initial` naming no variant, `initial` together with `warm_start`, a start
fleet beyond the inventory, a model's roles other than all `both` or `prefill` and `decode`
(or a disaggregated model whose KV size is unknown, with clairvoyant, or a warm start),
variants of one model naming several model
ids, two models with one name or one model id, a variant name used twice (across models too),
`models` together with `variants` or `model_id`, and a multi-model workload that is neither one
per model nor one shared trace.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

import pydantic

from llmscaler.sim.hardware import datasheets, presets
from llmscaler.sim.runner import SimSettings, check_settings
from llmscaler.sim.scenario.document import (
    DEFAULT_DOCUMENT,
    ScenarioError,
    ScenarioModel,
    ServedModel,
    SLOModel,
    SyntheticModel,
    VariantModel,
    WorkloadModel,
    describe_error,
    read_document,
)
from llmscaler.sim.scenario.setup import check_policy_name, with_initial
from llmscaler.sim.scenario.validated import ModelSetup, Scenario
from llmscaler.sim.vocabulary import SLO, VariantSpec

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
        path = '.'.join(str(p) for p in first['loc'])
        raise ScenarioError(f'{where}: settings.{path}: {first["msg"]}') from None
    try:
        check_settings(settings=settings)
    except ValueError as exc:  # a range the types do not say (cycle > 0, ...)
        raise ScenarioError(f'{where}: {exc}') from None
    return settings


def _check_models(models: Sequence[ModelSetup], where: str) -> None:
    names = [v.name for m in models for v in m.variants]
    if len(set(names)) != len(names):
        where_first = next(m.where for m in models for v in m.variants if names.count(v.name) > 1)
        raise ScenarioError(
            f'{where}: {where_first}variants: duplicate variant names {sorted(names)}'
            + ('; variant names are unique across models' if len(models) > 1 else '')
        )
    owners: dict[str, str] = {}
    for m in models:
        if m.model_id in owners:
            raise ScenarioError(
                f'{where}: {m.where}model_id: {m.model_id!r} is also the model id of model '
                f'{owners[m.model_id]}; give each model its own (the controller groups '
                'variants by model id)'
            )
        owners[m.model_id] = m.name
        roles = {v.role for v in m.variants}
        if roles != {'both'} and roles != {'prefill', 'decode'}:
            raise ScenarioError(
                f'{where}: {m.where}variants: roles {", ".join(sorted(roles))}: a model is served '
                'whole (role both) or disaggregated (prefill and decode variants, no other)'
            )
        if roles != {'both'} and m.model_id not in datasheets.MODELS:
            raise ScenarioError(
                f'{where}: {m.where}variants: disaggregated serving needs the KV size of '
                f'{m.model_id!r} (known: {", ".join(sorted(datasheets.MODELS))})'
            )


def _check_disaggregated(
    *, models: Sequence[ModelSetup], policies: Sequence[str], warm: bool, where: str
) -> None:
    """The clairvoyant capacities replay whole requests on one replica: not for P/D pools."""
    split = [m.name for m in models if any(v.role != 'both' for v in m.variants)]
    if not split:
        return
    if 'clairvoyant' in policies:
        raise ScenarioError(
            f'{where}: policies: clairvoyant calibrates whole requests on one replica; it does '
            f'not size prefill and decode pools (model {split[0]})'
        )
    if warm:
        raise ScenarioError(
            f'{where}: warm_start: the warm start uses whole-request capacities; it does not '
            f'size prefill and decode pools (model {split[0]})'
        )


def check_inventory(
    *, inventory: Mapping[str, int], variants: Sequence[VariantSpec], where: str
) -> None:
    """Raise `ScenarioError` for an accelerator no variant runs on, or a start fleet that needs
    more GPUs than the inventory has."""
    used = sorted({v.accelerator for v in variants})
    for accelerator in sorted(inventory):
        if accelerator not in used:
            raise ScenarioError(
                f'{where}: inventory.{accelerator}: no variant runs on it; accelerators: '
                + ', '.join(used)
            )
    need = dict.fromkeys(inventory, 0)
    for spec in variants:
        if spec.accelerator in need:
            need[spec.accelerator] += spec.initial_replicas * spec.gpus_per_replica
    for accelerator in sorted(need):
        if need[accelerator] > inventory[accelerator]:
            raise ScenarioError(
                f'{where}: inventory.{accelerator}: the start fleet needs {need[accelerator]} '
                f'GPUs, more than the {inventory[accelerator]} there are (lower initial)'
            )


def _check_initial(*, spec: VariantSpec, count: int, field: str) -> None:
    if not spec.min_replicas <= count <= spec.max_replicas:
        raise ScenarioError(
            f'{field}.initial_replicas: {count} is outside [{spec.min_replicas}, '
            f'{spec.max_replicas}] (min_replicas, max_replicas of {spec.name})'
        )


def _variant(model: VariantModel, *, place: str, namespace: str, where: str) -> VariantSpec:
    overrides = {
        k: v for k, v in model.model_dump().items() if k not in ('name', 'preset') and v is not None
    }
    try:
        spec = presets.preset(name=model.preset, variant_name=model.name)
    except ValueError as exc:
        raise ScenarioError(f'{where}: {place}.preset: {exc}') from None
    return replace(spec, namespace=namespace, **overrides)


def _slo(model: SLOModel | None) -> SLO | None:
    return SLO(ttft=model.ttft, itl=model.itl) if model is not None else None


def _model(
    entry: ServedModel,
    *,
    prefix: str,
    named: bool,
    namespace: str,
    fallback: SLO | None,
    where: str,
) -> ModelSetup:
    """One model's setup; `prefix` is '' for a one-model document, 'models.i.' in `models`
    (`named`: its variants carry its name)."""
    if not entry.variants:
        raise ScenarioError(f'{where}: {prefix}variants: at least one variant is needed')
    variants = tuple(
        _variant(v, place=f'{prefix}variants.{i}', namespace=namespace, where=where)
        for i, v in enumerate(entry.variants)
    )
    if entry.model_id is not None:
        variants = tuple(replace(v, model_id=entry.model_id) for v in variants)
    ids = sorted({v.model_id for v in variants})
    if len(ids) != 1:
        how = f'set {prefix}model_id'
        raise ScenarioError(
            f'{where}: {prefix}variants: all variants must serve one model; presets give {ids} '
            f'({how} to serve one)'
        )
    if named:
        variants = tuple(replace(v, model=entry.name) for v in variants)
    workload = entry.workload
    if workload is not None and workload.synthetic is not None and workload.trace is not None:
        raise ScenarioError(f'{where}: {prefix}workload: give either synthetic or trace, not both')
    if workload is not None and workload.synthetic is None and workload.trace is None:
        workload = None if named else WorkloadModel(synthetic=SyntheticModel())
    own = _slo(entry.slo)
    return ModelSetup(
        name=entry.name,
        model_id=ids[0],
        variants=variants,
        workload=workload,
        slo=own if own is not None else fallback,
        where=prefix,
    )


def _models(model: ScenarioModel, where: str) -> tuple[tuple[ModelSetup, ...], WorkloadModel]:
    """The models of the document, and the scenario-level workload."""
    fallback = _slo(model.slo)
    if not model.models:
        if not model.variants:
            raise ScenarioError(f'{where}: variants: at least one variant is needed')
        single = ServedModel(
            name='-', model_id=model.model_id, variants=model.variants, workload=model.workload
        )
        setup = _model(
            single,
            prefix='',
            named=False,
            namespace=model.namespace,
            fallback=fallback,
            where=where,
        )
        setup = replace(setup, name=setup.model_id)
        assert setup.workload is not None
        return (setup,), setup.workload
    if model.variants:
        raise ScenarioError(f'{where}: variants: with models, give each model its variants')
    if model.model_id is not None:
        raise ScenarioError(f'{where}: model_id: with models, give each model its model_id')
    names = [m.name for m in model.models]
    if len(set(names)) != len(names):
        raise ScenarioError(f'{where}: models: duplicate model names {sorted(names)}')
    models = tuple(
        _model(
            entry,
            prefix=f'models.{i}.',
            named=True,
            namespace=model.namespace,
            fallback=fallback,
            where=where,
        )
        for i, entry in enumerate(model.models)
    )
    shared = model.workload
    if shared.synthetic is not None:
        raise ScenarioError(
            f'{where}: workload.synthetic: with models, give each model its workload (a '
            'scenario-level workload can only be a trace split by its model column)'
        )
    if shared.trace is not None:
        if shared.trace.model is not None:
            raise ScenarioError(
                f'{where}: workload.trace.model: a shared trace is split by its model column; '
                "`model` picks one model's rows of a model's own trace"
            )
        given = [m for m in models if m.workload is not None]
        if given:
            raise ScenarioError(
                f'{where}: {given[0].where}workload: give a workload per model or one shared '
                'trace, not both'
            )
    else:
        missing = [m for m in models if m.workload is None]
        if missing:
            raise ScenarioError(
                f'{where}: {missing[0].where}workload: every model needs a workload (synthetic '
                'or trace), or give one shared trace as the scenario-level workload'
            )
    if shared.trace is None and len(models) == 1:
        assert models[0].workload is not None
        return models, models[0].workload
    return models, shared


def _document(model: ScenarioModel) -> dict[str, Any]:
    """The validated document as plain data, without the fields a one-model scenario leaves
    unset that older documents did not have (the report shows what was given)."""
    document = model.model_dump(mode='json')
    for key, empty in (('models', []), ('inventory', None)):
        if document.get(key) == empty:
            del document[key]
    for variant in document.get('variants', []):
        if variant.get('role') is None:
            variant.pop('role', None)
    trace_doc = (document.get('workload') or {}).get('trace')
    if isinstance(trace_doc, dict) and trace_doc.get('model') is None:
        trace_doc.pop('model', None)
    return document


def _given(model: ScenarioModel) -> list[tuple[str, VariantModel]]:
    """Every variant as written, with its place, in the order of `Scenario.variants`."""
    if not model.models:
        return [(f'variants.{i}', v) for i, v in enumerate(model.variants)]
    return [
        (f'models.{j}.variants.{i}', v)
        for j, m in enumerate(model.models)
        for i, v in enumerate(m.variants)
    ]


def from_document(*, document: dict[str, Any], where: str = '<built-in>') -> Scenario:
    """Validate a scenario document (the decoded YAML)."""
    try:
        model = ScenarioModel.model_validate(document)
    except pydantic.ValidationError as exc:
        raise ScenarioError(describe_error(exc, where)) from None
    models, workload = _models(model, where)
    _check_models(models, where)
    _check_disaggregated(models=models, policies=model.policies, warm=model.warm_start, where=where)
    variants = tuple(v for m in models for v in m.variants)
    names = [v.name for v in variants]
    first = tuple(m.variants[0].name for m in models)
    for index, name in enumerate(model.policies):
        check_policy_name(
            name=name, variants=names, where=f'{where}: policies.{index}', first=first
        )
    for (place, entry), spec in zip(_given(model), variants, strict=True):
        if entry.initial_replicas is not None:
            _check_initial(spec=spec, count=entry.initial_replicas, field=f'{where}: {place}')
    if model.initial is not None:
        if model.warm_start:
            raise ScenarioError(f'{where}: initial: give initial or warm_start, not both')
        variants = with_initial(variants=variants, initial=model.initial, where=where)
        by_name = {v.name: v for v in variants}
        models = tuple(
            replace(m, variants=tuple(by_name[v.name] for v in m.variants)) for m in models
        )
    if model.inventory is not None:
        check_inventory(inventory=model.inventory, variants=variants, where=where)
    return Scenario(
        name=model.name,
        variants=variants,
        workload=workload,
        policies=tuple(model.policies),
        settings=_settings(model.settings, where),
        slo=_slo(model.slo),
        seed=model.seed,
        source=where,
        document=_document(model),
        warm_start=model.warm_start,
        models=models,
        inventory=dict(model.inventory) if model.inventory is not None else None,
    )


def load(*, path: Path) -> Scenario:
    """Read a scenario file; `ScenarioError` with one line on any problem."""
    return from_document(document=read_document(path=path), where=str(path))


def default() -> Scenario:
    """The built-in scenario (`make run`)."""
    return from_document(document=DEFAULT_DOCUMENT)
