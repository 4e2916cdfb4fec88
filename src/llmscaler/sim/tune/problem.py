"""A scenario made into the tuner's simulations: candidates on the search part, and the final
comparison on the held-back part.

Why: the search (`search`) only asks "run these candidates on these draws"; this module knows
what that means for a scenario, and runs everything through the sweep it is given
(`sim.sweep.Sweep`, so `--jobs` and the run cache apply and the figures do not depend on either):

- The draws: the scenario's workload built with its seed, then with each next seed (a synthetic
  workload is drawn again, a rate-scaled trace gets other copies); draws whose traces are equal
  (a trace replayed at its own rate) count once. Each is cut at one time (`split`): the cut is
  placed on the first draw's span.
- What every run shares is fixed from the first draw's search part only, never from the
  held-back part: the SLO (the scenario's, else derived), the performance models a user would
  state (`setup.intents`), the recommended configuration (`setup.core_config` of the policy
  tuned, `space.PolicySpace.policy`).
- A candidate runs as the core policy with the model's configuration under the candidate's
  settings (`PolicySpace.resolve`) on the variants it offers, with its replica bounds
  (`space.bounded`). With a warm start, each run starts at the fleet its part's first minutes
  need on the offered variants within those bounds (`setup.warm_fleet`), the capacities
  calibrated once on the first draw's search part (`setup.calibrate_capacities`: those runs
  are counted apart; the held-back part's own calibration counts with the comparison).
- The held-back comparison runs the chosen candidate, the defaults and the scenario's policies
  (the peers, as `llmscaler simulate` builds them, on the held-back part as their workload) in
  one round of the sweep, on the first draw's held-back part; `clairvoyant` and `static-best`
  are reported as bounds, not peers (they know the workload in hindsight).

What fails: `ScenarioError` for a scenario of several models (one model is tuned at a time) and
for a trace too short to cut; `TraceError` for a trace that cannot be read.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from llmscaler.config.resolved import Config, ModelConfig
from llmscaler.sim.policies.core import CorePolicy
from llmscaler.sim.scenario.document import ScenarioError
from llmscaler.sim.scenario.setup import (
    SEARCHED_POLICIES,
    build_policies,
    calibrate_capacities,
    core_config,
    intents,
    needs_capacities,
    warm_fleet,
    with_initial,
    with_start_fleet,
)
from llmscaler.sim.scenario.validated import Scenario
from llmscaler.sim.scenario.workloads import Workloads, build_workloads, model_slos
from llmscaler.sim.sweep.sweep import Sweep
from llmscaler.sim.sweep.tasks import Finished, RunSpec
from llmscaler.sim.tune import split as parts
from llmscaler.sim.tune.search import Measure
from llmscaler.sim.tune.space import Candidate, PolicySpace, bounded
from llmscaler.sim.vocabulary import SLO, Trace, VariantSpec

BOUNDS = ('clairvoyant', *SEARCHED_POLICIES)
"""Policies that know the workload in hindsight: reported, but no peer one could run."""


@dataclass(frozen=True, slots=True)
class Row:
    """A configuration's run on the held-back part."""

    name: str
    role: str
    """'chosen', 'defaults', 'peer' or 'bound' (`BOUNDS`)."""
    cost: float
    attainment: float
    finished: Finished


def _same(a: Trace, b: Trace) -> bool:
    return (
        np.array_equal(a.arrivals, b.arrivals)
        and np.array_equal(a.input_tokens, b.input_tokens)
        and np.array_equal(a.output_tokens, b.output_tokens)
    )


def measure(finished: Finished) -> Measure:
    return Measure(cost=finished.summary.cost_usd, attainment=finished.summary.slo_attainment)


class Problem:
    """One scenario's tuning problem (module docstring); `calibration_runs` counts the runs
    the warm start's calibration took."""

    def __init__(
        self,
        *,
        scenario: Scenario,
        seeds: int,
        holdout: float,
        sweep: Sweep,
        policy: PolicySpace[Any],
        slo: SLO | None = None,
    ) -> None:
        if scenario.several_models:
            raise ScenarioError(f'{scenario.source}: tune takes a scenario of one model')
        if seeds < 1:
            raise ValueError(f'seeds must be ≥ 1, got {seeds}')
        self.scenario = scenario
        self.sweep = sweep
        self.policy = policy
        self.model = scenario.models[0]
        first = self._trace(scenario.seed)
        try:
            self.cut = parts.cut_time(trace=first, holdout=holdout)
            drawn = [first]
            for seed in range(scenario.seed + 1, scenario.seed + seeds):
                trace = self._trace(seed)
                if not any(_same(trace, other) for other in drawn):
                    drawn.append(trace)
            draws = [parts.split(trace=trace, cut=self.cut) for trace in drawn]
        except ValueError as exc:
            raise ScenarioError(f'{scenario.source}: {exc}') from None
        self.draws: tuple[parts.Parts, ...] = tuple(draws)
        search = self._workloads(self.draws[0].search)
        self.slos = (
            {self.model.name: slo}
            if slo is not None
            else model_slos(scenario=scenario, workloads=search)
        )
        self.slo = self.slos[self.model.name]
        stated = intents(scenario=scenario, workloads=search, slos=self.slos)
        self.config = core_config(name=policy.policy, intents=stated)
        self.base = self.config.model(model_id=self.model.model_id, namespace=self.namespace)
        self.capacities: dict[str, float] | None = None
        self.calibration_runs = 0
        if scenario.warm_start:
            before = self._runs()
            self.capacities = self._calibrate(search)
            self.calibration_runs = self._runs() - before

    @property
    def namespace(self) -> str:
        return self.model.variants[0].namespace

    @property
    def variant_names(self) -> tuple[str, ...]:
        return tuple(v.name for v in self.model.variants)

    def _trace(self, seed: int) -> Trace:
        traces = build_workloads(scenario=replace(self.scenario, seed=seed)).traces
        return traces[self.model.name]

    def _workloads(self, trace: Trace) -> Workloads:
        return Workloads(traces={self.model.name: trace})

    def _calibrate(self, workloads: Workloads) -> dict[str, float]:
        return calibrate_capacities(
            scenario=self.scenario, workloads=workloads, slos=self.slos, sweep=self.sweep
        )

    def _runs(self) -> int:
        return self.sweep.executed + self.sweep.reused

    def settings(self, candidate: Candidate[Any]) -> ModelConfig:
        """The model's configuration under `candidate`: the recommended one with its settings."""
        return self.policy.resolve(settings=candidate.settings, base=self.base)

    def policy_config(self, candidate: Candidate[Any]) -> Config:
        """The core's configuration for `candidate`: the recommended one, the model's entry
        with its settings."""
        tuned = self.settings(candidate)
        return replace(
            self.config,
            by_model=tuple(
                (key, tuned if key == self.model.model_id else model)
                for key, model in self.config.by_model
            ),
        )

    def variants(
        self, *, candidate: Candidate[Any], trace: Trace, capacities: Mapping[str, float] | None
    ) -> tuple[VariantSpec, ...]:
        """The offered variants with `candidate`'s bounds (`space.bounded`), starting as the
        scenario says (moved inside the bounds) or, with a warm start, at the fleet `trace`'s
        first minutes need on them (by `capacities`, within the bounds)."""
        offered = bounded(candidate=candidate, variants=self.model.variants)
        if capacities is None:
            return offered
        fleet = warm_fleet(variants=offered, workload=trace, capacities=capacities)
        return with_initial(variants=offered, initial=fleet, where=self.scenario.source)

    def run_spec(
        self,
        *,
        candidate: Candidate[Any],
        name: str,
        trace: Trace,
        capacities: Mapping[str, float] | None,
    ) -> RunSpec:
        """`candidate` on `trace` (the start fleet as `variants` says)."""
        return RunSpec(
            traces={self.model.name: trace},
            variants=self.variants(candidate=candidate, trace=trace, capacities=capacities),
            policy=CorePolicy(name=name, config=self.policy_config(candidate)),
            settings=self.scenario.settings,
            slos=self.slo,
            inventory=self.scenario.inventory,
        )

    def evaluate(self, pairs: Sequence[tuple[Candidate[Any], int]]) -> list[Measure]:
        """Each (candidate, draw) run on that draw's search part: one round of the sweep."""
        tasks = [
            self.run_spec(
                candidate=c, name=c.name, trace=self.draws[d].search, capacities=self.capacities
            )
            for c, d in pairs
        ]
        return [measure(f) for f in self.sweep.run(tasks=tasks)]

    def held_back(
        self, *, chosen: Candidate[Any], defaults: Candidate[Any], peers: Sequence[str]
    ) -> tuple[list[Row], int]:
        """The chosen candidate, the defaults and `peers` on the held-back part, and how many
        runs that took (the held-back part's calibration and the peers' searches included)."""
        before = self._runs()
        trace = self.draws[0].held_back
        workloads = self._workloads(trace)
        scenario = replace(self.scenario, policies=tuple(peers))
        capacities = None
        if needs_capacities(scenario=scenario):
            capacities = self._calibrate(workloads)
        if scenario.warm_start:
            assert capacities is not None
            fleet = warm_fleet(variants=self.model.variants, workload=trace, capacities=capacities)
            scenario = with_start_fleet(scenario=scenario, initial=fleet)
        policies = build_policies(
            scenario=scenario,
            workloads=workloads,
            slos=self.slos,
            capacities=capacities,
            sweep=self.sweep,
        )
        start = capacities if scenario.warm_start else None
        tasks = [
            self.run_spec(candidate=chosen, name='chosen', trace=trace, capacities=start),
            self.run_spec(candidate=defaults, name='defaults', trace=trace, capacities=start),
        ]
        tasks += [
            RunSpec(
                traces=workloads.traces,
                variants=scenario.variants,
                policy=policy,
                settings=scenario.settings,
                slos=self.slo,
                inventory=scenario.inventory,
            )
            for policy in policies
        ]
        finished = self.sweep.run(tasks=tasks)
        roles = [
            'chosen',
            'defaults',
            *('bound' if p.name in BOUNDS else 'peer' for p in policies),
        ]
        names = [chosen.name, defaults.name, *(p.name for p in policies)]
        rows = [
            Row(name=n, role=r, cost=f.summary.cost_usd, attainment=_attained(f), finished=f)
            for n, r, f in zip(names, roles, finished, strict=True)
        ]
        return rows, self._runs() - before


def _attained(finished: Finished) -> float:
    value = finished.summary.slo_attainment
    return 0.0 if math.isnan(value) else value
