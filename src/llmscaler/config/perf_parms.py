"""`perfParms` and `performanceModel` of a `wva-queueing-model-config` entry.

Why: the SLO analyzer's tuner (`analyze.learning.kalman`) needs a starting point, and a guess from
one observation can be far off; here a user gives the parameters per accelerator, one list per
entry (default or per-model), in the form of the entry's performance model:

    performanceModel: three-parameter    # the default: WVA main's service model
    perfParms:
      - acc: H100-80GB                    # the variant's accelerator, as in its VA
        serviceParms: {alpha: 5.0, beta: 0.05, gamma: 0.00005}   # ms per iteration / token

    performanceModel: four-parameter     # the WVA design paper's model (WVA ≤ v0.4)
    perfParms:
      - acc: H100-80GB
        decodeParms: {alpha: 6.9, beta: 0.04}      # ITL = α + β·b (ms)
        prefillParms: {gamma: 21, delta: 0.0004}   # prefill = γ + δ·I·b (ms)

The names are WVA's: `serviceParms{alpha, beta, gamma}` of its main branch (pkg/config/types.go
`ModelAcceleratorPerfData.ServiceParms` since commit aff15ca), `decodeParms`/`prefillParms` of
v0.4's `modelProfile.accelerators[].perfParms`. A variant whose accelerator is listed seeds its
tuner there, and a restart (an empty state) starts from there again; a variant not listed keeps
the guess from its first observation.

What fails: `performance_model` raises `Invalid` for anything but `three-parameter` or
`four-parameter` (no default is guessed for a misspelt name); `perf_parms_list` raises `Invalid`
(the entry is then rejected with a one-line error naming the path, e.g.
`perfParms[0].serviceParms.beta`) for anything but a list of such mappings: unknown fields, both
forms or neither in one item, a missing parameter, a value not in (0, 3,600,000], an empty or
repeated `acc`. `form_mismatch` names the first item whose form is not the entry's model's.
"""

from __future__ import annotations

from llmscaler.config.fields import LATENCY_MS_MAX, Invalid, type_name
from llmscaler.config.resolved import (
    FOUR_PARAMETER,
    PARAMETER_COUNT,
    THREE_PARAMETER,
    PerformanceModel,
)

PerfParmsByAccelerator = tuple[tuple[str, tuple[float, ...]], ...]
"""(accelerator, (α, β, γ) or (α, β, γ, δ) ms), sorted by accelerator."""

_FOUR_GROUPS = {'decodeParms': ('alpha', 'beta'), 'prefillParms': ('gamma', 'delta')}
_THREE_GROUPS = {'serviceParms': ('alpha', 'beta', 'gamma')}
_MODELS: dict[str, PerformanceModel] = {
    THREE_PARAMETER: THREE_PARAMETER,
    FOUR_PARAMETER: FOUR_PARAMETER,
}


def performance_model(value: object) -> PerformanceModel:
    """`performanceModel`: exactly `three-parameter` or `four-parameter`."""
    if isinstance(value, str) and value in _MODELS:
        return _MODELS[value]
    names = ', '.join(f"'{name}'" for name in _MODELS)
    raise Invalid(f'must be one of {names}', value=value)


def _positive(value: object, path: str) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise Invalid(f'must be a number, not {type_name(value)}', path=path, value=value)
    number = float(value)
    if not 0 < number <= LATENCY_MS_MAX:  # NaN fails this too
        raise Invalid(f'must be in (0, {LATENCY_MS_MAX:.15g}]', path=path, value=value)
    return number


def _one(index: int, raw: object) -> tuple[str, tuple[float, ...]]:
    where = f'[{index}]'
    if not isinstance(raw, dict):
        raise Invalid(f'must be a mapping, not {type_name(raw)}', path=where, value=raw)
    for name in sorted(raw, key=str):
        if name != 'acc' and name not in _FOUR_GROUPS and name not in _THREE_GROUPS:
            raise Invalid('unknown field', path=f'{where}.{name}', value=raw[name])
    acc = raw.get('acc')
    if not isinstance(acc, str) or not acc:
        raise Invalid('must be a non-empty string', path=f'{where}.acc', value=acc)
    three = 'serviceParms' in raw
    if three and any(group in raw for group in _FOUR_GROUPS):
        raise Invalid(
            'give serviceParms (three-parameter) or decodeParms and prefillParms '
            '(four-parameter), not both',
            path=where,
        )
    groups = _THREE_GROUPS if three else _FOUR_GROUPS
    values: list[float] = []
    for group, names in groups.items():
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
    return acc, tuple(values)


def perf_parms_list(value: object) -> PerfParmsByAccelerator:
    """The configured parameters by accelerator (see the module docstring)."""
    if not isinstance(value, list):
        raise Invalid(f'must be a list, not {type_name(value)}')
    got: dict[str, tuple[float, ...]] = {}
    for index, raw in enumerate(value):
        acc, params = _one(index, raw)
        if acc in got:
            raise Invalid('accelerator listed twice', path=f'[{index}].acc', value=acc)
        got[acc] = params
    return tuple(sorted(got.items()))


def form_mismatch(*, perf_parms: PerfParmsByAccelerator, model: PerformanceModel) -> str | None:
    """Why `perf_parms` do not fit `model` (the accelerator of the first item in the other
    form), None when every item fits."""
    for acc, values in perf_parms:
        if len(values) != PARAMETER_COUNT[model]:
            form = 'serviceParms' if model == THREE_PARAMETER else 'decodeParms/prefillParms'
            return (
                f"perfParms for '{acc}' are not in the {model} form ({form}); set "
                f'performanceModel in this entry to the model they are written for'
            )
    return None
