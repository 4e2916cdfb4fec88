"""The benchmark scripts of bench/, imported by the tests that check their logic.

Why: bench/ is a folder of scripts, not a package (each is run as `python bench/NAME.py`), so a
test reaches one by its path; this does it once for every test that needs one.
"""

from __future__ import annotations

import importlib.util
import sys
from collections.abc import Callable
from types import ModuleType

import pytest

from llmscaler.sim.report.summary import PolicySummary
from tests.support.paths import ROOT

BENCH = ROOT / 'bench'


def load(name: str) -> ModuleType:
    """bench/`name`.py as a module (imported once, under a name of its own so that it never
    stands for another module of that name; its folder on the path, as when it runs)."""
    key = f'bench_script_{name}'
    if key in sys.modules:
        return sys.modules[key]
    if str(BENCH) not in sys.path:
        sys.path.insert(0, str(BENCH))
    spec = importlib.util.spec_from_file_location(key, BENCH / f'{name}.py')
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[key] = module
    spec.loader.exec_module(module)
    return module


def summary(*, slo: float, cost: float, policy: str = 'predictive') -> PolicySummary:
    """A run's summary with only its attainment, cost and policy of interest (a bench table's
    input)."""
    return PolicySummary(
        policy=policy, trace='t', duration=60.0, cost_usd=cost, gpu_hours=1.0,
        requests=10, completed=10, failed=0, incomplete=0, failed_queue_timeout=0,
        failed_replica_timeout=0, failed_rejected=0, ttft_p50=0.1, ttft_p90=0.2, ttft_p99=0.3,
        itl_p50=0.01, itl_p90=0.02, itl_p99=0.03, slo_attainment=slo, scale_events=0,
        scale_ups=0, scale_downs=0, replica_hours={}, mean_replicas=1.0, cost_vs_reference=None,
        throughput=1.0,
    )  # fmt: skip


def same_with_any_jobs(
    *,
    main: Callable[[list[str]], int],
    argv: list[str],
    capsys: pytest.CaptureFixture[str],
    forbid_simulating: Callable[[], None],
) -> str:
    """A sweeping script's output (`main(argv + ...)`): the same with `--jobs 2` and with
    `--jobs 1 --no-cache`, and once more from the run cache after `forbid_simulating()` has
    made every simulation fail. The caller points the run cache at a folder of its own."""
    assert main([*argv, '--jobs', '2']) == 0
    two = capsys.readouterr().out
    assert main([*argv, '--jobs', '1', '--no-cache']) == 0
    one = capsys.readouterr().out
    assert one == two
    forbid_simulating()
    assert main([*argv, '--jobs', '1']) == 0
    assert capsys.readouterr().out == one
    return one
