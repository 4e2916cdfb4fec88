"""`llmscaler tune`'s course: split, search, compare on the held-back part, write.

Why: the command and the benchmark (bench/tune.py) must do the same thing; this is that thing.
`tune` builds the problem (`problem.Problem`: the draws, the cut, the recommended configuration of
the policy tuned, `Options.policy`), lists the candidates (`space.grid`), runs the successive
halving within the budget (`search.search`), then the chosen candidate, the defaults and the
scenario's policies on the held-back part, all through the one sweep given; `write` puts the objects
to apply and the report into a folder.

The budget counts the search's simulations only; the warm start's calibration and the
held-back comparison (with the peers' own searches, `static-best` and `clairvoyant`) are counted
apart and reported. Wall-clock time is read here, for the report, and nowhere in the search.

What fails: what `problem.Problem` raises (`ScenarioError`, `TraceError`), `ValueError` for a
budget, seed count or goal out of range, `OSError` when the folder cannot be written.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

from llmscaler.sim.scenario.validated import Scenario
from llmscaler.sim.sweep.sweep import Sweep
from llmscaler.sim.tune import output, report
from llmscaler.sim.tune.problem import Problem
from llmscaler.sim.tune.search import search
from llmscaler.sim.tune.space import bounded, defaults, grid
from llmscaler.sim.tune.tuned import Options, Tuned


def tune(*, scenario: Scenario, options: Options, sweep: Sweep) -> Tuned:
    """Search `scenario` for its cheapest configuration that meets `options.goal` (module
    docstring); every run through `sweep`."""
    started = time.perf_counter()
    problem = Problem(
        scenario=scenario,
        seeds=options.seeds,
        holdout=options.holdout,
        sweep=sweep,
        policy=options.policy,
        slo=options.slo,
    )
    candidates = grid(
        policy=options.policy,
        space=options.space,
        variants=problem.model.variants,
        goal=options.goal,
        base=problem.base,
    )
    outcome = search(
        candidates=candidates,
        names=[c.name for c in candidates],
        draws=len(problem.draws),
        budget=options.budget,
        goal=options.goal,
        evaluate=problem.evaluate,
    )
    chosen = outcome.best.candidate
    recommended = defaults(policy=options.policy, variants=problem.variant_names)
    rows, held_runs = problem.held_back(
        chosen=chosen, defaults=recommended, peers=scenario.policies
    )
    return Tuned(
        scenario=scenario,
        options=options,
        problem=problem,
        candidates=len(candidates),
        outcome=outcome,
        chosen=chosen,
        settings=problem.settings(chosen),
        defaults=recommended,
        held_back=tuple(rows),
        held_back_runs=held_runs,
        wall_seconds=time.perf_counter() - started,
    )


def write(*, tuned: Tuned, out: Path) -> list[Path]:
    """configmap.yaml, variantautoscalings.yaml, report.md and front.json in `out`."""
    out.mkdir(parents=True, exist_ok=True)
    problem = tuned.problem
    # The bounds the chosen configuration ran with; the start counts are the simulation's own.
    offered = bounded(candidate=tuned.chosen, variants=problem.model.variants)
    files = {
        'configmap.yaml': output.dump(
            [
                output.configmap(
                    policy=tuned.options.policy,
                    config=tuned.settings,
                    model_id=problem.model.model_id,
                    namespace=problem.namespace,
                )
            ]
        ),
        'variantautoscalings.yaml': output.dump(output.variant_autoscalings(variants=offered)),
        'report.md': report.markdown(tuned=tuned),
        'front.json': json.dumps(report.front(tuned=tuned), indent=2, allow_nan=False) + '\n',
    }
    written = []
    for name, text in files.items():
        path = out / name
        path.write_text(text, encoding='utf-8')
        written.append(path)
    return written
