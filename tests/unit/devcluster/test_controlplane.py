"""`llmscaler.devcluster.controlplane`: the real control plane starts as a cluster would be set
up, enforces RBAC, and leaves no process behind.

The clusters built on it (`Cluster(control_plane=True)`) are tested end to end in
tests/e2e/test_kubernetes.py; here, the control plane alone.
"""

from __future__ import annotations

import os
import ssl
from pathlib import Path

import httpx
import pytest

from llmscaler.devcluster import binaries
from llmscaler.devcluster.controlplane import (
    BINARIES,
    FRONT_PROXY_CLIENT,
    IDENTITIES,
    ControlPlane,
    ControlPlaneMissing,
)
from tests.support.prerequisites import need_built, need_program


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


async def test_an_unbuilt_binary_is_named_with_the_way_to_build_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv('LLMSCALER_TOOLS_CACHE', str(tmp_path / 'empty'))
    plane = ControlPlane(workdir=tmp_path / 'plane')
    with pytest.raises(ControlPlaneMissing, match=r'etcd is not built \(make binaries'):
        await plane.start()
    assert not (tmp_path / 'plane').exists()


async def test_it_serves_the_release_enforces_rbac_and_stops_every_process(
    tmp_path: Path,
) -> None:
    for name in BINARIES:
        need_built(name)
    need_program('openssl')
    plane = ControlPlane(workdir=tmp_path)
    async with plane:
        pids = list(plane.pids.values())
        assert sorted(plane.pids) == sorted(BINARIES)
        assert all(alive(pid) for pid in pids)
        context = ssl.create_default_context(cafile=str(plane.ca))
        async with httpx.AsyncClient(base_url=plane.url, verify=context, timeout=5) as anonymous:
            version = (await anonymous.get('/version')).json()
            assert version['gitVersion'] == binaries.FAMILIES['kubernetes'].version
            # Anonymous requests may read /version and nothing else.
            assert (await anonymous.get('/api/v1/namespaces')).status_code == 403
        scheduler = IDENTITIES['kube-scheduler']
        context.load_cert_chain(
            str(plane.pki / 'kube-scheduler.crt'), str(plane.pki / 'kube-scheduler.key')
        )
        async with httpx.AsyncClient(base_url=plane.url, verify=context, timeout=5) as client:
            # RBAC: the scheduler may list pods but not read Secrets.
            assert (await client.get('/api/v1/pods')).status_code == 200
            denied = await client.get('/api/v1/namespaces/kube-system/secrets')
            assert denied.status_code == 403
            assert scheduler.name in denied.json()['message']
        kubeconfig = plane.kubeconfig(tmp_path / 'admin.kubeconfig', namespace='llm')
        assert 'current-context: devcluster' in kubeconfig.read_text()
        # The aggregation layer: what an extension API server reads to trust proxied requests.
        path = '/api/v1/namespaces/kube-system/configmaps/extension-apiserver-authentication'
        context.load_cert_chain(str(plane.pki / 'admin.crt'), str(plane.pki / 'admin.key'))
        async with httpx.AsyncClient(base_url=plane.url, verify=context, timeout=5) as admin:
            data = (await admin.get(path)).json()['data']
        assert (
            data['requestheader-client-ca-file'] == (plane.pki / 'front-proxy-ca.crt').read_text()
        )
        assert data['requestheader-allowed-names'] == f'["{FRONT_PROXY_CLIENT}"]'
        assert data['requestheader-username-headers'] == '["X-Remote-User"]'
        # An add-on process stops with the control plane; one that exits is reported.
        pids.append(await plane.run(name='add-on', argv=['sleep', '600']))
        assert plane.pids['add-on'] == pids[-1]
        assert alive(pids[-1])
        with pytest.raises(ValueError, match='add-on is already running'):
            await plane.run(name='add-on', argv=['sleep', '600'])
        with pytest.raises(RuntimeError, match=r'broken exited:\n.*no such option'):
            await plane.run(
                name='broken',
                argv=['sh', '-c', 'echo no such option; exit 2'],
                ready='http://127.0.0.1:1/readyz',
            )
        assert 'broken' not in plane.pids
    assert not any(alive(pid) for pid in pids)
    await plane.stop()  # idempotent
    with pytest.raises(RuntimeError, match='the control plane is not running'):
        await plane.run(name='late', argv=['sleep', '600'])
