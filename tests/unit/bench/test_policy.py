"""`bench/policy.py`: how it is told where to run its sweep."""

from __future__ import annotations

import argparse

import pytest

from tests.support.bench_scripts import load
from tests.support.ray_cluster import free_port, ray_program

policy = load('policy')


def test_a_ray_address_nobody_answers_stops_the_script_in_one_line(
    capsys: pytest.CaptureFixture[str],
) -> None:
    ray_program()  # Ray installed: the address is what is missing
    parser = argparse.ArgumentParser(prog='policy.py')
    policy.jobs_argument(parser)
    address = f'127.0.0.1:{free_port()}'
    args = parser.parse_args(['--ray', address, '--no-cache'])
    policy.check_jobs(parser, args)
    with pytest.raises(SystemExit) as stopped:
        policy.sweep_of(parser, args, label='t')
    assert stopped.value.code == 2
    err = capsys.readouterr().err
    assert err.startswith(f'policy.py: --ray {address}: no Ray cluster answers there')
    assert err.count('\n') == 1


def test_jobs_and_ray_are_one_or_the_other(capsys: pytest.CaptureFixture[str]) -> None:
    parser = argparse.ArgumentParser(prog='policy.py')
    policy.jobs_argument(parser)
    with pytest.raises(SystemExit):
        parser.parse_args(['--jobs', '2', '--ray', 'auto'])
    assert 'not allowed with argument' in capsys.readouterr().err
