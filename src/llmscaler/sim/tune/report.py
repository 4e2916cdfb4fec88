"""The tuner's report: what was searched, what was chosen, and how it does on the held-back part.

Why: a configuration found by search is only as believable as the comparison beside it. The
report (report.md) states the goal, the SLO and the cut; the search's spending (simulations of
the budget, the calibration's and the comparison's apart, wall time); the chosen settings
against the recommended ones, and the offered variants' replica bounds against the scenario's;
the held-back part's table (the chosen configuration, the defaults and every peer, each with
its cost and attainment, and the cheapest peer that meets the goal); and the cost–attainment
front of every configuration tried on the search part.
`front` is the same front as data (front.json).

A configuration is on the front when no other tried one is as cheap and attains at least as
much, one of them strictly. Attainment on the search part is the worst draw's, cost the mean
over the draws a configuration ran on.

What fails: nothing; NaN figures are written as "n/a" (markdown) and null (JSON).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from llmscaler.sim.tune.problem import Row
from llmscaler.sim.tune.search import Trial
from llmscaler.sim.tune.space import Candidate, bounded
from llmscaler.sim.tune.tuned import Tuned


def on_front(trials: Sequence[Trial[Candidate[Any]]]) -> set[str]:
    """Names of the trials no other trial dominates (cheaper or as cheap, attaining as much or
    more, one of the two strictly)."""
    front = set()
    for trial in trials:
        dominated = any(
            other.cost <= trial.cost
            and other.attainment >= trial.attainment
            and (other.cost < trial.cost or other.attainment > trial.attainment)
            for other in trials
        )
        if not dominated:
            front.add(trial.name)
    return front


def cheapest_peer(*, rows: Sequence[Row], goal: float) -> Row | None:
    """The cheapest peer meeting `goal` on the held-back part (ties: by name), or None."""
    meeting = [r for r in rows if r.role == 'peer' and r.attainment >= goal]
    return min(meeting, key=lambda r: (r.cost, r.name), default=None)


def _share(value: float) -> str:
    return 'n/a' if math.isnan(value) else f'{value * 100:.2f} %'


def _cell(value: object) -> str:
    if isinstance(value, float):
        return f'{value:.6g}'
    # An empty string is a value set (`analyzerName: ''` selects the percentage analyzer).
    return "''" if value == '' else str(value)


def _number(value: float) -> float | None:
    return None if math.isnan(value) else value


def front(*, tuned: Tuned) -> dict[str, Any]:
    """front.json: every configuration tried, and the held-back rows."""
    trials = tuned.outcome.trials
    best = on_front(trials)
    return {
        'policy': tuned.options.policy.policy,
        'goal': tuned.options.goal,
        'slo': {'ttft': tuned.slo.ttft, 'itl': tuned.slo.itl},
        'chosen': tuned.chosen.name,
        'tried': [
            {
                'name': t.name,
                'draws': len(t.runs),
                'cost_usd': t.cost,
                'attainment': _number(t.attainment),
                'meets_goal': t.meets(tuned.options.goal),
                'on_front': t.name in best,
            }
            for t in sorted(trials, key=lambda t: (t.cost, t.name))
        ],
        'held_back': [
            {
                'name': r.name,
                'role': r.role,
                'cost_usd': r.cost,
                'attainment': _number(r.attainment),
            }
            for r in tuned.held_back
        ],
    }


def _bounds(tuned: Tuned) -> list[tuple[str, int, int]]:
    """(`variant minReplicas`/`maxReplicas`, the scenario's, chosen) for every variant offered."""
    problem = tuned.problem
    scenario = {v.name: v for v in problem.model.variants}
    found = []
    for spec in bounded(candidate=tuned.chosen, variants=problem.model.variants):
        given = scenario[spec.name]
        found.append((f'{spec.name} minReplicas', given.min_replicas, spec.min_replicas))
        found.append((f'{spec.name} maxReplicas', given.max_replicas, spec.max_replicas))
    return found


def _entries(tuned: Tuned) -> tuple[dict[str, Any], dict[str, Any]]:
    """The ConfigMap entries of the chosen configuration and of the defaults."""
    problem, policy = tuned.problem, tuned.options.policy
    model = problem.model.model_id
    chosen = policy.entry(config=tuned.settings, model_id=model, namespace='')
    default = policy.entry(config=problem.settings(tuned.defaults), model_id=model, namespace='')
    return chosen, default


def _settings_table(tuned: Tuned) -> list[str]:
    problem = tuned.problem
    chosen, default = _entries(tuned)
    lines = ['| key | chosen | recommended default |', '|---|---|---|']
    for key in chosen:
        if key in ('model_id', 'namespace', 'perfParms'):
            continue
        mark = '' if chosen[key] == default.get(key) else ' ←'
        lines.append(f'| `{key}` | {_cell(chosen[key])}{mark} | {_cell(default.get(key))} |')
    variants = problem.variant_names
    offered = '+'.join(tuned.chosen.offered)
    mark = '' if set(tuned.chosen.offered) == set(variants) else ' ←'
    lines.append(f'| variants | {offered}{mark} | {"+".join(sorted(variants))} |')
    for key, given, chosen_bound in _bounds(tuned):
        mark = '' if chosen_bound == given else ' ←'
        lines.append(f'| {key} | {chosen_bound}{mark} | {given} |')
    return lines


def markdown(*, tuned: Tuned) -> str:
    """report.md (module docstring)."""
    options, problem, outcome = tuned.options, tuned.problem, tuned.outcome
    goal = options.goal
    held = problem.draws[0].held_back
    searched = problem.draws[0].search
    lines = [
        f'# `llmscaler tune`: {tuned.scenario.name}',
        '',
        f'- Workload: {tuned.scenario.workload_text}; SLO TTFT ≤ {tuned.slo.ttft:g} s, mean ITL '
        f'≤ {tuned.slo.itl * 1000:g} ms; goal: {goal * 100:g} % of requests within it.',
        f'- Cut at {problem.cut:,.0f} s: the search ran on the first part ({len(searched):,} '
        f'requests) with {len(problem.draws)} draw(s) of the workload (seeds from '
        f'{tuned.scenario.seed}); the comparison below is on the held-back part ({len(held):,} '
        'requests), which no search run saw.',
        f'- Policy tuned: `{options.policy.policy}`.',
        f'- Search: {outcome.runs} simulations of a budget of {options.budget} (successive '
        f'halving over {outcome.draws} draw(s); {len(outcome.trials)} of {tuned.candidates} '
        f'configurations tried); calibration {problem.calibration_runs} runs; held-back '
        f'comparison {tuned.held_back_runs} runs; {tuned.wall_seconds:.0f} s in all.',
        '',
        '## Chosen configuration',
        '',
        f'`{tuned.chosen.name}`: on the search part, worst draw {_share(outcome.best.attainment)}, '
        f'${outcome.best.cost:,.2f} a run'
        + (
            ''
            if outcome.best.meets(goal)
            else f' — **no configuration tried met {goal:g}**; this is the one attaining most'
        ),
        '',
        *_settings_table(tuned),
        '',
        "Apply: `kubectl apply -f configmap.yaml` (the model's namespace-local "
        f'`{tuned.options.policy.configmap_name}`) and the VariantAutoscaling fields of '
        '`variantautoscalings.yaml` (their `scaleTargetRef` names a Deployment called like the '
        'variant: edit it to yours).',
    ]
    dropped = sorted(set(problem.variant_names) - set(tuned.chosen.offered))
    if dropped:
        lines.append(
            f'Variants not offered: {", ".join(dropped)} — delete their VariantAutoscalings.'
        )
    lines += [
        '',
        '## On the held-back part',
        '',
        '| configuration | role | cost | SLO attainment | meets goal |',
        '|---|---|---:|---:|---|',
    ]
    for row in tuned.held_back:
        meets = 'yes' if row.attainment >= goal else 'no'
        lines.append(
            f'| {row.name} | {row.role} | ${row.cost:,.2f} | {_share(row.attainment)} | {meets} |'
        )
    peer = cheapest_peer(rows=tuned.held_back, goal=goal)
    chosen_row, default_row = tuned.held_back[0], tuned.held_back[1]
    lines += [
        '',
        f'Chosen vs defaults: ${chosen_row.cost:,.2f} vs ${default_row.cost:,.2f}, '
        f'{_share(chosen_row.attainment)} vs {_share(default_row.attainment)}. Cheapest peer '
        'meeting the goal: '
        + (f'{peer.name}, ${peer.cost:,.2f}, {_share(peer.attainment)}.' if peer else 'none.'),
        '',
        '## Every configuration tried (search part)',
        '',
        'Sorted by cost; ★: on the cost–attainment front.',
        '',
        '| configuration | draws | mean cost | worst attainment | meets goal |',
        '|---|---:|---:|---:|---|',
    ]
    best = on_front(outcome.trials)
    for trial in sorted(outcome.trials, key=lambda t: (t.cost, t.name)):
        star = ' ★' if trial.name in best else ''
        lines.append(
            f'| {trial.name}{star} | {len(trial.runs)} | ${trial.cost:,.2f} | '
            f'{_share(trial.attainment)} | {"yes" if trial.meets(goal) else "no"} |'
        )
    return '\n'.join(lines) + '\n'


def summary_lines(*, tuned: Tuned) -> list[str]:
    """A few lines for the terminal: the spending, the choice, the held-back figures."""
    goal = tuned.options.goal
    chosen, default = tuned.held_back[0], tuned.held_back[1]
    peer = cheapest_peer(rows=tuned.held_back, goal=goal)
    met = '' if tuned.outcome.best.meets(goal) else ' (no configuration tried met the goal)'
    return [
        f'search: {tuned.outcome.runs} simulations (budget {tuned.options.budget}), '
        f'calibration {tuned.problem.calibration_runs}, held-back comparison '
        f'{tuned.held_back_runs}; {tuned.wall_seconds:.0f} s',
        f'chosen: {tuned.chosen.name}{met}',
        f'held-back part: chosen ${chosen.cost:,.2f} at {_share(chosen.attainment)}, defaults '
        f'${default.cost:,.2f} at {_share(default.attainment)}; cheapest peer meeting '
        f'{goal * 100:g} %: '
        + (f'{peer.name} ${peer.cost:,.2f} at {_share(peer.attainment)}' if peer else 'none'),
    ]


def changed_settings(*, tuned: Tuned) -> list[str]:
    """The keys (and the variants) where the chosen configuration differs from the defaults,
    as `key default → chosen`."""
    problem = tuned.problem
    chosen, default = _entries(tuned)
    found = [
        f'{key} {_cell(default.get(key))} → {_cell(value)}'
        for key, value in chosen.items()
        if value != default.get(key)
    ]
    if set(tuned.chosen.offered) != set(problem.variant_names):
        found.append(
            f'variants {"+".join(sorted(problem.variant_names))} → {"+".join(tuned.chosen.offered)}'
        )
    found += [
        f'{key} {given} → {chosen}' for key, given, chosen in _bounds(tuned) if given != chosen
    ]
    return found
