"""The informer caches the controller reads, and the `World` built from them, memoised.

Why: both loops read the same cluster state — the main cycle every 30 s, scale-from-zero every
100 ms. Building a `World` parses every VariantAutoscaling and scale target (pydantic and the
accessor), far too costly to repeat ten times a second for a thousand variants. The caches carry a
`version` that moves on every change, so the world is rebuilt only when a cache or the
configuration changed.

Which objects are cached (`build_caches`): VAs and scale targets of the watched scope; pods as
`controller.cluster.podcache` decides (by default only in namespaces that hold a VA, plus the EPP
pods, slimmed to the fields read); ConfigMaps with a configured label (all, when none is
configured), asked of the API server as a label selector
(`app.kubernetes.io/name in (llmscaler,workload-variant-autoscaler)` when the labels share a key,
else one informer per label), and of those only the scaling ConfigMaps
(`configwatch.SCALING_CONFIGMAPS`) are kept. `configmap_items` checks the labels once more, so a
cache built otherwise (or a server that ignored the selector) still reads only labelled maps.

What fails: nothing raises once built; an informer that has not synced yet contributes what it has
(the controller waits for `synced()` before its first cycle). `build_caches` raises ValueError
for a malformed pod or EPP selector or a negative namespace limit (the options layer checks them
first).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

from lightkube import AsyncClient
from lightkube.resources.apps_v1 import Deployment, StatefulSet
from lightkube.resources.core_v1 import ConfigMap

from llmscaler.clock import Clock
from llmscaler.config.resolved import Config
from llmscaler.controller.cluster.configwatch import SCALING_CONFIGMAPS
from llmscaler.controller.cluster.parsed import ParsedObjects
from llmscaler.controller.cluster.podcache import PodCache
from llmscaler.controller.cluster.pods import parse_selector
from llmscaler.controller.cluster.world import World, build_world
from llmscaler.kube.client import LeaderWorkerSetResource, VariantAutoscalingResource
from llmscaler.kube.informer import Cache, Informer, Obj, Selector

DEFAULT_EPP_SELECTOR: Final = 'llm-d.ai/epp=true'
DEFAULT_POD_NAMESPACE_LIMIT: Final = 20
"""Per-namespace pod watches above which one cluster-wide pod watch is used (see podcache)."""

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
    pods: Cache
    """A `PodCache` (several informers behind one face) from `build_caches`."""
    configmaps: tuple[Informer, ...]
    """The watched namespace's (or all) ConfigMaps, plus the controller namespace's when the
    controller watches a single other namespace (the global ConfigMaps live there)."""
    configmap_labels: tuple[tuple[str, str], ...] = ()
    """ConfigMaps are read only when they carry one of these (label, value) pairs."""

    def all(self) -> tuple[Cache, ...]:
        """Every cache, each to be `run()` once by the process."""
        return (
            self.vas,
            self.deployments,
            self.statefulsets,
            self.leaderworkersets,
            self.pods,
            *self.configmaps,
        )

    def informers(self) -> tuple[Informer, ...]:
        """Every informer of the moment, the pod cache's own included: one watch each."""
        found: list[Informer] = []
        for cache in self.all():
            if isinstance(cache, PodCache):
                found.extend(cache.informers())
            elif isinstance(cache, Informer):
                found.append(cache)
        return tuple(found)

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

    def required(self) -> tuple[Cache, ...]:
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
    pod_selector: str = '',
    epp_selector: str = DEFAULT_EPP_SELECTOR,
    pod_namespace_limit: int = DEFAULT_POD_NAMESPACE_LIMIT,
) -> Caches:
    """The informers of `llmscaler run`.

    `watch_namespace` '' watches every namespace; otherwise that one, plus the ConfigMaps of the
    controller's own `namespace` (the global ConfigMaps live there). `configmap_labels` are
    `key=value` texts. `pod_selector` ('' for none) and `epp_selector` are `k=v,...` equality
    selectors; with no pod selector, pods are watched per namespace holding a VA, up to
    `pod_namespace_limit` namespaces (see `controller.cluster.podcache`).
    """
    scope = watch_namespace or None

    def informer(resource: type[object], name: str, where: str | None = scope) -> Informer:
        return Informer(client=client, resource=resource, clock=clock, namespace=where, name=name)

    labels = tuple(
        (key, value) for key, _, value in (text.partition('=') for text in configmap_labels)
    )
    where = [(scope, 'configmaps')]
    if scope is not None and scope != namespace:
        where.append((namespace, 'configmaps-global'))
    selectors = configmap_selectors(labels)
    configmaps = tuple(
        Informer(
            client=client,
            resource=ConfigMap,
            clock=clock,
            namespace=place,
            labels=selector,
            name=name if len(selectors) == 1 else f'{name}[{_show(selector)}]',
            transform=_scaling_configmap,
        )
        for place, name in where
        for selector in selectors
    )
    vas = informer(VariantAutoscalingResource, 'variantautoscalings')
    pods = PodCache(
        client=client,
        clock=clock,
        vas=vas,
        scope=scope,
        selector=parse_selector(pod_selector),
        epp_selector=parse_selector(epp_selector),
        namespace_limit=pod_namespace_limit,
    )
    return Caches(
        vas=vas,
        deployments=informer(Deployment, 'deployments'),
        statefulsets=informer(StatefulSet, 'statefulsets'),
        leaderworkersets=informer(LeaderWorkerSetResource, 'leaderworkersets'),
        pods=pods,
        configmaps=configmaps,
        configmap_labels=labels,
    )


def configmap_selectors(labels: Sequence[tuple[str, str]]) -> tuple[Selector | None, ...]:
    """The label selectors that list exactly the ConfigMaps carrying one of `labels`.

    None (every ConfigMap) without labels; one set-based selector when they share one key (a
    single pair is an equality); otherwise one equality selector per pair, sorted.
    """
    pairs = sorted(set(labels))
    if not pairs:
        return (None,)
    keys = {key for key, _ in pairs}
    if len(keys) == 1:
        (key,) = keys
        values = tuple(value for _, value in pairs)
        return ({key: values[0] if len(values) == 1 else values},)
    return tuple({key: value} for key, value in pairs)


def _show(selector: Selector | None) -> str:
    return ','.join(f'{k}={v}' for k, v in sorted((selector or {}).items()))


def _scaling_configmap(obj: Obj) -> Obj | None:
    """Only the ConfigMaps the configuration reads are kept (a label can be on many maps)."""
    meta = obj.get('metadata')
    return obj if isinstance(meta, Mapping) and meta.get('name') in SCALING_CONFIGMAPS else None


class WorldCache:
    """`World`s rebuilt only when their inputs changed.

    `variants()` leaves pods out (scale-from-zero needs none, and pods change all the time);
    `full()` includes them (the main cycle attributes metrics to pods).
    """

    def __init__(self, *, caches: Caches) -> None:
        self._caches = caches
        self._variants: tuple[tuple[object, ...], World] | None = None
        self._full: tuple[tuple[object, ...], World] | None = None
        # One memo per kind of build: the two are built at different times, from different
        # cache versions, and each keeps only what its own last build asked for.
        self._parsed_variants = ParsedObjects()
        self._parsed_full = ParsedObjects()

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
            parsed=self._parsed_full if with_pods else self._parsed_variants,
        )
