"""What a scenario needs before it runs: its workloads, SLOs, capacities, start fleet, policies.

Why: `sim.scenario.loader` validates a scenario; this module turns a valid one into what the event
loop takes, model by model: a trace per model and the SLO each model is judged by
(`sim.scenario.workloads`), each variant's clairvoyant capacity, the warm
start fleet, and the policies.

- Warm start (`warm_start_fleet`): per model, in name order, the cheapest mix of its variants
  whose clairvoyant capacity covers the peak 60-second arrival rate of windows that start within
  the first WARM_WINDOW seconds plus the largest start-up delay (`warm_fleet`); with a GPU
  inventory, within the GPUs the models before it left.
- Policies (`build_policies`): the names of `FIXED_POLICIES` (`default`, the core with its
  default configuration; every policy of the core's registry, each configured as a user stating
  the model's SLO and start-up time would configure it, the tuner seeded from the presets; the
  peers; the clairvoyant bound), `static-best` (`sim.policies.bound`), `static:...`,
  `config:FILE`, `predictive:TARGET` (`predictive` with its `attainmentTarget` at TARGET, in
  (0.5, 1), as `llmscaler-predictive-config` sets it) and
  Kaito's `kaito-realtime[:FILE]` / `kaito-cron:FILE|SCHEDULE=N[@ZONE];...` (`sim.policies.kaito`).

What fails: a bad synthetic preset, a trace file that cannot be read (`trace.TraceError`), a
policy name or configuration file that is not valid: `ScenarioError` or `TraceError`, one line
each.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

import numpy as np

from llmscaler.config import file as config_file
from llmscaler.config.errors import ConfigFileError
from llmscaler.config.predictive import PredictiveOverrides
from llmscaler.config.resolved import Config, ModelConfig
from llmscaler.policies import registry
from llmscaler.policies.protocol import Intent
from llmscaler.sim.hardware import perf_seed
from llmscaler.sim.policies import bound, clairvoyant, core, floors, kaito, peers
from llmscaler.sim.scenario.document import ScenarioError
from llmscaler.sim.scenario.workloads import Workloads
from llmscaler.sim.sweep.sweep import Sweep, in_process
from llmscaler.sim.vocabulary import SLO, Policy, Trace, VariantSpec

if TYPE_CHECKING:
    from llmscaler.sim.scenario.validated import ModelSetup, Scenario

WARM_WINDOW = 300.0
"""Seconds after the largest start-up delay whose peak load the warm start fleet covers."""

KAITO_FORMS = ('kaito-realtime', 'kaito-realtime:FILE', 'kaito-cron:FILE|SCHEDULE=N[@ZONE];...')
"""Kaito's LLMAutoScaler policies (`sim.policies.kaito`)."""
DEFAULT = 'default'
"""The core with the configuration nobody wrote (the registry's choice for it)."""
PREDICTIVE = 'predictive'
TARGETED = f'{PREDICTIVE}:'
"""The prefix of `predictive:TARGET`: the predictive policy at another attainment target."""
FIXED_POLICIES = (DEFAULT, *registry.names(), 'keda-queue', 'hpa-kv', 'clairvoyant')
SEARCHED_POLICIES = ('static-best',)
"""Policies found by simulating the scenario (`sim.policies.bound`): the best fixed fleet in
hindsight."""


def check_policy_name(
    *, name: str, variants: Sequence[str], where: str, first: Sequence[str] = ()
) -> None:
    """Raise `ScenarioError` listing the valid names when `name` is not a policy."""
    if name in FIXED_POLICIES or name in SEARCHED_POLICIES or name.startswith('config:'):
        return
    if name.startswith(TARGETED):
        try:
            attainment_target(name)
        except ValueError as exc:
            raise ScenarioError(f'{where}: {exc}') from None
        return
    if kaito.is_kaito(name):
        try:
            kaito.parse_kaito(text=name, variants=variants)
        except ValueError as exc:
            raise ScenarioError(f'{where}: {exc}') from None
        return
    if floors.is_floor(name):
        try:
            floors.parse_floor(text=name, variants=variants)
        except ValueError as exc:
            raise ScenarioError(f'{where}: {exc}') from None
        return
    if name.startswith('static:'):
        try:
            core.parse_static(text=name, variants=variants, first=first)
        except ValueError as exc:
            raise ScenarioError(f'{where}: {exc}') from None
        return
    valid = ', '.join(
        (
            *FIXED_POLICIES,
            *SEARCHED_POLICIES,
            'static:N',
            'static:VARIANT=N,...',
            'config:FILE',
            f'{TARGETED}TARGET',
            *KAITO_FORMS,
            floors.FORM,
        )
    )
    raise ScenarioError(f'{where}: unknown policy {name!r}; valid: {valid}')


def with_initial(
    *, variants: tuple[VariantSpec, ...], initial: Mapping[str, int], where: str
) -> tuple[VariantSpec, ...]:
    """`variants` with the start counts of `initial`; `ScenarioError` for a name that is no
    variant or a count outside the variant's [min_replicas, max_replicas]."""
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


# ---- capacities and the warm start ---------------------------------------------------------


def core_config(*, name: str, intents: Mapping[str, Intent] | None = None) -> Config:
    """The configuration the core policy `name` (`default`, or a name of the registry) stands
    for: each model ID of `intents` configured by the policy as a user stating that intent
    would (`Policy.configure`), every other model as one stating nothing."""
    policy = registry.by_name(name)
    if policy is None:
        if name != DEFAULT:
            raise ValueError(f'not a policy of the core: {name!r}')
        return Config()
    return Config(
        default=policy.configure(intent=Intent()),
        by_model=tuple(
            (model_id, policy.configure(intent=intent))
            for model_id, intent in sorted((intents or {}).items())
        ),
    )


def attainment_target(name: str) -> float:
    """TARGET of a `predictive:TARGET` policy name; ValueError unless a number in (0.5, 1)."""
    text = name.removeprefix(TARGETED)
    try:
        target = float(text)
    except ValueError:
        target = math.nan
    if not 0.5 < target < 1:
        raise ValueError(f'{name}: the attainment target must be a number in (0.5, 1)')
    return target


def with_target(config: Config, target: float) -> Config:
    """`config` with every predictive model's `attainmentTarget` set to `target`."""
    return with_predictive(config, PredictiveOverrides(attainment_target=target))


def with_predictive(config: Config, entry: PredictiveOverrides) -> Config:
    """`config` with `entry` over every predictive model's settings, as a ConfigMap entry
    naming those keys would set them."""

    def one(model: ModelConfig) -> ModelConfig:
        if model.predictive is None:
            return model
        return replace(model, predictive=entry.over(model.predictive))

    return replace(
        config,
        default=one(config.default),
        by_namespace=tuple((key, one(model)) for key, model in config.by_namespace),
        by_model=tuple((key, one(model)) for key, model in config.by_model),
        by_group=tuple((key, one(model)) for key, model in config.by_group),
    )


def intents(
    *, scenario: Scenario, workloads: Workloads, slos: Mapping[str, SLO]
) -> dict[str, Intent]:
    """What a user of the scenario states about each model: its SLO, the slowest start-up of its
    variants, and its variants' performance models fitted to their presets at the model's
    token mix (`sim.hardware.perf_seed`)."""
    mixes = {
        m.model_id: _mean_mix(workloads.traces[m.name])
        for m in scenario.models
        if m.name in workloads.traces and len(workloads.traces[m.name])
    }
    seeds = perf_seed.preset_seeds(variants=scenario.variants, mixes=mixes)
    return {
        m.model_id: Intent(
            ttft=slos[m.name].ttft,
            itl=slos[m.name].itl,
            startup_seconds=max(v.startup_delay for v in m.variants),
            perf_parms=seeds.get(m.model_id),
        )
        for m in scenario.models
    }


def needs_capacities(*, scenario: Scenario) -> bool:
    """Whether running `scenario` calibrates the variants' capacities (clairvoyant, warm start)."""
    return scenario.warm_start or 'clairvoyant' in scenario.policies


def _model_of(scenario: Scenario) -> dict[str, ModelSetup]:
    return {v.name: m for m in scenario.models for v in m.variants}


@dataclass(frozen=True, slots=True)
class Calibration:
    """One variant's one-replica calibration (`clairvoyant.calibrate`) as a sweep's task."""

    spec: VariantSpec
    trace: Trace
    slo: SLO
    seed: int

    @property
    def label(self) -> str:
        return f'calibration {self.spec.name}'

    def identity(self) -> object:
        return ('calibration', self.spec, self.trace, self.slo, self.seed)

    def __call__(self) -> float:
        return clairvoyant.calibrate(spec=self.spec, trace=self.trace, slo=self.slo, seed=self.seed)


def calibrate_capacities(
    *,
    scenario: Scenario,
    workloads: Workloads,
    slos: Mapping[str, SLO],
    progress: Callable[[float], None] | None = None,
    sweep: Sweep | None = None,
) -> dict[str, float]:
    """Each variant's clairvoyant capacity on its model's workload and SLO, in req/s: one
    replica's (`clairvoyant.calibrate`), then the headroom and variant set with which the
    clairvoyant plan, run on the scenario itself, meets the SLO (`bound.bound_capacities`; a
    variant the plan leaves out has 0). `progress(fraction_done)` is called now and then; the
    calibrations and the search's runs go through `sweep` (None: here, one after another)."""
    model_of = _model_of(scenario)
    calibrations = [
        Calibration(
            spec=spec,
            trace=workloads.traces[model_of[spec.name].name],
            slo=slos[model_of[spec.name].name],
            seed=scenario.seed,
        )
        for spec in scenario.variants
    ]
    found = (sweep if sweep is not None else in_process()).run(tasks=calibrations)
    capacities = {c.spec.name: capacity for c, capacity in zip(calibrations, found, strict=True)}
    if progress is not None:
        progress(0.5)  # the search after the calibration weighs as much
    setting = _setting(scenario=scenario, workloads=workloads, slos=slos, sweep=sweep)

    def start(caps: Mapping[str, float]) -> tuple[VariantSpec, ...]:
        if not scenario.warm_start:
            return scenario.variants
        fleet = warm_start_fleet(scenario=scenario, workloads=workloads, capacities=caps)
        return with_start_fleet(scenario=scenario, initial=fleet).variants

    def searched(done: float) -> None:
        if progress is not None:
            progress(0.5 + done / 2)

    return bound.bound_capacities(
        setting=setting,
        base=capacities,
        cycle=scenario.settings.cycle,
        start=start,
        progress=searched,
    )


def _setting(
    *,
    scenario: Scenario,
    workloads: Workloads,
    slos: Mapping[str, SLO],
    sweep: Sweep | None = None,
) -> bound.Setting:
    """What the searches' runs share (`sim.policies.bound`), as `simulate.run` runs the policies."""
    judged: Mapping[str, SLO] | SLO = slos if scenario.several_models else next(iter(slos.values()))
    return bound.Setting(
        traces=workloads.traces,
        variants=scenario.variants,
        settings=scenario.settings,
        slos=judged,
        inventory=scenario.inventory,
        sweep=sweep,
    )


def warm_fleet(
    *,
    variants: Sequence[VariantSpec],
    workload: Trace,
    capacities: Mapping[str, float],
    free: Mapping[str, int] | None = None,
) -> dict[str, int]:
    """The fleet the first minutes of `workload` need (see the module docstring), per variant
    name; with `free` (GPUs per accelerator type), within them."""
    delay = max((v.startup_delay for v in variants), default=0.0)
    rates = clairvoyant.sliding_rates(arrivals=workload.arrivals)
    last = min(rates.shape[0], math.floor(delay + WARM_WINDOW) + 1)
    peak = float(rates[:last].max()) if last > 0 else 0.0
    return clairvoyant.cheapest_mix(
        required=peak, variants=variants, capacities=capacities, free=free
    )


def warm_start_fleet(
    *, scenario: Scenario, workloads: Workloads, capacities: Mapping[str, float]
) -> dict[str, int]:
    """Every model's warm fleet (`warm_fleet`), models in name order, each within the GPUs of
    the inventory the models before it left."""
    free = dict(scenario.inventory or {})
    fleet: dict[str, int] = {}
    for model in sorted(scenario.models, key=lambda m: m.name):
        mine = warm_fleet(
            variants=model.variants,
            workload=workloads.traces[model.name],
            capacities=capacities,
            free=free or None,
        )
        for spec in model.variants:
            if spec.accelerator in free:
                free[spec.accelerator] -= mine[spec.name] * spec.gpus_per_replica
        fleet.update(mine)
    return fleet


def with_start_fleet(*, scenario: Scenario, initial: Mapping[str, int]) -> Scenario:
    """`scenario` with its variants starting at `initial` replicas (variants left out keep
    theirs); the counts must lie within each variant's bounds (`warm_fleet`'s do)."""
    variants = with_initial(variants=scenario.variants, initial=initial, where=scenario.source)
    by_name = {v.name: v for v in variants}
    models = tuple(
        replace(m, variants=tuple(by_name[v.name] for v in m.variants)) for m in scenario.models
    )
    return replace(scenario, variants=variants, models=models)


# ---- policies ------------------------------------------------------------------------------


def _mean_mix(workload: Trace) -> tuple[float, float]:
    """Mean (input, output) tokens per request of a trace."""
    return float(np.mean(workload.input_tokens)), float(np.mean(workload.output_tokens))


def needs_fleet(*, scenario: Scenario) -> bool:
    """Whether running `scenario` searches the best fixed fleet (`static-best`, clairvoyant)."""
    return 'static-best' in scenario.policies or 'clairvoyant' in scenario.policies


def best_fleet(
    *, scenario: Scenario, workloads: Workloads, slos: Mapping[str, SLO], sweep: Sweep | None
) -> bound.Fleet:
    """The best fixed fleet of `scenario` as it starts (`bound.best_static`); `ScenarioError`
    when its count space is too large to search."""
    try:
        return bound.best_static(
            setting=_setting(scenario=scenario, workloads=workloads, slos=slos, sweep=sweep)
        )
    except ValueError as exc:
        raise ScenarioError(f'policies: {exc}') from None


def build_policies(
    *,
    scenario: Scenario,
    workloads: Workloads,
    slos: Mapping[str, SLO],
    capacities: Mapping[str, float] | None = None,
    sweep: Sweep | None = None,
    fleet: bound.Fleet | None = None,
) -> list[Policy]:
    """Instantiate the scenario's policies in the order given. The clairvoyant policy uses
    `capacities` when given, else calibrates them (`calibrate_capacities`), and keeps the best
    fixed fleet instead when that is cheaper (`bound.clairvoyant_bound`); `static-best` and the
    clairvoyant policy share one search of fixed fleets (`bound.best_static`), or `fleet` when
    the caller searched it (`best_fleet`, on this scenario as it starts). The searches' runs go
    through `sweep` (None: here, one after another)."""
    names = [v.name for v in scenario.variants]
    first = scenario.first_variants
    built: list[Policy] = []
    # `fleet`: the best fixed fleet, searched once for both uses
    for name in scenario.policies:
        if name == DEFAULT or registry.by_name(name) is not None:
            stated = intents(scenario=scenario, workloads=workloads, slos=slos)
            built.append(core.CorePolicy(name=name, config=core_config(name=name, intents=stated)))
        elif name.startswith(TARGETED):
            stated = intents(scenario=scenario, workloads=workloads, slos=slos)
            config = core_config(name=PREDICTIVE, intents=stated)
            built.append(
                core.CorePolicy(name=name, config=with_target(config, attainment_target(name)))
            )
        elif name.startswith('config:'):
            path = name.removeprefix('config:')
            try:
                config, errors = config_file.load_config_file(path=path)
            except ConfigFileError as exc:
                raise ScenarioError(f'policy {name}: {exc}') from None
            fatal = [e for e in errors if not e.warning]
            if fatal:
                raise ScenarioError(f'policy {name}: {fatal[0]}')
            built.append(core.CorePolicy(name=name, config=config))
        elif name == 'keda-queue':
            built.append(peers.KedaQueuePolicy())
        elif name == 'hpa-kv':
            built.append(peers.HpaKvPolicy())
        elif name.startswith('static:'):
            built.append(core.parse_static(text=name, variants=names, first=first))
        elif kaito.is_kaito(name):
            try:
                built.append(kaito.parse_kaito(text=name, variants=names))
            except ValueError as exc:
                raise ScenarioError(f'policies: {exc}') from None
        elif floors.is_floor(name):
            try:
                built.append(floors.parse_floor(text=name, variants=names))
            except ValueError as exc:
                raise ScenarioError(f'policies: {exc}') from None
        elif name == 'static-best':
            fleet = fleet or best_fleet(
                scenario=scenario, workloads=workloads, slos=slos, sweep=sweep
            )
            built.append(fleet.policy())
        elif name == 'clairvoyant':
            if capacities is None:
                capacities = calibrate_capacities(
                    scenario=scenario, workloads=workloads, slos=slos, sweep=sweep
                )
            fleet = fleet or best_fleet(
                scenario=scenario, workloads=workloads, slos=slos, sweep=sweep
            )
            built.append(
                bound.clairvoyant_bound(
                    setting=_setting(
                        scenario=scenario, workloads=workloads, slos=slos, sweep=sweep
                    ),
                    capacities=capacities,
                    cycle=scenario.settings.cycle,
                    fleet=fleet,
                )
            )
        else:
            check_policy_name(name=name, variants=names, where='policies')
    return built
