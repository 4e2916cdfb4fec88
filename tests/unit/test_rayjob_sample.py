"""deploy/samples/ray/simulate-rayjob.yaml: a RayJob KubeRay accepts, whose entrypoint
`llmscaler simulate` accepts.

The manifest is validated against the openAPIV3Schema of KubeRay's RayJob CRD (v1.7.0,
vendored in tests/support/data, see its README.md), strictly: a field the schema does not
declare is an error, as `kubectl apply --validate=strict` would say, where the API server
alone would drop it without a word. kubernetes-validate (test_deploy.py) has no schema for
ray.io kinds.
"""

from __future__ import annotations

import copy
import gzip
import shlex
from typing import Any

import jsonschema  # type: ignore[import-untyped]
import pytest
import yaml

from llmscaler import cli
from tests.support.paths import DATA, ROOT

SAMPLE = ROOT / 'deploy' / 'samples' / 'ray' / 'simulate-rayjob.yaml'
CRD = DATA / 'kuberay-v1.7.0-ray.io_rayjobs.yaml.gz'


def strict(schema: Any) -> Any:
    """`schema` with every object that lists its properties closed to others (what the API
    server's strict field validation does), unless it keeps unknown fields."""
    if isinstance(schema, list):
        return [strict(item) for item in schema]
    if not isinstance(schema, dict):
        return schema
    closed = {key: strict(value) for key, value in schema.items()}
    if (
        'properties' in schema
        and 'additionalProperties' not in schema
        and not schema.get('x-kubernetes-preserve-unknown-fields')
    ):
        closed['additionalProperties'] = False
    return closed


@pytest.fixture(scope='module')
def validator() -> jsonschema.protocols.Validator:
    # libyaml's loader where PyYAML has it: the CRD is 1.4 MB of YAML.
    loader = getattr(yaml, 'CSafeLoader', yaml.SafeLoader)
    crd = yaml.load(gzip.decompress(CRD.read_bytes()), Loader=loader)
    [version] = [v for v in crd['spec']['versions'] if v['name'] == 'v1']
    schema = strict(version['schema']['openAPIV3Schema'])
    return jsonschema.Draft7Validator(schema)


def sample() -> dict[str, Any]:
    document: dict[str, Any] = yaml.safe_load(SAMPLE.read_text())
    return document


def test_the_sample_is_a_valid_rayjob(validator: jsonschema.protocols.Validator) -> None:
    document = sample()
    assert (document['apiVersion'], document['kind']) == ('ray.io/v1', 'RayJob')
    errors = [f'{list(e.absolute_path)}: {e.message}' for e in validator.iter_errors(document)]
    assert errors == []


@pytest.mark.parametrize(
    ('where', 'key'),
    [
        ((), 'spec'),  # a misspelt top-level field
        (('spec',), 'entrypoint'),
        (('spec', 'rayClusterSpec', 'headGroupSpec'), 'rayStartParams'),
    ],
)
def test_a_misspelt_field_is_refused(
    validator: jsonschema.protocols.Validator, where: tuple[str, ...], key: str
) -> None:
    document = copy.deepcopy(sample())
    parent = document
    for step in where:
        parent = parent[step]
    parent[key + 's'] = parent.pop(key)
    assert list(validator.iter_errors(document))


def test_the_entrypoint_is_a_simulate_on_the_ray_cluster() -> None:
    words = shlex.split(sample()['spec']['entrypoint'])
    assert words[:2] == ['llmscaler', 'simulate']
    args = cli._parser().parse_args(words[1:])
    assert args.ray == 'auto'
    assert args.jobs is None  # the cluster's CPUs


def test_the_image_s_ray_is_the_cluster_s() -> None:
    cluster = sample()['spec']['rayClusterSpec']
    pods = [cluster['headGroupSpec'], *cluster['workerGroupSpecs']]
    images = {c['image'] for pod in pods for c in pod['template']['spec']['containers']}
    assert images == {f'rayproject/ray:{cluster["rayVersion"]}-py311'}
