"""Fit the step model's efficiencies to published vLLM measurements; write the validation table.

What it does:

- default: replays every replayable record of `llmscaler.sim.hardware.published` with the fitted
  efficiencies (`stepmodel.FITTED`) and prints the validation table (record, setup, published,
  simulated, ratio, band);
- `--fit`: searches the efficiencies (HBM bandwidth and FLOP fractions, per-step overhead,
  per-all-reduce latency, the sharpness of the linear layers' roofline) that minimise the
  weighted sum of squared log(simulated / published) over the fitted records, by Nelder-Mead
  from `FITTED` (no SciPy: a few hundred replays of about 0.5 s each), and prints the result
  for `stepmodel.FITTED` and each record's residual (a few minutes);
- `--write-docs`: rewrites the fit section and the table of docs/fidelity.md, between their
  markers, from `FITTED` (what the tests hold the simulator to).

Weights of the fit: a printed measurement 1, a figure derived from prose or stated loosely 0.5,
a point of WVA's fitted line between its two runs 0.3 (its batch-1 end is a measurement: 1);
vLLM 0.6.0's TPOT with multi-step scheduling 0.5 (prefill stalls of an engine without chunked
prefill); left out (0): vLLM 0.5.x (CPU-bound engine), the multi-step TTFTs (admission only
every 10 steps, see docs/fidelity.md), and the records that cannot be replayed. The interconnect
efficiency is not fitted (no record separates it from the all-reduce latency): 0.7, NCCL's
usual bus efficiency on NVLink.

Usage: python bench/fidelity.py [--fit] [--write-docs]
"""

from __future__ import annotations

import argparse
import dataclasses
import math
import time
from collections.abc import Callable, Sequence
from pathlib import Path

import doc_blocks
from llmscaler.sim.hardware import fidelity, published, stepmodel
from llmscaler.sim.hardware.measurement import Figure, Measurement, Provenance

DOC = Path(__file__).resolve().parents[1] / 'docs' / 'fidelity.md'
TABLE = ('<!-- fidelity-table:begin -->', '<!-- fidelity-table:end -->')
FIT = ('<!-- fidelity-fit:begin -->', '<!-- fidelity-fit:end -->')


def weight(m: Measurement) -> float:
    """The record's weight in the fit (module docstring)."""
    version = m.setup.vllm_version or ''
    multi_step = m.key.startswith('sglang060-')
    if fidelity.replayable(m) or version.startswith('0.5'):
        return 0.0
    if multi_step and m.figure is Figure.TTFT:
        return 0.0
    if multi_step and m.figure is Figure.TPOT:
        return 0.5
    if m.provenance is Provenance.FIT:
        return 1.0 if m.load.value == 1 else 0.3
    if m.provenance in (Provenance.DERIVED, Provenance.STATED_APPROX):
        return 0.5
    return 1.0


FITTED_RECORDS = tuple(m for m in published.MEASUREMENTS if weight(m) > 0)

# The search runs on unbounded coordinates: logit of the fractions, log of the times and of
# sharpness − 1.
_NAMES = ('memory', 'flops', 'step_overhead', 'allreduce_latency', 'sharpness')


def _encode(e: stepmodel.Efficiency) -> list[float]:
    def logit(v: float) -> float:
        v = min(v, 0.999)
        return math.log(v / (1 - v))

    return [
        logit(e.memory),
        logit(e.flops),
        math.log(e.step_overhead),
        math.log(max(e.allreduce_latency, 1e-9)),
        math.log(max(e.sharpness - 1, 1e-3)) if math.isfinite(e.sharpness) else math.log(1e3),
    ]


def _decode(x: Sequence[float]) -> stepmodel.Efficiency:
    def sigmoid(v: float) -> float:
        return 1 / (1 + math.exp(-v))

    return stepmodel.Efficiency(
        memory=sigmoid(x[0]),
        flops=sigmoid(x[1]),
        link=stepmodel.FITTED.link,
        step_overhead=math.exp(x[2]),
        allreduce_latency=math.exp(x[3]),
        sharpness=1 + math.exp(x[4]),
    )


def residuals(e: stepmodel.Efficiency) -> list[tuple[Measurement, float]]:
    """(record, log(simulated / published)) over the fitted records."""
    return [(m, math.log(fidelity.simulate(m, efficiency=e) / m.value)) for m in FITTED_RECORDS]


def objective(e: stepmodel.Efficiency) -> float:
    return sum(weight(m) * r * r for m, r in residuals(e))


def nelder_mead(
    f: Callable[[list[float]], float], x0: list[float], *, step: float, iterations: int
) -> tuple[list[float], float]:
    """Minimise f from x0 (a plain Nelder-Mead: reflect, expand, contract, shrink)."""
    n = len(x0)
    simplex = [list(x0)] + [
        [v + (step if i == j else 0.0) for j, v in enumerate(x0)] for i in range(n)
    ]
    values = [f(p) for p in simplex]
    for _ in range(iterations):
        order = sorted(range(n + 1), key=lambda i: values[i])
        simplex = [simplex[i] for i in order]
        values = [values[i] for i in order]
        centre = [sum(p[j] for p in simplex[:-1]) / n for j in range(n)]
        worst = simplex[-1]

        def towards(t: float, w: list[float] = worst, c: list[float] = centre) -> list[float]:
            return [cj + t * (wj - cj) for cj, wj in zip(c, w, strict=True)]

        reflected = towards(-1.0)
        fr = f(reflected)
        if fr < values[0]:
            expanded = towards(-2.0)
            fe = f(expanded)
            simplex[-1], values[-1] = (expanded, fe) if fe < fr else (reflected, fr)
        elif fr < values[-2]:
            simplex[-1], values[-1] = reflected, fr
        else:
            contracted = towards(0.5)
            fc = f(contracted)
            if fc < values[-1]:
                simplex[-1], values[-1] = contracted, fc
            else:
                first = simplex[0]
                for i in range(1, n + 1):
                    simplex[i] = [b + 0.5 * (p - b) for b, p in zip(first, simplex[i], strict=True)]
                    values[i] = f(simplex[i])
    best = min(range(n + 1), key=lambda i: values[i])
    return simplex[best], values[best]


def fit(*, iterations: int) -> stepmodel.Efficiency:
    start = time.perf_counter()
    x, value = nelder_mead(
        lambda x: objective(_decode(x)), _encode(stepmodel.FITTED), step=0.3, iterations=iterations
    )
    e = _decode(x)
    print(f'fit: objective {value:.5f} in {time.perf_counter() - start:.0f} s')
    for name in _NAMES:
        print(f'  {name} = {getattr(e, name):.4g}')
    return e


def fit_summary(e: stepmodel.Efficiency) -> str:
    """The fit section of docs/fidelity.md for efficiencies `e`."""
    res = residuals(e)
    total = sum(weight(m) for m, _ in res)
    rms = math.sqrt(sum(weight(m) * r * r for m, r in res) / total)
    worst = max(res, key=lambda mr: abs(mr[1]))
    lines = [
        '| factor | fitted | meaning |',
        '|---|---|---|',
        f'| memory | {e.memory:.3f} | fraction of the HBM bandwidth reached by weight and KV '
        'reads |',
        f'| flops | {e.flops:.3f} | fraction of the dense tensor-core peak reached by GEMMs and '
        'attention |',
        f'| step_overhead | {1e3 * e.step_overhead:.2f} ms | per step, besides GPU work |',
        f'| allreduce_latency | {1e6 * e.allreduce_latency:.1f} µs | per all-reduce (two per layer '
        'under TP) |',
        f"| sharpness | {e.sharpness:g} | p of the linear layers' smooth max (1: weight reads and "
        'FLOPs add up) |',
        f'| link | {e.link:.2f} (not fitted) | fraction of the interconnect bandwidth |',
        '',
        f'Objective {sum(weight(m) * r * r for m, r in res):.4f} over {len(res)} records (total '
        f'weight {total:g}); weighted RMS of log(simulated / published) {rms:.3f} '
        f'(×{math.exp(rms):.3f}); worst {worst[0].key} at ×{math.exp(worst[1]):.3f}.',
        '',
        '| fitted record | weight | simulated / published |',
        '|---|---|---|',
    ]
    lines += [f'| {m.key} | {weight(m):g} | {math.exp(r):.3f} |' for m, r in res]
    return '\n'.join(lines)


def write_docs() -> None:
    rows = fidelity.rows()
    doc_blocks.write(DOC, markers=TABLE, body=fidelity.table(rows))
    doc_blocks.write(DOC, markers=FIT, body=fit_summary(stepmodel.FITTED))
    inside = sum(r.within_goal for r in rows)
    print(f'wrote {DOC}: {len(rows)} rows, {inside} within ±10 %')


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split('\n', 1)[0])
    parser.add_argument('--fit', action='store_true', help='fit the efficiencies (minutes)')
    parser.add_argument('--iterations', type=int, default=150)
    parser.add_argument('--write-docs', action='store_true', help='rewrite docs/fidelity.md')
    args = parser.parse_args()
    if args.fit:
        fitted = fit(iterations=args.iterations)
        for m, r in residuals(fitted):
            print(f'  {m.key:42s} weight {weight(m):3g}  ×{math.exp(r):.3f}')
        same = dataclasses.replace(fitted, link=stepmodel.FITTED.link)
        print(f'stepmodel.FITTED would be: {same}')
    if args.write_docs:
        write_docs()
    if not (args.fit or args.write_docs):
        print(fidelity.table(fidelity.rows()))


if __name__ == '__main__':
    main()
