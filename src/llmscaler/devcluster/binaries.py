"""Binaries built from pinned Go modules: Kubernetes, etcd, a current Prometheus, Helm, KEDA, and
a strict check of Grafana dashboards.

Why: the tests and the demo run the real control plane (kube-apiserver, kube-controller-manager,
kube-scheduler, etcd), kubectl, a Prometheus 3 server beside Debian's 2.42, helm, and KEDA's
operator and metrics server (an HPA following `wva_desired_replicas`), and a check of the
Grafana dashboard against the Grafana Foundation SDK's dashboard schema (Grafana itself is under
the AGPL and is not built). None of them has a
Debian package recent enough, and no download site or image registry is reachable;
the Go module proxy is. Each family is one small Go module under `tools/` whose go.mod and go.sum
pin the release, so a build is reproducible; the binaries land in a cache outside the work tree,
keyed by family and version, and are built once per machine.

What: `FAMILIES` (name, version, module folder, the binaries and the packages they come from),
`cache_root()` (`$LLMSCALER_TOOLS_CACHE`, else `~/.cache/llmscaler/tools`), `find(binary)` (the
cached path, or None), `build(family, ...)` (builds into a temporary folder, then renames it
into place, so a build cut short leaves no half-filled folder that `find` would trust),
`module_source(family, module)` (a required module's folder in the Go module cache, for the
files a release ships beside its code: KEDA's CRDs and RBAC).
`python -m llmscaler.devcluster.binaries build [FAMILY ...]` builds what is missing, `path
BINARY` prints a binary's path, `list` prints every binary and whether it is built.

What fails: `build` raises `BuildFailed` (with the end of go's output) when `go` is absent or
a build fails; `find` and `module_source` never raise (None: not built, not downloaded). The
CLI exits 2 with one line for an unknown family or binary, and 1 when a build fails or `path`
names a binary not built yet.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

__all__ = [
    'FAMILIES',
    'BuildFailed',
    'Family',
    'build',
    'cache_root',
    'find',
    'folder',
    'main',
    'module_source',
]

# Where the Go modules live: tools/ beside src/ in a checkout (the binaries are a development
# aid; an installed wheel has no tools/ and no need to build them).
_TOOLS = Path(__file__).resolve().parents[3] / 'tools'


@dataclass(frozen=True, slots=True)
class Family:
    """Binaries built from one Go module at one release."""

    name: str
    version: str
    module: str  # the folder under tools/
    packages: tuple[tuple[str, str], ...]  # (binary, Go package)
    ldflags: tuple[str, ...] = ()
    sources: tuple[str, ...] = ()
    """Go modules whose files (not code) are read at run time, such as KEDA's release manifests:
    `build` makes sure they are in the Go module cache, built binaries or not."""

    @property
    def binaries(self) -> tuple[str, ...]:
        return tuple(binary for binary, _ in self.packages)


def _k8s_version(version: str) -> tuple[str, ...]:
    """The -X flags Kubernetes' own build sets, so that `kubectl version` and /version report
    the release rather than v0.0.0 (kubectl warns of skew against a v0.0.0 server)."""
    major, minor, _ = version.lstrip('v').split('.')
    flags = []
    for package in ('k8s.io/component-base/version', 'k8s.io/client-go/pkg/version'):
        flags += [
            f'-X {package}.gitVersion={version}',
            f'-X {package}.gitMajor={major}',
            f'-X {package}.gitMinor={minor}',
            f'-X {package}.gitTreeState=clean',
        ]
    return tuple(flags)


FAMILIES: dict[str, Family] = {
    family.name: family
    for family in (
        Family(
            name='kubernetes',
            version='v1.34.4',
            module='k8s',
            packages=(
                ('kube-apiserver', 'k8s.io/kubernetes/cmd/kube-apiserver'),
                ('kube-controller-manager', 'k8s.io/kubernetes/cmd/kube-controller-manager'),
                ('kube-scheduler', 'k8s.io/kubernetes/cmd/kube-scheduler'),
                ('kubectl', 'k8s.io/kubernetes/cmd/kubectl'),
            ),
            ldflags=_k8s_version('v1.34.4'),
        ),
        Family(
            name='etcd',
            version='v3.6.16',
            module='etcd',
            packages=(('etcd', './cmd/etcd'),),
        ),
        Family(
            name='prometheus',
            version='v3.16.0',
            module='prometheus',
            packages=(
                ('prometheus', 'github.com/prometheus/prometheus/cmd/prometheus'),
                ('promtool', 'github.com/prometheus/prometheus/cmd/promtool'),
            ),
            ldflags=('-X github.com/prometheus/common/version.Version=3.16.0',),
        ),
        Family(
            name='helm',
            version='v3.19.5',
            module='helm',
            packages=(('helm', 'helm.sh/helm/v3/cmd/helm'),),
            # The Kubernetes release helm assumes without a cluster (`helm template`), set as
            # helm's own Makefile sets it, from the client-go it is built with (v0.34).
            ldflags=(
                '-X helm.sh/helm/v3/internal/version.version=v3.19.5',
                '-X helm.sh/helm/v3/pkg/chartutil.k8sVersionMajor=1',
                '-X helm.sh/helm/v3/pkg/chartutil.k8sVersionMinor=34',
                '-X helm.sh/helm/v3/pkg/lint/rules.k8sVersionMajor=1',
                '-X helm.sh/helm/v3/pkg/lint/rules.k8sVersionMinor=34',
            ),
        ),
        Family(
            name='keda',
            version='v2.21.0',
            module='keda',
            # The operator (ScaledObjects into HPAs, and the scalers behind a gRPC service) and
            # its external-metrics API server; the admission webhooks are not built.
            packages=(
                ('keda-operator', 'github.com/kedacore/keda/v2/cmd/operator'),
                ('keda-adapter', 'github.com/kedacore/keda/v2/cmd/adapter'),
            ),
            # As KEDA's release build sets it (the tag without its v), for its start-up banner.
            ldflags=('-X github.com/kedacore/keda/v2/version.Version=2.21.0',),
            sources=('github.com/kedacore/keda/v2',),
        ),
        Family(
            name='grafana-sdk',
            version='v0.0.22',
            module='grafana',
            # Grafana itself is not built (AGPL): the dashboard is decoded strictly against the
            # schema of the Grafana Foundation SDK (Apache-2.0), generated from Grafana's own.
            packages=(('grafana-dashboard-check', './cmd/grafana-dashboard-check'),),
        ),
    )
}


class BuildFailed(RuntimeError):
    """`go` is missing or a build failed; the message ends with go's output."""


def cache_root() -> Path:
    """`$LLMSCALER_TOOLS_CACHE`, else `~/.cache/llmscaler/tools` (outside the work tree)."""
    configured = os.environ.get('LLMSCALER_TOOLS_CACHE')
    return Path(configured) if configured else Path.home() / '.cache' / 'llmscaler' / 'tools'


def folder(family: Family) -> Path:
    """Where `family`'s binaries live once built: one folder per family, version and build
    recipe (packages and flags), so a changed recipe builds afresh instead of reusing."""
    recipe = json.dumps([family.module, family.packages, family.ldflags]).encode()
    return cache_root() / f'{family.name}-{family.version}-{hashlib.sha256(recipe).hexdigest()[:8]}'


def _family_of(binary: str) -> Family | None:
    for name in sorted(FAMILIES):
        if binary in FAMILIES[name].binaries:
            return FAMILIES[name]
    return None


def find(binary: str) -> Path | None:
    """The cached `binary`, or None when it is not built (or no family builds it)."""
    family = _family_of(binary)
    if family is None:
        return None
    path = folder(family) / binary
    return path if path.is_file() and os.access(path, os.X_OK) else None


def module_source(
    family: Family, module: str, *, go: str | None = None, tools: Path = _TOOLS
) -> Path | None:
    """The folder of Go module `module`, at the version `family`'s go.mod pins, in the Go
    module cache (files a release ships beside its code, such as KEDA's manifests); None when
    go is absent or the module is not downloaded yet (`build` downloads it). Never downloads."""
    go = go or shutil.which('go')
    if go is None:
        return None
    try:
        done = subprocess.run(
            [go, 'list', '-m', '-f', '{{.Dir}}', module],
            cwd=tools / family.module,
            env={**os.environ, 'GOFLAGS': '-mod=readonly', 'GOPROXY': 'off'},
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    found = done.stdout.strip()
    return Path(found) if done.returncode == 0 and found else None


def build(family: Family, *, go: str | None = None, tools: Path = _TOOLS) -> Path:
    """Build `family` into the cache unless every binary is there already, and download its
    `sources` if the Go module cache lacks them (a machine whose Go caches were emptied while the
    tools cache was kept); its folder."""
    target = folder(family)
    built = all(find(binary) is not None for binary in family.binaries)
    go = go or shutil.which('go')
    if go is None:
        if built:  # what reads the sources says so when they are missing
            return target
        raise BuildFailed(
            'no go on PATH: the Go toolchain builds these binaries (go.dev/doc/install)'
        )
    missing = [m for m in family.sources if module_source(family, m, go=go, tools=tools) is None]
    if built and not missing:
        return target
    for module in missing:
        done = subprocess.run(
            [go, 'mod', 'download', module],
            cwd=tools / family.module,
            env={**os.environ, 'GOFLAGS': '-mod=readonly'},
            capture_output=True,
            text=True,
            check=False,
        )
        if done.returncode != 0:
            output = (done.stdout + done.stderr)[-3000:]
            raise BuildFailed(f'go mod download {module} ({family.name}):\n{output}')
    if built:
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    partial = Path(tempfile.mkdtemp(prefix=f'.{target.name}-', dir=target.parent))
    partial.chmod(0o755)  # mkdtemp's 0700 would hide the binaries from other users
    try:
        for binary, package in family.packages:
            command = [go, 'build', '-trimpath', '-o', str(partial / binary)]
            command += ['-ldflags', ' '.join(('-s', '-w', *family.ldflags))]
            done = subprocess.run(
                [*command, package],
                cwd=tools / family.module,
                env={**os.environ, 'GOFLAGS': '-mod=readonly'},
                capture_output=True,
                text=True,
                check=False,
            )
            if done.returncode != 0:
                output = (done.stdout + done.stderr)[-3000:]
                raise BuildFailed(f'go build {package} ({family.name} {family.version}):\n{output}')
        shutil.rmtree(target, ignore_errors=True)
        partial.rename(target)
    finally:
        shutil.rmtree(partial, ignore_errors=True)
    return target


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog='python -m llmscaler.devcluster.binaries',
        description='Build and find the binaries of the pinned Go modules under tools/.',
    )
    verbs = parser.add_subparsers(dest='verb', required=True)
    build_verb = verbs.add_parser('build', help='build the families not in the cache yet')
    build_verb.add_argument('families', nargs='*', metavar='FAMILY')
    path_verb = verbs.add_parser('path', help="print a built binary's path")
    path_verb.add_argument('binary')
    verbs.add_parser('list', help='list every binary and whether it is built')
    args = parser.parse_args(argv)
    if args.verb == 'build':
        unknown = sorted(set(args.families) - set(FAMILIES))
        if unknown:
            parser.exit(2, f'error: unknown family {unknown[0]!r} (known: {", ".join(FAMILIES)})\n')
        for name in args.families or list(FAMILIES):
            try:
                print(f'{name} {FAMILIES[name].version}: {build(FAMILIES[name])}', flush=True)
            except BuildFailed as failed:
                print(f'error: {failed}', file=sys.stderr)
                return 1
        return 0
    if args.verb == 'path':
        if _family_of(args.binary) is None:
            parser.exit(2, f'error: no family builds {args.binary!r}\n')
        path = find(args.binary)
        if path is None:
            print(f'error: {args.binary} is not built (make binaries)', file=sys.stderr)
            return 1
        print(path)
        return 0
    for name, family in FAMILIES.items():
        for binary in family.binaries:
            path = find(binary)
            print(f'{name}\t{family.version}\t{binary}\t{path or "not built"}')
    return 0


if __name__ == '__main__':
    sys.exit(main())
