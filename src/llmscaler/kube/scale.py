"""Reading and writing a scale target's replica count through its `/scale` subresource.

Why: the controller actuates a decision by changing how many replicas a Deployment, StatefulSet
or LeaderWorkerSet runs. It does so only through the autoscaling/v1 Scale subresource, the way
the HPA and KEDA do, never by writing `spec.replicas` of the object itself: a Scale write
touches one field, needs only the `<kind>/scale` RBAC verb, and cannot clobber a concurrent edit
of the rest of the spec. The kinds and their lightkube classes come from `kube.client`.

What it does: `ScaleClient.read` GETs the Scale and reports `spec.replicas`. `ScaleClient.scale`
GETs the Scale, then

- does nothing (UNCHANGED) when `spec.replicas` already equals the wanted count;
- does nothing (CONFLICT) when the caller passed `expect`, the count its decision was made
  from, and the server's count differs: someone else moved the target since, so the caller
  decides again next cycle rather than overwrite that change;
- otherwise writes a merge patch on `/scale` that carries the GET's `metadata.resourceVersion`,
  so the write only lands on the object that was read (optimistic concurrency).

A Scale read with no `spec.replicas` means 0: autoscaling/v1 omits a zero count (`omitempty`).

What fails and how: nothing raises; every outcome is a `ScaleResult` value. A 409 (the target
changed between GET and PATCH) is CONFLICT and is not retried here: the caller requeues and
decides again from fresh facts. 404 is NOT_FOUND, a kind outside `SCALE_KINDS` is UNSUPPORTED
(no request is made), and any other failure (500, 429, 422, a refused connection, a timeout,
an undecodable answer) is FAILED with a one-line `describe_error` message. A replica count that
is not an int in [0, 2^31 − 1] is a programming error in the caller; it is answered FAILED
without any request, so a bad value can never reach the cluster.
"""

from __future__ import annotations

import enum
import logging
from dataclasses import dataclass
from typing import Any

from lightkube import AsyncClient
from lightkube.types import PatchType

from llmscaler.kube.client import describe_error, error_code, scale_resource
from llmscaler.kube.resource_model import INT32_MAX

logger = logging.getLogger(__name__)


class ScaleOutcome(enum.StrEnum):
    APPLIED = 'Applied'
    UNCHANGED = 'Unchanged'
    CONFLICT = 'Conflict'
    NOT_FOUND = 'NotFound'
    UNSUPPORTED = 'Unsupported'
    FAILED = 'Failed'


@dataclass(frozen=True, slots=True)
class ScaleResult:
    """What a read or a scale did.

    `replicas` is `spec.replicas` as the server reported it before any write (None when the
    Scale could not be read); `message` is one line, '' when applied or unchanged.
    """

    outcome: ScaleOutcome
    replicas: int | None
    message: str


@dataclass(frozen=True, slots=True)
class _Read:
    replicas: int
    resource_version: str | None


class ScaleClient:
    """The `/scale` subresource of Deployments, StatefulSets and LeaderWorkerSets."""

    def __init__(self, *, client: AsyncClient) -> None:
        self._client = client

    async def read(
        self, *, api_version: str | None, kind: str, namespace: str, name: str
    ) -> ScaleResult:
        """The target's `spec.replicas` (outcome UNCHANGED), or why it could not be read."""
        resource = scale_resource(api_version=api_version, kind=kind)
        if resource is None:
            return _unsupported(api_version, kind)
        got = await self._get(resource, kind, namespace, name)
        if isinstance(got, ScaleResult):
            return got
        return ScaleResult(ScaleOutcome.UNCHANGED, got.replicas, '')

    async def scale(
        self,
        *,
        api_version: str | None,
        kind: str,
        namespace: str,
        name: str,
        replicas: int,
        expect: int | None,
    ) -> ScaleResult:
        """Set the target's replica count to `replicas`, if it is still `expect` (when given)."""
        problem = _check_replicas(replicas)
        if problem is not None:
            return problem
        resource = scale_resource(api_version=api_version, kind=kind)
        if resource is None:
            return _unsupported(api_version, kind)
        got = await self._get(resource, kind, namespace, name)
        if isinstance(got, ScaleResult):
            return got
        if got.replicas == replicas:
            return ScaleResult(ScaleOutcome.UNCHANGED, got.replicas, '')
        if expect is not None and got.replicas != expect:
            return ScaleResult(
                ScaleOutcome.CONFLICT,
                got.replicas,
                f'{kind} {namespace}/{name} has {got.replicas} replicas, expected {expect}',
            )
        return await self._write(
            resource, kind, namespace, name, replicas, got.resource_version, before=got.replicas
        )

    async def scale_at(
        self,
        *,
        api_version: str | None,
        kind: str,
        namespace: str,
        name: str,
        replicas: int,
        resource_version: str,
    ) -> ScaleResult:
        """`scale` in one round trip, for scale-from-zero where every millisecond counts.

        The caller read the target at `resource_version` (an informer's copy) and decided from
        it; the merge patch carries that version as its precondition, so the API server applies
        it only if the object has not changed since, else answers 409 (CONFLICT: the caller's
        copy was stale, it decides again from a fresh one). `replicas` of the result is None:
        nothing was read.
        """
        problem = _check_replicas(replicas)
        if problem is not None:
            return problem
        resource = scale_resource(api_version=api_version, kind=kind)
        if resource is None:
            return _unsupported(api_version, kind)
        if not resource_version:
            return ScaleResult(ScaleOutcome.FAILED, None, 'no resourceVersion to write against')
        return await self._write(
            resource, kind, namespace, name, replicas, resource_version, before=None
        )

    async def _write(
        self,
        resource: Any,
        kind: str,
        namespace: str,
        name: str,
        replicas: int,
        resource_version: str | None,
        *,
        before: int | None,
    ) -> ScaleResult:
        """The merge patch of `replicas` on `/scale`, preconditioned on `resource_version` when
        there is one: APPLIED, or the failure as a value (`before` is the count read before it,
        None when nothing was read)."""
        patch: dict[str, Any] = {'spec': {'replicas': replicas}}
        if resource_version:
            patch['metadata'] = {'resourceVersion': resource_version}
        try:
            await self._client.patch(
                resource.Scale, name, patch, namespace=namespace, patch_type=PatchType.MERGE
            )
        except Exception as exc:  # every failure becomes a value: never raise
            return _failure(exc, before, kind, namespace, name)
        logger.debug('scaled %s %s/%s to %d (read: %s)', kind, namespace, name, replicas, before)
        return ScaleResult(ScaleOutcome.APPLIED, before, '')

    async def _get(
        self, resource: Any, kind: str, namespace: str, name: str
    ) -> _Read | ScaleResult:
        try:
            scale = await self._client.get(resource.Scale, name, namespace=namespace)
        except Exception as exc:  # every failure becomes a value: never raise
            return _failure(exc, None, kind, namespace, name)
        spec = getattr(scale, 'spec', None)
        replicas = getattr(spec, 'replicas', None)
        if replicas is None:
            replicas = 0  # autoscaling/v1 omits a zero count
        if isinstance(replicas, bool) or not isinstance(replicas, int):
            message = f'{kind} {namespace}/{name}: Scale spec.replicas is {replicas!r}'
            return ScaleResult(ScaleOutcome.FAILED, None, message)
        metadata = getattr(scale, 'metadata', None)
        rv = getattr(metadata, 'resourceVersion', None)
        return _Read(replicas, rv if isinstance(rv, str) else None)


def _check_replicas(replicas: object) -> ScaleResult | None:
    if isinstance(replicas, bool) or not isinstance(replicas, int):
        return ScaleResult(ScaleOutcome.FAILED, None, f'replicas {replicas!r} is not an int')
    if not 0 <= replicas <= INT32_MAX:
        return ScaleResult(
            ScaleOutcome.FAILED, None, f'replicas {replicas} is outside [0, {INT32_MAX}]'
        )
    return None


def _unsupported(api_version: str | None, kind: str) -> ScaleResult:
    shown = f'{api_version} {kind}' if api_version else kind
    return ScaleResult(ScaleOutcome.UNSUPPORTED, None, f'unsupported scale target kind {shown}')


def _failure(
    exc: Exception, replicas: int | None, kind: str, namespace: str, name: str
) -> ScaleResult:
    code = error_code(exc)
    message = describe_error(exc)
    if code == 409:
        logger.debug('scale of %s %s/%s conflicted: %s', kind, namespace, name, message)
        return ScaleResult(ScaleOutcome.CONFLICT, replicas, message)
    if code == 404:
        return ScaleResult(ScaleOutcome.NOT_FOUND, replicas, message)
    logger.warning('scale of %s %s/%s failed: %s', kind, namespace, name, message)
    return ScaleResult(ScaleOutcome.FAILED, replicas, message)
