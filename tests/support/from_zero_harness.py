"""The scale-from-zero loop's harness: the fake apiserver's objects, an EPP page on loopback.

Model `m` in namespace `llm`: `deployment(name)` at zero replicas (pods labelled `app=<name>`) and
`va(name)` scaling it (variantCost 10, minReplicas 0, maxReplicas 4 unless given). `Epp` serves
`/metrics` on loopback with the body the test sets, `queued(3)` by default showing
`inference_extension_flow_control_queue_size{target_model_name="m"} 3`; `epp_pod` is the pod
labelled `llm-d.ai/epp=true` whose page it is. `Harness` builds FromZero loops against the fake
apiserver and reads back what reached it (patches, Events, the controller's metrics); `harness`
gives one over a fresh fake apiserver.
"""

from __future__ import annotations

import contextlib
import ssl
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from typing import Any

from aiohttp import web
from lightkube import AsyncClient
from lightkube.resources.apps_v1 import Deployment
from lightkube.types import PatchType
from prometheus_client.parser import text_string_to_metric_families

from llmscaler.clock import ManualClock
from llmscaler.collect.scrape.source import Scheme, ScrapeTarget
from llmscaler.config.resolved import Config
from llmscaler.controller.cluster.pods import epp_targets
from llmscaler.controller.cluster.world import World, build_world
from llmscaler.controller.from_zero.loop import FromZero
from llmscaler.controller.publish import ControllerMetrics
from llmscaler.devcluster import loopback
from llmscaler.devcluster.fakeapi.server import FakeAPI
from llmscaler.kube.client import make_client
from llmscaler.kube.events import EventRecorder
from llmscaler.kube.scale import ScaleClient
from tests.support.pool_objects import va as va
from tests.support.world_objects import pod

NS = 'llm'
EPP_LABEL = {'llm-d.ai/epp': 'true'}
QUEUE = 'inference_extension_flow_control_queue_size'

Series = dict[tuple[str, tuple[tuple[str, str], ...]], float]


# --- objects -----------------------------------------------------------------------------------


def deployment(name: str, *, namespace: str = NS, replicas: int = 0) -> dict[str, Any]:
    labels = {'app': name}
    return {
        'apiVersion': 'apps/v1',
        'kind': 'Deployment',
        'metadata': {'name': name, 'namespace': namespace, 'labels': labels},
        'spec': {
            'replicas': replicas,
            'selector': {'matchLabels': labels},
            'template': {
                'metadata': {'labels': labels},
                'spec': {'containers': [{'name': 'vllm', 'image': 'vllm/vllm-openai'}]},
            },
        },
    }


def page(*lines: str) -> bytes:
    return ''.join(f'{line}\n' for line in (f'# TYPE {QUEUE} gauge', *lines)).encode()


def queued(size: float, model: str = 'm') -> bytes:
    return page(f'{QUEUE}{{target_model_name="{model}"}} {size:g}')


# --- the EPP -----------------------------------------------------------------------------------


class Epp:
    """A gateway metrics page whose body and status the test sets; counts its requests and keeps
    the Authorization header of each. Served over https with `tls`."""

    def __init__(self, *, tls: ssl.SSLContext | None = None) -> None:
        self.status = 200
        self.body = queued(0)
        self.hits = 0
        self.authorization: list[str | None] = []
        self.before_answer: Callable[[], Awaitable[None]] | None = None
        self.port = 0
        self._tls = tls
        self._served: loopback.Served | None = None

    async def __aenter__(self) -> Epp:
        app = web.Application()
        app.router.add_get('/metrics', self._handle)
        self._served = await loopback.serve(app, tls=self._tls)
        self.port = self._served.port
        return self

    async def __aexit__(self, *exc: object) -> None:
        if self._served is not None:
            await self._served.close()

    async def _handle(self, request: web.Request) -> web.Response:
        self.hits += 1
        self.authorization.append(request.headers.get('Authorization'))
        if self.before_answer is not None:
            await self.before_answer()
        return web.Response(
            status=self.status,
            body=self.body,
            headers={'Content-Type': 'text/plain; version=0.0.4; charset=utf-8'},
        )


def epp_pod(name: str, *, namespace: str = NS, port: int) -> dict[str, Any]:
    return pod(
        name,
        namespace,
        labels=EPP_LABEL,
        ip='127.0.0.1',
        annotations={'prometheus.io/port': str(port)},
    )


# --- harness -----------------------------------------------------------------------------------


class Harness:
    def __init__(self, api: FakeAPI, client: AsyncClient, epp: Epp) -> None:
        self.api, self.client, self.epp = api, client, epp
        self.clock = ManualClock()
        self.metrics = ControllerMetrics()
        self.events = EventRecorder(client=client, clock=self.clock, instance='test-0')
        self.world: World = self.fresh_world()
        self.epp_pods: list[dict[str, Any]] = [epp_pod('epp-0', port=epp.port)]
        self.epp_scheme: Scheme = 'http'
        self.loops: list[FromZero] = []

    def fresh_world(self) -> World:
        """The World an up-to-date informer would give now."""
        store = self.api.store
        vas = store.list(self.api.store_resource(va('x')), None)
        deploys = store.list(self.api.store_resource(deployment('x')), None)
        targets = {
            ('Deployment', d['metadata']['namespace'], d['metadata']['name']): d for d in deploys
        }
        return build_world(vas=vas, targets=targets, pods=(), config=Config())

    def refresh(self) -> None:
        self.world = self.fresh_world()

    def epp_targets(self) -> Sequence[ScrapeTarget]:
        return epp_targets(pods=self.epp_pods, selector=EPP_LABEL, scheme=self.epp_scheme)

    def loop(self, **kwargs: Any) -> FromZero:
        params: dict[str, Any] = {
            'clock': self.clock,
            'world_fn': lambda: self.world,
            'epp_fn': self.epp_targets,
            'scale': ScaleClient(client=self.client),
            'events': self.events,
            'metrics': self.metrics,
        }
        made = FromZero(**(params | kwargs))
        self.loops.append(made)
        return made

    def replicas(self, name: str, namespace: str = NS) -> int:
        obj = self.api.get(api_version='apps/v1', kind='Deployment', namespace=namespace, name=name)
        return int(obj['spec']['replicas'])

    def rv(self, name: str) -> str:
        obj = self.api.get(api_version='apps/v1', kind='Deployment', namespace=NS, name=name)
        return str(obj['metadata']['resourceVersion'])

    def patches(self) -> list[Any]:
        return [r for r in self.api.requests if r.method == 'PATCH']

    def series(self) -> Series:
        found: Series = {}
        for family in text_string_to_metric_families(self.metrics.render().decode()):
            for sample in family.samples:
                found[(sample.name, tuple(sorted(sample.labels.items())))] = sample.value
        return found

    def family(self, name: str) -> Series:
        return {k: v for k, v in self.series().items() if k[0] == name}

    def stored_events(self) -> list[dict[str, Any]]:
        resource = self.api.store_resource({'apiVersion': 'events.k8s.io/v1', 'kind': 'Event'})
        return self.api.store.list(resource, None)

    async def scale_back_to_zero(self, name: str) -> None:
        """Someone (scale-to-zero, a person) moves the target back to 0 replicas."""
        await self.client.patch(
            Deployment, name, {'spec': {'replicas': 0}}, namespace=NS, patch_type=PatchType.MERGE
        )


@contextlib.asynccontextmanager
async def harness(*seeded: dict[str, Any]) -> AsyncIterator[Harness]:
    """A Harness over a fresh fake apiserver holding `seeded`, with an EPP page on loopback;
    the loops it built and its client are closed on leaving."""
    async with FakeAPI() as api, Epp() as epp:
        for obj in seeded:
            api.seed(obj)
        client = make_client(server=api.url, timeout=5.0)
        made = Harness(api, client, epp)
        try:
            yield made
        finally:
            for loop in made.loops:
                await loop.aclose()
            await client.aclose()
