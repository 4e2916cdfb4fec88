"""The policy benchmark's workloads: two Azure traces and five synthetic stress cases, as scenarios.

Why: policies win or lose on the shape of the load — a step, a burst, a slow ramp, long prompts,
shared prefixes — so the benchmark (bench/policy.py) runs each policy on cases that each stress
one of them, and the bound test runs one of them too. Each case is a scenario document on the
built-in fleet (Llama-3.1-8B on H100 at $3.90/h and L40S at $1.90/h, 90 s start-up), seeded,
and starts warm (`warm_start`: every policy starts at the fleet the first minutes need, so no
case is decided by a cold start). Every case lasts `DURATION` seconds (30 minutes: the bench
runs seven cases times nine policies, two of them searched by simulation, in a few minutes),
`multi-turn` 10; `case(..., duration=)` sets another.

- `azure-conv`, `azure-code`: the first 30 minutes of the bundled Azure 2023 traces, the
  conversation trace at rate ×6 and the code trace at ×2 (each peak then needs 4 or more
  replicas; the code trace's long prompts need that many already at ×2, and at ×3 not even
  the whole fleet, 8 H100 and 12 L40S, meets 99 %).
- `diurnal-flash`: a day compressed into half an hour (six 5-minute levels, ×0.5 to ×1.4 of
  16 req/s of conversation traffic) with a flash crowd of ×2.5 for two minutes at its peak.
- `on-off`: code-like traffic at 14 req/s for five minutes, then ×0.05 for five, three times.
- `ramp`: conversation traffic rising from ×0.1 to ×1.0 of 40 req/s in ten equal steps.
- `long-prompts`: RAG-like: every prompt carries a 3,000-token retrieved context (one of 2,000,
  so a prefix cache would rarely help; caching is off) before its question, at 10 req/s.
- `multi-turn`: conversations with shared system prompts (8 of 1,000 tokens) and follow-up turns
  (half of the requests continue one of 200 open sessions), prefix caching on and the
  prefix-aware router, at 11 req/s for 10 minutes (`SHORT`: with the prefix-aware router's
  scoring these runs are the slowest per request).

`HELD_OUT` are five more, never used to choose a constant of any policy: the benchmark
reports them apart (bench/policy.py), as a check that what holds on the seven cases holds on
load they were not tuned on:

- `code-steady`: code traffic at 25 req/s throughout.
- `conv-fall`: conversation traffic falling from 40 req/s to a tenth of it in ten 3-minute
  steps (each step shorter than a scale-down delay).
- `conv-bursts`: conversation traffic at 12 req/s with two 3-minute bursts of ×1.8.
- `conv-low`: conversation traffic at 3 req/s (a fraction of one replica).
- `code-sawtooth`: code traffic at 12 req/s, ×0.3 for ten minutes, ×1 for ten, ×0.3 again
  (lulls longer than a scale-down delay plus a start-up).

`BURSTS` holds one more, for the fast path for bursts (bench/burst.py runs it with `on-off`):

- `silent-bursts`: conversation traffic at 24 req/s for five minutes, then nothing for fifteen
  (longer than a scale-down delay and a start-up together), three bursts in 45 minutes: each
  returning burst meets the fleet the silence left.

`PERIODS` names the cases whose load repeats, with their period in seconds (bench/periodic.py
judges the learnt recurrence on them): `on-off`, `silent-bursts` and one more, outside the
benchmark's tables:

- `diurnal-days`: three compressed days of ten minutes with the same shape each day,
  conversation traffic at ×0.3, ×1.2 and ×0.3 of 20 req/s for a third of the day each.

`runs` turns a case into the runs of a sweep, one per policy (the sweep runner's tests and
bench/sweep.py use it).

What fails: `case` (and so `runs`) raises `KeyError` naming the cases for an unknown name and
`ValueError` for a non-positive duration.
"""

from __future__ import annotations

import copy
import math
from pathlib import Path
from typing import Any

from llmscaler.sim.scenario import loader
from llmscaler.sim.scenario.setup import build_policies
from llmscaler.sim.scenario.workloads import build_workloads, model_slos
from llmscaler.sim.sweep.tasks import RunSpec

DURATION = 1800.0
"""Seconds of every case but those of `SHORT`."""
SHORT = {'multi-turn': 600.0}
LONG = {'silent-bursts': 2700.0}
AZURE_RATE_SCALES = {'azure-conv': 6.0, 'azure-code': 2.0}

_VARIANTS = [
    {'name': 'h100', 'preset': 'llama-3.1-8b-h100', 'max_replicas': 8},
    {'name': 'l40s', 'preset': 'llama-3.1-8b-l40s', 'max_replicas': 12},
]


def _levels(*, step: float, multipliers: list[float]) -> list[tuple[float, float, float]]:
    return [(i * step, step, m) for i, m in enumerate(multipliers)]


_SYNTHETIC: dict[str, dict[str, Any]] = {
    'diurnal-flash': {
        'synthetic': {
            'preset': 'azure-conv',
            'rate': 16.0,
            'events': [
                *_levels(step=300.0, multipliers=[0.5, 0.8, 1.2, 1.4, 1.0, 0.6]),
                (960.0, 120.0, 2.5),
            ],
        }
    },
    'on-off': {
        'synthetic': {
            'preset': 'azure-code',
            'rate': 14.0,
            'events': [(300.0, 300.0, 0.05), (900.0, 300.0, 0.05), (1500.0, 300.0, 0.05)],
        }
    },
    'ramp': {
        'synthetic': {
            'preset': 'azure-conv',
            'rate': 40.0,
            'events': _levels(step=180.0, multipliers=[(i + 1) / 10 for i in range(10)]),
        }
    },
    'long-prompts': {
        'synthetic': {
            'preset': 'azure-conv',
            'rate': 10.0,
            'prefixes': {'system_prompts': 2000, 'system_tokens': 3000, 'skew': 0.0},
        }
    },
    'multi-turn': {
        'synthetic': {
            'preset': 'azure-conv',
            'rate': 11.0,
            'prefixes': {
                'system_prompts': 8,
                'system_tokens': 1000,
                'followup': 0.5,
                'open_sessions': 200,
            },
        }
    },
    'code-steady': {'synthetic': {'preset': 'azure-code', 'rate': 25.0}},
    'conv-fall': {
        'synthetic': {
            'preset': 'azure-conv',
            'rate': 40.0,
            'events': _levels(step=180.0, multipliers=[1.0 - i / 10 for i in range(10)]),
        }
    },
    'conv-bursts': {
        'synthetic': {
            'preset': 'azure-conv',
            'rate': 12.0,
            'events': [(400.0, 180.0, 1.8), (1200.0, 180.0, 1.8)],
        }
    },
    'conv-low': {'synthetic': {'preset': 'azure-conv', 'rate': 3.0}},
    'code-sawtooth': {
        'synthetic': {
            'preset': 'azure-code',
            'rate': 12.0,
            'events': _levels(step=600.0, multipliers=[0.3, 1.0, 0.3]),
        }
    },
}
_SYNTHETIC['silent-bursts'] = {
    'synthetic': {
        'preset': 'azure-conv',
        'rate': 24.0,
        'events': [(300.0, 900.0, 0.0), (1500.0, 900.0, 0.0)],
    }
}
DAY = 600.0
"""Seconds of one compressed day of `diurnal-days`."""
_SYNTHETIC['diurnal-days'] = {
    'synthetic': {
        'preset': 'azure-conv',
        'rate': 20.0,
        'events': [
            (day * DAY + i * DAY / 3, DAY / 3, multiplier)
            for day in range(3)
            for i, multiplier in enumerate((0.3, 1.2, 0.3))
        ],
    }
}
AZURE_TRACES = {
    'azure-conv': 'AzureLLMInferenceTrace_conv.csv',
    'azure-code': 'AzureLLMInferenceTrace_code.csv',
}
HELD_OUT = ('code-steady', 'conv-fall', 'conv-bursts', 'conv-low', 'code-sawtooth')
"""The cases no policy was tuned on, reported apart."""
BURSTS = ('silent-bursts',)
"""The cases of the fast path for bursts (bench/burst.py), beside `on-off`."""
PERIODS = {'on-off': 600.0, 'diurnal-days': DAY, 'silent-bursts': 1200.0}
"""The cases whose load repeats, and its period (s)."""
NAMES = (
    *AZURE_TRACES,
    *(name for name in _SYNTHETIC if name not in (*HELD_OUT, *BURSTS, 'diurnal-days')),
)
"""The benchmark's cases, in its order."""


def case(
    *,
    name: str,
    policies: list[str],
    duration: float | None = None,
    traces: Path | None = None,
    seed: int = 1,
) -> dict[str, Any]:
    """The scenario document of case `name` running `policies` (module docstring); `duration`
    None: the case's own; `seed` draws the synthetic load (and a scaled trace's copies);
    `traces` is the folder holding the Azure trace files, which the Azure cases need (ValueError
    without it)."""
    if duration is None:
        duration = SHORT.get(name, LONG.get(name, DURATION))
    if not (duration > 0 and math.isfinite(duration)):
        raise ValueError(f'duration must be > 0 and finite, got {duration}')
    settings: dict[str, Any] = {}
    if name in AZURE_TRACES:
        if traces is None:
            raise ValueError(
                f'case {name} replays {AZURE_TRACES[name]}: give the folder of the traces'
            )
        workload: dict[str, Any] = {
            'trace': {
                'path': str(traces / AZURE_TRACES[name]),
                'rate_scale': AZURE_RATE_SCALES[name],
                'duration': duration,
            }
        }
    elif name in _SYNTHETIC:
        workload = copy.deepcopy(_SYNTHETIC[name])
        workload['synthetic']['duration'] = duration
        if name == 'multi-turn':
            settings = {'prefix_caching': True, 'router': 'prefix-aware'}
    else:
        known = (*NAMES, *HELD_OUT, *BURSTS, 'diurnal-days')
        raise KeyError(f'unknown case {name!r}; cases: {", ".join(known)}')
    return {
        'name': name,
        'variants': copy.deepcopy(_VARIANTS),
        'workload': workload,
        'policies': list(policies),
        'settings': settings,
        'warm_start': True,
        'seed': seed,
    }


def runs(
    *, name: str, policies: list[str], duration: float | None = None, seed: int = 1
) -> list[RunSpec]:
    """Each of `policies` on synthetic case `name` as a run of a sweep (`sweep.tasks.RunSpec`),
    cold (warm start off), all on one workload object: what the sweep runner's tests and
    bench/sweep.py send to executors. Policies that search (the bound, `static-best`) search
    here, one run after another."""
    document = case(name=name, policies=policies, duration=duration, seed=seed)
    document['warm_start'] = False
    setup = loader.from_document(document=document, where=name)
    workloads = build_workloads(scenario=setup)
    slos = model_slos(scenario=setup, workloads=workloads)
    return [
        RunSpec(
            traces=workloads.traces,
            variants=setup.variants,
            policy=policy,
            settings=setup.settings,
            slos=next(iter(slos.values())),  # the cases serve one model
        )
        for policy in build_policies(scenario=setup, workloads=workloads, slos=slos)
    ]
