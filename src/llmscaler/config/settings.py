"""Manager settings of the decision core, resolved with precedence CLI > env > file > ConfigMap.

Why: WVA reads its manager settings (`wva-manager-config`, env vars, flags) with this precedence
(llm-d workload-variant-autoscaler v0.9.0, internal/config/), and users expect the same keys to work
here. Every layer uses the same key spelling (the CLI layer arrives already keyed by these names):

| key | CoreSettings field | range | default |
|---|---|---|---|
| GLOBAL_OPT_INTERVAL | interval (duration) | 1s to 1h | 30s (WVA: 15s) |
| WVA_SCALE_TO_ZERO | scale_to_zero (bool) | | false |
| PROMETHEUS_METRICS_CACHE_FRESH_THRESHOLD | fresh_threshold | to 24h | 1m |
| PROMETHEUS_METRICS_CACHE_STALE_THRESHOLD | stale_threshold | to 24h | 2m |
| PROMETHEUS_METRICS_CACHE_UNAVAILABLE_THRESHOLD | unavailable_threshold | to 24h | 5m |
| LLMSCALER_K2_WINDOW | k2_window (integer) | 1 to 10000 | 10 |
| LLMSCALER_K2_HISTORY_TTL | k2_history_ttl | to 720h (30 days) | 24h |
| LLMSCALER_CAPACITY_TTL | capacity_ttl | to 8760h (365 days) | 168h |
| LLMSCALER_SCALE_TO_ZERO_RETENTION | default_retention_period | to 168h (7 days) | 10m |

Durations (all but the boolean and the integer) are Go strings with a unit
(`llmscaler.config.durations`) and must be above 0. Every setting has a finite maximum well
inside what the arithmetic of the core handles, so an absurd value is refused here instead of
reaching a decision. Booleans accept true/false/1/0/yes/no in any case (and YAML booleans in the
file layer); integers accept decimal text or YAML integers.

What fails: nothing raises. An invalid value at one layer gives a `ConfigError` and that layer is
skipped for that key, so the next lower layer (finally the default) applies. Unknown keys are
ignored in the environment (which holds many unrelated variables) and are errors in the CLI,
file and ConfigMap layers, except the other documented WVA manager keys (`PASSTHROUGH_KEYS`,
Prometheus connection and the like), which belong to the adapters and are accepted silently.
The error for an unknown key never shows its value (it may be a misspelt secret); nor does the
error for any key that looks secret (`config.errors.is_secret_key`).
If the resolved cache thresholds are not strictly increasing (fresh < stale < unavailable), all
three fall back to their defaults with an error.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from typing import Any

from llmscaler.config.durations import format_duration, parse_duration
from llmscaler.config.errors import ConfigError, show_setting, show_value
from llmscaler.config.resolved import CoreSettings

HOUR = 3600.0
DAY = 24 * HOUR


def _duration(value: object, *, maximum: float, minimum: float = 0.0) -> float:
    if isinstance(value, bool) or not isinstance(value, str):
        if isinstance(value, int | float):
            raise ValueError('a unit is required: write a Go duration such as "30s"')
        raise ValueError('must be a Go duration string such as "30s"')
    seconds = parse_duration(value)
    if seconds <= 0:
        raise ValueError('must be a positive duration')
    if seconds < minimum:
        raise ValueError(f'must be at least {format_duration(minimum)}')
    if seconds > maximum:
        raise ValueError(f'must be at most {format_duration(maximum)}')
    return seconds


def _up_to(maximum: float, *, minimum: float = 0.0) -> Callable[[object], float]:
    def parse(value: object) -> float:
        return _duration(value, maximum=maximum, minimum=minimum)

    return parse


_TRUE = frozenset({'true', '1', 'yes'})
_FALSE = frozenset({'false', '0', 'no'})


def parse_bool(value: object) -> bool:
    """true/false/1/0/yes/no in any case, or a bool (raises ValueError otherwise)."""
    if isinstance(value, bool):
        return value
    if isinstance(value, int) and value in (0, 1):
        return value == 1
    if isinstance(value, str):
        text = value.strip().lower()
        if text in _TRUE:
            return True
        if text in _FALSE:
            return False
    raise ValueError('must be one of true, false, 1, 0, yes, no')


K2_WINDOW_MAX = 10_000


def _window(value: object) -> int:
    if isinstance(value, bool):
        raise ValueError('must be a whole number')
    if isinstance(value, int):
        number = value
    elif isinstance(value, str) and value.strip().lstrip('+').isdecimal():
        text = value.strip().lstrip('+')
        # A long digit string is out of range whatever it says; never convert it.
        number = int(text) if len(text) <= 9 else K2_WINDOW_MAX + 1
    else:
        raise ValueError('must be a whole number')
    if not 1 <= number <= K2_WINDOW_MAX:
        raise ValueError(f'must be from 1 to {K2_WINDOW_MAX}')
    return number


@dataclass(frozen=True, slots=True)
class _Setting:
    field: str
    parse: Callable[[object], object]


SETTINGS: dict[str, _Setting] = {
    'GLOBAL_OPT_INTERVAL': _Setting('interval', _up_to(HOUR, minimum=1.0)),
    'WVA_SCALE_TO_ZERO': _Setting('scale_to_zero', parse_bool),
    'PROMETHEUS_METRICS_CACHE_FRESH_THRESHOLD': _Setting('fresh_threshold', _up_to(DAY)),
    'PROMETHEUS_METRICS_CACHE_STALE_THRESHOLD': _Setting('stale_threshold', _up_to(DAY)),
    'PROMETHEUS_METRICS_CACHE_UNAVAILABLE_THRESHOLD': _Setting(
        'unavailable_threshold', _up_to(DAY)
    ),
    'LLMSCALER_K2_WINDOW': _Setting('k2_window', _window),
    'LLMSCALER_K2_HISTORY_TTL': _Setting('k2_history_ttl', _up_to(30 * DAY)),
    'LLMSCALER_CAPACITY_TTL': _Setting('capacity_ttl', _up_to(365 * DAY)),
    'LLMSCALER_SCALE_TO_ZERO_RETENTION': _Setting('default_retention_period', _up_to(7 * DAY)),
}
"""The keys that feed `CoreSettings`, with the field each sets."""

PASSTHROUGH_KEYS = frozenset(
    {
        'PROMETHEUS_BASE_URL',
        'PROMETHEUS_BEARER_TOKEN',
        'PROMETHEUS_TOKEN_PATH',
        'PROMETHEUS_TLS_INSECURE_SKIP_VERIFY',
        'PROMETHEUS_ALLOW_HTTP',
        'PROMETHEUS_CA_CERT_PATH',
        'PROMETHEUS_CLIENT_CERT_PATH',
        'PROMETHEUS_CLIENT_KEY_PATH',
        'PROMETHEUS_SERVER_NAME',
        'PROMETHEUS_METRICS_CACHE_TTL',
        'PROMETHEUS_METRICS_CACHE_CLEANUP_INTERVAL',
        'PROMETHEUS_METRICS_CACHE_FETCH_INTERVAL',
        'WVA_LIMITED_MODE',
        'SCALE_FROM_ZERO_ENGINE_MAX_CONCURRENCY',
        'EXPERIMENTAL_COORDINATOR_ENABLED',
        'COORDINATOR_INTERVAL',
        'CONTROLLER_INSTANCE',
        'WVA_NODE_SELECTOR',
    }
)
"""WVA manager keys that are not core settings (read by the adapters); never an error here."""

_THRESHOLD_KEYS = (
    'PROMETHEUS_METRICS_CACHE_FRESH_THRESHOLD',
    'PROMETHEUS_METRICS_CACHE_STALE_THRESHOLD',
    'PROMETHEUS_METRICS_CACHE_UNAVAILABLE_THRESHOLD',
)


def load_settings(
    *,
    cli: Mapping[str, str],
    env: Mapping[str, str],
    file: Mapping[str, object],
    configmap: Mapping[str, str],
    file_source: str = 'config file',
    configmap_source: str = 'wva-manager-config',
) -> tuple[CoreSettings, tuple[ConfigError, ...]]:
    """The resolved `CoreSettings` and every problem found; `*_source` name layers in errors."""
    layers: tuple[tuple[str, Mapping[Any, object], bool], ...] = (
        ('command line', cli, True),
        ('environment', env, False),
        (file_source, file, True),
        (configmap_source, configmap, True),
    )
    errors: list[ConfigError] = []
    for source, layer, strict in layers:
        if not strict:
            continue
        for key in sorted(layer, key=str):
            if key not in SETTINGS and key not in PASSTHROUGH_KEYS:
                # Never the value: a misspelt secret (`..._TOKN: sk-...`) must not reach a log.
                errors.append(
                    ConfigError(source=source, key=show_value(key), message='unknown setting')
                )
    changes: dict[str, Any] = {}
    for key in sorted(SETTINGS):
        setting = SETTINGS[key]
        for source, layer, _ in layers:
            if key not in layer:
                continue
            raw = layer[key]
            try:
                changes[setting.field] = setting.parse(raw)
            except ValueError as exc:
                errors.append(
                    ConfigError(
                        source=source, key=key, value=show_setting(key, raw), message=str(exc)
                    )
                )
                continue
            break
    settings = replace(CoreSettings(), **changes)
    fresh, stale = settings.fresh_threshold, settings.stale_threshold
    unavailable = settings.unavailable_threshold
    if not fresh < stale < unavailable:
        defaults = CoreSettings()
        message = (
            'cache thresholds must increase (fresh < stale < unavailable), got '
            f'{format_duration(fresh)} / {format_duration(stale)} / '
            f'{format_duration(unavailable)}; all three reset to '
            f'{format_duration(defaults.fresh_threshold)} / '
            f'{format_duration(defaults.stale_threshold)} / '
            f'{format_duration(defaults.unavailable_threshold)}'
        )
        errors.append(ConfigError(source='settings', key=_THRESHOLD_KEYS[0], message=message))
        settings = replace(
            settings,
            fresh_threshold=defaults.fresh_threshold,
            stale_threshold=defaults.stale_threshold,
            unavailable_threshold=defaults.unavailable_threshold,
        )
    return settings, tuple(errors)
