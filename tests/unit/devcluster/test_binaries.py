"""`llmscaler.devcluster.binaries`: the cache of binaries built from the pinned Go modules.

The builds here run a stand-in `go` (a shell script that writes its arguments into the output
file), so they check what is asked of go, where the result lands and what a failure leaves
behind, in milliseconds. The real builds are what `make binaries` runs; the e2e and integration
suites use their output.
"""

from __future__ import annotations

import dataclasses
import os
import re
import stat
from pathlib import Path

import pytest

from llmscaler.devcluster import binaries
from tests.support import prerequisites


@pytest.fixture(autouse=True)
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    root = tmp_path / 'cache'
    monkeypatch.setenv('LLMSCALER_TOOLS_CACHE', str(root))
    return root


def _fake_go(tmp_path: Path, *, fail_on: str | None = None) -> str:
    """A `go` that writes its command line into the `-o` file, or fails for one package; every
    module is in its module cache (`go list -m` names a folder)."""
    script = tmp_path / 'go'
    failing = f'if [ "$last" = "{fail_on}" ]; then echo "cannot build $last" >&2; exit 1; fi'
    script.write_text(
        '#!/bin/sh\n'
        'if [ "$1" = "list" ]; then echo "/modcache/$5"; exit 0; fi\n'
        'all="$*"\n'
        'for a in "$@"; do last="$a"; done\n'
        f'{failing if fail_on else ""}\n'
        'while [ "$1" != "-o" ]; do shift; done\n'
        'out="$2"\n'
        'echo "cwd=$(pwd) GOFLAGS=$GOFLAGS" > "$out"\n'
        'echo "$all" >> "$out"\n'
        'for a in "$@"; do echo "$a" >> "$out"; done\n'
        'chmod +x "$out"\n'
    )
    script.chmod(script.stat().st_mode | stat.S_IXUSR)
    return str(script)


def _tools(tmp_path: Path) -> Path:
    tools = tmp_path / 'tools'
    for family in binaries.FAMILIES.values():
        (tools / family.module).mkdir(parents=True, exist_ok=True)
    return tools


def test_the_cache_is_keyed_by_family_version_and_recipe(cache: Path) -> None:
    family = binaries.FAMILIES['etcd']
    where = binaries.folder(family)
    assert where.parent == cache
    assert where.name.startswith(f'etcd-{family.version}-')
    flagged = dataclasses.replace(family, ldflags=('-X main.v=1',))
    assert binaries.folder(flagged) != where
    assert binaries.folder(dataclasses.replace(family)) == where


def test_the_default_cache_is_outside_the_work_tree(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv('LLMSCALER_TOOLS_CACHE')
    root = binaries.cache_root()
    assert root == Path.home() / '.cache' / 'llmscaler' / 'tools'
    repository = Path(binaries.__file__).resolve().parents[3]
    assert repository not in root.parents


def test_every_pinned_release_is_the_one_its_go_module_requires() -> None:
    repository = Path(binaries.__file__).resolve().parents[3]
    required = {
        'kubernetes': 'k8s.io/kubernetes',
        'etcd': 'go.etcd.io/etcd/server/v3',
        'prometheus': 'github.com/prometheus/prometheus',
        'helm': 'helm.sh/helm/v3',
        'keda': 'github.com/kedacore/keda/v2',
        'grafana-sdk': 'github.com/grafana/grafana-foundation-sdk/go',
    }
    assert sorted(required) == sorted(binaries.FAMILIES)
    for name, module in required.items():
        family = binaries.FAMILIES[name]
        go_mod = (repository / 'tools' / family.module / 'go.mod').read_text()
        found = re.search(rf'^\s*(?:require\s+)?{re.escape(module)} (v\S+)', go_mod, re.M)
        assert found is not None, f'{module} not required in tools/{family.module}/go.mod'
        # Prometheus publishes its 3.x server as the Go module version v0.3xx.y.
        version = family.version
        if name == 'prometheus':
            major, minor, patch = version.lstrip('v').split('.')
            version = f'v0.{int(major) * 100 + int(minor)}.{patch}'
        assert found.group(1) == version, name


def test_kubernetes_staging_modules_are_replaced_at_the_same_release() -> None:
    repository = Path(binaries.__file__).resolve().parents[3]
    go_mod = (repository / 'tools' / 'k8s' / 'go.mod').read_text()
    staging = re.findall(r'^\s*(k8s\.io/[\w-]+) => k8s\.io/[\w-]+ (v\S+)', go_mod, re.M)
    assert len(staging) >= 25
    release = binaries.FAMILIES['kubernetes'].version
    assert {version for _, version in staging} == {'v0' + release[2:]}


def test_keda_s_own_replace_and_exclude_lines_are_repeated() -> None:
    """A dependency's replace and exclude directives do not apply to the main module, so
    tools/keda must carry KEDA's, or it would build other versions than KEDA's release does."""
    family = binaries.FAMILIES['keda']
    source = binaries.module_source(family, 'github.com/kedacore/keda/v2')
    if source is None:
        prerequisites.missing('the KEDA module is not in the Go module cache (make binaries)')
    repository = Path(binaries.__file__).resolve().parents[3]
    ours = (repository / 'tools' / 'keda' / 'go.mod').read_text()
    directive = re.compile(r'^(?:replace|exclude) .*$', re.M)
    theirs = directive.findall((source / 'go.mod').read_text())
    assert theirs
    assert directive.findall(ours) == theirs


def test_module_source_is_the_folder_go_names_or_none(tmp_path: Path) -> None:
    family = binaries.FAMILIES['keda']
    tools = _tools(tmp_path)
    go = tmp_path / 'go'
    go.write_text(
        '#!/bin/sh\n'
        'echo "GOPROXY=$GOPROXY $*" > "$(dirname "$0")/asked"\n'
        'if [ "$5" = "absent" ]; then exit 1; fi\n'
        'echo /cache/$5@v1\n'
    )
    go.chmod(0o755)
    assert binaries.module_source(family, 'example.com/m', go=str(go), tools=tools) == Path(
        '/cache/example.com/m@v1'
    )
    # Never a download: the proxy is off.
    assert (tmp_path / 'asked').read_text() == 'GOPROXY=off list -m -f {{.Dir}} example.com/m\n'
    assert binaries.module_source(family, 'absent', go=str(go), tools=tools) is None
    assert binaries.module_source(family, 'm', go=str(tmp_path / 'no-go'), tools=tools) is None


def test_a_build_asks_go_for_each_binary_with_its_flags(tmp_path: Path) -> None:
    family = binaries.FAMILIES['kubernetes']
    tools = _tools(tmp_path)
    folder = binaries.build(family, go=_fake_go(tmp_path), tools=tools)
    assert folder == binaries.folder(family)
    for binary, package in family.packages:
        path = binaries.find(binary)
        assert path == folder / binary
        lines = path.read_text().splitlines()
        assert lines[0] == f'cwd={tools / "k8s"} GOFLAGS=-mod=readonly'
        assert lines[-1] == package
        ldflags = lines[lines.index('-ldflags') + 1]
        assert f'gitVersion={family.version}' in ldflags
        assert lines[1].startswith('build -trimpath -o ')


def test_a_built_family_is_reused_without_go(tmp_path: Path) -> None:
    family = binaries.FAMILIES['helm']
    tools = _tools(tmp_path)
    binaries.build(family, go=_fake_go(tmp_path), tools=tools)
    before = (binaries.folder(family) / 'helm').stat().st_mtime_ns
    binaries.build(family, go=str(tmp_path / 'no-such-go'), tools=tools)
    assert (binaries.folder(family) / 'helm').stat().st_mtime_ns == before


def test_a_built_family_whose_sources_are_gone_downloads_them(tmp_path: Path) -> None:
    # KEDA's binaries are cached, but the Go module cache no longer holds the module whose
    # manifests the install reads: `go mod download` fetches it, nothing is rebuilt.
    family = binaries.FAMILIES['keda']
    tools = _tools(tmp_path)
    binaries.build(family, go=_fake_go(tmp_path), tools=tools)
    go = tmp_path / 'go-offline'
    go.write_text(
        '#!/bin/sh\n'
        'echo "$*" >> "$(dirname "$0")/asked"\n'
        'if [ "$1" = "list" ]; then exit 1; fi\n'  # not in the module cache
        'if [ "$1" = "mod" ]; then exit 0; fi\n'
        'exit 3\n'
    )
    go.chmod(0o755)
    before = (binaries.folder(family) / 'keda-operator').stat().st_mtime_ns
    binaries.build(family, go=str(go), tools=tools)
    asked = (tmp_path / 'asked').read_text().splitlines()
    assert asked == [
        'list -m -f {{.Dir}} github.com/kedacore/keda/v2',
        'mod download github.com/kedacore/keda/v2',
    ]
    assert (binaries.folder(family) / 'keda-operator').stat().st_mtime_ns == before
    # A download that fails is a failed build, with go's words.
    go.write_text(
        '#!/bin/sh\nif [ "$1" = "list" ]; then exit 1; fi\necho "proxy said 403" >&2\nexit 1\n'
    )
    with pytest.raises(binaries.BuildFailed, match=r'go mod download github\.com/kedacore/keda/v2'):
        binaries.build(family, go=str(go), tools=tools)


def test_a_failed_build_leaves_nothing_that_find_would_trust(tmp_path: Path) -> None:
    family = binaries.FAMILIES['prometheus']
    tools = _tools(tmp_path)
    failing = _fake_go(tmp_path, fail_on='github.com/prometheus/prometheus/cmd/promtool')
    with pytest.raises(binaries.BuildFailed, match=r'cannot build .*promtool'):
        binaries.build(family, go=failing, tools=tools)
    assert binaries.find('prometheus') is None
    assert binaries.find('promtool') is None
    assert not binaries.cache_root().exists() or not any(binaries.cache_root().iterdir())


def test_without_go_the_build_says_so(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv('PATH', str(tmp_path))
    with pytest.raises(binaries.BuildFailed, match='no go on PATH'):
        binaries.build(binaries.FAMILIES['etcd'], tools=_tools(tmp_path))


def test_find_wants_an_executable_file(cache: Path) -> None:
    family = binaries.FAMILIES['etcd']
    binaries.folder(family).mkdir(parents=True)
    etcd = binaries.folder(family) / 'etcd'
    etcd.write_text('')
    assert binaries.find('etcd') is None
    etcd.chmod(0o755)
    assert binaries.find('etcd') == etcd
    assert binaries.find('kube-proxy') is None


def test_the_command_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    with pytest.raises(SystemExit) as exited:
        binaries.main(['build', 'kine'])
    assert exited.value.code == 2
    assert "unknown family 'kine'" in capsys.readouterr().err
    with pytest.raises(SystemExit) as exited:
        binaries.main(['path', 'kubelet'])
    assert exited.value.code == 2
    assert binaries.main(['path', 'etcd']) == 1
    assert 'etcd is not built (make binaries)' in capsys.readouterr().err
    monkeypatch.setenv('PATH', str(tmp_path))
    assert binaries.main(['build', 'etcd']) == 1
    assert 'no go on PATH' in capsys.readouterr().err
    etcd = binaries.folder(binaries.FAMILIES['etcd']) / 'etcd'
    etcd.parent.mkdir(parents=True)
    etcd.write_text('')
    etcd.chmod(0o755)
    assert binaries.main(['path', 'etcd']) == 0
    assert capsys.readouterr().out == f'{etcd}\n'
    assert binaries.main(['list']) == 0
    listed = capsys.readouterr().out.splitlines()
    assert f'etcd\t{binaries.FAMILIES["etcd"].version}\tetcd\t{etcd}' in listed
    assert len(listed) == sum(len(f.binaries) for f in binaries.FAMILIES.values())
    assert all(line.endswith('not built') for line in listed if '\tetcd\t' not in line)


def test_need_built_skips_locally_and_fails_in_ci(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv('CI', 'false')
    with pytest.raises(pytest.skip.Exception, match='etcd is not built'):
        prerequisites.need_built('etcd')
    monkeypatch.setenv('CI', 'true')
    with pytest.raises(pytest.fail.Exception, match='etcd is not built'):
        prerequisites.need_built('etcd')
    etcd = binaries.folder(binaries.FAMILIES['etcd']) / 'etcd'
    etcd.parent.mkdir(parents=True)
    etcd.write_text('')
    os.chmod(etcd, 0o755)
    assert prerequisites.need_built('etcd') == etcd
