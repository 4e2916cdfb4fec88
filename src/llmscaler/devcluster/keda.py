"""KEDA on the real control plane: its operator and its external-metrics server, as processes.

Why: with `--actuation metrics` llmscaler only publishes `wva_desired_replicas`; what scales the
workload is an HPA that reads the gauge through the external metrics API. That the objects
`llmscaler manifests --via keda` writes make a real HPA controller follow the gauge can only be
shown with the real parts: KEDA's operator (it turns a ScaledObject into an HPA and asks
Prometheus), its metrics server (an extension API server behind the APIService
`v1beta1.external.metrics.k8s.io`), kube-apiserver's aggregation layer and
kube-controller-manager's HPA controller. prometheus-adapter, which the plain HPAs of
deploy/samples/hpa expect, is not served by the Go module proxy; KEDA is (`tools/keda`, built by
`make binaries`), so KEDA is the adapter run here.

What: `Keda(plane=..., workdir=...)`, an async context manager on a running `ControlPlane`,
installs what KEDA's release ships, read at run time from the KEDA module in the Go module cache
(`kubectl kustomize config/minimal`, KEDA's install without webhooks): its CRDs, the namespace
`keda`, the ServiceAccount `keda-operator` with KEDA's own ClusterRoles, Roles and bindings, the
Service `keda-metrics-apiserver` and the APIService, not the Deployments. The APIService gets
the cluster's CA as its caBundle, and the Service an EndpointSlice to `host.host_address()` (the
aggregator routes to endpoints, there being no kube-proxy, and an endpoint may not be a loopback
address). Both binaries then run through `ControlPlane.run`, signed in as the ServiceAccount
(a token kubeconfig), with one certificate of the cluster's CA for the operator's gRPC metrics
service, the metrics server's client of it and the metrics server's HTTPS (KEDA's certificate
rotation off); entering returns once the APIService is Available. Leaving stops both. `address`
is the address the metrics server listens on, `pids` the two processes' ids (kept after they
stop, to check that none is left), `log(name)` a process's output.

What fails: `KedaMissing` when a KEDA binary or kubectl is not built, or the KEDA module is not
in the Go module cache (`make binaries` puts both there); `host.NoHostAddress` when the machine
has no IPv4 address but loopback and link-local ones; RuntimeError with the end of its log when a
process exits or is not ready within `ready_timeout` seconds, and `subprocess.CalledProcessError`
(kubectl's stderr in `stderr`) or `subprocess.TimeoutExpired` when an install step or the wait
for the APIService fails; everything started by then is stopped first.
"""

from __future__ import annotations

import asyncio
import base64
import shutil
import subprocess
from pathlib import Path
from types import TracebackType
from typing import Any

import yaml

from llmscaler.devcluster import binaries
from llmscaler.devcluster.controlplane import ControlPlane
from llmscaler.devcluster.host import host_address
from llmscaler.devcluster.process import free_port

__all__ = [
    'ACCOUNT',
    'BINARIES',
    'MODULE',
    'NAMESPACE',
    'Keda',
    'KedaMissing',
    'release_manifests',
]

Obj = dict[str, Any]

NAMESPACE = 'keda'
ACCOUNT = 'keda-operator'  # the release runs both binaries as this ServiceAccount
BINARIES = ('keda-operator', 'keda-adapter')
MODULE = 'github.com/kedacore/keda/v2'
APISERVICE = 'v1beta1.external.metrics.k8s.io'
METRICS_SERVICE = 'keda-metrics-apiserver'
# What is taken from the release: everything but its Deployments (the binaries run as processes).
_INSTALLED_KINDS = frozenset(
    {
        'CustomResourceDefinition',
        'Namespace',
        'ServiceAccount',
        'ClusterRole',
        'ClusterRoleBinding',
        'Role',
        'RoleBinding',
        'Service',
        'APIService',
    }
)
_KUBECTL_TIMEOUT = 120.0


class KedaMissing(RuntimeError):
    """A KEDA binary or kubectl is not built, or the KEDA module is not in the Go module cache."""


def _built(name: str) -> str:
    path = binaries.find(name)
    if path is None:
        raise KedaMissing(f'{name} is not built (make binaries; cache {binaries.cache_root()})')
    return str(path)


def release_manifests() -> list[Obj]:
    """The objects of KEDA's release install without webhooks (`config/minimal` of the KEDA
    module `tools/keda` pins), rendered by kubectl kustomize, but for its Deployments."""
    family = binaries.FAMILIES['keda']
    source = binaries.module_source(family, MODULE)
    if source is None:
        raise KedaMissing(
            f'{MODULE} {family.version} is not in the Go module cache (make binaries downloads it)'
        )
    rendered = subprocess.run(
        [_built('kubectl'), 'kustomize', str(source / 'config' / 'minimal')],
        capture_output=True,
        text=True,
        timeout=_KUBECTL_TIMEOUT,
        check=True,
    ).stdout
    return [d for d in yaml.safe_load_all(rendered) if d and d['kind'] in _INSTALLED_KINDS]


class Keda:
    """KEDA's operator and metrics server on `plane` (see the module docstring)."""

    def __init__(self, *, plane: ControlPlane, workdir: Path, ready_timeout: float = 90.0) -> None:
        self.plane = plane
        self.workdir = workdir
        self.ready_timeout = ready_timeout
        self.address = ''
        self.pids: dict[str, int] = {}
        self._admin = workdir / 'admin.kubeconfig'

    async def __aenter__(self) -> Keda:
        await self.start()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.stop()

    def log(self, name: str) -> str:
        """What `name` (keda-operator or keda-adapter) printed so far."""
        return self.plane.log(name)

    async def start(self) -> None:
        # Everything that is missing is reported before anything is installed or started.
        binary = {name: _built(name) for name in (*BINARIES, 'kubectl')}
        self.address = host_address()
        self.workdir.mkdir(parents=True, exist_ok=True)
        self._admin = self.plane.kubeconfig(self.workdir / 'admin.kubeconfig')
        try:
            await self._start(binary)
        except BaseException:
            await self.stop()
            raise

    async def _start(self, binary: dict[str, str]) -> None:
        adapter_port, grpc = free_port(), free_port()
        # kubectl and openssl block: in a thread, so the event loop (emulated pods) keeps serving.
        token = await asyncio.to_thread(self._install, adapter_port=adapter_port)
        kubeconfig = self.plane.token_kubeconfig(
            self.workdir / 'keda.kubeconfig', token=token, namespace=NAMESPACE
        )
        certs = await asyncio.to_thread(self._certificates)
        env = {
            'KUBECONFIG': str(kubeconfig),
            'WATCH_NAMESPACE': '',  # every namespace
            'POD_NAMESPACE': NAMESPACE,
            'KEDA_CLUSTER_OBJECT_NAMESPACE': NAMESPACE,
        }
        probe = free_port()
        self.pids['keda-operator'] = await self.plane.run(
            name='keda-operator',
            argv=[
                binary['keda-operator'],
                '--leader-elect=false',
                '--enable-cert-rotation=false',
                f'--cert-dir={certs}',
                f'--metrics-service-bind-address=127.0.0.1:{grpc}',
                f'--metrics-bind-address=127.0.0.1:{free_port()}',
                f'--health-probe-bind-address=127.0.0.1:{probe}',
                '--zap-log-level=info',
            ],
            env=env,
            ready=f'http://127.0.0.1:{probe}/readyz',
        )
        self.pids['keda-adapter'] = await self.plane.run(
            name='keda-adapter',
            argv=[
                binary['keda-adapter'],
                f'--bind-address={self.address}',
                f'--secure-port={adapter_port}',
                f'--tls-cert-file={certs / "tls.crt"}',
                f'--tls-private-key-file={certs / "tls.key"}',
                f'--client-ca-file={certs / "ca.crt"}',
                f'--cert-dir={certs}',
                f'--metrics-service-address=127.0.0.1:{grpc}',
                f'--port={free_port()}',  # its own /metrics
                f'--lister-kubeconfig={kubeconfig}',
                f'--authentication-kubeconfig={kubeconfig}',
                f'--authorization-kubeconfig={kubeconfig}',
                '--zap-log-level=info',
            ],
            env=env,
            ready=f'https://{self.address}:{adapter_port}/readyz',
        )
        await asyncio.to_thread(
            self._kubectl,
            'wait',
            '--for=condition=Available',
            f'--timeout={int(self.ready_timeout)}s',
            f'apiservice/{APISERVICE}',
        )

    def _certificates(self) -> Path:
        """KEDA's certificate folder (ca.crt, tls.crt, tls.key) as its release mounts it: one
        certificate for the operator's gRPC server, the metrics server's gRPC client and its
        HTTPS, valid for the Services' names and the addresses dialled here."""
        names = [
            f'DNS:{service}.{NAMESPACE}.svc{suffix}'
            for service in ('keda-operator', METRICS_SERVICE)
            for suffix in ('', '.cluster.local')
        ]
        crt, key = self.plane.issue(
            'keda',
            subject='/O=keda/CN=keda',
            extensions=f'subjectAltName={",".join(names)},IP:127.0.0.1,IP:{self.address}\n'
            'extendedKeyUsage=serverAuth,clientAuth',
        )
        folder = self.workdir / 'certs'
        folder.mkdir(exist_ok=True)
        shutil.copyfile(self.plane.ca, folder / 'ca.crt')
        shutil.copyfile(crt, folder / 'tls.crt')
        shutil.copyfile(key, folder / 'tls.key')
        return folder

    def _kubectl(self, *args: str, stdin: str | None = None) -> str:
        return subprocess.run(
            [_built('kubectl'), f'--kubeconfig={self._admin}', *args],
            input=stdin,
            capture_output=True,
            text=True,
            timeout=_KUBECTL_TIMEOUT + self.ready_timeout,
            check=True,
        ).stdout

    def _install(self, *, adapter_port: int) -> str:
        """The release's objects, the APIService's caBundle and the Service's EndpointSlice;
        a token of the ServiceAccount both binaries run as."""
        objects = release_manifests()
        bundle = base64.b64encode(self.plane.ca.read_bytes()).decode()
        for obj in objects:
            if obj['kind'] == 'APIService':
                obj['spec']['caBundle'] = bundle
        objects.append(
            {
                'apiVersion': 'discovery.k8s.io/v1',
                'kind': 'EndpointSlice',
                'metadata': {
                    'name': f'{METRICS_SERVICE}-host',
                    'namespace': NAMESPACE,
                    'labels': {
                        'kubernetes.io/service-name': METRICS_SERVICE,
                        # Not the EndpointSlice controller's: it leaves this one alone.
                        'endpointslice.kubernetes.io/managed-by': 'llmscaler-devcluster',
                    },
                },
                'addressType': 'IPv4',
                'endpoints': [{'addresses': [self.address], 'conditions': {'ready': True}}],
                'ports': [{'name': 'https', 'port': adapter_port, 'protocol': 'TCP'}],
            }
        )
        self._kubectl('apply', '--server-side', '-f', '-', stdin=yaml.safe_dump_all(objects))
        crds = [
            f'crd/{o["metadata"]["name"]}'
            for o in objects
            if o['kind'] == 'CustomResourceDefinition'
        ]
        self._kubectl('wait', '--for=condition=Established', '--timeout=60s', *crds)
        return self._kubectl(
            'create', 'token', ACCOUNT, f'--namespace={NAMESPACE}', '--duration=24h'
        ).strip()

    async def stop(self) -> None:
        """Stop the metrics server, then the operator; idempotent."""
        for name in reversed(BINARIES):
            await self.plane.halt(name)
