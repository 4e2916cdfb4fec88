"""What a sweep runs: tasks, and the one every search needs, a simulated run (`RunSpec`).

Why: the runner (`sweep.Sweep`) knows nothing of simulations; it runs `Task`s, each a picklable
value that can name its inputs (`identity`, hashed for the run cache) and compute its result
(`__call__`) wherever it is sent. `RunSpec` is a run of the simulator: (workload, fleet, policy
with its settings, loop settings, SLO) → `Finished` (the run's summary, and the whole
`SimResult` when asked for); the workload's seed is in its trace, drawn before the run. A task
must not depend on anything outside itself that its `identity` does not name (a module constant
patched by a benchmark is named by that benchmark's task), or the cache would hand back a run
of other inputs.

A task may also be `Splittable`: `split` parts it into what many tasks of a sweep hold (the
same object: a `RunSpec`'s workload, its largest input by far) and the rest, and `rejoined` puts
them back. An executor that sends tasks over a network (`on_ray`) sends the shared part once
and each task without it; the others ignore it.

`SimResult.wall_seconds` is the seconds the run took where it ran (the one clock read here, for
the report; a result from the cache keeps the time it took then).

What fails: whatever `runner.run` raises for the spec (bad settings, a bad fleet, a policy
returning an unknown variant) is raised by the call, in the worker, and re-raised by the sweep.
"""

from __future__ import annotations

import copy
import dataclasses
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol, Self, TypeVar, cast, runtime_checkable

from llmscaler.sim import runner
from llmscaler.sim.report import summary as metrics
from llmscaler.sim.vocabulary import Policy, SimResult, Trace, VariantSpec

R_co = TypeVar('R_co', covariant=True)


class Task(Protocol[R_co]):
    """A unit of a sweep: picklable, and pure in what `identity` names."""

    @property
    def label(self) -> str:
        """A short name for error messages."""
        ...

    def identity(self) -> object:
        """Everything the result depends on, picklable (the run cache hashes it)."""
        ...

    def __call__(self) -> R_co:
        """Compute the result (in whatever process the executor chose)."""
        ...


@runtime_checkable
class Splittable(Protocol):
    """A task whose largest input is shared by many tasks of a sweep (module docstring)."""

    def split(self) -> tuple[object, Self]:
        """(the shared input, this task without it): `rejoined` of the one on the other is
        this task again."""
        ...

    def rejoined(self, *, shared: object) -> Self:
        """This task with `shared` in place of what `split` took out."""
        ...


@dataclass(frozen=True, slots=True)
class Finished:
    """A simulated run's outcome: its summary, and the whole result when it was kept."""

    summary: metrics.PolicySummary
    result: SimResult | None


@dataclass(frozen=True, slots=True)
class RunSpec:
    """One simulated run: `runner.run` on these inputs, summarized against `slos`.

    `policy` is sent as it is before the run (a fresh policy: its memory is built by the run,
    in a copy, so that the task gives the same result however often it runs);
    `keep` keeps the whole `SimResult` (timelines, every request) in the outcome, for a report.
    """

    traces: Trace | Mapping[str, Trace]
    variants: Sequence[VariantSpec]
    policy: Policy
    settings: runner.SimSettings
    slos: metrics.SLOs
    inventory: Mapping[str, int] | None = None
    keep: bool = False

    @property
    def label(self) -> str:
        return self.policy.name

    def identity(self) -> object:
        return (
            'run',
            self.traces,
            tuple(self.variants),
            self.policy,
            self.settings,
            self.slos,
            self.inventory,
            self.keep,
        )

    def split(self) -> tuple[object, RunSpec]:
        # An empty mapping holds the place, so that the rest is still a `RunSpec` (pickled by
        # the same code, typed alike); it is only ever run rejoined.
        return self.traces, dataclasses.replace(self, traces={})

    def rejoined(self, *, shared: object) -> RunSpec:
        return dataclasses.replace(self, traces=cast(Trace | Mapping[str, Trace], shared))

    def __call__(self) -> Finished:
        began = time.perf_counter()
        # A copy runs: policies keep what they learn in themselves, and this task may run
        # again in this process (an in-process sweep, a cache miss) or be hashed after.
        policy = copy.deepcopy(self.policy)
        result = runner.run(
            trace=self.traces,
            variants=self.variants,
            policy=policy,
            settings=self.settings,
            inventory=self.inventory,
        )
        notes = getattr(policy, 'notes', None)
        if callable(notes):  # what the policy learnt about its own run (the clairvoyant's)
            result.notes.extend(notes())
        result.wall_seconds = time.perf_counter() - began
        summary = metrics.summarize(result=result, slo=self.slos)
        return Finished(summary=summary, result=result if self.keep else None)
