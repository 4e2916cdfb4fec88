"""The enforcer: scale-to-zero for idle models, or at least one replica when zero is disabled.

Why: the optimizer sizes a model from capacity signals and never takes it to zero on its own
(it keeps the cheapest variant at one replica). Whether an idle model may release all its GPUs
is a policy of the operator, decided here after the optimizer, per model, as WVA's enforcer does
(llm-d workload-variant-autoscaler v0.9.0, internal/engines/pipeline/enforcer.go), under the
safety rules of the decision core (docs/decision-core.md, "Safety rules").

What it computes (`enforce`), from the optimizer's targets for every variant of one model:

- Skipped entirely (targets returned as given) when any variant has `min_replicas > 0` (the
  HPA-style floor wins) or any variant runs an engine other than vLLM (the request counter it
  relies on is vLLM-only; a variant without engine parameters counts as vLLM).
- Enabled? The first setting that is set decides: the saturation entry's inline
  `scale_to_zero_enabled`, then the model's `wva-model-scale-to-zero-config` entry, then
  `WVA_SCALE_TO_ZERO` (`CoreSettings.scale_to_zero`), which defaults to False
  (`scale_to_zero_enabled`). The retention window is the model's `retention_period`, then
  `CoreSettings.default_retention_period` (600 s) (`retention_period`). The caller measures
  `request_count` over that window; here it only appears in the message. The caller also
  passes `in_flight`: the requests the model holds right now (the gateway queue, and the
  requests waiting or running on its replicas).
- Enabled: no count (query failed) → targets kept; count > 0 → kept; requests in flight (or
  their number unknown) → kept; count == 0 and nothing in flight → every variant goes towards
  0, policy `scale_to_zero`.
- Disabled: when the targets sum to 0, the cheapest variant gets 1 replica (priced by the one
  cost rule, `domain.snapshot.effective_cost`: a cost that is not a finite positive number
  counts as 10; ties go to the alphabetically first name), policy `minimum_replicas`.

Deliberate deviations from upstream, each one of those safety rules:
1. Missing or stale metrics never cause scale-to-zero: with `metrics_complete` False a zero
   count is not trusted and the targets are kept.
2. Step down N → 1 before 1 → 0. Upstream jumps every variant straight to 0. Here a variant
   that currently runs more than one replica goes to 1 this cycle and reaches 0 on a later one,
   after the zero count has been confirmed again.
3. Never to zero while requests arrived within the retention period: when scale-to-zero is
   enabled but this cycle does not scale to zero (count unknown, positive, requests in flight,
   or metrics incomplete) and the optimizer's targets would still take a running model to 0
   replicas, the cheapest variant keeps 1 (policy `minimum_replicas`). A model already at 0
   stays there; the scale-from-zero loop wakes it when requests queue.
4. Never to zero while requests are queued or running. The request count covers requests
   that *completed* within the window: a request still waiting in the gateway queue or on a
   replica, or still running, is not in it, so a count of 0 alone does not prove the model idle
   (a long request, or requests queued behind a stalled replica, would be cut off).

Bad input: a NaN, infinite or negative request count, or `in_flight`, is treated as unknown
(the query failed), which keeps the targets;
a NaN, infinite or non-positive retention falls back to the settings default, then to 600 s;
negative targets read as 0; a variant missing from `targets` keeps its `current_replicas`;
names in `targets` that are not variants are ignored. Nothing raises.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Literal

from llmscaler.config.resolved import CoreSettings, ModelConfig
from llmscaler.domain.snapshot import Variant

Policy = Literal['scale_to_zero', 'minimum_replicas', '']

DEFAULT_RETENTION = 600.0
ENFORCED_SUFFIX = ' (enforced)'


@dataclass(frozen=True, slots=True)
class Enforcement:
    """What the enforcer did to one model's targets.

    `targets` covers every variant, sorted by name; `modified` names the variants whose target
    the enforcer changed; `policy` and `reason` are empty when nothing changed, and `message`
    always says what was decided and why (for status conditions and events).
    """

    targets: tuple[tuple[str, int], ...]
    policy: Policy
    reason: str
    message: str
    modified: tuple[str, ...] = ()

    def target_map(self) -> dict[str, int]:
        return dict(self.targets)


def enforced_reason(*, reason: str) -> str:
    """A decision reason marked as changed by the enforcer, keeping its category."""
    if reason.endswith(ENFORCED_SUFFIX):
        return reason
    return f'{reason}{ENFORCED_SUFFIX}'


def scale_to_zero_enabled(*, config: ModelConfig, settings: CoreSettings) -> bool:
    """The first of inline saturation setting, scale-to-zero ConfigMap, env that is set."""
    if config.saturation.scale_to_zero_enabled is not None:
        return config.saturation.scale_to_zero_enabled
    if config.scale_to_zero.enabled is not None:
        return config.scale_to_zero.enabled
    return settings.scale_to_zero


def _valid_period(value: float | None) -> float | None:
    if value is None or not math.isfinite(value) or value <= 0:
        return None
    return value


def retention_period(*, config: ModelConfig, settings: CoreSettings) -> float:
    """Seconds of inactivity required before scale-to-zero (model entry, settings, 600 s)."""
    for candidate in (config.scale_to_zero.retention_period, settings.default_retention_period):
        period = _valid_period(candidate)
        if period is not None:
            return period
    return DEFAULT_RETENTION


def _engine(variant: Variant) -> str:
    return 'vllm' if variant.engine is None else variant.engine.engine


def _cheapest(variants: Sequence[Variant]) -> Variant:
    return min(variants, key=lambda v: (v.effective_cost, v.name))


def _result(
    *,
    original: dict[str, int],
    final: dict[str, int],
    policy: Policy,
    label: str,
    message: str,
) -> Enforcement:
    modified = tuple(name for name in sorted(final) if final[name] != original[name])
    return Enforcement(
        targets=tuple(sorted(final.items())),
        policy=policy if modified else '',
        reason=enforced_reason(reason=label) if modified else '',
        message=message,
        modified=modified,
    )


def _keep_one(
    *, variants: Sequence[Variant], original: dict[str, int], message: str
) -> Enforcement:
    """Give the cheapest variant one replica when the targets sum to 0."""
    final = dict(original)
    if sum(final.values()) > 0:
        return _result(original=original, final=final, policy='', label='', message=message)
    cheapest = _cheapest(variants)
    final[cheapest.name] = 1
    return _result(
        original=original,
        final=final,
        policy='minimum_replicas',
        label='minimum_replicas',
        message=f'{message}; minimum one replica kept on the cheapest variant {cheapest.name}',
    )


def _count(request_count: float | None) -> float | None:
    if request_count is None or not math.isfinite(request_count) or request_count < 0:
        return None
    return request_count


def enforce(
    *,
    variants: Sequence[Variant],
    targets: Mapping[str, int],
    config: ModelConfig,
    settings: CoreSettings,
    request_count: float | None,
    in_flight: float,
    metrics_complete: bool,
) -> Enforcement:
    """Apply scale-to-zero or minimum-replicas to one model's targets (see module docstring).

    `in_flight` is the number of requests the model holds now (queued at the gateway, waiting or
    running on a replica); any positive number, or one that is not a finite number >= 0,
    forbids scale-to-zero.
    """
    ordered = sorted(variants, key=lambda v: v.name)
    original = {v.name: max(0, targets.get(v.name, v.current_replicas)) for v in ordered}
    if not ordered:
        return _result(original={}, final={}, policy='', label='', message='no variants')

    floored = [v for v in ordered if v.min_replicas > 0]
    if floored:
        first = floored[0]
        message = (
            f'skipped: variant {first.name} has minReplicas {first.min_replicas} > 0; '
            'scale-to-zero needs minReplicas 0 on every variant'
        )
        return _result(original=original, final=original, policy='', label='', message=message)
    foreign = [v for v in ordered if _engine(v) != 'vllm']
    if foreign:
        first = foreign[0]
        message = (
            f'skipped: variant {first.name} runs engine {_engine(first)}; '
            'the request counter is vLLM-only'
        )
        return _result(original=original, final=original, policy='', label='', message=message)

    if not scale_to_zero_enabled(config=config, settings=settings):
        return _keep_one(variants=ordered, original=original, message='scale-to-zero disabled')

    retention = retention_period(config=config, settings=settings)
    window = f'{retention:g} s'
    count = _count(request_count)
    running = sum(max(0, v.current_replicas) for v in ordered) > 0

    def keep(message: str) -> Enforcement:
        if running:
            return _keep_one(variants=ordered, original=original, message=message)
        return _result(original=original, final=original, policy='', label='', message=message)

    if count is None:
        return keep(f'request count over the last {window} unavailable; targets kept')
    if count > 0:
        return keep(f'{count:g} requests in the last {window}; targets kept')
    held = _count(in_flight)
    if held is None:
        return keep('requests queued or running unknown; targets kept')
    if held > 0:
        return keep(f'{held:g} requests queued or running; targets kept')
    if not metrics_complete:
        return keep(f'no requests in the last {window} but metrics are incomplete; targets kept')

    final = {v.name: 1 if v.current_replicas > 1 else 0 for v in ordered}
    stepping = [name for name in sorted(final) if final[name] == 1]
    message = f'no requests in the last {window}; scaling to zero'
    if stepping:
        message += f' (stepping down to 1 first: {", ".join(stepping)})'
    return _result(
        original=original,
        final=final,
        policy='scale_to_zero',
        label='scale_to_zero',
        message=message,
    )
