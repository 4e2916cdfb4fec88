"""Converters of ConfigMap entry field values: type, range and shape checks, one field each.

Why: the three WVA ConfigMaps (`llmscaler.config.configmaps`) share their value rules, and the
analyzer list of the saturation map is a small schema of its own. Each converter takes the value
as YAML produced it and returns the typed value, or raises `Invalid` with a message (and, for a
nested value, the path below the field and the offending part).

Rules: numbers are ints or floats, never booleans or strings, and must be finite (NaN and ±Inf are
out of every range); every number has a finite maximum, so no value accepted here can overflow
the arithmetic of the core (a `queueLengthThreshold` of 1e308 once did):

| converter | range | fields |
|---|---|---|
| `fraction` | [0, 1] | kvCacheThreshold, kvSpareTrigger |
| `threshold` | (0, 1] | scaleUpThreshold, scaleDownBoundary |
| `queue_length` | [0, 1,000,000] requests | queueLengthThreshold, queueSpareTrigger |
| `weight` | [0, 1,000,000] | priority, analyzers[].score |
| `slo_multiplier` | (1, 100] | sloMultiplier |
| `latency_ms` | (0, 3,600,000] ms (one hour) | targetTTFT, targetITL |
| `retention` | (0, 7 days], a Go duration string with a unit | retention_period |

Analyzers are mappings with a non-empty name (or type, equal to it), unique names, and
scaleUpThreshold > scaleDownBoundary.

What fails: only `Invalid`, for a value that breaks its rule.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from dataclasses import replace
from typing import Any

from llmscaler.config.durations import parse_duration
from llmscaler.config.resolved import AnalyzerSpec


class Invalid(Exception):
    def __init__(self, message: str, *, path: str = '', value: object = None) -> None:
        super().__init__(message)
        self.message = message
        self.path = path
        self.value = value


def _number(value: object) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise Invalid(f'must be a number, not {type_name(value)}')
    try:
        number = float(value)
    except OverflowError:
        number = math.inf
    if not math.isfinite(number):
        raise Invalid('must be a finite number')
    return number


def type_name(value: object) -> str:
    names = {bool: 'a boolean', str: 'a string', list: 'a list', dict: 'a mapping'}
    if value is None:
        return 'null'
    return names.get(type(value), type(value).__name__)


QUEUE_LENGTH_MAX = 1_000_000.0
"""Requests: far beyond any engine's or gateway's queue, far below any float overflow."""
WEIGHT_MAX = 1_000_000.0
SLO_MULTIPLIER_MAX = 100.0
LATENCY_MS_MAX = 3_600_000.0
RETENTION_MAX = 7 * 24 * 3600.0


def _in_range(value: object, *, low: float, high: float, low_open: bool = False) -> float:
    number = _number(value)
    if number < low or (low_open and number == low) or number > high:
        raise Invalid(f'must be in {"(" if low_open else "["}{low:.15g}, {high:.15g}]')
    return number


def fraction(value: object) -> float:
    return _in_range(value, low=0.0, high=1.0)


def threshold(value: object) -> float:
    return _in_range(value, low=0.0, high=1.0, low_open=True)


def queue_length(value: object) -> float:
    return _in_range(value, low=0.0, high=QUEUE_LENGTH_MAX)


def weight(value: object) -> float:
    return _in_range(value, low=0.0, high=WEIGHT_MAX)


def slo_multiplier(value: object) -> float:
    return _in_range(value, low=1.0, high=SLO_MULTIPLIER_MAX, low_open=True)


def latency_ms(value: object) -> float:
    return _in_range(value, low=0.0, high=LATENCY_MS_MAX, low_open=True)


def boolean(value: object) -> bool:
    if not isinstance(value, bool):
        raise Invalid(f'must be true or false, not {type_name(value)}')
    return value


def string(value: object) -> str:
    if not isinstance(value, str):
        raise Invalid(f'must be a string, not {type_name(value)}')
    return value


def retention(value: object) -> float:
    if isinstance(value, bool) or not isinstance(value, str):
        if isinstance(value, int | float):
            raise Invalid('a unit is required: write a Go duration string such as "10m"')
        raise Invalid(f'must be a Go duration string such as "10m", not {type_name(value)}')
    try:
        seconds = parse_duration(value)
    except ValueError as exc:
        raise Invalid(str(exc)) from None
    if seconds <= 0:
        raise Invalid('must be a positive duration')
    if seconds > RETENTION_MAX:
        raise Invalid('must be at most 168h (7 days)')
    return seconds


def scale_to_zero_block(value: object) -> bool | None:
    if not isinstance(value, dict):
        raise Invalid(f'must be a mapping such as {{enabled: true}}, not {type_name(value)}')
    for sub in sorted(value, key=str):
        if sub != 'enabled':
            raise Invalid('unknown field', path=f'.{sub}', value=value[sub])
    if 'enabled' not in value:
        return None
    try:
        return boolean(value['enabled'])
    except Invalid as exc:
        raise Invalid(exc.message, path='.enabled', value=value['enabled']) from None


_ANALYZER_FIELDS: dict[str, Callable[[object], object]] = {
    'name': string,
    'type': string,
    'enabled': boolean,
    'score': weight,
    'scaleUpThreshold': threshold,
    'scaleDownBoundary': threshold,
}


def _parameters(value: object) -> tuple[tuple[str, str], ...]:
    if not isinstance(value, dict):
        raise Invalid(f'must be a mapping, not {type_name(value)}')
    pairs: list[tuple[str, str]] = []
    for name, item in value.items():
        if isinstance(item, bool):
            text = 'true' if item else 'false'
        elif isinstance(item, str | int | float):
            text = str(item)
        else:
            raise Invalid('must be a string, number or boolean', path=f'.{name}', value=item)
        pairs.append((str(name), text))
    return tuple(sorted(pairs))


def _analyzer(index: int, raw: object) -> AnalyzerSpec:
    where = f'[{index}]'
    if not isinstance(raw, dict):
        raise Invalid(f'must be a mapping, not {type_name(raw)}', path=where, value=raw)
    got: dict[str, Any] = {}
    for name in sorted(raw, key=str):
        value = raw[name]
        if name == 'parameters':
            try:
                got['parameters'] = _parameters(value)
            except Invalid as exc:
                path = f'{where}.parameters{exc.path}'
                raise Invalid(exc.message, path=path, value=exc.value or value) from None
            continue
        convert = _ANALYZER_FIELDS.get(name) if isinstance(name, str) else None
        if convert is None:
            raise Invalid('unknown field', path=f'{where}.{name}', value=value)
        try:
            got[name] = convert(value)
        except Invalid as exc:
            raise Invalid(exc.message, path=f'{where}.{name}', value=value) from None
    names = [str(got[k]) for k in ('name', 'type') if k in got]
    if not names or '' in names:
        raise Invalid('needs a non-empty name (or type)', path=where, value=raw)
    if len(set(names)) > 1:
        raise Invalid('name and type differ', path=where, value=raw)
    up, down = got.get('scaleUpThreshold'), got.get('scaleDownBoundary')
    if isinstance(up, float) and isinstance(down, float) and up <= down:
        msg = f'scaleUpThreshold {up} must be greater than scaleDownBoundary {down}'
        raise Invalid(msg, path=where, value=raw)
    return replace(
        AnalyzerSpec(name=names[0]),
        **{
            _snake(k): v
            for k, v in got.items()
            if k in ('enabled', 'score', 'scaleUpThreshold', 'scaleDownBoundary', 'parameters')
        },
    )


def _snake(name: str) -> str:
    return re.sub(r'(?<!^)([A-Z])', r'_\1', name).lower()


def analyzer_list(value: object) -> tuple[AnalyzerSpec, ...]:
    if not isinstance(value, list):
        raise Invalid(f'must be a list, not {type_name(value)}')
    specs = tuple(_analyzer(index, raw) for index, raw in enumerate(value))
    seen: set[str] = set()
    for index, spec in enumerate(specs):
        if spec.name in seen:
            raise Invalid('duplicate analyzer name', path=f'[{index}]', value=spec.name)
        seen.add(spec.name)
    return specs
