"""The objects `llmscaler manifests` writes: the common queue-based KEDA setup for vLLM, and the
HPA or ScaledObject that follows llmscaler's `wva_desired_replicas`.

Why each choice:

- **Queue actuation.** The common KEDA configuration on vLLM's queue (vLLM production-stack's
  helm/templates/scaledobject-vllm.yaml uses the same trigger and threshold): one KEDA
  ScaledObject per scale target, Prometheus triggers `sum(vllm:num_requests_waiting{…})` with
  `metricType: AverageValue` and threshold 5 (the HPA then asks ⌈Σ waiting / 5⌉ replicas; a
  *sum*, since an `avg()` under AverageValue scales down under load) and
  `sum(vllm:kv_cache_usage_perc{…})` with threshold 0.8 as the secondary trigger (⌈Σ KV / 0.8⌉:
  the replicas that keep mean KV usage at 0.8). It ships paused
  (`autoscaling.keda.sh/paused: "true"`): a live ScaledObject owns `/spec/replicas`, so
  autoscaling is a deliberate act. The floor is a profile: `prod` 2 (HA), `dev` 1, `cost` 0.
  The setup sets no HPA behaviour of its own, so the generated HPA gets Kubernetes' defaults,
  written out so that they are visible and editable: scale-up max(+4 pods, +100 %) per 15 s
  with no window, scale-down 300 s window then up to 100 % per 15 s (exactly what the simulator's
  `keda-queue` runs: `llmscaler.hpa.behavior` is the single source of these values).
- **`cost` (min 0).** Written as asked, with its caveats in a comment on the object:
  at zero replicas no vLLM pod exports `num_requests_waiting`, so nothing wakes the target
  unless a buffering proxy (the KEDA HTTP add-on) holds requests and reports them; the gateway
  (GIE) answers 503 with no endpoints; the GPU node pool must scale to zero too; the first
  request waits for a cold start of minutes. KEDA's `cooldownPeriod` drops N→0 in one step
  (kedacore/keda#7770), and `initialCooldownPeriod` is set to the cooldown so that a new
  ScaledObject does not park a running workload at once (kedacore/keda#5008).
- **Metrics actuation.** llmscaler decides; the HPA (or KEDA) only follows the gauge: an External
  metric `wva_desired_replicas` selected by `variant_name` and `exported_namespace` with
  `AverageValue` 1, windows 0 (llmscaler already stabilizes) and per-HPA tolerance 0 (the
  default 10 % would swallow every ±1 step from 10 replicas up, 11/10 being within it).

What fails: nothing here; the inputs are checked by `targets` and `command`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from llmscaler.hpa.behavior import (
    DEFAULT_DOWNSCALE_STABILIZATION,
    DEFAULT_SCALE_DOWN,
    DEFAULT_SCALE_UP,
    ScalingRules,
)
from llmscaler.manifests.targets import Target

Profile = Literal['prod', 'dev', 'cost']
PROFILES: dict[str, int] = {'prod': 2, 'dev': 1, 'cost': 0}
"""The replica floor of each profile."""
PAUSED = 'autoscaling.keda.sh/paused'
DEFAULT_PROMETHEUS = 'http://prometheus-operated.monitoring.svc:9090'
DEFAULT_SERIES = 'namespace="{namespace}",pod=~"{target}-.*"'
"""The PromQL matchers that select a target's pods (placeholders: namespace, target)."""
COOLDOWN = 300
MANAGED_BY = {'app.kubernetes.io/managed-by': 'llmscaler'}
COST_CAVEATS = (
    'Profile cost (minReplicaCount 0), see docs/manifests.md. At 0 replicas no vLLM pod exports',
    'vllm:num_requests_waiting, so nothing wakes this target unless the KEDA HTTP add-on (a',
    'buffering proxy) holds requests and reports them; the gateway (GIE) answers 503 with no',
    'endpoints; the GPU node pool must also scale to 0; the first request then waits for a cold',
    'start of minutes. cooldownPeriod drops N->0 in one step (kedacore/keda#7770).',
)


@dataclass(frozen=True, slots=True)
class QueueOptions:
    """The setup's knobs (defaults: the common setup's values)."""

    profile: Profile = 'prod'
    queue_per_replica: float = 5.0
    kv_target: float = 0.8
    prometheus: str = DEFAULT_PROMETHEUS
    series: str = DEFAULT_SERIES
    paused: bool = True


@dataclass(frozen=True, slots=True)
class Manifest:
    """One object and the comment lines written above it."""

    object: dict[str, Any]
    comments: tuple[str, ...] = ()


def _number(value: float) -> str:
    """A KEDA threshold: metadata values are strings; no exponent, no trailing zeros."""
    text = f'{value:.6f}'.rstrip('0').rstrip('.')
    return text or '0'


def rules(scaling: ScalingRules, *, window: int) -> dict[str, Any]:
    """`HPAScalingRules` on the wire."""
    return {
        'stabilizationWindowSeconds': window,
        'selectPolicy': scaling.select_policy,
        'policies': [
            {'type': p.type, 'value': p.value, 'periodSeconds': p.period_seconds}
            for p in scaling.policies
        ],
    }


def record_behavior() -> dict[str, Any]:
    """Kubernetes' default behaviour, written out (the setup sets none of its own)."""
    return {
        'scaleUp': rules(
            DEFAULT_SCALE_UP, window=DEFAULT_SCALE_UP.stabilization_window_seconds or 0
        ),
        'scaleDown': rules(DEFAULT_SCALE_DOWN, window=DEFAULT_DOWNSCALE_STABILIZATION),
    }


def follow_behavior() -> dict[str, Any]:
    """No windows, tolerance 0: the gauge is a decision llmscaler has already stabilized."""
    return {
        'scaleUp': {'stabilizationWindowSeconds': 0, 'tolerance': '0'},
        'scaleDown': {'stabilizationWindowSeconds': 0, 'tolerance': '0'},
    }


def _ref(target: Target) -> dict[str, str]:
    return {'apiVersion': target.api_version, 'kind': target.kind, 'name': target.name}


def _meta(target: Target, *, paused: bool) -> dict[str, Any]:
    meta: dict[str, Any] = {
        'name': target.variant,
        'namespace': target.namespace,
        'labels': dict(MANAGED_BY),
    }
    if paused:
        meta['annotations'] = {PAUSED: 'true'}
    return meta


def _prometheus(*, name: str, query: str, threshold: float, server: str) -> dict[str, Any]:
    return {
        'type': 'prometheus',
        'name': name,
        'metricType': 'AverageValue',
        'metadata': {
            'serverAddress': server,
            'query': query,
            'threshold': _number(threshold),
            'activationThreshold': '0',
            # No series is an error, not 0: the HPA's failing metric blocks any scale-down and
            # KEDA parks nothing on an error (missing metrics never scale down).
            'ignoreNullValues': 'false',
        },
    }


def queue_scaled_object(*, target: Target, options: QueueOptions) -> Manifest:
    """The queue-based ScaledObject for one scale target."""
    series = options.series.format(namespace=target.namespace, target=target.name)
    floor = PROFILES[options.profile]
    spec: dict[str, Any] = {
        'scaleTargetRef': _ref(target),
        'minReplicaCount': floor,
        'maxReplicaCount': target.max_replicas,
        'pollingInterval': 30,
        'cooldownPeriod': COOLDOWN,
        'advanced': {'horizontalPodAutoscalerConfig': {'behavior': record_behavior()}},
        'triggers': [
            _prometheus(
                name='queue',
                query=f'sum(vllm:num_requests_waiting{{{series}}})',
                threshold=options.queue_per_replica,
                server=options.prometheus,
            ),
            _prometheus(
                name='kv-cache',
                query=f'sum(vllm:kv_cache_usage_perc{{{series}}})',
                threshold=options.kv_target,
                server=options.prometheus,
            ),
        ],
    }
    comments = [
        f'KEDA on the queue for {target.kind}/{target.name} (the common queue-based setup): '
        f'profile {options.profile}, floor {floor},',
        'paused: remove the annotation to autoscale.' if options.paused else 'not paused: live.',
    ]
    if floor == 0:
        spec['initialCooldownPeriod'] = COOLDOWN
        comments.extend(COST_CAVEATS)
    obj = {
        'apiVersion': 'keda.sh/v1alpha1',
        'kind': 'ScaledObject',
        'metadata': _meta(target, paused=options.paused),
        'spec': spec,
    }
    return Manifest(object=obj, comments=tuple(comments))


def _desired_selector(target: Target) -> dict[str, str]:
    # Prometheus keeps the series' own namespace label as exported_namespace (the scrape
    # target, the controller, lives in llmscaler-system).
    return {'variant_name': target.variant, 'exported_namespace': target.namespace}


def desired_hpa(*, target: Target) -> Manifest:
    """An HPA that follows `wva_desired_replicas` (an HPA keeps at least one replica)."""
    obj = {
        'apiVersion': 'autoscaling/v2',
        'kind': 'HorizontalPodAutoscaler',
        'metadata': _meta(target, paused=False),
        'spec': {
            'scaleTargetRef': _ref(target),
            'minReplicas': max(1, target.min_replicas),
            'maxReplicas': target.max_replicas,
            'metrics': [
                {
                    'type': 'External',
                    'external': {
                        'metric': {
                            'name': 'wva_desired_replicas',
                            'selector': {'matchLabels': _desired_selector(target)},
                        },
                        'target': {'type': 'AverageValue', 'averageValue': '1'},
                    },
                }
            ],
            'behavior': follow_behavior(),
        },
    }
    comments = (
        f'Follows llmscaler (ACTUATION_MODE=metrics) for {target.kind}/{target.name}. Tolerance 0',
        'needs Kubernetes >= 1.35 (or 1.33/1.34 with the HPAConfigurableTolerance gate).',
    )
    return Manifest(object=obj, comments=comments)


def desired_scaled_object(*, target: Target, prometheus: str, paused: bool) -> Manifest:
    """A ScaledObject that follows `wva_desired_replicas` (KEDA writes the HPA above)."""
    labels = _desired_selector(target)
    matchers = ','.join(f'{k}="{v}"' for k, v in sorted(labels.items()))
    spec: dict[str, Any] = {
        'scaleTargetRef': _ref(target),
        'minReplicaCount': target.min_replicas,
        'maxReplicaCount': target.max_replicas,
        'advanced': {'horizontalPodAutoscalerConfig': {'behavior': follow_behavior()}},
        'triggers': [
            _prometheus(
                name='desired',
                query=f'max(wva_desired_replicas{{{matchers}}})',
                threshold=1.0,
                server=prometheus,
            )
        ],
    }
    if target.min_replicas == 0:
        spec['initialCooldownPeriod'] = COOLDOWN
    comments = (
        f'KEDA following llmscaler (ACTUATION_MODE=metrics) for {target.kind}/{target.name}.',
        'Tolerance 0 needs a KEDA whose CRD carries behavior.*.tolerance (it vendors',
        'autoscaling/v2 from Kubernetes >= 1.33) and a cluster honouring it (docs/manifests.md).',
    )
    obj = {
        'apiVersion': 'keda.sh/v1alpha1',
        'kind': 'ScaledObject',
        'metadata': _meta(target, paused=paused),
        'spec': spec,
    }
    return Manifest(object=obj, comments=comments)
