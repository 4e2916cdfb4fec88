"""The Grafana dashboard and the Prometheus alerts of deploy/monitoring.

Why: a panel or an alert on a metric the controller does not export is silent (an empty vector
draws nothing and fires nothing), so every metric and label name they read is checked against
the exposition of the controller's own registry (`ControllerMetrics`, filled through its public
methods). promtool checks the rules' syntax and runs their unit tests (alerts-test.yaml), which
must hold for each alert a case that fires it and one that does not; the same unit tests run
against rules broken on purpose must fail, so they can. The dashboard's queries are checked by
promtool too, as recording rules, and every alert's runbook must be a section of
docs/troubleshooting.md.

promtool: Debian's (the `prometheus` package, 2.42) on PATH, required with CI=true; and the
Prometheus 3 one built from its Go module (`python -m llmscaler.devcluster.binaries build
prometheus`) when it is there.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from prometheus_client.parser import text_string_to_metric_families

from llmscaler.controller.publish import (
    AvailabilityRow,
    ControllerMetrics,
    GpuRow,
    ReplicaRow,
    ShadowRow,
)
from llmscaler.devcluster import binaries
from tests.support.paths import ROOT
from tests.support.prerequisites import need_program
from tests.support.promql import Names, read

MONITORING = ROOT / 'deploy' / 'monitoring'
TROUBLESHOOTING = ROOT / 'docs' / 'troubleshooting.md'
RUNBOOKS = 'https://github.com/llmscaler/llmscaler/blob/main/docs/troubleshooting.md#'
SCRAPE_LABELS = {
    # Every scrape adds them; the dashboard tells replicas apart by `instance`.
    'instance',
    'job',
    # The Prometheus Operator adds the target's pod (and namespace) to a ServiceMonitor's series.
    'pod',
    # The series' own `namespace` (the variant's), as a scrape that adds its target's namespace
    # keeps it (the chart's ServiceMonitor).
    'exported_namespace',
}
"""Labels a query may read that Prometheus adds, not the controller."""
GRAFANA = {
    '$__rate_interval': '5m',
    '$__range': '6h',
    '$__interval': '1m',
    '$namespace': '.*',
    '$variant': '.*',
}
"""Grafana's variables as the dashboard uses them, and PromQL that stands in for each."""
Doc = dict[str, Any]


# -- what the controller exports --------------------------------------------------------------


def filled_metrics() -> ControllerMetrics:
    """A registry with a series in every family, through the methods the controller calls."""
    metrics = ControllerMetrics()
    metrics.set_replicas(
        rows=[ReplicaRow(variant='v', namespace='ns', accelerator='L40S', current=1, desired=2)]
    )
    metrics.scaled(variant='v', namespace='ns', direction='up', reason='r')
    metrics.cycle(seconds=0.2, status='success')
    metrics.decisions(action='hold', count=1)
    metrics.error(component='metrics', error_type='Timeout')
    metrics.from_zero(seconds=0.3)
    metrics.leader(is_leader=True)
    metrics.lease_renewal(late=0.0, ok=True)
    metrics.models(count=1)
    metrics.limited(variant='v', namespace='ns')
    metrics.set_available_gpus(rows=[GpuRow(vendor='nvidia', model='L40S', type='L40S', gpus=8)])
    metrics.set_metrics_available(
        rows=[AvailabilityRow(variant='v', namespace='ns', model_id='m', available=False)]
    )
    replicas = ReplicaRow(variant='v', namespace='ns', accelerator='L40S', current=1, desired=2)
    metrics.set_shadow(rows=[ShadowRow(replicas=replicas, peer=1)])
    return metrics


@pytest.fixture(scope='module')
def exported() -> dict[str, dict[str, set[str]]]:
    """Each exported sample name → its label names → the values seen (from the text format)."""
    out: dict[str, dict[str, set[str]]] = {}
    page = filled_metrics().render().decode()
    for family in text_string_to_metric_families(page):
        for sample in family.samples:
            labels = out.setdefault(sample.name, {})
            for name, value in sample.labels.items():
                labels.setdefault(name, set()).add(value)
    return out


def test_every_family_of_the_controller_has_a_series_here(
    exported: dict[str, dict[str, set[str]]],
) -> None:
    """`filled_metrics` reaches every family the registry declares, so none goes unchecked."""
    declared = {
        f.name for f in text_string_to_metric_families(ControllerMetrics().render().decode())
    }
    filled = {
        f.name
        for f in text_string_to_metric_families(filled_metrics().render().decode())
        if f.samples
    }
    assert declared <= filled
    # The rest are the `_created` gauges of labelled counters and histograms, one per series.
    assert all(name.endswith('_created') for name in filled - declared)
    assert {'llmscaler_leader', 'wva_desired_replicas', 'wva_errors'} <= declared
    assert 'llmscaler_scale_from_zero_seconds_bucket' in exported


def label_names(exported: dict[str, dict[str, set[str]]]) -> set[str]:
    return {label for labels in exported.values() for label in labels} | SCRAPE_LABELS


def unknown(names: Names, exported: dict[str, dict[str, set[str]]]) -> list[str]:
    """The metric and label names of a query the controller does not export."""
    metrics = sorted(names.metrics - set(exported))
    labels = sorted(names.labels - label_names(exported))
    return metrics + [f'label {label}' for label in labels]


# -- the PromQL reader ------------------------------------------------------------------------


def test_the_reader_tells_metrics_from_the_rest() -> None:
    names = read(
        expr='histogram_quantile(0.9, sum by (le, pod) (rate(a_bucket{job="x", le!="+Inf"}'
        '[5m] offset 1m))) > on (pod) group_left (node) b or absent(c) unless sum without '
        '(x) ({__name__=~"d|e_total"}) * count(f) and bool 2'
    )
    assert names.metrics == {'a_bucket', 'b', 'c', 'd', 'e_total', 'f'}
    assert names.labels == {'le', 'pod', 'job', 'node', 'x'}
    assert ('le', '!=', '+Inf') in names.matchers
    with pytest.raises(ValueError, match='does not name its metrics'):
        read(expr='{__name__=~"wva_.*"}')
    with pytest.raises(ValueError, match='cannot read'):
        read(expr='rate(x[$__rate_interval])')


def test_the_name_check_sees_a_misspelt_name(exported: dict[str, dict[str, set[str]]]) -> None:
    assert unknown(read(expr='max(llmscaler_leader)'), exported) == []
    assert unknown(read(expr='max by (variant) (wva_desired_replica)'), exported) == [
        'wva_desired_replica',
        'label variant',
    ]


# -- the alerts -------------------------------------------------------------------------------


def load(name: str) -> Doc:
    doc = yaml.safe_load((MONITORING / name).read_text())
    assert isinstance(doc, dict)
    return doc


def alert_rules() -> list[Doc]:
    return [rule for group in load('alerts.yaml')['groups'] for rule in group['rules']]


def test_alerts_read_only_what_the_controller_exports(
    exported: dict[str, dict[str, set[str]]],
) -> None:
    rules = alert_rules()
    assert len(rules) >= 5
    for rule in rules:
        names = read(expr=rule['expr'])
        assert names.metrics, rule['alert']
        assert unknown(names, exported) == [], rule['alert']
        # A bucket matched by `le` must be one the histogram has, in the form it is written.
        for label, _, value in names.matchers:
            if label == 'le':
                [bucket] = [m for m in names.metrics if m.endswith('_bucket')]
                assert value in exported[bucket]['le'], (rule['alert'], value)


def test_every_alert_has_a_severity_a_summary_a_description_and_its_runbook() -> None:
    sections = anchors(TROUBLESHOOTING.read_text())
    names = [rule['alert'] for rule in alert_rules()]
    assert len(set(names)) == len(names)
    for rule in alert_rules():
        assert re.fullmatch(r'Llmscaler[A-Z][A-Za-z]+', rule['alert'])
        assert rule['labels'] == {'severity': rule['labels']['severity']}
        assert rule['labels']['severity'] in ('critical', 'warning')
        annotations = rule['annotations']
        assert set(annotations) == {'summary', 'description', 'runbook_url'}, rule['alert']
        assert annotations['summary'].strip()
        assert len(annotations['description']) > 40
        url = annotations['runbook_url']
        assert url.startswith(RUNBOOKS)
        # One section per alert, under the alert's own name.
        assert url.removeprefix(RUNBOOKS) == rule['alert'].lower()
        assert rule['alert'].lower() in sections, rule['alert']


def anchors(markdown: str) -> set[str]:
    """The anchors of a page's headings, as GitHub makes them (lower case, punctuation dropped,
    spaces to hyphens), outside fenced code."""
    out: set[str] = set()
    fenced = False
    for line in markdown.splitlines():
        if line.startswith('```'):
            fenced = not fenced
        elif not fenced and (heading := re.match(r'#{1,6} (.+)', line)):
            text = re.sub(r'[^\w\- ]', '', heading[1].strip().lower())
            out.add(text.replace(' ', '-'))
    return out


def test_the_anchor_rule_is_githubs() -> None:
    page = '# Top\n## A variant does not scale\n```\n# not a heading\n```\n### `x` (y)!\n'
    assert anchors(page) == {'top', 'a-variant-does-not-scale', 'x-y'}


def test_every_alert_has_series_that_fire_it_and_series_that_do_not() -> None:
    """Per alert, a test whose input fires it, and a test whose input never does (an evaluation
    before a `for:` has passed is not enough: the series themselves must not qualify)."""
    tests = load('alerts-test.yaml')
    assert tests['rule_files'] == ['alerts.yaml']
    kinds: dict[str, set[bool]] = {}
    for test in tests['tests']:
        fires: dict[str, bool] = {}
        for case in test['alert_rule_test']:
            name = case['alertname']
            fires[name] = fires.get(name, False) or bool(case.get('exp_alerts'))
        for name, fired in fires.items():
            kinds.setdefault(name, set()).add(fired)
    assert kinds == {rule['alert']: {True, False} for rule in alert_rules()}


def test_alert_tests_feed_series_the_controller_exports(
    exported: dict[str, dict[str, set[str]]],
) -> None:
    """Input series under another name would test an alert on metrics that never exist."""
    allowed = label_names(exported)
    for test in load('alerts-test.yaml')['tests']:
        for series in test['input_series']:
            names = read(expr=series['series'])
            assert names.metrics <= set(exported), series
            assert names.labels <= allowed, series


@pytest.fixture(params=['path', 'built'], ids=['debian', 'prometheus-3'])
def promtool(request: pytest.FixtureRequest) -> str:
    if request.param == 'path':
        return need_program('promtool')
    built = binaries.find('promtool')
    if built is None:
        pytest.skip(
            'no Prometheus 3 promtool: python -m llmscaler.devcluster.binaries build prometheus'
        )
    return str(built)


def run(promtool: str, *args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [promtool, *args], capture_output=True, text=True, cwd=cwd, timeout=120, check=False
    )


def test_promtool_checks_the_rules(promtool: str) -> None:
    done = run(promtool, 'check', 'rules', 'alerts.yaml', cwd=MONITORING)
    assert done.returncode == 0, done.stdout + done.stderr
    assert f'SUCCESS: {len(alert_rules())} rules found' in done.stdout


def test_promtool_runs_the_alert_tests(promtool: str) -> None:
    done = run(promtool, 'test', 'rules', 'alerts-test.yaml', cwd=MONITORING)
    assert done.returncode == 0, done.stdout + done.stderr
    assert 'SUCCESS' in done.stdout


@pytest.mark.parametrize(
    'broken',
    [
        # Always firing (with no label but severity): each alert's case that must not fire fails.
        'vector(1)',
        # Never firing: each alert's case that must fire fails.
        'vector(1) < 0',
    ],
    ids=['always', 'never'],
)
def test_the_alert_tests_fail_on_broken_rules(promtool: str, tmp_path: Path, broken: str) -> None:
    rules = load('alerts.yaml')
    for rule in (r for g in rules['groups'] for r in g['rules']):
        rule['expr'] = broken
    (tmp_path / 'alerts.yaml').write_text(yaml.safe_dump(rules), encoding='utf-8')
    shutil.copy(MONITORING / 'alerts-test.yaml', tmp_path)
    done = run(promtool, 'test', 'rules', 'alerts-test.yaml', cwd=tmp_path)
    assert done.returncode != 0
    failed = set(re.findall(r'alertname: (\w+)', done.stdout + done.stderr))
    assert failed == {rule['alert'] for rule in alert_rules()}


# -- the dashboard ----------------------------------------------------------------------------


def dashboard() -> Doc:
    doc = json.loads((MONITORING / 'dashboard.json').read_text())
    assert isinstance(doc, dict)
    return doc


def panels(doc: Doc) -> Iterator[Doc]:
    for panel in doc['panels']:
        yield panel
        yield from panel.get('panels', [])


def promql(grafana: str) -> str:
    """A dashboard query with Grafana's variables replaced by PromQL that means the same."""
    for variable, standin in sorted(GRAFANA.items(), key=lambda kv: -len(kv[0])):
        grafana = grafana.replace(variable, standin)
    assert '$' not in grafana, grafana
    return grafana


def queries(doc: Doc) -> Iterator[tuple[str, str]]:
    """(where, PromQL) of every panel target and every query variable's selector."""
    for panel in panels(doc):
        for target in panel.get('targets', []):
            yield f'panel {panel["id"]} {target["refId"]}', promql(target['expr'])
    for variable in doc['templating']['list']:
        if variable['type'] == 'query':
            found = re.fullmatch(r'label_values\((.+), *(\w+)\)', variable['query']['query'])
            assert found, variable
            yield f'variable {variable["name"]}', promql(found[1])
            yield f'variable {variable["name"]} label', f'sum by ({found[2]}) ({promql(found[1])})'


def test_the_dashboard_is_grafana_json_with_its_variables() -> None:
    doc = dashboard()
    assert doc['uid']
    assert doc['title']
    assert isinstance(doc['schemaVersion'], int)
    variables = {v['name']: v for v in doc['templating']['list']}
    assert set(variables) == {'datasource', 'namespace', 'variant'}
    assert (variables['datasource']['type'], variables['datasource']['query']) == (
        'datasource',
        'prometheus',
    )
    ids = [p['id'] for p in panels(doc)]
    assert len(ids) == len(set(ids))
    for panel in panels(doc):
        place = panel['gridPos']
        assert place['x'] >= 0, panel['title']
        assert place['x'] + place['w'] <= 24, panel['title']
        if panel['type'] == 'row':
            continue
        # Every panel queries, through the chosen data source.
        assert panel['targets'], panel['title']
        assert panel['datasource'] == {'type': 'prometheus', 'uid': '${datasource}'}
        for target in panel['targets']:
            assert target['expr'].strip(), panel['title']
            assert target['datasource'] == panel['datasource']


def test_the_dashboard_reads_only_what_the_controller_exports(
    exported: dict[str, dict[str, set[str]]],
) -> None:
    seen: set[str] = set()
    for where, expr in queries(dashboard()):
        names = read(expr=expr)
        assert names.metrics, where
        assert unknown(names, exported) == [], where
        seen |= names.metrics
    # What the dashboard is for: these families are all on it.
    for family in (
        'wva_desired_replicas',
        'wva_current_replicas',
        'llmscaler_decisions_total',
        'wva_optimization_duration_seconds_bucket',
        'wva_errors_total',
        'llmscaler_leader',
        'llmscaler_scale_from_zero_seconds_bucket',
        'wva_available_gpus',
    ):
        assert family in seen, family


@pytest.fixture
def dashboard_check() -> str:
    built = binaries.find('grafana-dashboard-check')
    if built is None:
        pytest.skip(
            'no grafana-dashboard-check: python -m llmscaler.devcluster.binaries build grafana-sdk'
        )
    return str(built)


def test_the_dashboard_decodes_strictly_as_grafana_s_schema(
    dashboard_check: str, tmp_path: Path
) -> None:
    # The Grafana Foundation SDK's dashboard schema, with Grafana's built-in panels' options.
    path = MONITORING / 'dashboard.json'
    done = run(dashboard_check, str(path), cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert f'{len(dashboard()["panels"])} panels: ok' in done.stdout
    # A panel option its plugin lacks, and a unit that is not a string, are refused by path.
    broken = dashboard()
    stat = next(i for i, p in enumerate(broken['panels']) if p['type'] == 'stat')
    broken['panels'][stat]['options']['colour'] = 'red'
    series = next(i for i, p in enumerate(broken['panels']) if p['type'] == 'timeseries')
    broken['panels'][series]['fieldConfig']['defaults']['unit'] = 3
    (tmp_path / 'broken.json').write_text(json.dumps(broken))
    done = run(dashboard_check, 'broken.json', cwd=tmp_path)
    assert done.returncode == 1
    assert f"panels[{stat}].options.Options: unexpected field 'colour'" in done.stderr
    assert f'panels[{series}].fieldConfig' in done.stderr


def test_promtool_parses_every_dashboard_query(promtool: str, tmp_path: Path) -> None:
    rules = [
        {'record': f'dashboard:query_{index}', 'expr': expr}
        for index, (_, expr) in enumerate(queries(dashboard()))
    ]
    (tmp_path / 'queries.yaml').write_text(
        yaml.safe_dump({'groups': [{'name': 'dashboard', 'rules': rules}]}), encoding='utf-8'
    )
    done = run(promtool, 'check', 'rules', 'queries.yaml', cwd=tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    assert f'SUCCESS: {len(rules)} rules found' in done.stdout
