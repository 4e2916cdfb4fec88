"""A real Kubernetes control plane on loopback: etcd, kube-apiserver, kube-controller-manager and
kube-scheduler, built from their Go modules (`devcluster.binaries`).

Why: the fake API server is ours, so it cannot tell us that the real one rejects a CRD's schema,
that the shipped RBAC forbids a call the controller makes, or that a real Deployment rollout and
garbage collection behave as assumed. This module starts the real thing, configured as a cluster
would be: its own CA and serving certificate, ServiceAccount signing keys,
`--authorization-mode=Node,RBAC` with the default admission plugins, and one client certificate
per component, so RBAC sees the identities it sees in a cluster. An audit log records every
write by any other client (the controller under test), request body included, and its reads of
`/scale` subresources: the real server's equivalent of the fake's request log. The aggregation
layer is on (a front-proxy CA and client certificate, request-header authentication, routing to
endpoints since there is no kube-proxy), so an extension API server such as KEDA's metrics server
(`devcluster.keda`) can serve an APIService, and an HPA's own tolerance is honoured, as from
Kubernetes 1.35 on (the feature gate HPAConfigurableTolerance).

What: `ControlPlane(workdir=...)`, an async context manager, starts the four processes in order
(each waits for the previous to be ready) and stops them in reverse. `url` is the API server's
address, `ca` its CA file, `kubeconfig(path, identity=...)` writes a kubeconfig for one of the
certificate identities in `IDENTITIES` (`admin` is in `system:masters`), `token_kubeconfig`
one for a bearer token (a ServiceAccount's), `issue(name, ...)` a certificate of the cluster's
CA (for an add-on's serving certificate), `run(name=..., argv=...)` starts one more process
beside the control plane (an add-on) and `halt(name)` stops it, `audited()` returns the audit
events and `log(name)` a process's output, `pids` the running processes. The
controller-manager runs the controllers in `CONTROLLERS`, each with its own ServiceAccount
credentials; the scheduler binds pods to nodes (registering nodes and running their pods is the
kubelet emulation's job, not the control plane's).

What fails: `start` raises `ControlPlaneMissing` when a binary is not built (`make binaries`)
or openssl is absent, and RuntimeError with the end of the process's log when one exits or is
not ready within `ready_timeout` seconds; everything started by then is stopped first. `stop`
is idempotent and leaves no child process behind (add-ons started with `run` included): each
runs in its own session and is killed after `stop_timeout` seconds of SIGTERM. `run` raises
RuntimeError when the control plane is not running or the process exits or is not ready (it is
stopped first), ValueError when a process of that name runs already.
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import ssl
import subprocess
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType

import httpx
import yaml

from llmscaler.devcluster import binaries
from llmscaler.devcluster.process import free_port, terminate

__all__ = [
    'BINARIES',
    'CONTROLLERS',
    'FRONT_PROXY_CLIENT',
    'IDENTITIES',
    'ControlPlane',
    'ControlPlaneMissing',
    'Identity',
]

# The processes a control plane runs, in the order they start.
BINARIES = ('etcd', 'kube-apiserver', 'kube-controller-manager', 'kube-scheduler')

# The kube-controller-manager controllers a workload of Deployments, StatefulSets, HPAs and
# ServiceAccount tokens needs; node lifecycle is left out, because emulated nodes keep their
# own Ready condition and nothing should evict their pods.
CONTROLLERS = (
    'deployment-controller',
    'replicaset-controller',
    'statefulset-controller',
    'horizontal-pod-autoscaler-controller',
    'garbage-collector-controller',
    'namespace-controller',
    'serviceaccount-controller',
    'serviceaccount-token-controller',
    'endpointslice-controller',
    'disruption-controller',
)

# Per-HPA tolerance (behavior.scale{Up,Down}.tolerance), alpha in 1.34 and on by default from
# 1.35: the HPAs llmscaler writes set it to 0, and the cluster should honour it as 1.35 does.
_FEATURE_GATES = 'HPAConfigurableTolerance=true'

# The common name of the client certificate kube-apiserver presents to extension API servers
# (an APIService's backend) when it proxies a request, with the user in X-Remote-* headers.
FRONT_PROXY_CLIENT = 'front-proxy-client'


@dataclass(frozen=True, slots=True)
class Identity:
    """A client certificate's subject: the user name and groups RBAC sees."""

    name: str
    groups: tuple[str, ...] = ()


IDENTITIES = {
    'admin': Identity('kubernetes-admin', ('system:masters',)),
    'kube-controller-manager': Identity('system:kube-controller-manager'),
    'kube-scheduler': Identity('system:kube-scheduler'),
}


# The audit policy: every write but those of the control plane's own components (the API server
# itself included) and of the admin identity (the harness), with its request body; of the reads,
# only those of a `/scale` subresource (without a body: a test counts an autoscaler's cycles by
# them), in the groups whose workloads the tests scale.
_SCALED_GROUPS = ('apps', 'kaito.sh', 'leaderworkerset.x-k8s.io')
_AUDIT_POLICY = {
    'apiVersion': 'audit.k8s.io/v1',
    'kind': 'Policy',
    'omitStages': ['RequestReceived'],
    'rules': [
        {
            'level': 'None',
            'users': sorted(
                ['system:apiserver', *(identity.name for identity in IDENTITIES.values())]
            ),
        },
        {'level': 'None', 'userGroups': ['system:serviceaccounts:kube-system', 'system:nodes']},
        {
            'level': 'Metadata',
            'verbs': ['get'],
            'resources': [{'group': group, 'resources': ['*/scale']} for group in _SCALED_GROUPS],
        },
        {'level': 'None', 'verbs': ['get', 'list', 'watch']},
        {'level': 'Request'},
    ],
}


class ControlPlaneMissing(RuntimeError):
    """A binary of the control plane is not built, or openssl is not installed."""


@dataclass(slots=True)
class _Running:
    name: str
    process: subprocess.Popen[bytes]
    log: Path


def _openssl(*args: str, cwd: Path) -> None:
    done = subprocess.run(['openssl', *args], cwd=cwd, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise RuntimeError(f'openssl {args[0]}: {done.stderr.strip()[-500:]}')


_RSA = ('-newkey', 'rsa:2048', '-nodes')


def _subject(identity: Identity) -> str:
    return ''.join(f'/O={group}' for group in identity.groups) + f'/CN={identity.name}'


class ControlPlane:
    """etcd, kube-apiserver, kube-controller-manager and kube-scheduler under one workdir."""

    def __init__(
        self,
        *,
        workdir: Path,
        ready_timeout: float = 90.0,
        stop_timeout: float = 10.0,
        hpa_sync_period: str = '5s',
    ) -> None:
        self.workdir = workdir
        self.pki = workdir / 'pki'
        self.ready_timeout = ready_timeout
        self.stop_timeout = stop_timeout
        self.hpa_sync_period = hpa_sync_period
        self.url = ''
        self._running: list[_Running] = []

    @property
    def ca(self) -> Path:
        return self.pki / 'ca.crt'

    async def __aenter__(self) -> ControlPlane:
        await self.start()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.stop()

    def _binary(self, name: str) -> str:
        path = binaries.find(name)
        if path is None:
            raise ControlPlaneMissing(
                f'{name} is not built (make binaries; it lands in {binaries.cache_root()})'
            )
        return str(path)

    def _make_ca(self, name: str, *, common_name: str) -> None:
        _openssl(
            'req',
            '-x509',
            *_RSA,
            '-keyout',
            f'{name}.key',
            '-out',
            f'{name}.crt',
            '-days',
            '7',
            '-subj',
            f'/CN={common_name}',
            '-addext',
            'basicConstraints=critical,CA:TRUE',
            '-addext',
            'keyUsage=critical,keyCertSign,cRLSign,digitalSignature',
            cwd=self.pki,
        )

    def issue(
        self, name: str, *, subject: str, extensions: str, ca: str = 'ca'
    ) -> tuple[Path, Path]:
        """A certificate `<name>.crt` and its key `<name>.key` in `pki`, signed by the CA `ca`
        (`ca`, the cluster's, or `front-proxy-ca`); `subject` as openssl writes it
        (`/O=group/CN=user`), `extensions` lines of an openssl extension file (subjectAltName,
        extendedKeyUsage). The paths of the certificate and the key."""
        d = self.pki
        (d / f'{name}.ext').write_text(
            f'{extensions}\nbasicConstraints=CA:FALSE\n'
            'keyUsage=critical,digitalSignature,keyEncipherment\n'
        )
        _openssl(
            'req', *_RSA, '-keyout', f'{name}.key', '-out', f'{name}.csr', '-subj', subject, cwd=d
        )
        _openssl(
            'x509',
            '-req',
            '-in',
            f'{name}.csr',
            '-CA',
            f'{ca}.crt',
            '-CAkey',
            f'{ca}.key',
            '-CAcreateserial',
            '-out',
            f'{name}.crt',
            '-days',
            '7',
            '-extfile',
            f'{name}.ext',
            cwd=d,
        )
        return d / f'{name}.crt', d / f'{name}.key'

    def _make_pki(self) -> None:
        if shutil.which('openssl') is None:
            raise ControlPlaneMissing('no openssl on PATH (Debian/Ubuntu: apt-get install openssl)')
        d = self.pki
        d.mkdir(parents=True, exist_ok=True)
        self._make_ca('ca', common_name='llmscaler-devcluster-ca')
        # The aggregation layer's own CA, as kubeadm sets it up: an extension API server trusts
        # the user names in request headers only from a client certificate of this CA.
        self._make_ca('front-proxy-ca', common_name='llmscaler-devcluster-front-proxy-ca')
        _openssl('genrsa', '-out', 'sa.key', '2048', cwd=d)
        _openssl('rsa', '-in', 'sa.key', '-pubout', '-out', 'sa.pub', cwd=d)
        self.issue(
            'apiserver',
            subject='/CN=kube-apiserver',
            extensions='subjectAltName=IP:127.0.0.1,DNS:localhost,DNS:kubernetes,'
            'DNS:kubernetes.default,DNS:kubernetes.default.svc,IP:10.0.0.1\n'
            'extendedKeyUsage=serverAuth',
        )
        for name, identity in sorted(IDENTITIES.items()):
            self.issue(name, subject=_subject(identity), extensions='extendedKeyUsage=clientAuth')
        self.issue(
            FRONT_PROXY_CLIENT,
            subject=f'/CN={FRONT_PROXY_CLIENT}',
            extensions='extendedKeyUsage=clientAuth',
            ca='front-proxy-ca',
        )

    @property
    def pids(self) -> dict[str, int]:
        """The process id of each component running now, by name."""
        return {running.name: running.process.pid for running in self._running}

    def kubeconfig(
        self, path: Path, *, identity: str = 'admin', namespace: str = 'default'
    ) -> Path:
        """A kubeconfig for the API server as `identity` (a key of `IDENTITIES`)."""
        if identity not in IDENTITIES:
            raise KeyError(f'unknown identity {identity!r} (known: {", ".join(IDENTITIES)})')
        user = {
            'client-certificate': str(self.pki / f'{identity}.crt'),
            'client-key': str(self.pki / f'{identity}.key'),
        }
        return self._write_kubeconfig(path, user=user, namespace=namespace)

    def token_kubeconfig(self, path: Path, *, token: str, namespace: str = 'default') -> Path:
        """A kubeconfig for the API server with a bearer token (a ServiceAccount's)."""
        return self._write_kubeconfig(path, user={'token': token}, namespace=namespace)

    def _write_kubeconfig(self, path: Path, *, user: dict[str, str], namespace: str) -> Path:
        config = {
            'apiVersion': 'v1',
            'kind': 'Config',
            'clusters': [
                {
                    'name': 'devcluster',
                    'cluster': {'server': self.url, 'certificate-authority': str(self.ca)},
                }
            ],
            'users': [{'name': 'user', 'user': user}],
            'contexts': [
                {
                    'name': 'devcluster',
                    'context': {'cluster': 'devcluster', 'user': 'user', 'namespace': namespace},
                }
            ],
            'current-context': 'devcluster',
        }
        path.write_text(yaml.safe_dump(config))
        return path

    def audited(self) -> list[dict[str, object]]:
        """The audit events so far: every write by a client other than the control plane's
        components and the admin identity, oldest first (kube-apiserver's audit.k8s.io/v1
        Event: verb, requestURI, user, requestObject, responseStatus ...)."""
        path = self.workdir / 'audit.log'
        if not path.exists():
            return []
        events = []
        for line in path.read_text(errors='replace').splitlines():
            # The last line may be half written.
            try:
                events.append(json.loads(line))
            except ValueError:
                continue
        return events

    def log(self, name: str) -> str:
        """Everything process `name` (etcd, kube-apiserver, ...) printed so far."""
        path = self.workdir / f'{name}.log'
        return path.read_text(errors='replace') if path.exists() else ''

    def _spawn(
        self, name: str, argv: Sequence[str], *, env: Mapping[str, str] | None = None
    ) -> _Running:
        log = self.workdir / f'{name}.log'
        with log.open('wb') as out:
            process = subprocess.Popen(
                list(argv),
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
                cwd=self.workdir,
                env=None if env is None else {**os.environ, **env},
                start_new_session=True,
            )
        running = _Running(name, process, log)
        self._running.append(running)
        return running

    async def _ready(self, running: _Running, url: str, *, tls: bool) -> None:
        deadline = time.monotonic() + self.ready_timeout
        verify: ssl.SSLContext | bool = False
        if tls:
            verify = ssl.create_default_context(cafile=str(self.ca))
            verify.load_cert_chain(str(self.pki / 'admin.crt'), str(self.pki / 'admin.key'))
        async with httpx.AsyncClient(timeout=2, verify=verify) as client:
            while True:
                try:
                    if (await client.get(url)).status_code == 200:
                        return
                except httpx.HTTPError:
                    pass
                if running.process.poll() is not None or time.monotonic() > deadline:
                    tail = running.log.read_text(errors='replace')[-3000:]
                    state = 'exited' if running.process.poll() is not None else 'is not ready'
                    raise RuntimeError(f'{running.name} {state}:\n{tail}')
                await asyncio.sleep(0.2)

    async def run(
        self,
        *,
        name: str,
        argv: Sequence[str],
        env: Mapping[str, str] | None = None,
        ready: str | None = None,
    ) -> int:
        """Start one more process beside the control plane (an add-on: KEDA's operator and
        metrics server) and wait until `ready`, a URL, answers 200 (https: checked against the
        cluster's CA, with the admin certificate); its pid. Its output is `log(name)`, `env` is
        added to this process's environment. It stops with `halt(name)` or with the control
        plane, the last started first; one that exits or is not ready in `ready_timeout` is
        stopped and raises RuntimeError with the end of its log."""
        if not self._running:
            raise RuntimeError(f'cannot start {name}: the control plane is not running')
        if name in self.pids:
            raise ValueError(f'{name} is already running')
        running = self._spawn(name, argv, env=env)
        if ready is not None:
            try:
                await self._ready(running, ready, tls=ready.startswith('https:'))
            except BaseException:
                await self.halt(name)
                raise
        return running.process.pid

    async def halt(self, name: str) -> None:
        """Stop process `name` (SIGTERM, then SIGKILL after `stop_timeout` s); nothing when it
        is not running."""
        for running in [r for r in self._running if r.name == name]:
            self._running.remove(running)
            await terminate(running.process, self.stop_timeout)

    async def start(self) -> str:
        """Start everything; the API server's URL."""
        binary = {name: self._binary(name) for name in BINARIES}
        self.workdir.mkdir(parents=True, exist_ok=True)
        try:
            self._make_pki()
            await self._start_all(binary)
        except BaseException:
            await self.stop()
            raise
        return self.url

    async def _start_all(self, binary: dict[str, str]) -> None:
        client, peer = free_port(), free_port()
        etcd = self._spawn(
            'etcd',
            [
                binary['etcd'],
                '--name=devcluster',
                f'--data-dir={self.workdir / "etcd"}',
                f'--listen-client-urls=http://127.0.0.1:{client}',
                f'--advertise-client-urls=http://127.0.0.1:{client}',
                f'--listen-peer-urls=http://127.0.0.1:{peer}',
                f'--initial-advertise-peer-urls=http://127.0.0.1:{peer}',
                f'--initial-cluster=devcluster=http://127.0.0.1:{peer}',
                '--listen-metrics-urls=',
                # A test cluster's data outlives nothing: fsync buys no safety, only latency.
                '--unsafe-no-fsync',
                '--log-level=warn',
            ],
        )
        await self._ready(etcd, f'http://127.0.0.1:{client}/health', tls=False)
        port = free_port()
        self.url = f'https://127.0.0.1:{port}'
        pki = self.pki
        policy = self.workdir / 'audit-policy.yaml'
        policy.write_text(yaml.safe_dump(_AUDIT_POLICY))
        apiserver = self._spawn(
            'kube-apiserver',
            [
                binary['kube-apiserver'],
                f'--etcd-servers=http://127.0.0.1:{client}',
                '--bind-address=127.0.0.1',
                '--advertise-address=127.0.0.1',
                f'--secure-port={port}',
                f'--cert-dir={self.workdir / "apiserver-certs"}',
                f'--tls-cert-file={pki / "apiserver.crt"}',
                f'--tls-private-key-file={pki / "apiserver.key"}',
                f'--client-ca-file={pki / "ca.crt"}',
                f'--service-account-key-file={pki / "sa.pub"}',
                f'--service-account-signing-key-file={pki / "sa.key"}',
                '--service-account-issuer=https://kubernetes.default.svc.cluster.local',
                '--service-cluster-ip-range=10.0.0.0/24',
                '--authorization-mode=Node,RBAC',
                # The aggregation layer (APIServices such as an external-metrics adapter): the
                # front proxy's client certificate and CA, and the headers that carry the user.
                f'--requestheader-client-ca-file={pki / "front-proxy-ca.crt"}',
                f'--requestheader-allowed-names={FRONT_PROXY_CLIENT}',
                '--requestheader-username-headers=X-Remote-User',
                '--requestheader-group-headers=X-Remote-Group',
                '--requestheader-extra-headers-prefix=X-Remote-Extra-',
                f'--proxy-client-cert-file={pki / f"{FRONT_PROXY_CLIENT}.crt"}',
                f'--proxy-client-key-file={pki / f"{FRONT_PROXY_CLIENT}.key"}',
                # No kube-proxy here: a Service's cluster IP leads nowhere, so an APIService is
                # reached at an endpoint of its Service's EndpointSlices.
                '--enable-aggregator-routing=true',
                f'--feature-gates={_FEATURE_GATES}',
                '--allow-privileged=true',
                '--profiling=false',
                f'--audit-policy-file={policy}',
                f'--audit-log-path={self.workdir / "audit.log"}',
                '--audit-log-format=json',
                '--audit-log-mode=blocking',
                '--v=1',
            ],
        )
        await self._ready(apiserver, f'{self.url}/readyz', tls=True)
        self._spawn(
            'kube-controller-manager',
            [
                binary['kube-controller-manager'],
                *self._component_flags('kube-controller-manager'),
                '--use-service-account-credentials=true',
                f'--service-account-private-key-file={pki / "sa.key"}',
                f'--root-ca-file={pki / "ca.crt"}',
                f'--controllers={",".join(CONTROLLERS)}',
                f'--horizontal-pod-autoscaler-sync-period={self.hpa_sync_period}',
                f'--feature-gates={_FEATURE_GATES}',
            ],
        )
        self._spawn(
            'kube-scheduler',
            [binary['kube-scheduler'], *self._component_flags('kube-scheduler')],
        )
        # Both are ready once they hold their informers' caches; a process that exits at once
        # (a bad flag) is reported here rather than as a pod that never moves.
        await asyncio.sleep(1.0)
        for running in self._running:
            if running.process.poll() is not None:
                tail = running.log.read_text(errors='replace')[-3000:]
                raise RuntimeError(f'{running.name} exited:\n{tail}')

    def _component_flags(self, name: str) -> list[str]:
        """The flags kube-controller-manager and kube-scheduler share: `name`'s certificate
        identity for everything they ask the API server, one replica (no leader election), their
        own secure port on loopback, and a client rate above the default 20 requests/s (a test
        or benchmark that creates a thousand pods at once must not wait minutes for them)."""
        config = self.kubeconfig(self.workdir / f'{name}.kubeconfig', identity=name)
        return [
            '--kube-api-qps=200',
            '--kube-api-burst=400',
            f'--kubeconfig={config}',
            f'--authentication-kubeconfig={config}',
            f'--authorization-kubeconfig={config}',
            '--leader-elect=false',
            '--bind-address=127.0.0.1',
            f'--secure-port={free_port()}',
            f'--cert-dir={self.workdir / f"{name}-certs"}',
            '--v=1',
        ]

    async def stop(self) -> None:
        """Stop every process, the last started first."""
        while self._running:
            running = self._running.pop()
            await terminate(running.process, self.stop_timeout)
