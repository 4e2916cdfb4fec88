"""The API server connection and the resource table the controller runtime shares.

Why: every runtime piece (informers, scale client, status writer, leases, events) talks to the API
server through lightkube's `AsyncClient`, and all of them must agree on which lightkube resource
class stands for which kind, how an object becomes a plain dict (the form `kube.crd`,
`kube.targets` and the attribution step read), and how an API failure is described. One module
holds those facts so they cannot drift.

What it provides:

- `VariantAutoscalingResource` and `LeaderWorkerSetResource`: generic namespaced resources with
  `/status` and `/scale` (lightkube creates both subresources for generic kinds);
- `SCALE_KINDS`: (apiVersion, kind) → resource class of every supported scale target:
  `WORKLOAD_SCALE_KINDS` (Deployment, StatefulSet, LeaderWorkerSet: VAs and LLMAutoScalers) and
  `KAITO_SCALE_KINDS` (Kaito's InferenceSet: LLMAutoScalers only, through `/scale` alone, so a
  cluster without Kaito's CRDs is never asked to list them);
- `as_dict`: any lightkube object (typed model or generic dict) → a plain JSON-like dict;
- `ObjectRef`: the identity of an object an event or a log line is about;
- `make_client`: a client from an explicit server URL, a kubeconfig file, or the environment
  (in-cluster service account, `KUBECONFIG`, `~/.kube/config`, lightkube's order);
- `error_code` / `describe_error`: the HTTP code and a one-line description of a failure.

What fails: `make_client` raises `KubeConfigProblem`, one line naming the file or what was
tried, when the kubeconfig given cannot be read or used, or when no configuration is found at all
(not in a cluster, no `KUBECONFIG`, no `~/.kube/config`); the caller reports it and exits. The
other helpers never raise.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final

import httpx2
import yaml
from lightkube import AsyncClient, KubeConfig
from lightkube.config.kubeconfig import DEFAULT_KUBECONFIG
from lightkube.core.exceptions import ApiError
from lightkube.core.exceptions import ConfigError as LightkubeConfigError
from lightkube.generic_resource import create_namespaced_resource
from lightkube.resources.apps_v1 import Deployment, StatefulSet

FIELD_MANAGER: Final = 'llmscaler'

VariantAutoscalingResource = create_namespaced_resource(
    'llmd.ai', 'v1alpha1', 'VariantAutoscaling', 'variantautoscalings'
)
LeaderWorkerSetResource = create_namespaced_resource(
    'leaderworkerset.x-k8s.io', 'v1', 'LeaderWorkerSet', 'leaderworkersets'
)

InferenceSetResources: Final = {
    version: create_namespaced_resource('kaito.sh', version, 'InferenceSet', 'inferencesets')
    for version in ('v1beta1', 'v1alpha1')
}

WORKLOAD_SCALE_KINDS: Final[Mapping[tuple[str, str], type[Any]]] = {
    ('apps/v1', 'Deployment'): Deployment,
    ('apps/v1', 'StatefulSet'): StatefulSet,
    ('leaderworkerset.x-k8s.io/v1', 'LeaderWorkerSet'): LeaderWorkerSetResource,
}
"""The kinds a VariantAutoscaling scales: informed too (`kube.targets.API_VERSIONS`), since its
decision reads the workload's pod template (GPUs, serving arguments, accelerator)."""

KAITO_SCALE_KINDS: Final[Mapping[tuple[str, str], type[Any]]] = {
    ('kaito.sh/v1beta1', 'InferenceSet'): InferenceSetResources['v1beta1'],
    ('kaito.sh/v1alpha1', 'InferenceSet'): InferenceSetResources['v1alpha1'],
}
"""Kaito's scalable kind, for LLMAutoScalers only: read and written through `/scale` alone
(`.spec.replicas`, `.status.replicas`, selector `.status.selector`), never informed. Kaito's
Workspace is not here: Kaito treats a Workspace as one unit and scales inference by the number
of Workspaces an InferenceSet holds; its Workspace scale-API work was closed in favour of it."""

SCALE_KINDS: Final[Mapping[tuple[str, str], type[Any]]] = {
    **WORKLOAD_SCALE_KINDS,
    **KAITO_SCALE_KINDS,
}
"""Every kind the scale client reads and writes, keyed by (apiVersion, kind): every kind an
LLMAutoScaler may target. Which kinds a VariantAutoscaling may target is `kube.targets`' table."""

DEFAULT_API_VERSIONS: Final[Mapping[str, str]] = {
    kind: av for av, kind in reversed(tuple(SCALE_KINDS))
}
"""The apiVersion assumed for a scaleTargetRef that names only a kind: its first listed one."""


def scale_resource(*, api_version: str | None, kind: str) -> type[Any] | None:
    """The resource class of a scale target kind; a missing apiVersion takes the kind's default."""
    version = api_version or DEFAULT_API_VERSIONS.get(kind, '')
    return SCALE_KINDS.get((version, kind))


def as_dict(obj: object) -> dict[str, Any]:
    """A plain dict of a lightkube object (a typed model or a generic resource)."""
    to_dict = getattr(obj, 'to_dict', None)
    if callable(to_dict):
        result = to_dict()
        if isinstance(result, dict):
            return result
    if isinstance(obj, Mapping):
        return dict(obj)
    return {}


@dataclass(frozen=True, slots=True)
class ObjectRef:
    """The identity of an object (what an event is about, what a log line names)."""

    api_version: str
    kind: str
    namespace: str
    name: str
    uid: str = ''

    @property
    def key(self) -> str:
        return f'{self.namespace}/{self.name}'

    @classmethod
    def of(cls, obj: Mapping[str, Any]) -> ObjectRef:
        """The reference of an object dict (empty strings where fields are missing)."""
        meta = obj.get('metadata')
        meta = meta if isinstance(meta, Mapping) else {}

        def text(value: object) -> str:
            return value if isinstance(value, str) else ''

        return cls(
            api_version=text(obj.get('apiVersion')),
            kind=text(obj.get('kind')),
            namespace=text(meta.get('namespace')),
            name=text(meta.get('name')),
            uid=text(meta.get('uid')),
        )


class KubeConfigProblem(Exception):
    """No usable connection to the API server can be configured; the message is one line."""


def _one_line(exc: BaseException) -> str:
    text = ' '.join(str(exc).split()) or type(exc).__name__
    return text if len(text) <= 200 else text[:197] + '...'


def _from_file(path: str) -> KubeConfig:
    if os.path.isdir(os.path.expanduser(path)):
        raise KubeConfigProblem(f'kubeconfig {path}: is a directory')
    try:
        return KubeConfig.from_file(path)
    except LightkubeConfigError:
        raise KubeConfigProblem(f'kubeconfig {path}: no such file') from None
    except Exception as exc:  # a file that is not a kubeconfig fails in many ways
        raise KubeConfigProblem(f'kubeconfig {path}: not usable: {_why(exc)}') from None


def _why(exc: BaseException) -> str:
    """What is wrong with a kubeconfig, never a piece of it: it may hold credentials."""
    if isinstance(exc, yaml.MarkedYAMLError) and exc.problem_mark is not None:
        mark = exc.problem_mark
        return f'not YAML (line {mark.line + 1}, column {mark.column + 1}: {exc.problem})'
    if isinstance(exc, KeyError):
        return f'no {_one_line(exc)} entry'
    return f'{type(exc).__name__} (details not shown: the file may hold credentials)'


def _from_environment() -> KubeConfig:
    """In-cluster, else the file `KUBECONFIG` names, else ~/.kube/config (lightkube's order)."""
    try:
        return KubeConfig.from_service_account()
    except LightkubeConfigError:
        pass
    except Exception as exc:  # a service account directory that is there but unusable
        raise KubeConfigProblem(f'in-cluster configuration: not usable: {_why(exc)}') from None
    path = os.environ.get('KUBECONFIG') or DEFAULT_KUBECONFIG
    if not os.path.exists(os.path.expanduser(path)):
        raise KubeConfigProblem(
            'no Kubernetes configuration: not running in a cluster (no service account), no '
            f'KUBECONFIG and no {DEFAULT_KUBECONFIG}; give --kubeconfig FILE or --server URL'
        )
    return _from_file(path)


def make_client(
    *,
    server: str | None = None,
    kubeconfig: str | None = None,
    timeout: float = 60.0,
    namespace: str | None = None,
) -> AsyncClient:
    """An AsyncClient for `server` (plain URL, no auth: tests and `kubectl proxy`), else the
    kubeconfig file, else the environment. `timeout` bounds every request except watches.

    Raises KubeConfigProblem (see the module docstring)."""
    config: KubeConfig
    if server:
        config = KubeConfig.from_dict(
            {
                'clusters': [{'name': 'server', 'cluster': {'server': server}}],
                'users': [{'name': 'anonymous', 'user': {}}],
                'contexts': [
                    {'name': 'server', 'context': {'cluster': 'server', 'user': 'anonymous'}}
                ],
                'current-context': 'server',
            }
        )
    elif kubeconfig:
        config = _from_file(kubeconfig)
    else:
        config = _from_environment()
    try:
        return AsyncClient(
            config=config,
            namespace=namespace,
            timeout=httpx2.Timeout(timeout),
            field_manager=FIELD_MANAGER,
            lazy=False,
        )
    except Exception as exc:  # a kubeconfig that parses but names no usable context or cluster
        where = f'kubeconfig {kubeconfig}' if kubeconfig else 'Kubernetes configuration'
        raise KubeConfigProblem(f'{where}: not usable: {_why(exc)}') from None


def error_code(exc: BaseException) -> int | None:
    """The HTTP status of an API failure; None for transport failures (refused, timeout)."""
    if isinstance(exc, ApiError):
        code = getattr(exc.status, 'code', None)
        if isinstance(code, int):
            return code
        return exc.response.status_code if exc.response is not None else None
    if isinstance(exc, httpx2.HTTPStatusError):
        return exc.response.status_code
    return None


def describe_error(exc: BaseException) -> str:
    """One line naming the failure: `409 Conflict: <message>` or `ConnectError: <message>`."""
    code = error_code(exc)
    if isinstance(exc, ApiError):
        reason = getattr(exc.status, 'reason', None) or ''
        message = getattr(exc.status, 'message', None) or str(exc)
        text = f'{code} {reason}: {message}' if reason else f'{code}: {message}'
    elif code is not None:
        text = f'{code}: {exc}'
    else:
        text = f'{type(exc).__name__}: {exc}' if str(exc) else type(exc).__name__
    return ' '.join(text.split())
