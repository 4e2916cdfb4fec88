"""kubectl against the fake kube-apiserver: its wire format, and the VA printer columns.

kubectl runs as an asyncio subprocess so the in-process server keeps serving. The printer-column
tests are how a user sees `kubectl get va` (and `-o wide`): the fake apiserver renders Tables from
the CRD in deploy/base/crds (`llmscaler.devcluster.fakeapi.table`), kubectl prints them. Skipped
when no kubectl is on PATH, a failure with CI=true (`tests.support.prerequisites`).
"""

from __future__ import annotations

import asyncio
import datetime
import json
import re
import subprocess
from collections.abc import AsyncIterator
from typing import Any

import aiohttp
import pytest
from hypothesis import given
from hypothesis import strategies as st

from llmscaler.devcluster.fakeapi.resources import by_kind
from llmscaler.devcluster.fakeapi.server import FakeAPI
from llmscaler.devcluster.fakeapi.table import (
    compile_jsonpath,
    human_duration,
    negotiate,
    printer_columns,
)
from llmscaler.kube.crd import parse_va
from llmscaler.kube.resource_model import InvalidObject
from tests.support.prerequisites import missing, need_program

Doc = dict[str, Any]


@pytest.fixture(autouse=True)
def _kubectl() -> None:
    need_program('kubectl')


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


async def test_describe_lists_the_events_recorded_through_events_k8s_io(api: FakeAPI) -> None:
    # The controller records events.k8s.io/v1 Events; kubectl describe reads core v1 ones by
    # the object's kind, name, namespace and uid: the same Events, as on a real API server.
    va = api.get(
        api_version='llmd.ai/v1alpha1', kind='VariantAutoscaling', namespace='ns', name='v'
    )
    regarding = {
        'apiVersion': 'llmd.ai/v1alpha1',
        'kind': 'VariantAutoscaling',
        'name': 'v',
        'namespace': 'ns',
        'uid': va['metadata']['uid'],
    }
    api.seed(
        {
            'apiVersion': 'events.k8s.io/v1',
            'kind': 'Event',
            'metadata': {'name': 'v.1', 'namespace': 'ns'},
            'eventTime': '2026-01-01T00:00:00.000000Z',
            'regarding': regarding,
            'note': 'Deployment ns/x: 1 -> 2 (saturation)',
            'reason': 'ScaledUp',
            'type': 'Normal',
            'action': 'Scale',
            'reportingController': 'llmscaler',
            'reportingInstance': 'ctl-0',
        }
    )
    code, out, err = await kubectl(api, 'describe', 'va', 'v', '-n', 'ns')
    assert code == 0, err
    events = out.split('Events:', 1)[1]
    assert 'ScaledUp' in events
    assert 'Deployment ns/x: 1 -> 2 (saturation)' in events


async def test_scale_deployment(api: FakeAPI) -> None:
    code, out, err = await kubectl(api, 'scale', 'deployment/x', '--replicas=3', '-n', 'ns')
    assert code == 0, err
    assert 'scaled' in out
    obj = api.get(api_version='apps/v1', kind='Deployment', namespace='ns', name='x')
    assert obj['spec']['replicas'] == 3
    assert any(r.path.endswith('/deployments/x/scale') for r in api.requests)


async def test_patch_va_status(api: FakeAPI) -> None:
    if not await supports_subresource():
        missing('this kubectl has no patch --subresource (kubectl 1.24 or later has it)')
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


# --- printer columns: the CRD's, as the fake apiserver renders them in Tables ---------------

HEADER = [
    'NAME',
    'TARGET',
    'MODEL',
    'MIN',
    'MAX',
    'CURRENT',
    'READY',
    'OPTIMIZED',
    'METRICSREADY',
    'AGE',
]
WIDE = [*HEADER, 'ACCELERATOR', 'COST', 'REASON']


def va_object(name: str, namespace: str, *, with_status: bool) -> Doc:
    obj: Doc = {
        'apiVersion': 'llmd.ai/v1alpha1',
        'kind': 'VariantAutoscaling',
        'metadata': {'name': name, 'namespace': namespace},
        'spec': {
            'scaleTargetRef': {'apiVersion': 'apps/v1', 'kind': 'Deployment', 'name': f'{name}-d'},
            'modelID': 'meta-llama/Llama-3.1-8B-Instruct',
            'minReplicas': 1,
            'maxReplicas': 6,
            'variantCost': '5.0',
        },
    }
    if with_status:
        obj['status'] = {
            'desiredOptimizedAlloc': {'numReplicas': 3, 'lastRunTime': '2026-01-01T00:00:00Z'},
            'currentAlloc': {'accelerator': 'NVIDIA-A10G', 'numReplicas': 2, 'readyReplicas': 1},
            'conditions': [
                {
                    'type': 'MetricsAvailable',
                    'status': 'True',
                    'reason': 'MetricsFound',
                    'message': '',
                    'lastTransitionTime': '2026-01-01T00:00:00Z',
                },
                {
                    'type': 'OptimizationReady',
                    'status': 'True',
                    'reason': 'OptimizationSucceeded',
                    'message': 'scale_up 2 -> 3',
                    'lastTransitionTime': '2026-01-01T00:00:00Z',
                },
                {
                    'type': 'TargetResolved',
                    'status': 'True',
                    'reason': 'TargetFound',
                    'message': 'x',
                    'lastTransitionTime': '2026-01-01T00:00:00Z',
                },
            ],
        }
    assert not isinstance(parse_va(obj), InvalidObject)
    return obj


@pytest.fixture
async def vas() -> AsyncIterator[FakeAPI]:
    async with FakeAPI() as running:
        running.seed(va_object('llama-a10g', 'inference', with_status=True))
        running.seed(va_object('llama-new', 'other', with_status=False))
        yield running


async def printed(api: FakeAPI, *args: str) -> str:
    code, out, err = await kubectl(api, *args)
    assert code == 0, err
    return out


def table_rows(out: str) -> tuple[list[str], list[dict[str, str]]]:
    """kubectl's table output cut at the header's column starts (cells may be empty)."""
    header, *lines = out.rstrip('\n').splitlines()
    starts = [m.start() for m in re.finditer(r'\S+', header)]
    names = header.split()
    ends = [*starts[1:], None]
    rows = [
        {n: line[s:e].strip() for n, s, e in zip(names, starts, ends, strict=True)}
        for line in lines
    ]
    return names, rows


async def test_kubectl_get_shows_the_printer_columns(vas: FakeAPI) -> None:
    names, rows = table_rows(await printed(vas, 'get', 'va', '-n', 'inference'))
    assert names == HEADER
    [row] = rows
    assert re.fullmatch(r'\d+s', row.pop('AGE'))
    assert row == {
        'NAME': 'llama-a10g',
        'TARGET': 'llama-a10g-d',
        'MODEL': 'meta-llama/Llama-3.1-8B-Instruct',
        'MIN': '1',
        'MAX': '6',
        'CURRENT': '2',
        'READY': '1',
        'OPTIMIZED': '3',
        'METRICSREADY': 'True',
    }


async def test_kubectl_get_wide_adds_accelerator_cost_and_reason(vas: FakeAPI) -> None:
    names, rows = table_rows(await printed(vas, 'get', 'va', '-A', '-o', 'wide'))
    assert names == ['NAMESPACE', *WIDE]
    assert [
        (r['NAME'], r['CURRENT'], r['READY'], r['ACCELERATOR'], r['COST'], r['REASON'])
        for r in rows
    ] == [
        ('llama-a10g', '2', '1', 'NVIDIA-A10G', '5.0', 'OptimizationSucceeded'),
        ('llama-new', '', '', '', '5.0', ''),
    ]


async def test_kubectl_get_all_namespaces_and_one_object(vas: FakeAPI) -> None:
    names, rows = table_rows(await printed(vas, 'get', 'va', '-A'))
    assert names == ['NAMESPACE', *HEADER]
    assert [
        (r['NAMESPACE'], r['NAME'], r['CURRENT'], r['OPTIMIZED'], r['METRICSREADY']) for r in rows
    ] == [
        ('inference', 'llama-a10g', '2', '3', 'True'),
        ('other', 'llama-new', '', '', ''),
    ]
    names, [row] = table_rows(await printed(vas, 'get', 'va/llama-new', '-n', 'other'))
    assert names == HEADER
    assert row['MAX'] == '6'
    assert row['OPTIMIZED'] == ''


async def test_table_only_for_clients_that_ask(vas: FakeAPI) -> None:
    api = vas
    table_accept = 'application/json;as=Table;v=v1;g=meta.k8s.io,application/json'
    base = f'{api.url}/apis/llmd.ai/v1alpha1/namespaces/inference/variantautoscalings'
    async with aiohttp.ClientSession() as session:

        async def get(url: str, accept: str) -> Doc:
            async with session.get(url, headers={'Accept': accept}) as response:
                assert response.status == 200
                body: Doc = await response.json()
                return body

        assert (await get(base, 'application/json'))['kind'] == 'VariantAutoscalingList'
        table = await get(base + '?includeObject=Object', table_accept)
        assert table['kind'] == 'Table'
        assert table['rows'][0]['object']['kind'] == 'VariantAutoscaling'
        table = await get(base + '/llama-a10g', table_accept)
        assert table['rows'][0]['object']['kind'] == 'PartialObjectMetadata'
        assert [c['name'] for c in table['columnDefinitions']][:2] == ['Name', 'Target']
        table = await get(base + '?includeObject=None', table_accept)
        assert 'object' not in table['rows'][0]
        # Built-in kinds and v1beta1-only clients get plain objects.
        deployments = f'{api.url}/apis/apps/v1/namespaces/inference/deployments'
        assert (await get(deployments, table_accept))['kind'] == 'DeploymentList'
        beta = 'application/json;as=Table;v=v1beta1;g=meta.k8s.io'
        assert (await get(base, beta))['kind'] == 'VariantAutoscalingList'


def test_crd_printer_columns_are_wvas_and_ours() -> None:
    columns = printer_columns(group='llmd.ai', version='v1alpha1', plural='variantautoscalings')
    assert columns is not None
    assert [(c.name, c.type, c.priority) for c in columns] == [
        ('Target', 'string', 0),
        ('Model', 'string', 0),
        ('Min', 'integer', 0),
        ('Max', 'integer', 0),
        ('Current', 'integer', 0),
        ('Ready', 'integer', 0),
        ('Optimized', 'integer', 0),
        ('MetricsReady', 'string', 0),
        ('Age', 'date', 0),
        ('Accelerator', 'string', 1),
        ('Cost', 'string', 1),
        ('Reason', 'string', 1),
    ]
    assert printer_columns(group='apps', version='v1', plural='deployments') is None


def test_table_cells_and_age() -> None:
    resource = by_kind(api_version='llmd.ai/v1alpha1', kind='VariantAutoscaling')
    assert resource is not None
    obj = va_object('v', 'ns', with_status=True)
    obj['metadata']['creationTimestamp'] = '2026-01-01T00:00:00Z'
    obj['spec']['minReplicas'] = 0
    now = datetime.datetime(2026, 1, 1, 3, 5, 7, tzinfo=datetime.UTC)
    accept = 'application/json;as=Table;v=v1;g=meta.k8s.io'
    table = negotiate(accept=accept, query={}, resource=resource, body=obj, now=now)
    assert table['rows'][0]['cells'] == [
        'v',
        'v-d',
        'meta-llama/Llama-3.1-8B-Instruct',
        0,
        6,
        2,
        1,
        3,
        'True',
        '3h5m',
        'NVIDIA-A10G',
        '5.0',
        'OptimizationSucceeded',
    ]
    obj['metadata']['creationTimestamp'] = 'yesterday'
    table = negotiate(accept=accept, query={}, resource=resource, body=obj, now=now)
    assert table['rows'][0]['cells'][9] == '<invalid>'


def test_jsonpath_subset() -> None:
    doc = {'a': [{'t': 'x', 'v': 1}, {'t': 'y', 'v': 2}, {'t': 'y', 'v': 3}], 'n': {'k': 5}}
    assert compile_jsonpath(text='.a[?(@.t=="y")].v').find(doc) == [2, 3]
    assert compile_jsonpath(text="{.a[?(@.t!='y')].v}").find(doc) == [1]
    assert compile_jsonpath(text='.a[?(@.v==3)].t').find(doc) == ['y']
    assert compile_jsonpath(text='.a[-1].v').find(doc) == [3]
    assert compile_jsonpath(text='.a[*].t').find(doc) == ['x', 'y', 'y']
    assert compile_jsonpath(text='.n.k').find(doc) == [5]
    assert compile_jsonpath(text='.n.missing').find(doc) == []
    for unsupported in ('.a[0:2]', '..v', '.a[?(@.v>1)]', ''):
        with pytest.raises(ValueError, match='JSONPath'):
            compile_jsonpath(text=unsupported)


UNIT_SECONDS = {'s': 1, 'm': 60, 'h': 3600, 'd': 86400, 'y': 365 * 86400}


@pytest.mark.parametrize(
    ('seconds', 'text'),
    [
        (-5, '<invalid>'),
        (-1, '0s'),
        (119, '119s'),
        (120, '2m'),
        (310, '5m10s'),
        (600, '10m'),
        (3 * 3600 - 1, '179m'),
        (3 * 3600 + 65, '3h1m'),
        (30 * 3600, '30h'),
        (52 * 3600, '2d4h'),
        (9 * 86400 + 5, '9d'),
        (800 * 86400, '2y70d'),
        (9 * 365 * 86400, '9y'),
    ],
)
def test_human_duration(seconds: int, text: str) -> None:
    assert human_duration(seconds=seconds) == text


@given(st.integers(min_value=0, max_value=20 * 365 * 86400))
def test_human_duration_truncates_to_its_smallest_unit(seconds: int) -> None:
    parts = re.findall(r'(\d+)([smhdy])', human_duration(seconds=seconds))
    assert 1 <= len(parts) <= 2
    value = sum(int(n) * UNIT_SECONDS[u] for n, u in parts)
    assert value <= seconds < value + min(UNIT_SECONDS[u] for _, u in parts)
