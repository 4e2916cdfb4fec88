"""The informer caches the controller reads, and the `World` built from them, memoised.

Why: both loops read the same cluster state — the main cycle every 30 s, scale-from-zero every
100 ms. Building a `World` parses every VariantAutoscaling and scale target (pydantic and the
accessor), far too costly to repeat ten times a second for a thousand variants. The caches carry a
`version` that moves on every change, so the world is rebuilt only when a cache or the
configuration changed.

What fails: nothing raises; an informer that has not synced yet contributes what it has (the
controller waits for `synced()` before its first cycle).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from lightkube import AsyncClient
from lightkube.resources.apps_v1 import Deployment, StatefulSet
from lightkube.resources.core_v1 import ConfigMap, Pod

from llmscaler.clock import Clock
from llmscaler.config.types import Config
from llmscaler.controller.world import World, build_world
from llmscaler.kube.client import LeaderWorkerSetResource, VariantAutoscalingResource
from llmscaler.kube.informer import Informer

_KINDS = (
    ('Deployment', 'deployments'),
    ('StatefulSet', 'statefulsets'),
    ('LeaderWorkerSet', 'leaderworkersets'),
)


@dataclass(frozen=True, slots=True)
class Caches:
    """One informer per kind the controller watches."""

    vas: Informer
    deployments: Informer
    statefulsets: Informer
    leaderworkersets: Informer
    pods: Informer
    configmaps: tuple[Informer, ...]
    """The watched namespace's (or all) ConfigMaps, plus the controller namespace's when the
    controller watches a single other namespace (the global ConfigMaps live there)."""
    configmap_labels: tuple[tuple[str, str], ...] = ()
    """ConfigMaps are read only when they carry one of these (label, value) pairs."""

    def all(self) -> tuple[Informer, ...]:
        return (
            self.vas,
            self.deployments,
            self.statefulsets,
            self.leaderworkersets,
            self.pods,
            *self.configmaps,
        )

    def configmap_version(self) -> tuple[int, ...]:
        return tuple(informer.version for informer in self.configmaps)

    def configmap_items(self) -> tuple[Mapping[str, Any], ...]:
        """The labelled ConfigMaps, deduplicated by (namespace, name), sorted."""
        found: dict[tuple[str, str], Mapping[str, Any]] = {}
        for informer in self.configmaps:
            for obj in informer.items():
                meta = obj.get('metadata') or {}
                labels = meta.get('labels') or {}
                if self.configmap_labels and not any(
                    labels.get(key) == value for key, value in self.configmap_labels
                ):
                    continue
                found[(str(meta.get('namespace', '')), str(meta.get('name', '')))] = obj
        return tuple(found[key] for key in sorted(found))

    def synced(self) -> bool:
        """Whether every informer has listed once (LWS may be absent: see `required`)."""
        return all(informer.synced.is_set() for informer in self.required())

    def required(self) -> tuple[Informer, ...]:
        """Informers the first cycle waits for; LeaderWorkerSet is optional (CRD may be absent)."""
        return tuple(i for i in self.all() if i is not self.leaderworkersets)

    def targets(self) -> dict[tuple[str, str, str], Mapping[str, Any]]:
        """Every cached scale target keyed (kind, namespace, name)."""
        found: dict[tuple[str, str, str], Mapping[str, Any]] = {}
        for kind, attribute in _KINDS:
            informer: Informer = getattr(self, attribute)
            for obj in informer.items():
                meta = obj.get('metadata') or {}
                found[(kind, str(meta.get('namespace', '')), str(meta.get('name', '')))] = obj
        return found

    def target_versions(self) -> tuple[int, ...]:
        return (
            self.vas.version,
            self.deployments.version,
            self.statefulsets.version,
            self.leaderworkersets.version,
        )


def build_caches(
    *,
    client: AsyncClient,
    clock: Clock,
    namespace: str,
    watch_namespace: str,
    configmap_labels: Sequence[str],
) -> Caches:
    """The informers of `llmscaler run`.

    `watch_namespace` '' watches every namespace; otherwise that one, plus the ConfigMaps of the
    controller's own `namespace` (the global ConfigMaps live there). `configmap_labels` are
    `key=value` texts.
    """
    scope = watch_namespace or None

    def informer(resource: type[object], name: str, where: str | None = scope) -> Informer:
        return Informer(client=client, resource=resource, clock=clock, namespace=where, name=name)

    configmaps = [informer(ConfigMap, 'configmaps')]
    if scope is not None and scope != namespace:
        configmaps.append(informer(ConfigMap, 'configmaps-global', namespace))
    labels = tuple(
        (key, value) for key, _, value in (text.partition('=') for text in configmap_labels)
    )
    return Caches(
        vas=informer(VariantAutoscalingResource, 'variantautoscalings'),
        deployments=informer(Deployment, 'deployments'),
        statefulsets=informer(StatefulSet, 'statefulsets'),
        leaderworkersets=informer(LeaderWorkerSetResource, 'leaderworkersets'),
        pods=informer(Pod, 'pods'),
        configmaps=tuple(configmaps),
        configmap_labels=labels,
    )


class WorldCache:
    """`World`s rebuilt only when their inputs changed.

    `variants()` leaves pods out (scale-from-zero needs none, and pods change all the time);
    `full()` includes them (the main cycle attributes metrics to pods).
    """

    def __init__(self, *, caches: Caches) -> None:
        self._caches = caches
        self._variants: tuple[tuple[object, ...], World] | None = None
        self._full: tuple[tuple[object, ...], World] | None = None

    def variants(self, *, config: Config) -> World:
        key = (*self._caches.target_versions(), config)
        if self._variants is None or self._variants[0] != key:
            world = self._build(config=config, with_pods=False)
            self._variants = (key, world)
        return self._variants[1]

    def full(self, *, config: Config) -> World:
        key = (*self._caches.target_versions(), self._caches.pods.version, config)
        if self._full is None or self._full[0] != key:
            self._full = (key, self._build(config=config, with_pods=True))
        return self._full[1]

    def _build(self, *, config: Config, with_pods: bool) -> World:
        return build_world(
            vas=self._caches.vas.items(),
            targets=self._caches.targets(),
            pods=self._caches.pods.items() if with_pods else (),
            config=config,
        )
