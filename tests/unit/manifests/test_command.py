"""`llmscaler manifests` on the command line: inputs, output file, and every refusal as one line
with exit status 2 (nothing written)."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from llmscaler import cli
from tests.support.paths import ROOT

SAMPLE = ROOT / 'deploy' / 'samples' / 'llama-8b-a100.yaml'


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = cli.main(['manifests', *argv])
    out, err = capsys.readouterr()
    return code, out, err


def test_va_file_skips_other_kinds_and_takes_the_namespace(
    capsys: pytest.CaptureFixture[str],
) -> None:
    code, out, err = run(capsys, '--va', str(SAMPLE), '--namespace', 'llm-inference')
    assert (code, err) == (0, '')
    (doc,) = [d for d in yaml.safe_load_all(out) if d]
    assert doc['kind'] == 'ScaledObject'
    assert doc['metadata']['namespace'] == 'llm-inference'
    assert doc['spec']['maxReplicaCount'] == 4  # the VA's bound


def test_out_file(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    out_file = tmp_path / 'keda.yaml'
    code, out, _ = run(capsys, '--target', 'Deployment/a', '--out', str(out_file))
    assert (code, out) == (0, '')
    assert yaml.safe_load(out_file.read_text())['metadata']['name'] == 'a'


def bad_va(tmp_path: Path, text: str) -> str:
    path = tmp_path / 'va.yaml'
    path.write_text(text, encoding='utf-8')
    return str(path)


VA = (
    'apiVersion: llmd.ai/v1alpha1\nkind: VariantAutoscaling\nmetadata: {name: v}\n'
    'spec: {scaleTargetRef: {kind: %s, name: t}, modelID: m, maxReplicas: %d}\n'
)


@pytest.mark.parametrize(
    ('argv', 'message'),
    [
        ((), 'give --va FILE, --from-cluster or --target'),
        (('--target', 'Deployment/a', '--server', 'http://x'), 'applies to --from-cluster'),
        (('--from-cluster', '--server', 'http://x', '--kubeconfig', 'k'), 'give one of them'),
        (('--bogus',), 'unrecognized arguments'),
        (('--target', 'x'), 'expected KIND/NAME'),
        (('--target', 'Pod/x'), "kind 'Pod' is not supported"),
        (('--target', 'Deployment/Bad_Name'), 'not a valid Kubernetes name'),
        (('--target', 'Deployment/a', '--target', 'Deployment/a'), 'given twice'),
        (('--target', 'Deployment/a', '--max-replicas', '0'), 'integer >= 1'),
        (('--target', 'Deployment/a', '--max-replicas', '1'), 'profile prod needs maxReplicas'),
        (('--target', 'Deployment/a', '--queue-per-replica', 'nan'), 'finite number > 0'),
        (('--target', 'Deployment/a', '--kv-target', '1.5'), 'in (0, 1]'),
        (('--target', 'Deployment/a', '--profile', 'huge'), 'invalid choice'),
        (('--target', 'Deployment/a', '--actuation', 'metrics', '--profile', 'dev'), 'applies to'),
        (('--target', 'Deployment/a', '--via', 'keda'), 'applies to --actuation metrics'),
        (('--target', 'Deployment/a', '--actuation', 'metrics', '--unpaused'), 'ScaledObjects'),
        (('--target', 'Deployment/a', '--prometheus', 'prometheus:9090'), 'expected a URL'),
        (('--target', 'Deployment/a', '--series', 'pod="{pod}"'), 'placeholders'),
        (
            (
                '--target',
                'Deployment/a',
                '--actuation',
                'metrics',
                '--min-replicas',
                '5',
                '--max-replicas',
                '3',
            ),
            'above --max-replicas',
        ),
        (('--va', '/nonexistent/va.yaml'), 'cannot read'),
        (('--va', str(SAMPLE), '--max-replicas', '3'), 'applies to --target'),
    ],
)
def test_refusals_are_one_line(
    capsys: pytest.CaptureFixture[str], argv: tuple[str, ...], message: str
) -> None:
    code, out, err = run(capsys, *argv)
    assert code == 2
    assert out == ''
    assert err.count('\n') == 1
    assert err.startswith('llmscaler manifests: ')
    assert message in err


@pytest.mark.parametrize(
    ('text', 'message'),
    [
        ('kind: ConfigMap\nmetadata: {name: c}\n', 'no VariantAutoscaling'),
        ('- a\n- b\n', 'expected a Kubernetes object'),
        ('a: [1\n', 'va.yaml'),
        (VA % ('Job', 2), "kind 'Job' is not supported"),
        (VA % ('Deployment', 0), 'maxReplicas'),
        (VA % ('Deployment', 2) + '---\n' + VA % ('StatefulSet', 2), 'given twice'),
    ],
)
def test_bad_va_files(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, text: str, message: str
) -> None:
    code, out, err = run(capsys, '--va', bad_va(tmp_path, text))
    assert (code, out) == (2, '')
    assert err.count('\n') == 1
    assert message in err


def test_out_to_a_directory_is_refused(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    code, _, err = run(capsys, '--target', 'Deployment/a', '--out', str(tmp_path))
    assert code == 2
    assert 'is a directory' in err
