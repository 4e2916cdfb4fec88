"""The informers of the InferencePool datastore: pools of both served versions, EPP EndpointSlices.

Why: `controller.pools.datastore` is pure; this module keeps its inputs current. Clusters carry the
InferencePool of the Gateway API Inference Extension as the GA `inference.networking.k8s.io/v1`,
the older `inference.networking.x-k8s.io/v1alpha2`, both, or neither, so each version is first
asked of the API server: a list of one object (`chunk_size=1`) that answers 404 means the version
is not served (the group/version/resource discovery would say the same); it is asked again every
`rediscover` seconds (60), so a CRD installed later is picked up without a restart. A served
version gets an informer. EndpointSlices (slimmed by `pools.slim_endpoint_slice`) are watched
over the same scope once a version is served: they carry the EPP pods' addresses and port names,
so neither Services nor EPP pods are read. Once served, a version stays watched: a CRD removed
later makes its informer's lists fail (logged, retried) while it keeps the pools it last saw.

`synced` is set once every version is known (listed, or answered 404) and, when one is served,
the EndpointSlices have listed: before that a variant would look poolless and be held for no
reason, so the controller waits for it before its first cycle. `version` moves on every change
of a store and whenever a version comes or goes.

What fails: a probe that fails otherwise (API down, 403 for missing RBAC) leaves the version
unknown and is retried after `retry_delay`, growing to `rediscover`, logged at warning with the
error; `last_error` names it. Informers log, back off and retry on their own (`kube.informer`).
Nothing raises out of `run()` but cancellation.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any, Final

from lightkube import AsyncClient
from lightkube.generic_resource import create_namespaced_resource
from lightkube.resources.discovery_v1 import EndpointSlice

from llmscaler.clock import Clock
from llmscaler.controller.pools.datastore import (
    POOL_VERSIONS,
    Pool,
    read_pools,
    slim_endpoint_slice,
)
from llmscaler.kube.client import describe_error, error_code
from llmscaler.kube.informer import Informer, Obj

log = logging.getLogger(__name__)

POOL_RESOURCES: Final[dict[str, type[Any]]] = {
    f'{group}/{version}': create_namespaced_resource(
        group, version, 'InferencePool', 'inferencepools'
    )
    for group, version in POOL_VERSIONS
}
"""apiVersion → lightkube resource of InferencePool, for each version read."""


class PoolCaches:
    """InferencePools of every served version and the EPP EndpointSlices (module docstring)."""

    def __init__(
        self,
        *,
        client: AsyncClient,
        clock: Clock,
        scope: str | None,
        rediscover: float = 60.0,
        retry_delay: float = 1.0,
    ) -> None:
        self._client = client
        self._clock = clock
        self._scope = scope
        self._rediscover = rediscover
        self._retry_delay = retry_delay
        self.served: dict[str, bool | None] = dict.fromkeys(POOL_RESOURCES)
        """apiVersion → served (True), not served (False), not known yet (None)."""
        self.informers: dict[str, Informer] = {
            av: Informer(
                client=client,
                resource=resource,
                clock=clock,
                namespace=scope,
                name=f'inferencepools.{av.split("/")[0]}',
            )
            for av, resource in POOL_RESOURCES.items()
        }
        self.slices = Informer(
            client=client,
            resource=EndpointSlice,
            clock=clock,
            namespace=scope,
            name='endpointslices',
            transform=slim_endpoint_slice,
        )
        self._errors: dict[str, str] = {}
        self._moves = 0
        self._memo: tuple[int, tuple[Pool, ...]] | None = None
        self._changed = asyncio.Event()
        self.synced = asyncio.Event()
        """Set once every version is known and, when one is served, the slices have listed."""

    @property
    def name(self) -> str:
        return 'inferencepools'

    @property
    def version(self) -> int:
        served = (i.version for av, i in self.informers.items() if self.served[av])
        return self._moves + sum(served) + self.slices.version

    @property
    def last_error(self) -> str | None:
        for av in sorted(self._errors):
            return f'{av}: {self._errors[av]}'
        return None

    def get(self, *, namespace: str, name: str) -> Obj | None:
        """The InferencePool object of the preferred served version, or None."""
        for av in POOL_RESOURCES:
            found = self.informers[av].get(namespace=namespace, name=name)
            if self.served[av] and found is not None:
                return found
        return None

    def items(self) -> tuple[Obj, ...]:
        """The InferencePool objects of every served version (a pool in two versions twice)."""
        return tuple(
            obj
            for av, informer in self.informers.items()
            if self.served[av]
            for obj in informer.items()
        )

    def __len__(self) -> int:
        return len(self.items())

    def pools(self) -> tuple[Pool, ...]:
        """Every pool of the served versions, one per (namespace, name), sorted."""
        version = self.version
        if self._memo is None or self._memo[0] != version:
            objects = {
                av: informer.items() for av, informer in self.informers.items() if self.served[av]
            }
            self._memo = (version, read_pools(objects))
        return self._memo[1]

    def endpoint_slices(self) -> tuple[Obj, ...]:
        return self.slices.items() if any(self.served.values()) else ()

    async def run(self) -> None:
        """Probe each version, run the informers of the served ones; until cancelled."""
        tasks = [asyncio.create_task(self._version(av)) for av in sorted(POOL_RESOURCES)]
        tasks.append(asyncio.create_task(self._sync()))
        try:
            await asyncio.gather(*tasks)
        finally:
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)

    async def _probe(self, api_version: str) -> bool | None:
        resource = POOL_RESOURCES[api_version]
        namespace = self._scope if self._scope is not None else '*'
        try:
            async for _ in self._client.list(resource, namespace=namespace, chunk_size=1):
                break
        except Exception as exc:
            if error_code(exc) == 404:
                self._errors.pop(api_version, None)
                return False
            self._errors[api_version] = describe_error(exc)
            log.warning(
                'InferencePool %s: cannot tell whether it is served (%s)',
                api_version,
                self._errors[api_version],
            )
            return None
        self._errors.pop(api_version, None)
        return True

    async def _version(self, api_version: str) -> None:
        delay = self._retry_delay
        while True:
            served = await self._probe(api_version)
            if served is None:
                await self._clock.sleep(delay)
                delay = min(self._rediscover, delay * 2)
                continue
            delay = self._retry_delay
            if served != self.served[api_version]:
                log.info(
                    'InferencePool %s is %s', api_version, 'served' if served else 'not served'
                )
            self.served[api_version] = served
            self._moves += 1
            self._changed.set()
            if served:
                await self.informers[api_version].run()  # runs until cancelled
            await self._clock.sleep(self._rediscover)

    async def _sync(self) -> None:
        """Run the slice informer once a version is served; set `synced` when all is known."""
        slices: asyncio.Task[None] | None = None
        try:
            while True:
                self._changed.clear()
                known = all(s is not None for s in self.served.values())
                served = [av for av, s in self.served.items() if s]
                if served and slices is None:
                    slices = asyncio.create_task(self.slices.run())
                waits = [
                    self.informers[av].synced.wait()
                    for av in served
                    if not self.informers[av].synced.is_set()
                ]
                if served and not self.slices.synced.is_set():
                    waits.append(self.slices.synced.wait())
                if known and not waits:
                    self.synced.set()
                pending = [asyncio.ensure_future(w) for w in waits]
                pending.append(asyncio.ensure_future(self._changed.wait()))
                try:
                    await asyncio.wait(pending, return_when=asyncio.FIRST_COMPLETED)
                finally:
                    for task in pending:
                        task.cancel()
                    await asyncio.gather(*pending, return_exceptions=True)
        finally:
            if slices is not None:
                slices.cancel()
                await asyncio.gather(slices, return_exceptions=True)
