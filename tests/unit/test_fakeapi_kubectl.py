"""kubectl against the fake kube-apiserver: a conformance check of its wire format.

kubectl runs as an asyncio subprocess so the in-process server keeps serving. Skipped when no
kubectl is on PATH (CI machines have one).
"""

from __future__ import annotations

import asyncio
import json
import shutil
import subprocess
from collections.abc import AsyncIterator

import pytest

from tests.fakeapi import FakeAPI

pytestmark = pytest.mark.skipif(shutil.which('kubectl') is None, reason='kubectl not on PATH')


@pytest.fixture
async def api() -> AsyncIterator[FakeAPI]:
    async with FakeAPI() as running:
        running.seed(
            {
                'apiVersion': 'apps/v1',
                'kind': 'Deployment',
                'metadata': {'name': 'x', 'namespace': 'ns'},
                'spec': {'replicas': 1, 'selector': {'matchLabels': {'app': 'x'}}},
                'status': {'replicas': 1},
            }
        )
        running.seed(
            {
                'apiVersion': 'llmd.ai/v1alpha1',
                'kind': 'VariantAutoscaling',
                'metadata': {'name': 'v', 'namespace': 'ns'},
                'spec': {'modelID': 'm'},
            }
        )
        yield running


async def kubectl(
    api: FakeAPI, *args: str, timeout: float = 20, request_timeout: str = '10s'
) -> tuple[int, str, str]:
    proc = await asyncio.create_subprocess_exec(
        'kubectl',
        f'--server={api.url}',
        '--request-timeout=10s',
        *args,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    try:
        out, err = await asyncio.wait_for(proc.communicate(), timeout)
    except TimeoutError:
        proc.kill()
        out, err = await proc.communicate()
    return proc.returncode or 0, out.decode(), err.decode()


async def supports_subresource() -> bool:
    proc = await asyncio.create_subprocess_exec(
        'kubectl', 'patch', '--help', stdout=subprocess.PIPE, stderr=subprocess.PIPE
    )
    out, _ = await proc.communicate()
    return b'--subresource' in out


async def test_get_deployments(api: FakeAPI) -> None:
    code, out, err = await kubectl(api, 'get', 'deployments', '-n', 'ns')
    assert code == 0, err
    assert out.splitlines()[1].split()[0] == 'x'


async def test_get_va_json_by_short_name(api: FakeAPI) -> None:
    code, out, err = await kubectl(api, 'get', 'va', '-n', 'ns', '-o', 'json')
    assert code == 0, err
    [item] = json.loads(out)['items']
    assert item['kind'] == 'VariantAutoscaling'
    assert item['spec'] == {'modelID': 'm'}


async def test_scale_deployment(api: FakeAPI) -> None:
    code, out, err = await kubectl(api, 'scale', 'deployment/x', '--replicas=3', '-n', 'ns')
    assert code == 0, err
    assert 'scaled' in out
    obj = api.get(api_version='apps/v1', kind='Deployment', namespace='ns', name='x')
    assert obj['spec']['replicas'] == 3
    assert any(r.path.endswith('/deployments/x/scale') for r in api.requests)


async def test_patch_va_status(api: FakeAPI) -> None:
    if not await supports_subresource():
        pytest.skip('this kubectl has no patch --subresource')
    code, _, err = await kubectl(
        api,
        'patch',
        'va/v',
        '-n',
        'ns',
        '--subresource=status',
        '--type=merge',
        '-p',
        '{"status":{"desiredOptimizedAlloc":{"numReplicas":2}}}',
    )
    assert code == 0, err
    obj = api.get(
        api_version='llmd.ai/v1alpha1', kind='VariantAutoscaling', namespace='ns', name='v'
    )
    assert obj['status'] == {'desiredOptimizedAlloc': {'numReplicas': 2}}
    [patch] = api.requests_to(
        method='PATCH', path='/apis/llmd.ai/v1alpha1/namespaces/ns/variantautoscalings/v/status'
    )
    assert patch.content_type == 'application/merge-patch+json'


async def test_watch_sees_update(api: FakeAPI) -> None:
    # --request-timeout bounds the watch; kubectl then exits on its own with what it printed.
    async def update_soon() -> None:
        while not api.store.watchers:
            await asyncio.sleep(0.05)
        obj = api.get(api_version='apps/v1', kind='Deployment', namespace='ns', name='x')
        obj['spec']['replicas'] = 9
        api.store.update(api.store_resource(obj), 'ns', 'x', obj, part='main')

    updater = asyncio.create_task(update_soon())
    _, out, err = await kubectl(
        api, 'get', 'deployments', '-n', 'ns', '--watch', '-o', 'json', request_timeout='4s'
    )
    await updater
    decoder, rest, seen = json.JSONDecoder(), out.strip(), []
    while rest:
        obj, end = decoder.raw_decode(rest)
        seen.append(obj['spec']['replicas'])
        rest = rest[end:].strip()
    assert seen == [1, 9], err
