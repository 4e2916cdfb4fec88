"""`llmscaler demo`'s options, load profile and retention (running it: tests/e2e/test_demo.py).

Worked numbers: with the default 6 min the load is 0.5 req/s for 18 s, rises to 8 req/s by 72 s,
stays there until 126 s, falls back to 0.5 req/s by 162 s, stays low until 252 s, stops until
313 s (the retention is a third of those 61 s: 20 s) and comes back at 1 req/s.
"""

from __future__ import annotations

import itertools
import socket
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from llmscaler import cli
from llmscaler.devcluster import binaries, demo
from llmscaler.devcluster.cluster import CONTROL_PLANE_BINARIES
from llmscaler.devcluster.demo import (
    HIGH_RATE,
    LOW_RATE,
    PROFILE,
    RATE_STEP,
    RETURN_RATE,
    parse_duration,
    parse_options,
    phase_at,
    rate_at,
    retention,
)


@pytest.mark.parametrize(
    ('text', 'seconds'),
    [('360', 360.0), ('90s', 90.0), ('6m', 360.0), ('1.5h', 5400.0), (' 20s ', 20.0)],
)
def test_durations(text: str, seconds: float) -> None:
    assert parse_duration(text) == seconds


@pytest.mark.parametrize(
    'text', ['0', '0s', '-1', 'nan', 'inf', '1e999', '25h', '6 min', '', 's', '1d', '3x']
)
def test_bad_durations_are_refused(text: str) -> None:
    with pytest.raises(ValueError, match=r'duration|at most 24h'):
        parse_duration(text)


@pytest.mark.parametrize(
    ('argv', 'named'),
    [
        (['--duration', 'soon'], '--duration'),
        (['--duration', '-5'], '--duration'),
        (['--port', '70000'], '--port'),
        (['--port', 'http'], '--port'),
        (['--workdir', '/nonexistent/demo'], '--workdir'),
        (['--prometheus'], '--prometheus'),
        (['--dur', '5m'], '--dur'),
        (['--control-plane', '--inference-pools'], '--inference-pools'),
        (['--control-plane', '--port', '8001'], '--port'),
        (['--control-plane', '--fake-api'], '--fake-api'),
        (['--policy', 'hpa'], '--policy'),
    ],
)
def test_a_bad_option_is_one_line_and_exit_2(
    argv: list[str], named: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exited:
        cli.main(['demo', *argv])
    assert exited.value.code == 2
    err = capsys.readouterr().err
    assert err.count('\n') == 1, err
    assert err.startswith('llmscaler demo: '), err
    assert named in err, err


def test_options_default_and_given(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv('LLMSCALER_TOOLS_CACHE', str(tmp_path / 'nothing built'))
    default = parse_options([])
    assert (default.duration, default.port, default.prometheus, default.scale_to_zero) == (
        360.0,
        0,
        True,
        True,
    )
    assert default.workdir is None
    assert not default.control_plane
    assert default.policy == 'wva'
    assert parse_options(['--policy', 'predictive']).policy == 'predictive'
    assert parse_options(['--control-plane']).control_plane
    given_ = parse_options(
        [
            *('--duration', '2m', '--port', '8001'),
            *('--no-prometheus', '--no-scale-to-zero', '--workdir', str(tmp_path)),
        ]
    )
    assert (given_.duration, given_.port, given_.prometheus, given_.scale_to_zero) == (
        120.0,
        8001,
        False,
        False,
    )
    assert given_.workdir == tmp_path


def test_a_port_in_use_is_one_line_and_exit_2(capsys: pytest.CaptureFixture[str]) -> None:
    with socket.socket() as taken:
        taken.bind(('127.0.0.1', 0))
        taken.listen()
        port = taken.getsockname()[1]
        assert not demo.port_free(port)
        assert cli.main(['demo', '--port', str(port)]) == 2
    err = capsys.readouterr().err
    assert err == f'llmscaler demo: --port: 127.0.0.1:{port} is in use\n'


def test_the_profile_goes_up_down_to_zero_and_back() -> None:
    assert [p.start for p in PROFILE] == sorted({p.start for p in PROFILE})
    assert PROFILE[0].start == 0.0
    rates = [rate_at(fraction=i / 1000) for i in range(1001)]
    assert rates[0] == LOW_RATE
    assert max(rates) == HIGH_RATE
    assert rate_at(fraction=0.3) == HIGH_RATE
    assert rate_at(fraction=0.6) == LOW_RATE
    assert rate_at(fraction=72 / 360) == HIGH_RATE
    assert rate_at(fraction=60 / 360) < HIGH_RATE
    assert rate_at(fraction=0.8) == 0.0
    assert rates[-1] == RETURN_RATE
    # Up, then down (to low, then to zero), then back up: the sign changes of the rate's steps.
    moves = [b - a for a, b in itertools.pairwise(rates) if b != a]
    signs = [m > 0 for m in moves]
    changes = [s for i, s in enumerate(signs) if i == 0 or s != signs[i - 1]]
    assert changes == [True, False, True], moves


@given(st.floats(min_value=0.0, max_value=1.0))
def test_every_rate_is_a_step_between_zero_and_high(fraction: float) -> None:
    rate = rate_at(fraction=fraction)
    assert 0.0 <= rate <= HIGH_RATE
    assert rate / RATE_STEP == round(rate / RATE_STEP)
    assert phase_at(fraction=fraction).start <= fraction


@given(st.floats(min_value=1.0, max_value=24 * 3600.0))
def test_the_retention_ends_inside_the_no_load_phase(duration: float) -> None:
    no_load = next(p for p in PROFILE if p.rate == p.to == 0.0)
    after = PROFILE[PROFILE.index(no_load) + 1]
    window = (after.start - no_load.start) * duration
    assert retention(duration) >= 2.0
    if window >= 6.0:
        assert retention(duration) <= window / 2
    assert retention(360.0) == 20.0


def test_the_kubectl_commands_name_the_kubeconfig(tmp_path: Path) -> None:
    kubeconfig = tmp_path / 'kubeconfig'
    commands = demo.kubectl_commands(kubeconfig=kubeconfig)
    assert all(c.startswith(f'kubectl --kubeconfig {kubeconfig} ') for c in commands)
    assert f'kubectl --kubeconfig {kubeconfig} get va -w' in commands
    assert any(' describe va cheap' in c for c in commands)
    assert any(' get events' in c for c in commands)


def test_the_scale_to_zero_configmap_has_the_retention() -> None:
    configmap = demo.scale_to_zero_configmap(retention_seconds=20.0)
    assert configmap['metadata']['name'] == 'wva-model-scale-to-zero-config'
    assert configmap['metadata']['namespace'] == demo.CONTROLLER_NAMESPACE
    assert configmap['data'] == {'default': 'enable_scale_to_zero: true\nretention_period: 20s'}


def test_an_unbuilt_control_plane_is_one_line_and_exit_1(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv('LLMSCALER_TOOLS_CACHE', str(tmp_path))
    assert cli.main(['demo', '--control-plane', '--no-prometheus']) == 1
    err = capsys.readouterr().err
    assert err.count('\n') == 1, err
    assert err.startswith('llmscaler demo: --control-plane: '), err
    assert 'is not built (make binaries' in err, err


def test_the_real_control_plane_is_the_default_once_built(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv('LLMSCALER_TOOLS_CACHE', str(tmp_path))
    assert not parse_options([]).control_plane
    for name in CONTROL_PLANE_BINARIES:
        family = next(f for f in binaries.FAMILIES.values() if name in f.binaries)
        binaries.folder(family).mkdir(parents=True, exist_ok=True)
        path = binaries.folder(family) / name
        path.write_text('')
        path.chmod(0o755)
        expected = name == CONTROL_PLANE_BINARIES[-1]  # only once every one is there
        assert parse_options([]).control_plane == expected, name
    assert not parse_options(['--fake-api']).control_plane
    assert not parse_options(['--port', '8001']).control_plane
    assert not parse_options(['--inference-pools']).control_plane
