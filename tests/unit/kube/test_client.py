"""`make_client`: a usable client, or one line saying why not (never a traceback, never a piece
of a kubeconfig file, which may hold credentials)."""

from __future__ import annotations

from pathlib import Path

import pytest
from lightkube import AsyncClient
from lightkube.resources.core_v1 import ConfigMap

from llmscaler.devcluster.fakeapi.server import FakeAPI
from llmscaler.kube.client import KubeConfigProblem, make_client


@pytest.fixture
def no_cluster(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """An empty HOME, no KUBECONFIG, no in-cluster service account."""
    monkeypatch.setenv('HOME', str(tmp_path))
    monkeypatch.delenv('KUBECONFIG', raising=False)
    monkeypatch.delenv('KUBERNETES_SERVICE_HOST', raising=False)
    monkeypatch.delenv('KUBERNETES_SERVICE_PORT', raising=False)
    return tmp_path


def problem(*, kubeconfig: str | None = None) -> str:
    with pytest.raises(KubeConfigProblem) as caught:
        make_client(kubeconfig=kubeconfig)
    message = str(caught.value)
    assert '\n' not in message
    return message


@pytest.mark.usefixtures('no_cluster')
def test_no_configuration_at_all_says_what_was_tried() -> None:
    assert problem() == (
        'no Kubernetes configuration: not running in a cluster (no service account), no '
        'KUBECONFIG and no ~/.kube/config; give --kubeconfig FILE or --server URL'
    )


def test_a_kubeconfig_file_that_cannot_be_used(no_cluster: Path) -> None:
    assert problem(kubeconfig='/nonexist') == 'kubeconfig /nonexist: no such file'
    assert problem(kubeconfig=str(no_cluster)) == f'kubeconfig {no_cluster}: is a directory'
    broken = no_cluster / 'broken'
    broken.write_text('users: [{name: me, user: {token: sk-live-123}}\n')
    message = problem(kubeconfig=str(broken))
    assert message.startswith(f'kubeconfig {broken}: not usable: not YAML (line 2, column 1')
    assert 'sk-live' not in message
    partial = no_cluster / 'partial'
    partial.write_text('apiVersion: v1\nclusters: []\nusers: [{name: u, user: {token: sk-live}}]\n')
    assert problem(kubeconfig=str(partial)) == (
        f"kubeconfig {partial}: not usable: no 'contexts' entry"
    )


def test_the_default_kubeconfig_is_read_when_present(no_cluster: Path) -> None:
    (no_cluster / '.kube').mkdir()
    (no_cluster / '.kube' / 'config').write_text('not: [yaml\n')
    assert problem().startswith('kubeconfig ~/.kube/config: not usable: not YAML')


async def read_config_map(client: AsyncClient) -> dict[str, str] | None:
    """ConfigMap `cm` of the client's default namespace, read through `client`, then closed."""
    try:
        return (await client.get(ConfigMap, 'cm')).data
    finally:
        await client.aclose()


async def test_a_server_url_or_a_good_kubeconfig_gives_a_client_of_that_server(
    api: FakeAPI, no_cluster: Path
) -> None:
    api.seed(
        {
            'apiVersion': 'v1',
            'kind': 'ConfigMap',
            'metadata': {'name': 'cm', 'namespace': 'ns'},
            'data': {'k': 'v'},
        }
    )
    assert await read_config_map(make_client(server=api.url, namespace='ns')) == {'k': 'v'}
    path = no_cluster / 'config'
    path.write_text(
        'apiVersion: v1\nkind: Config\ncurrent-context: c\n'
        f'clusters: [{{name: k, cluster: {{server: "{api.url}"}}}}]\n'
        'users: [{name: u, user: {token: me}}]\n'
        'contexts: [{name: c, context: {cluster: k, user: u, namespace: ns}}]\n'
    )
    assert await read_config_map(make_client(kubeconfig=str(path))) == {'k': 'v'}
    # Both reached this server, in the namespace asked for; the second with the file's user.
    cm = '/api/v1/namespaces/ns/configmaps/cm'
    assert [(r.method, r.path, r.client) for r in api.requests] == [
        ('GET', cm, ''),
        ('GET', cm, 'me'),
    ]


def test_scale_kinds_vas_inform_only_their_workloads() -> None:
    """InferenceSet is a /scale target of LLMAutoScalers only; VAs keep their informed kinds."""
    from llmscaler.kube.client import (
        DEFAULT_API_VERSIONS,
        KAITO_SCALE_KINDS,
        SCALE_KINDS,
        WORKLOAD_SCALE_KINDS,
        scale_resource,
    )
    from llmscaler.kube.targets import API_VERSIONS

    assert {(av, kind) for kind, av in API_VERSIONS.items()} == set(WORKLOAD_SCALE_KINDS)
    assert set(SCALE_KINDS) == set(WORKLOAD_SCALE_KINDS) | set(KAITO_SCALE_KINDS)
    assert not {kind for _, kind in KAITO_SCALE_KINDS} & set(API_VERSIONS)
    inference_set = scale_resource(api_version='kaito.sh/v1beta1', kind='InferenceSet')
    assert inference_set is not None
    assert scale_resource(api_version=None, kind='InferenceSet') is inference_set
    assert DEFAULT_API_VERSIONS['InferenceSet'] == 'kaito.sh/v1beta1'
    assert scale_resource(api_version='kaito.sh/v1beta1', kind='Workspace') is None
