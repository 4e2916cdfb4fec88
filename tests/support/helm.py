"""The Helm chart (deploy/helm/llmscaler) rendered and linted by a real helm binary.

Why: a chart is Go templates and a JSON schema that only helm evaluates; rendering it with the
pinned helm (built from its Go module by `llmscaler.devcluster.binaries`, see
tests/support/prerequisites.py) is the only faithful check of what `helm install` would apply.

What: `Helm` runs one helm binary with its cache, configuration and data folders in a private
directory (so no user setting or repository leaks in): `render` gives the objects of
`helm template` as dicts (CRDs included), `refusal` the error of values helm refuses, `lint` the
output of `helm lint --strict`. Values are passed as one file. Every render names the Kubernetes
version (`KUBE_VERSION`, the release the manifests are validated against): a helm built from its
module without release flags assumes an old one, which the chart's kubeVersion refuses.

What fails: `render` and `lint` raise AssertionError with helm's output when helm exits
non-zero; `refusal` raises it when helm accepts the values.
"""

from __future__ import annotations

import json
import os
import subprocess
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

import yaml

from tests.support.paths import ROOT

CHART: Final = ROOT / 'deploy' / 'helm' / 'llmscaler'
KUBE_VERSION: Final = '1.34.0'
RELEASE: Final = 'llmscaler'
NAMESPACE: Final = 'llmscaler-system'
Doc = dict[str, Any]


@dataclass(frozen=True, slots=True)
class Helm:
    """One helm binary and the private folder it keeps its state in."""

    binary: Path
    home: Path

    def run(
        self, *args: str, values: Mapping[str, Any] | None = None
    ) -> subprocess.CompletedProcess[str]:
        """helm `args` (plus `-f` with `values`, when given), its output captured."""
        extra: list[str] = []
        if values is not None:
            # JSON is YAML: the values reach helm exactly as given, types included.
            with tempfile.NamedTemporaryFile(
                'w', suffix='.json', dir=self.home, delete=False, encoding='utf-8'
            ) as file:
                json.dump(values, file)
            extra = ['-f', file.name]
        env = {
            'PATH': os.environ.get('PATH', ''),
            'HOME': str(self.home),
            'HELM_CACHE_HOME': str(self.home / 'cache'),
            'HELM_CONFIG_HOME': str(self.home / 'config'),
            'HELM_DATA_HOME': str(self.home / 'data'),
        }
        return subprocess.run(
            [str(self.binary), *args, *extra],
            capture_output=True,
            text=True,
            env=env,
            timeout=120,
            check=False,
        )

    def template(
        self,
        *,
        values: Mapping[str, Any] | None = None,
        namespace: str = NAMESPACE,
        kube_version: str = KUBE_VERSION,
        options: Sequence[str] = (),
    ) -> subprocess.CompletedProcess[str]:
        """`helm template` of the chart, CRDs included, as helm answered."""
        return self.run(
            'template',
            RELEASE,
            str(CHART),
            '--namespace',
            namespace,
            '--kube-version',
            kube_version,
            '--include-crds',
            *options,
            values=values,
        )

    def render(
        self, *, values: Mapping[str, Any] | None = None, namespace: str = NAMESPACE
    ) -> list[Doc]:
        """The rendered objects, in helm's order."""
        done = self.template(values=values, namespace=namespace)
        assert done.returncode == 0, done.stderr
        return [doc for doc in yaml.safe_load_all(done.stdout) if doc]

    def refusal(self, *, values: Mapping[str, Any]) -> str:
        """helm's error for `values` it must refuse."""
        done = self.template(values=values)
        assert done.returncode != 0, f'helm accepted {values!r}'
        return done.stderr

    def lint(self, *, values: Mapping[str, Any] | None = None) -> str:
        """The output of `helm lint --strict`, which must pass."""
        done = self.run('lint', '--strict', str(CHART), values=values)
        assert done.returncode == 0, done.stdout + done.stderr
        return done.stdout
