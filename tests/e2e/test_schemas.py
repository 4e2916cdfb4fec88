"""The fake API and the real API server store and refuse the same custom resources.

kube-apiserver prunes what a CRD's structural schema does not declare, validates the rest
(ratcheting values left unchanged by an update) and validates a status write in its status
alone; the fake does the same with deploy/base's CRDs (`devcluster.fakeapi.schemas`). The
same kubectl writes run on both backends and must give the same outcome (where the two
disagree, the fake is wrong).

| write | expectation on both backends |
|---|---|
| a VA with an unknown spec field and an unknown top-level field | created, both pruned |
| `minReplicas: -1`; no `modelID` | refused, naming the field |
| a status patch with an unknown field | written, the field pruned |
| a status patch with `numReplicas: -2` | refused, naming the field |
| a label patch of a VA whose stored value breaks the schema | written (ratcheting) |
| objects that break the CRDs' CEL rules, alone or with other errors | refused, the same causes |
| a spec patch that breaks a CEL rule | refused, the stored object unchanged |
| a label patch of a VA whose stored spec breaks a CEL rule | written (ratcheting) |
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from llmscaler.devcluster.cluster import Cluster
from tests.support.cluster_kubectl import kubectl
from tests.support.e2e_controller import NS


@pytest.fixture
async def cluster(backend: bool, tmp_path: Path) -> AsyncIterator[Cluster]:
    async with Cluster(namespace=NS, workdir=tmp_path, control_plane=backend) as c:
        yield c


def va(name: str, **spec: Any) -> dict[str, Any]:
    return {
        'apiVersion': 'llmd.ai/v1alpha1',
        'kind': 'VariantAutoscaling',
        'metadata': {'name': name, 'namespace': NS},
        'spec': {
            'modelID': 'm',
            'scaleTargetRef': {'apiVersion': 'apps/v1', 'kind': 'Deployment', 'name': name},
            **spec,
        },
    }


async def run(cluster: Cluster, *args: str, stdin: str | None = None) -> tuple[int, str]:
    """kubectl in a thread (the fake API answers on this loop); its exit code and stderr."""
    done = await asyncio.to_thread(kubectl, cluster, *args, stdin=stdin, namespace=NS)
    return done.returncode, done.stderr


async def create(cluster: Cluster, obj: dict[str, Any]) -> tuple[int, str]:
    """`kubectl create --validate=false`: kubectl's default (`Strict`) needs the OpenAPI
    document, which the fake does not serve; without it unknown fields are pruned, on both."""
    return await run(cluster, 'create', '--validate=false', '-f', '-', stdin=yaml.safe_dump(obj))


async def status_patch(cluster: Cluster, name: str, status: dict[str, Any]) -> tuple[int, str]:
    patch = json.dumps({'status': status})
    return await run(
        cluster, 'patch', f'va/{name}', '--subresource=status', '--type=merge', '-p', patch
    )


def stored(cluster: Cluster, name: str) -> dict[str, Any]:
    return cluster.get(
        api_version='llmd.ai/v1alpha1', kind='VariantAutoscaling', namespace=NS, name=name
    )


async def test_both_backends_prune_refuse_and_ratchet_the_same_writes(cluster: Cluster) -> None:
    code, err = await create(cluster, va('pruned', misspelt=1) | {'extra': {'a': 1}})
    assert code == 0, err
    kept = stored(cluster, 'pruned')
    assert 'misspelt' not in kept['spec']
    assert 'extra' not in kept

    code, err = await create(cluster, va('negative', minReplicas=-1))
    assert code != 0
    assert 'spec.minReplicas: Invalid value: -1' in err, err
    missing = va('unnamed')
    del missing['spec']['modelID']
    code, err = await create(cluster, missing)
    assert code != 0
    assert 'spec.modelID: Required value' in err, err

    unknown = {'currentAlloc': {'numReplicas': 1, 'x': 'y'}}
    code, err = await status_patch(cluster, 'pruned', unknown)
    assert code == 0, err
    assert stored(cluster, 'pruned')['status'] == {'currentAlloc': {'numReplicas': 1}}
    code, err = await status_patch(cluster, 'pruned', {'currentAlloc': {'numReplicas': -2}})
    assert code != 0
    assert 'status.currentAlloc.numReplicas: Invalid value: -2' in err, err
    assert stored(cluster, 'pruned')['status'] == {'currentAlloc': {'numReplicas': 1}}


async def test_both_backends_let_an_unchanged_invalid_value_through(cluster: Cluster) -> None:
    # Stored as an older CRD let it be: the harness writes as the cluster did then. On the real
    # server the harness cannot store what the schema refuses, so the test stops there.
    if cluster.real:
        code, _ = await create(cluster, va('old', minReplicas=-1))
        assert code != 0
        return
    cluster.seed(va('old', minReplicas=-1))
    code, err = await run(cluster, 'label', 'va/old', 'team=a')
    assert code == 0, err
    assert stored(cluster, 'old')['metadata']['labels'] == {'team': 'a'}
    cluster.seed(va('crossed', minReplicas=3, maxReplicas=1))
    code, err = await run(cluster, 'label', 'va/crossed', 'team=a')
    assert code == 0, err
    code, err = await run(
        cluster, 'patch', 'va/crossed', '--type=merge', '-p', '{"spec":{"maxReplicas":2}}'
    )
    assert code != 0
    assert 'minReplicas must be less than or equal to maxReplicas' in err, err


def llmas(name: str, spec: dict[str, Any]) -> dict[str, Any]:
    target = {'kind': 'Deployment', 'name': name}
    return {
        'apiVersion': 'kaito.sh/v1alpha1',
        'kind': 'LLMAutoScaler',
        'metadata': {'name': name, 'namespace': NS},
        'spec': {'scaleTargetRef': target, 'maxReplicas': 2} | spec,
    }


def causes(err: str) -> tuple[str, set[str]]:
    """kubectl's report of an Invalid answer: its first line, and the causes it lists (one on
    that line, or one per `* ` line); the order of several is the server's map order."""
    head, _, rest = err.strip().partition(' is invalid: ')
    lines = rest.splitlines()
    listed = {line.removeprefix('* ') for line in lines if line.startswith('* ')}
    return head, listed or {rest}


def threshold(low: int, high: int) -> dict[str, Any]:
    return {'threshold': {'low': low, 'high': high}}


UNCHECKED = (
    '<nil>: Invalid value: null: some validation rules were not checked because the object was '
    'invalid; correct the existing errors to complete validation'
)
RULE = 'minReplicas must be less than or equal to maxReplicas'
REFUSED = [
    (va('r1', minReplicas=3, maxReplicas=1), {f'spec: Invalid value: "object": {RULE}'}),
    (
        va('r2', minReplicas='abc', maxReplicas=1),
        {
            'spec.minReplicas: Invalid value: "string": spec.minReplicas in body must be of '
            'type integer: "string"',
            UNCHECKED,
        },
    ),
    (
        va('r3', minReplicas=-1, maxReplicas=-2),
        {
            'spec.maxReplicas: Invalid value: -2: spec.maxReplicas in body should be greater '
            'than or equal to 1',
            'spec.minReplicas: Invalid value: -1: spec.minReplicas in body should be greater '
            'than or equal to 0',
            f'spec: Invalid value: "object": {RULE}',
        },
    ),
    (
        llmas('r4', {'scaler': {}}),
        {'spec.scaler: Invalid value: "object": set realtime, cron or both'},
    ),
    (
        llmas('r5', {'scaler': {'realtime': {'metrics': [threshold(5, 1), threshold(2, 1)]}}}),
        {
            f'spec.scaler.realtime.metrics[{i}].threshold: Invalid value: "object": low must '
            'be less than or equal to high'
            for i in (0, 1)
        },
    ),
    (
        llmas('r6', {'scaler': {'realtime': {'metrics': [{'threshold': {'low': 1}}]}}}),
        {'spec.scaler.realtime.metrics[0].threshold.high: Required value', UNCHECKED},
    ),
    (
        llmas('r7', {'scaler': {'realtime': {'metrics': []}}}),
        {
            'spec.scaler.realtime.metrics: Invalid value: 0: spec.scaler.realtime.metrics in '
            'body should have at least 1 items'
        },
    ),
]


async def test_both_backends_refuse_what_the_cel_rules_refuse(cluster: Cluster) -> None:
    for obj, expected in REFUSED:
        code, err = await create(cluster, obj)
        assert code != 0, obj
        name = obj['metadata']['name']
        assert causes(err) == (f'The {obj["kind"]} "{name}"', expected), err

    code, err = await create(cluster, va('ok', minReplicas=1, maxReplicas=2))
    assert code == 0, err
    patch = json.dumps({'spec': {'minReplicas': 3}})
    code, err = await run(cluster, 'patch', 'va/ok', '--type=merge', '-p', patch)
    assert code != 0
    assert causes(err) == (
        'The VariantAutoscaling "ok"',
        {f'spec: Invalid value: "object": {RULE}'},
    )
    assert stored(cluster, 'ok')['spec']['minReplicas'] == 1
