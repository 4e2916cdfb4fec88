"""`llmscaler manifests --from-cluster` against the in-repo fake kube-apiserver (real HTTP on
loopback): the VAs of one namespace or of all, and the failures as one line, exit status 2."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import pytest
import yaml

from llmscaler.devcluster.fakeapi.server import FakeAPI
from llmscaler.manifests import command


def va(name: str, namespace: str, *, kind: str = 'Deployment', top: int = 6) -> dict[str, Any]:
    return {
        'apiVersion': 'llmd.ai/v1alpha1',
        'kind': 'VariantAutoscaling',
        'metadata': {'name': name, 'namespace': namespace},
        'spec': {
            'scaleTargetRef': {'apiVersion': 'apps/v1', 'kind': kind, 'name': f'{name}-d'},
            'modelID': 'meta-llama/Llama-3.1-8B-Instruct',
            'minReplicas': 1,
            'maxReplicas': top,
        },
    }


@pytest.fixture
async def api() -> AsyncIterator[FakeAPI]:
    async with FakeAPI() as running:
        running.seed(va('llama-a10g', 'inference'))
        running.seed(va('llama-a100', 'inference', top=3))
        running.seed(va('other', 'team-b'))
        yield running


async def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    # The command runs its own event loop: off this test's loop, in a thread.
    code = await asyncio.to_thread(command.main, list(argv))
    out, err = capsys.readouterr()
    return code, out, err


async def test_one_namespace(api: FakeAPI, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = await run(
        capsys, '--from-cluster', '--server', api.url, '--namespace', 'inference'
    )
    assert (code, err) == (0, '')
    docs = [d for d in yaml.safe_load_all(out) if d]
    assert [(d['metadata']['name'], d['spec']['maxReplicaCount']) for d in docs] == [
        ('llama-a100', 3),
        ('llama-a10g', 6),
    ]
    assert {d['spec']['scaleTargetRef']['name'] for d in docs} == {'llama-a100-d', 'llama-a10g-d'}


async def test_all_namespaces_for_metrics(api: FakeAPI, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = await run(
        capsys, '--from-cluster', '--all-namespaces', '--server', api.url, '--actuation', 'metrics'
    )
    assert code == 0
    docs = [d for d in yaml.safe_load_all(out) if d]
    assert [(d['kind'], d['metadata']['namespace']) for d in docs] == [
        ('HorizontalPodAutoscaler', 'inference'),
        ('HorizontalPodAutoscaler', 'inference'),
        ('HorizontalPodAutoscaler', 'team-b'),
    ]


async def test_empty_namespace_and_bad_objects(
    api: FakeAPI, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, err = await run(
        capsys, '--from-cluster', '--server', api.url, '--namespace', 'nobody'
    )
    assert (code, out) == (2, '')
    assert err == 'llmscaler manifests: --from-cluster: no VariantAutoscaling in namespace nobody\n'
    api.seed(va('job', 'batch', kind='Job'))
    code, _, err = await run(capsys, '--from-cluster', '--server', api.url, '--namespace', 'batch')
    assert code == 2
    assert err.count('\n') == 1
    assert 'batch/job' in err
    assert "kind 'Job' is not supported" in err


async def test_unreachable_server(capsys: pytest.CaptureFixture[str]) -> None:
    async with FakeAPI() as gone:
        url = gone.url
    code, out, err = await run(capsys, '--from-cluster', '--server', url)
    assert (code, out) == (2, '')
    assert err.startswith('llmscaler manifests: --from-cluster: listing VariantAutoscalings')
    assert err.count('\n') == 1
