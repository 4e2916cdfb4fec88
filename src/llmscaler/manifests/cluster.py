"""The VariantAutoscalings of a cluster, for `llmscaler manifests --from-cluster`.

Why: the objects to write for are the VAs the controller serves; reading them from the API
server (with the same connection rules as `llmscaler run`: `--server` for a plain URL such as
`kubectl proxy`, else a kubeconfig, else the environment) avoids exporting them first.

What fails: a configuration that cannot be used, an API server that cannot be reached or refuses
the list (403 without `list` on variantautoscalings.llmd.ai), or a VA that does not validate,
each as one `TargetError` line; a cluster without VAs in the namespace(s) asked is an error too
(nothing to write).
"""

from __future__ import annotations

import asyncio
from typing import Any

from llmscaler.kube.client import (
    KubeConfigProblem,
    VariantAutoscalingResource,
    as_dict,
    describe_error,
    make_client,
)
from llmscaler.manifests.targets import Target, TargetError, from_va_object


async def _list(
    *, server: str | None, kubeconfig: str | None, namespace: str, timeout: float
) -> list[dict[str, Any]]:
    client = make_client(server=server, kubeconfig=kubeconfig, timeout=timeout)
    try:
        return [
            as_dict(obj)
            async for obj in client.list(VariantAutoscalingResource, namespace=namespace)
        ]
    finally:
        await client.close()


def _identity(obj: dict[str, Any]) -> tuple[str, str]:
    meta = obj.get('metadata')
    if not isinstance(meta, dict):
        return '?', '?'
    return str(meta.get('namespace', '?')), str(meta.get('name', '?'))


def from_cluster(
    *,
    server: str | None,
    kubeconfig: str | None,
    namespace: str | None,
    timeout: float = 30.0,
) -> list[Target]:
    """The VAs of `namespace` (None: every namespace), as targets."""
    where = f'namespace {namespace}' if namespace else 'all namespaces'
    try:
        objects = asyncio.run(
            _list(server=server, kubeconfig=kubeconfig, namespace=namespace or '*', timeout=timeout)
        )
    except KubeConfigProblem as exc:
        raise TargetError(f'--from-cluster: {exc}') from None
    except Exception as exc:  # any API or transport failure is this listing's problem
        raise TargetError(
            f'--from-cluster: listing VariantAutoscalings in {where}: {describe_error(exc)}'
        ) from None
    targets = []
    for obj in sorted(objects, key=_identity):
        namespace_of, name = _identity(obj)
        targets.append(
            from_va_object(
                document=obj,
                where=f'--from-cluster {namespace_of}/{name}',
                namespace=namespace or 'default',
            )
        )
    if not targets:
        raise TargetError(f'--from-cluster: no VariantAutoscaling in {where}')
    return targets
