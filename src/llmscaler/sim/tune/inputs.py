"""What `llmscaler tune` tunes: a scenario file, a benchmark case by name, or the built-in one.

Why: `--scenario` names a file as `llmscaler simulate`'s does, and also one of the benchmark's
cases (`sim.scenario.cases`, e.g. `diurnal-flash`), so a user can try the tuner on a known load
without writing a scenario; the case runs the scenario's default policies as peers. The
command line's other choices (a trace, a rate scale, a window, a seed, a warm start, the peers,
the SLO) are applied with `document.with_overrides`, as simulate's are, and the document is
validated by the scenario loader (`load`).

What fails: `ScenarioError` (one line) for a file that cannot be read or parsed, a name that is
neither a file nor a case, and a case replaying an Azure trace (its file is not known here: give
`--trace` on another scenario instead).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from llmscaler.sim.scenario import cases, loader
from llmscaler.sim.scenario import document as scenario_document
from llmscaler.sim.scenario.document import DEFAULT_POLICIES, ScenarioError
from llmscaler.sim.scenario.validated import Scenario


def read(*, scenario: str | None) -> tuple[dict[str, Any], str]:
    """(the scenario document, where it came from) for `--scenario` (None: built-in)."""
    if scenario is None:
        return dict(scenario_document.DEFAULT_DOCUMENT), 'scenario'
    path = Path(scenario)
    if path.exists() or scenario not in (*cases.NAMES, *cases.HELD_OUT, *cases.BURSTS):
        return scenario_document.read_document(path=path), scenario
    try:
        return cases.case(name=scenario, policies=list(DEFAULT_POLICIES)), scenario
    except ValueError as exc:
        raise ScenarioError(f'--scenario {scenario}: {exc}') from None


def load(
    *,
    scenario: str | None,
    overrides: Mapping[str, Any],
    peers: Sequence[str] = (),
    slo: Mapping[str, float] | None = None,
) -> Scenario:
    """The scenario `--scenario` names (`read`) with the command line's `overrides` (keyword
    arguments of `document.with_overrides`), `peers` as its policies when given, and `slo`
    (`ttft`, `itl` in seconds) as its SLO when given; validated."""
    document, where = read(scenario=scenario)
    document = scenario_document.with_overrides(document=document, policies=peers, **overrides)
    if slo:
        document['slo'] = dict(slo)
    return loader.from_document(document=document, where=where)
