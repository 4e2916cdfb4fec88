"""`perfParms` of a `wva-queueing-model-config` entry: configured α, β, γ, δ per accelerator.

Why: the SLO analyzer's tuner (`analyze.learning.kalman`) needs a starting point, and a guess from
one observation can be far off; WVA v0.4 took these four numbers from the VariantAutoscaling's
`modelProfile.accelerators[].perfParms`, with the same names. Here they sit in the queueing
ConfigMap, one list per entry (default or per-model):

    perfParms:
      - acc: H100-80GB                 # the variant's accelerator, as in its VA
        decodeParms: {alpha: 6.9, beta: 0.04}      # ITL = α + β·b (ms)
        prefillParms: {gamma: 21, delta: 0.0004}   # prefill = γ + δ·I·b (ms)

A variant whose accelerator is listed seeds its tuner there, and a restart (an empty state)
starts from there again; a variant not listed keeps the guess from its first observation.

What fails: `perf_parms_list` raises `Invalid` (the entry is then rejected with a one-line
error naming the path, e.g. `perfParms[0].decodeParms.beta`) for anything but a list of such
mappings: unknown fields, a missing parameter, a value not in (0, 3,600,000], an empty or
repeated `acc`.
"""

from __future__ import annotations

from llmscaler.config.fields import LATENCY_MS_MAX, Invalid, type_name

PerfParmsByAccelerator = tuple[tuple[str, tuple[float, float, float, float]], ...]
"""(accelerator, (α, β, γ, δ) ms), sorted by accelerator."""

_GROUPS = {'decodeParms': ('alpha', 'beta'), 'prefillParms': ('gamma', 'delta')}


def _positive(value: object, path: str) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise Invalid(f'must be a number, not {type_name(value)}', path=path, value=value)
    number = float(value)
    if not 0 < number <= LATENCY_MS_MAX:  # NaN fails this too
        raise Invalid(f'must be in (0, {LATENCY_MS_MAX:.15g}]', path=path, value=value)
    return number


def _one(index: int, raw: object) -> tuple[str, tuple[float, float, float, float]]:
    where = f'[{index}]'
    if not isinstance(raw, dict):
        raise Invalid(f'must be a mapping, not {type_name(raw)}', path=where, value=raw)
    for name in sorted(raw, key=str):
        if name != 'acc' and name not in _GROUPS:
            raise Invalid('unknown field', path=f'{where}.{name}', value=raw[name])
    acc = raw.get('acc')
    if not isinstance(acc, str) or not acc:
        raise Invalid('must be a non-empty string', path=f'{where}.acc', value=acc)
    values: list[float] = []
    for group, names in _GROUPS.items():
        block = raw.get(group)
        if not isinstance(block, dict):
            raise Invalid(
                f'must be a mapping of {" and ".join(names)}', path=f'{where}.{group}', value=block
            )
        for name in sorted(block, key=str):
            if name not in names:
                raise Invalid('unknown field', path=f'{where}.{group}.{name}', value=block[name])
        for name in names:
            if name not in block:
                raise Invalid('is required', path=f'{where}.{group}.{name}')
            values.append(_positive(block[name], f'{where}.{group}.{name}'))
    return acc, (values[0], values[1], values[2], values[3])


def perf_parms_list(value: object) -> PerfParmsByAccelerator:
    """The configured parameters by accelerator (see the module docstring)."""
    if not isinstance(value, list):
        raise Invalid(f'must be a list, not {type_name(value)}')
    got: dict[str, tuple[float, float, float, float]] = {}
    for index, raw in enumerate(value):
        acc, params = _one(index, raw)
        if acc in got:
            raise Invalid('accelerator listed twice', path=f'[{index}].acc', value=acc)
        got[acc] = params
    return tuple(sorted(got.items()))
