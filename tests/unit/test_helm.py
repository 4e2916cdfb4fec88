"""The Helm chart (deploy/helm/llmscaler), rendered and linted by the pinned helm.

Why: the chart and the kustomize base install the same controller; two copies of the RBAC, the
probes or the ConfigMaps drift apart unless a test compares them. By default the chart must
render every object of `kubectl kustomize deploy/base` (but the Namespace, which
`helm install --create-namespace` makes) equal field for field once the labels Helm adds are
set aside, and its values must reach the objects they name: `actuation: metrics` is the
metrics-actuation overlay, `serviceMonitor.enabled: false` the no-prometheus-operator one, and
the controller must accept the command line any accepted values give it. values.schema.json must
refuse bad values with helm's own error naming the field, and docs/deploy.md's table of values
must list exactly the chart's values and defaults.

Skipped locally without the built helm (`python -m llmscaler.devcluster.binaries build helm`)
or kubectl; with CI=true either is a failure (tests/support/prerequisites.py).
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
import tomllib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from llmscaler.config.build import build_config
from llmscaler.config.configmap_entries import ConfigMapSource
from llmscaler.config.predictive import PREDICTIVE_CONFIGMAP
from llmscaler.config.resolved import CoreSettings
from llmscaler.controller.options.resolve import RunOptions, resolve_options
from tests.support.helm import CHART, KUBE_VERSION, NAMESPACE, RELEASE, Doc, Helm
from tests.support.paths import ROOT
from tests.support.prerequisites import need_built, need_program

CHART_YAML = yaml.safe_load((CHART / 'Chart.yaml').read_text())
HELM_LABELS = {
    'app.kubernetes.io/managed-by': 'Helm',
    'app.kubernetes.io/instance': RELEASE,
    'app.kubernetes.io/version': CHART_YAML['appVersion'],
    'helm.sh/chart': f'{CHART_YAML["name"]}-{CHART_YAML["version"]}',
}
"""The labels the chart adds to every object it templates (not to its CRDs, which Helm applies
untemplated), on top of the base's: Helm's recommended ones."""
CLUSTER_SCOPED = {'ClusterRole', 'ClusterRoleBinding', 'CustomResourceDefinition', 'Namespace'}
MONITORING = ROOT / 'deploy' / 'monitoring'
BIN = Path(sys.executable).parent
Key = tuple[str, str]


@pytest.fixture(scope='module')
def helm(tmp_path_factory: pytest.TempPathFactory) -> Helm:
    return Helm(binary=need_built('helm'), home=tmp_path_factory.mktemp('helm-home'))


@pytest.fixture(scope='module')
def kustomized() -> dict[str, list[Doc]]:
    need_program('kubectl')
    out: dict[str, list[Doc]] = {}
    for path in (
        'deploy/base',
        'deploy/overlays/metrics-actuation',
        'deploy/overlays/no-prometheus-operator',
    ):
        run = subprocess.run(
            ['kubectl', 'kustomize', str(ROOT / path)], capture_output=True, text=True, timeout=60
        )
        assert run.returncode == 0, run.stderr
        out[path] = [d for d in yaml.safe_load_all(run.stdout) if d]
    return out


@pytest.fixture(scope='module')
def rendered(helm: Helm) -> list[Doc]:
    return helm.render()


def by_key(docs: list[Doc]) -> dict[Key, Doc]:
    out = {(d['kind'], d['metadata']['name']): d for d in docs}
    assert len(out) == len(docs), 'two objects of one kind share a name'
    return out


def without_helm_labels(docs: list[Doc]) -> dict[Key, Doc]:
    """The chart's objects with the labels Helm adds removed; each must carry all of them."""
    out = {}
    for key, doc in by_key(docs).items():
        doc = json.loads(json.dumps(doc))
        labels = doc['metadata'].get('labels', {})
        if doc['kind'] != 'CustomResourceDefinition':
            assert {k: labels.pop(k, None) for k in HELM_LABELS} == HELM_LABELS, key
        out[key] = doc
    return out


def same_objects(chart: list[Doc], kustomize: list[Doc]) -> None:
    """The chart's objects are the kustomization's (but its Namespace), field for field."""
    ours, theirs = without_helm_labels(chart), by_key(kustomize)
    assert set(theirs) - set(ours) == {('Namespace', NAMESPACE)}
    assert set(ours) - set(theirs) == set()
    for key in sorted(ours):
        assert ours[key] == theirs[key], key


def one(docs: list[Doc], kind: str, name: str) -> Doc:
    [found] = [d for d in docs if d['kind'] == kind and d['metadata']['name'] == name]
    return found


def controller_container(docs: list[Doc]) -> Doc:
    [container] = one(docs, 'Deployment', 'llmscaler-controller')['spec']['template']['spec'][
        'containers'
    ]
    assert isinstance(container, dict)
    return container


def resolved(docs: list[Doc]) -> RunOptions:
    """The controller's options from the Deployment's args and env, as in a pod."""
    container = controller_container(docs)
    downward = {'metadata.namespace': NAMESPACE, 'metadata.name': 'llmscaler-controller-0'}
    env = {
        e['name']: e['value'] if 'value' in e else downward[e['valueFrom']['fieldRef']['fieldPath']]
        for e in container['env']
    }
    options, errors = resolve_options(argv=container['args'], env=env)
    assert errors == ()
    return options


# -- the chart itself -------------------------------------------------------------------------


def test_chart_metadata_follows_the_project() -> None:
    project = tomllib.loads((ROOT / 'pyproject.toml').read_text())['project']
    assert CHART_YAML['apiVersion'] == 'v2'
    assert (CHART_YAML['name'], CHART_YAML['version']) == ('llmscaler', '0.1.0')
    # The release it installs, and the default image tag (the base's image, compared below).
    assert CHART_YAML['appVersion'] == project['version']


def test_helm_lint_passes(helm: Helm) -> None:
    everything = {'prometheusRule': {'enabled': True}, 'dashboards': {'enabled': True}}
    for values in (None, everything):
        out = helm.lint(values=values)
        assert '1 chart(s) linted, 0 chart(s) failed' in out
        assert '[WARNING]' not in out
        assert '[ERROR]' not in out


def test_the_chart_ships_copies_of_the_monitoring_files() -> None:
    for name in ('alerts.yaml', 'dashboard.json'):
        assert (CHART / 'files' / name).read_bytes() == (MONITORING / name).read_bytes(), name


# -- default render against the kustomize base ------------------------------------------------


def test_default_render_is_the_kustomize_base(
    rendered: list[Doc], kustomized: dict[str, list[Doc]]
) -> None:
    same_objects(rendered, kustomized['deploy/base'])


@pytest.mark.parametrize(
    ('values', 'overlay'),
    [
        ({'actuation': 'metrics'}, 'deploy/overlays/metrics-actuation'),
        ({'serviceMonitor': {'enabled': False}}, 'deploy/overlays/no-prometheus-operator'),
    ],
    ids=['metrics-actuation', 'no-prometheus-operator'],
)
def test_a_value_renders_an_overlay(
    helm: Helm,
    rendered: list[Doc],
    kustomized: dict[str, list[Doc]],
    values: dict[str, Any],
    overlay: str,
) -> None:
    chart = helm.render(values=values)
    same_objects(chart, kustomized[overlay])
    assert chart != rendered


def test_actuation_reaches_the_controller(helm: Helm, rendered: list[Doc]) -> None:
    assert resolved(rendered).actuation == 'direct'
    assert resolved(helm.render(values={'actuation': 'metrics'})).actuation == 'metrics'


def test_another_release_namespace_moves_everything(helm: Helm) -> None:
    docs = helm.render(namespace='autoscaling')
    for doc in docs:
        expected = None if doc['kind'] in CLUSTER_SCOPED else 'autoscaling'
        assert doc['metadata'].get('namespace') == expected, doc['metadata']
    for binding in (d for d in docs if d['kind'] in ('ClusterRoleBinding', 'RoleBinding')):
        assert {s['namespace'] for s in binding['subjects']} == {'autoscaling'}
    assert NAMESPACE not in yaml.safe_dump_all(docs)


# -- values -----------------------------------------------------------------------------------

EVERY_VALUE = {
    'image': {
        'repository': 'registry.example/llmscaler',
        'tag': '0.1.0-rc1',
        'digest': 'sha256:' + '0' * 64,
    },
    'imagePullSecrets': [{'name': 'pull'}],
    'replicas': 3,
    # No CPU limit: null removes the default's.
    'resources': {
        'requests': {'cpu': '200m', 'memory': '512Mi'},
        'limits': {'cpu': None, 'memory': '2Gi'},
    },
    'leaderElection': {
        'enabled': True,
        'leaseDuration': '30s',
        'renewDeadline': '20s',
        'retryPeriod': '5s',
    },
    'logLevel': 'debug',
    'actuation': 'metrics',
    'metricsSource': 'prometheus',
    'prometheusUrl': 'https://prometheus.monitoring.svc:9091',
    'extraArgs': ['--watch-namespace=prod', '--interval=15s'],
    'extraEnv': [{'name': 'PROMETHEUS_CA_CERT_PATH', 'value': '/etc/prometheus-ca/ca.crt'}],
    'extraVolumes': [{'name': 'prometheus-ca', 'configMap': {'name': 'prometheus-ca'}}],
    'extraVolumeMounts': [
        {'name': 'prometheus-ca', 'mountPath': '/etc/prometheus-ca', 'readOnly': True}
    ],
    'nodeSelector': {'kubernetes.io/os': 'linux'},
    'tolerations': [
        {'key': 'dedicated', 'operator': 'Equal', 'value': 'control', 'effect': 'NoSchedule'}
    ],
    # null, not {}: Helm merges a map with the default, and only null removes it.
    'affinity': None,
}


def test_every_value_reaches_its_object_and_the_controller_accepts_them(helm: Helm) -> None:
    docs = helm.render(values=EVERY_VALUE)
    deployment = one(docs, 'Deployment', 'llmscaler-controller')
    pod = deployment['spec']['template']['spec']
    container = controller_container(docs)
    assert container['image'] == 'registry.example/llmscaler:0.1.0-rc1@sha256:' + '0' * 64
    assert deployment['spec']['replicas'] == 3
    assert container['resources'] == {
        'requests': {'cpu': '200m', 'memory': '512Mi'},
        'limits': {'memory': '2Gi'},
    }
    assert pod['imagePullSecrets'] == EVERY_VALUE['imagePullSecrets']
    assert pod['nodeSelector'] == EVERY_VALUE['nodeSelector']
    assert pod['tolerations'] == EVERY_VALUE['tolerations']
    assert 'affinity' not in pod
    assert pod['volumes'][1:] == EVERY_VALUE['extraVolumes']
    assert container['volumeMounts'][1:] == EVERY_VALUE['extraVolumeMounts']
    options = resolved(docs)
    assert options.leader_elect is True
    assert (options.lease_duration, options.renew_deadline, options.retry_period) == (30, 20, 5)
    assert options.log_level == 'debug'
    assert options.actuation == 'metrics'
    assert options.watch_namespace == 'prod'
    assert options.settings.interval == 15
    assert options.prometheus is not None
    assert options.prometheus.base_url == EVERY_VALUE['prometheusUrl']
    assert options.prometheus.ca_file == Path('/etc/prometheus-ca/ca.crt')


def test_renders_validate_against_the_kubernetes_schemas(
    helm: Helm, rendered: list[Doc], tmp_path: Path
) -> None:
    """The default objects, every value set, and the monitoring objects, as test_deploy.py
    validates the kustomizations (the Prometheus Operator's kinds have no schema there)."""
    monitoring = {'prometheusRule': {'enabled': True}, 'dashboards': {'enabled': True}}
    docs = rendered + helm.render(values=EVERY_VALUE) + helm.render(values=monitoring)
    files = []
    for index, doc in enumerate(docs):
        if doc['apiVersion'].startswith('monitoring.coreos.com/'):
            continue
        files.append(tmp_path / f'{index:03d}-{doc["kind"]}.yaml')
        files[-1].write_text(yaml.safe_dump(doc), encoding='utf-8')
    run = subprocess.run(
        [str(BIN / 'kubernetes-validate'), '-k', KUBE_VERSION, '--strict', *map(str, files)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    problems = [line for line in (run.stdout + run.stderr).splitlines() if 'INFO' not in line]
    assert run.returncode == 0, problems
    passed = {line.split()[1] for line in run.stdout.splitlines() if ' passed for ' in line}
    assert passed == {str(f) for f in files}, run.stdout
    assert 'llmscaler-dashboard' in {d['metadata']['name'] for d in docs}


def test_the_pod_metrics_source_reaches_the_controller(helm: Helm) -> None:
    options = resolved(helm.render(values={'metricsSource': 'pods'}))
    assert options.metrics_source == 'pods'


def test_one_replica_without_leader_election(helm: Helm) -> None:
    docs = helm.render(values={'replicas': 1, 'leaderElection': {'enabled': False}})
    assert one(docs, 'Deployment', 'llmscaler-controller')['spec']['replicas'] == 1
    assert resolved(docs).leader_elect is False
    # No Lease is taken, so none may be written.
    assert not [d for d in docs if d['kind'] in ('Role', 'RoleBinding')]


def test_configmap_values_become_the_scaling_configmaps(helm: Helm) -> None:
    sample = yaml.safe_load((ROOT / 'deploy/samples/predictive/predictive-config.yaml').read_text())
    docs = helm.render(values={'configMaps': {'scaleToZero': None, 'predictive': sample['data']}})
    maps = {d['metadata']['name']: d for d in docs if d['kind'] == 'ConfigMap'}
    assert set(maps) == {'wva-saturation-scaling-config', PREDICTIVE_CONFIGMAP}
    predictive = maps[PREDICTIVE_CONFIGMAP]
    assert predictive['data'] == sample['data']
    assert (
        predictive['metadata']['labels']['app.kubernetes.io/name'] == 'workload-variant-autoscaler'
    )
    sources = [
        ConfigMapSource(name=name, namespace=NAMESPACE, data=cm['data'])
        for name, cm in maps.items()
    ]
    config, errors = build_config(
        configmaps=sources, settings=CoreSettings(), controller_namespace=NAMESPACE
    )
    assert errors == ()
    # Global here (the release namespace): every model of every namespace is predictive.
    assert config.model(
        model_id='meta-llama/Llama-3.1-8B-Instruct', namespace='anywhere'
    ).predictive
    assert config.model(model_id='other', namespace='prod').predictive is not None


def test_monitoring_objects_when_enabled(helm: Helm) -> None:
    docs = helm.render(
        values={
            'prometheusRule': {'enabled': True, 'labels': {'release': 'kube-prometheus-stack'}},
            'dashboards': {'enabled': True, 'annotations': {'grafana_folder': 'LLM serving'}},
            'serviceMonitor': {'enabled': True, 'labels': {'release': 'kube-prometheus-stack'}},
        }
    )
    rule = one(docs, 'PrometheusRule', 'llmscaler')
    assert rule['apiVersion'] == 'monitoring.coreos.com/v1'
    assert rule['metadata']['namespace'] == NAMESPACE
    assert rule['metadata']['labels']['release'] == 'kube-prometheus-stack'
    assert rule['spec'] == yaml.safe_load((MONITORING / 'alerts.yaml').read_text())
    monitor = one(docs, 'ServiceMonitor', 'llmscaler-controller')
    assert monitor['metadata']['labels']['release'] == 'kube-prometheus-stack'
    assert monitor['metadata']['labels']['app.kubernetes.io/name'] == 'llmscaler'
    dashboard = one(docs, 'ConfigMap', 'llmscaler-dashboard')
    assert dashboard['metadata']['labels']['grafana_dashboard'] == '1'
    assert dashboard['metadata']['annotations'] == {'grafana_folder': 'LLM serving'}
    [(key, text)] = dashboard['data'].items()
    assert key.endswith('.json')
    assert json.loads(text) == json.loads((MONITORING / 'dashboard.json').read_text())
    # The controller caches the ConfigMaps its labels select as configuration: not this one.
    labels = dashboard['metadata']['labels']
    for selector in RunOptions().configmap_labels:
        name, _, value = selector.partition('=')
        assert labels.get(name) != value


# -- the schema -------------------------------------------------------------------------------

SCHEMA_ERROR = "values don't meet the specifications of the schema(s)"


@pytest.mark.parametrize(
    ('values', 'where'),
    [
        ({'replicas': -1}, "at '/replicas'"),
        ({'replicas': 'two'}, "at '/replicas'"),
        ({'actuation': 'bogus'}, "at '/actuation'"),
        ({'actuation': 'direct'}, "at '/actuation'"),
        ({'replica': 3}, "'replica' not allowed"),
        ({'leaderElection': {'enabled': False}}, "at '/replicas'"),
        (
            {'leaderElection': {'enabled': True, 'leaseDuration': '60'}},
            "at '/leaderElection/leaseDuration'",
        ),
        ({'logLevel': 'verbose'}, "at '/logLevel'"),
        (
            {'image': {'repository': 'x', 'pullPolicy': 'IfNotPresent', 'digest': 'latest'}},
            "at '/image/digest'",
        ),
        ({'prometheusUrl': 'prometheus:9090'}, "at '/prometheusUrl'"),
        ({'extraArgs': ['-v']}, "at '/extraArgs/0'"),
        (
            {'configMaps': {'predictive': {'default': {'startupSeconds': 120}}}},
            "at '/configMaps/predictive/default'",
        ),
        ({'serviceMonitor': {'enabled': 'yes'}}, "at '/serviceMonitor/enabled'"),
    ],
)
def test_the_schema_refuses_bad_values(helm: Helm, values: dict[str, Any], where: str) -> None:
    message = helm.refusal(values=values)
    assert SCHEMA_ERROR in message
    assert where in message


def test_the_chart_refuses_a_kubernetes_without_unhealthy_pod_eviction_policy(helm: Helm) -> None:
    assert helm.template(kube_version='1.27.0').returncode == 0
    refused = helm.template(kube_version='1.26.9')
    assert refused.returncode != 0
    assert 'chart requires kubeVersion: >=1.27.0-0' in refused.stderr


# -- the table of values in docs/deploy.md ----------------------------------------------------

VALUES_TABLE = re.compile(r'<!-- helm-values:begin -->\n(.*?)<!-- helm-values:end -->', re.DOTALL)
ROW = re.compile(r'\| `([^`]+)` \| (.+?) \| (.+?) \|')
LONG = 'see `values.yaml`'


def schema_node(node: dict[str, Any], schema: dict[str, Any]) -> dict[str, Any]:
    """`node` with a `$ref` to the schema's definitions inlined."""
    ref = node.get('$ref')
    if ref is None:
        return node
    found = schema['definitions'][ref.removeprefix('#/definitions/')]
    assert isinstance(found, dict)
    return found


def value_rows(
    values: dict[str, Any], node: dict[str, Any], schema: dict[str, Any], prefix: str = ''
) -> Iterator[tuple[str, Any]]:
    """(dotted key, default) of every value a person sets: closed objects of the schema are
    walked into, open ones (labels, resources per kind, ConfigMap data) are one value."""
    # A closed object's keys are exactly the schema's: nothing in the schema lacks a default.
    assert set(values) == set(node['properties']), prefix
    for key, value in values.items():
        child = schema_node(node['properties'][key], schema)
        if child.get('additionalProperties') is False and 'properties' in child:
            yield from value_rows(value, child, schema, f'{prefix}{key}.')
        else:
            yield f'{prefix}{key}', value


def default_cell(value: Any) -> str:
    """The default as the table shows it: JSON when it is short, else a pointer to the file."""
    text = json.dumps(value)
    return LONG if len(text) > 60 or '\\n' in text else f'`{text}`'


def test_the_docs_table_lists_every_value_and_its_default() -> None:
    values = yaml.safe_load((CHART / 'values.yaml').read_text())
    schema = json.loads((CHART / 'values.schema.json').read_text())
    expected = [(key, default_cell(value)) for key, value in value_rows(values, schema, schema)]
    [table] = VALUES_TABLE.findall((ROOT / 'docs' / 'deploy.md').read_text())
    rows = [ROW.fullmatch(line.strip()) for line in table.strip().splitlines()[2:]]
    assert None not in rows, table
    documented = [(row[1], row[2]) for row in rows if row is not None]
    assert documented == expected, '\n'.join(f'| `{k}` | {d} | |' for k, d in expected)
    assert all(row[3].strip() for row in rows if row is not None)
    # The long defaults are the ones the table sends to values.yaml.
    assert {d for _, d in expected} >= {LONG, '`"scale"`', '`2`'}
