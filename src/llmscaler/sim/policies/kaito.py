"""Kaito's LLMAutoScaler as simulator policies: `kaito-realtime` and `kaito-cron`.

Why: `llmscaler simulate` compares the project with its peers on the same trace. Kaito's
LLMAutoScaler proposal (kaito-project/kaito,
docs/proposals/20250602-auto-scaler-for-inference-workloads.md) is one of them; these policies run
the very decision the controller runs for an LLMAutoScaler object
(`policies.kaito.autoscaler.decide_llmautoscaler`), one autoscaler per variant (an LLMAutoScaler
scales one target), so a result here is what the object would have done.

Policies (names as `simulate` takes them):

- `kaito-realtime`: the proposal's defaults on every variant: `vllm:num_requests_waiting`, steps of
  1, cooldowns 600 s up / 1,800 s down, windows 30 s / 300 s, minReplicas max(1, the variant's
  min), maxReplicas the variant's max. The proposal sets no thresholds; these use High 10 (the
  threshold of Kaito's KEDA proposal) and Low 5 (that proposal's scale-down tolerance of 0.5);
- `kaito-realtime:FILE` / `kaito-cron:FILE`: the LLMAutoScaler objects of a YAML file (one or
  more documents, as `kubectl apply` takes them); each scales the variant its scaleTargetRef
  names; variants no object names keep their count;
- `kaito-cron:SCHEDULE=N[@ZONE];...`: cron policies on every variant, e.g.
  `kaito-cron:0 7 * * 1-5=4@Europe/Berlin;0 19 * * *=1@Europe/Berlin`.

Time: the simulation starts at `SIM_EPOCH` (Monday 5 January 2026, 00:00 UTC), so a schedule
reads the wall clock of a trace that begins on a Monday at midnight UTC.

How it runs: the scaler acts every 15 s (the proposal's scrape interval), at each 15 s step up to
the control instant, on that instant's snapshot (as the HPA peers do, `sim.policies.peers`), and
sees its own previous writes. Per pod it reads the metric from the snapshot
(`vllm:num_requests_waiting` is the replica's `queue_length`, a 1-minute maximum; also
`vllm:num_requests_running` and the KV usage); the variant's pods are its ready and its pending
replicas, and a pending one has no value (the proposal's missing-pod rule, and no realtime
scale-down while any pod lacks a value, as in the controller). `wake` returns {}: an LLMAutoScaler
never goes below minReplicas >= 1.

What fails: `parse_kaito` raises ValueError (one line) for a file that cannot be read or holds an
invalid object, a target that is no variant, a metric the simulator does not model, or a
malformed inline schedule.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Final

import yaml

from llmscaler.config.cron import Schedule, parse_schedule
from llmscaler.domain.snapshot import ReplicaMetrics, Variant
from llmscaler.kube.llmautoscaler import LLMAutoScaler, core_spec, parse_llmautoscaler
from llmscaler.kube.resource_model import InvalidObject
from llmscaler.policies.kaito.autoscaler import AutoscalerSpec, RealtimeSpec, decide_llmautoscaler
from llmscaler.policies.kaito.cron import CronRule
from llmscaler.policies.kaito.realtime import MetricReading, Sample
from llmscaler.sim.vocabulary import ControlView

KAITO_REALTIME: Final = 'kaito-realtime'
KAITO_CRON: Final = 'kaito-cron'
SIM_EPOCH: Final = 1_767_571_200.0
"""2026-01-05T00:00:00Z, a Monday: the wall-clock time of simulated time 0."""
PERIOD: Final = 15.0
DEFAULT_HIGH: Final = 10.0
DEFAULT_LOW: Final = 5.0
_FIGURES: Final[Mapping[str, str]] = {
    'vllm:num_requests_waiting': 'queue_length',
    'vllm:num_requests_running': 'running_requests',
    'vllm:kv_cache_usage_perc': 'kv_usage',
    'vllm:gpu_cache_usage_perc': 'kv_usage',
}


@dataclass(frozen=True, slots=True)
class SimMetric:
    """One metric of an autoscaler as the simulator reads it: a `ReplicaMetrics` figure."""

    key: str
    figure: str
    high: float
    low: float


@dataclass(frozen=True, slots=True)
class SimAutoscaler:
    """One LLMAutoScaler of the simulation: the core spec and the metrics it reads."""

    spec: AutoscalerSpec
    metrics: tuple[SimMetric, ...]


@dataclass(slots=True)
class _Memory:
    history: dict[str, tuple[Sample, ...]] = field(default_factory=dict)
    last_scale: float | None = None
    step: float | None = None


def default_autoscaler(variant: Variant) -> SimAutoscaler:
    """The proposal's defaults on one variant (see the module docstring)."""
    low = max(1, variant.min_replicas)
    return SimAutoscaler(
        spec=AutoscalerSpec(
            min_replicas=low, max_replicas=max(low, variant.max_replicas), realtime=RealtimeSpec()
        ),
        metrics=(
            SimMetric(
                key='vllm:num_requests_waiting',
                figure='queue_length',
                high=DEFAULT_HIGH,
                low=DEFAULT_LOW,
            ),
        ),
    )


def from_object(obj: LLMAutoScaler) -> SimAutoscaler:
    """A validated LLMAutoScaler as the simulator runs it; ValueError for a metric it lacks."""
    metrics = []
    realtime = obj.spec.scaler.realtime
    for metric in realtime.metrics if realtime is not None else ():
        figure = _FIGURES.get(metric.source.name)
        if figure is None:
            known = ', '.join(sorted(_FIGURES))
            raise ValueError(
                f'metric {metric.source.name!r} is not simulated (the simulator has {known})'
            )
        threshold = metric.threshold
        metrics.append(
            SimMetric(
                key=metric.key, figure=figure, high=float(threshold.high), low=float(threshold.low)
            )
        )
    return SimAutoscaler(spec=core_spec(obj.spec), metrics=tuple(metrics))


class KaitoPolicy:
    """LLMAutoScalers on the simulated fleet (see the module docstring)."""

    def __init__(
        self,
        *,
        name: str,
        autoscalers: Mapping[str, SimAutoscaler] | None = None,
        cron: Sequence[CronRule] = (),
        epoch: float = SIM_EPOCH,
    ) -> None:
        self._name = name
        self._given = dict(autoscalers) if autoscalers is not None else None
        self._cron = tuple(cron)
        self._epoch = epoch
        self._memory: dict[str, _Memory] = {}

    @property
    def name(self) -> str:
        return self._name

    def _autoscaler(self, variant: Variant) -> SimAutoscaler | None:
        if self._given is not None:
            return self._given.get(variant.name)
        if self._cron:
            low = max(1, variant.min_replicas)
            spec = AutoscalerSpec(
                min_replicas=low, max_replicas=max(low, variant.max_replicas), cron=self._cron
            )
            return SimAutoscaler(spec=spec, metrics=())
        return default_autoscaler(variant)

    def targets(self, *, view: ControlView) -> dict[str, int]:
        by_variant: dict[str, list[ReplicaMetrics]] = {}
        for replica in view.snapshot.replicas:
            by_variant.setdefault(replica.variant, []).append(replica)
        out: dict[str, int] = {}
        for variant in sorted(view.snapshot.variants, key=lambda v: v.name):
            scaler = self._autoscaler(variant)
            if scaler is None:
                continue
            memory = self._memory.setdefault(variant.name, _Memory())
            current = view.replicas.get(variant.name, variant.current_replicas)
            readings, complete = _readings(scaler, variant, by_variant.get(variant.name, []))
            for t in _steps(last=memory.step, now=view.now):
                decision = decide_llmautoscaler(
                    spec=scaler.spec,
                    current_replicas=current,
                    readings=readings,
                    history=memory.history,
                    last_scale_time=memory.last_scale,
                    now=self._epoch + t,
                    metrics_complete=complete,
                    interval=PERIOD,
                )
                memory.history = dict(decision.history)
                if decision.desired != current:
                    memory.last_scale = self._epoch + t
                    current = decision.desired
                memory.step = t
            out[variant.name] = current
        return out

    def wake(self, *, view: ControlView) -> dict[str, int]:
        return {}


def _steps(*, last: float | None, now: float) -> list[float]:
    """The 15 s steps after `last` up to `now` (just `now` the first time)."""
    if last is None or not math.isfinite(last):
        return [now]
    steps = []
    t = last + PERIOD
    while t <= now + 1e-9:
        steps.append(t)
        t += PERIOD
    return steps


def _readings(
    scaler: SimAutoscaler, variant: Variant, replicas: Sequence[ReplicaMetrics]
) -> tuple[list[MetricReading], bool]:
    pods = max(len(replicas), variant.ready_replicas + variant.pending_replicas)
    complete = pods > 0
    readings = []
    for metric in scaler.metrics:
        values: list[float | None] = []
        for replica in sorted(replicas, key=lambda r: r.pod):
            value = getattr(replica, metric.figure)
            ok = isinstance(value, int | float) and math.isfinite(value) and value >= 0
            values.append(float(value) if ok else None)
        values += [None] * (pods - len(values))
        complete = complete and all(v is not None for v in values)
        readings.append(
            MetricReading.of(key=metric.key, high=metric.high, low=metric.low, values=values)
        )
    return readings, complete


def _inline_cron(text: str) -> tuple[CronRule, ...]:
    policies = []
    for index, part in enumerate(p.strip() for p in text.split(';')):
        expression, sep, rest = part.rpartition('=')
        count_text, _, zone = rest.partition('@')
        if not sep or not count_text.strip().isdigit():
            raise ValueError(
                f'{KAITO_CRON}: {part!r} is not SCHEDULE=REPLICAS[@ZONE] '
                f'(e.g. "0 7 * * 1-5=4@Europe/Berlin")'
            )
        schedule = parse_schedule(expression=expression, time_zone=zone.strip())
        if not isinstance(schedule, Schedule):
            raise ValueError(f'{KAITO_CRON}: {schedule.message}')
        policies.append(
            CronRule(name=f'policy-{index}', schedule=schedule, target_replicas=int(count_text))
        )
    return tuple(policies)


def _from_file(path: Path, *, variants: Sequence[str], where: str) -> dict[str, SimAutoscaler]:
    try:
        documents = [d for d in yaml.safe_load_all(path.read_text(encoding='utf-8')) if d]
    except (OSError, UnicodeDecodeError, yaml.YAMLError) as exc:
        raise ValueError(f'{where}: {path}: {" ".join(str(exc).split())[:200]}') from None
    found: dict[str, SimAutoscaler] = {}
    for document in documents:
        parsed = parse_llmautoscaler(document) if isinstance(document, dict) else None
        if not isinstance(parsed, LLMAutoScaler):
            why = parsed.message if isinstance(parsed, InvalidObject) else 'not an object'
            raise ValueError(f'{where}: {path}: {why}')
        target = parsed.spec.scale_target_ref.name
        if target not in variants:
            raise ValueError(
                f'{where}: {path}: scaleTargetRef {target!r} is no variant '
                f'(variants: {", ".join(variants)})'
            )
        if target in found:
            raise ValueError(f'{where}: {path}: two LLMAutoScalers scale {target!r}')
        try:
            found[target] = from_object(parsed)
        except ValueError as exc:
            raise ValueError(f'{where}: {path}: {exc}') from None
    if not found:
        raise ValueError(f'{where}: {path} holds no LLMAutoScaler')
    return found


def is_kaito(name: str) -> bool:
    """Whether `name` is one of this module's policy names."""
    return name == KAITO_REALTIME or name.startswith((f'{KAITO_REALTIME}:', f'{KAITO_CRON}:'))


def parse_kaito(*, text: str, variants: Sequence[str]) -> KaitoPolicy:
    """The policy a name stands for (see the module docstring); ValueError when it is invalid."""
    if text == KAITO_REALTIME:
        return KaitoPolicy(name=text)
    kind, _, rest = text.partition(':')
    if kind not in (KAITO_REALTIME, KAITO_CRON) or not rest.strip():
        raise ValueError(
            f'{text!r}: expected {KAITO_REALTIME}, {KAITO_REALTIME}:FILE, {KAITO_CRON}:FILE or '
            f'{KAITO_CRON}:SCHEDULE=N[@ZONE];...'
        )
    path = Path(rest.strip())
    if path.is_file():
        return KaitoPolicy(name=text, autoscalers=_from_file(path, variants=variants, where=kind))
    if kind == KAITO_REALTIME:
        raise ValueError(f'{KAITO_REALTIME}: {path}: no such file')
    return KaitoPolicy(name=text, cron=_inline_cron(rest))
