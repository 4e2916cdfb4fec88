"""bench/from_zero.py: a small cluster's wakes run to the end in both modes on either backend,
each model woken through its cheapest variant; `--models` keeps the full run's proportions.

Sizes are small and nothing is timed. On the real control plane the test is skipped without
the binaries, and fails with CI=true (the `backend` fixture of test_cycle.py).
"""

from __future__ import annotations

import pytest

from tests.support.bench_scripts import load
from tests.unit.bench.test_cycle import backend, bench_output, run_bench

script = load('from_zero')

__all__ = ['backend']  # the fixture, shared with test_cycle.py


@pytest.mark.parametrize('mode', ['pools', 'selector'])
def test_three_models_are_woken_through_their_cheapest_variant(backend: str, mode: str) -> None:
    printed = bench_output(
        'bench/from_zero.py', '--models', '3', '--mode', mode, '--backend', backend
    )
    pools = 3 if mode == 'pools' else 0
    assert f'InferencePools: {pools}; EPP sources: {pools}\n' in printed
    assert 'variants at zero: 6; wakes: 1 one by one, 1 burst\n' in printed
    assert 'cheapest variant woken: 2 of 2\n' in printed
    assert 'baseline: bare /scale GET+PATCH    n=1 ' in printed


def test_a_smaller_cluster_keeps_the_proportions_of_the_full_run() -> None:
    assert script._counts(script.MODELS) == (script.WAKES, script.BURST, script.BARE)
    assert script._counts(3) == (1, 1, 1)
    assert sum(script._counts(125)) <= 125


def test_models_out_of_range_are_refused() -> None:
    done = run_bench('bench/from_zero.py', '--models', '2')
    assert done.returncode == 2
    assert '--models must be in [3, 250]' in done.stderr
