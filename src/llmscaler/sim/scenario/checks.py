"""The checks a scenario passes beyond the types of its document: settings, models, roles,
inventory, start counts.

Why: `sim.scenario.document` checks the shape of a scenario (fields and their types); whether
the parts fit together is only known once the presets give each variant its model id, role,
accelerator and replica range. `sim.scenario.loader.from_document` builds the models and calls these
checks on them before it hands out a `Scenario`; keeping them apart keeps `sim.scenario.loader`
about what a scenario is and these about what makes one invalid.

- Settings (`_settings`): every key a field of `runner.SimSettings`, of its type and choices,
  within the ranges `runner.check_settings` sets.
- Models (`_check_models`): variant names unique across models, one model per model id, a
  model's roles all `both` or `prefill` and `decode`, and a known KV size when disaggregated;
  `_check_disaggregated`: neither clairvoyant nor a warm start for a disaggregated model.
- Inventory (`check_inventory`): only accelerators some variant runs on, and room for the start
  fleet; start counts (`_check_initial`): within the variant's [min_replicas, max_replicas].

What fails: each check raises `ScenarioError` with one line naming the place (the file), the
field and the valid choices or the limit; none fails otherwise.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

import pydantic

from llmscaler.sim.hardware import datasheets
from llmscaler.sim.run.loop import SimSettings, check_settings
from llmscaler.sim.scenario.document import ScenarioError
from llmscaler.sim.vocabulary import VariantSpec

if TYPE_CHECKING:
    from llmscaler.sim.scenario.validated import ModelSetup

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
