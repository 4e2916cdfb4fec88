"""`llmscaler simulate` end to end: the default scenario, the report files, bad input.

| case | expectation |
|---|---|
| default scenario, all policies | clairvoyant costs no more than any policy at least as good |
| two workers, searched and plain policies mixed | one worker's report, in the scenario's order |
| the bound compared with the best fixed fleet | its plan's run is the search's, not run again |
| short run via the CLI | table printed, summary.json/report.html/PNGs written, exit 0 |
| trace file with a malformed row | `file:line` on stderr, exit 2; with --skip-bad-rows it runs |
| unknown policy / preset | the valid names on stderr, exit 2, no traceback |
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from llmscaler.cli import main
from llmscaler.sim import simulate
from llmscaler.sim.scenario import loader
from llmscaler.sim.scenario.document import DEFAULT_DOCUMENT, with_overrides
from llmscaler.sim.sweep.sweep import Sweep


@pytest.fixture(scope='module')
def default_outcome() -> simulate.Outcome:
    document = with_overrides(
        document=DEFAULT_DOCUMENT,
        policies=['default', 'saturation-token', 'keda-queue', 'static:h100=4,l40s=4',
                  'clairvoyant'],
    )  # fmt: skip
    return simulate.run(setup=loader.from_document(document=document), out=None, progress=False)


def test_clairvoyant_is_the_cheapest_at_equal_or_better_attainment(
    default_outcome: simulate.Outcome,
) -> None:
    summaries = {s.policy: s for s in default_outcome.summaries}
    reference = summaries['clairvoyant']
    assert reference.completed > 0
    for summary in summaries.values():
        if summary.slo_attainment >= reference.slo_attainment:
            assert reference.cost_usd <= summary.cost_usd, summary.policy
    # Every policy saw the same workload.
    assert len({s.requests for s in summaries.values()}) == 1


def test_the_default_workload_needs_several_replicas_of_both_variants(
    default_outcome: simulate.Outcome,
) -> None:
    static = next(r for r in default_outcome.results if r.policy.startswith('static'))
    assert {v.name for v in static.variants} == {'h100', 'l40s'}
    clairvoyant = next(r for r in default_outcome.results if r.policy == 'clairvoyant')
    peak = max(
        sum(series[i] for series in clairvoyant.timeline.replicas.values())
        for i in range(len(clairvoyant.timeline.times))
    )
    # The bound's cheapest plan (capacities measured on this workload) needs two H100 at the
    # peak: more than one replica, so a policy that holds one would miss.
    assert peak >= 2


def test_two_workers_report_what_one_does_in_the_scenario_s_order() -> None:
    # The plain policies run behind the searches with two workers: interleaved with the
    # searched ones here, they must still come back in the scenario's order, with the same runs.
    document = with_overrides(
        document=DEFAULT_DOCUMENT,
        policies=['hpa-kv', 'clairvoyant', 'default', 'static-best', 'keda-queue'],
        duration=600.0,
    )
    setup = loader.from_document(document=document)
    reports = []
    for jobs in (1, 2):
        with Sweep(jobs=jobs, progress=False) as sweep:
            outcome = simulate.run(setup=setup, out=None, progress=False, sweep=sweep)
        reports.append([(s.policy, s.cost_usd, s.slo_attainment) for s in outcome.summaries])
    assert [policy for policy, _, _ in reports[1]] == list(setup.policies)
    assert reports[1] == reports[0]


def test_the_bound_s_comparison_is_its_search_s_run_of_the_capacities_chosen() -> None:
    document = with_overrides(document=DEFAULT_DOCUMENT, policies=['clairvoyant'], duration=600.0)
    setup = loader.from_document(document=document)
    with Sweep(jobs=1, progress=False) as sweep:
        outcome = simulate.run(setup=setup, out=None, progress=False, sweep=sweep)
    # The plan on the capacities the search chose was the search's run: the comparison with
    # the best fixed fleet is answered without a run.
    assert sweep.reused == 1
    (reported,) = outcome.summaries
    assert reported.policy == 'clairvoyant'
    assert reported.requests > 0


def run_cli(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_short_cli_run_writes_the_report(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    out = tmp_path / 'report'
    code, stdout, stderr = run_cli(
        capsys, 'simulate', '--duration', '600', '--policy', 'default', '--policy', 'static:2',
        '--out', str(out), '--no-progress',
    )  # fmt: skip
    assert code == 0, stderr
    assert 'default' in stdout
    assert 'static:2' in stdout
    summary = json.loads((out / 'summary.json').read_text())
    assert [p['policy'] for p in summary['policies']] == ['default', 'static:2']
    html = (out / 'report.html').read_text()
    assert 'static:2' in html
    for png in ('arrivals.png', 'replicas.png', 'ttft_p99.png'):
        assert (out / png).read_bytes().startswith(b'\x89PNG')


def test_malformed_trace_row_is_reported_or_skipped(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    trace = tmp_path / 'trace.csv'
    rows = [f'{i * 0.5},{200 + i},{50 + i}' for i in range(40)]
    rows[7] = '3.5,abc,60'
    trace.write_text('timestamp,input_length,output_length\n' + '\n'.join(rows) + '\n')
    code, _, err = run_cli(
        capsys, 'simulate', '--trace', str(trace), '--policy', 'static:1', '--out',
        str(tmp_path / 'o'), '--no-progress',
    )  # fmt: skip
    assert code == 2
    assert f'{trace}:9:' in err
    assert 'Traceback' not in err
    code, out, err = run_cli(
        capsys, 'simulate', '--trace', str(trace), '--policy', 'static:1', '--skip-bad-rows',
        '--out', str(tmp_path / 'o'), '--no-progress',
    )  # fmt: skip
    assert code == 0, err
    assert 'skipped 1 malformed trace rows' in out


@pytest.mark.parametrize(
    ('argv', 'expected'),
    [
        (
            ['--policy', 'magic'],
            'valid: default, predictive, slo-queueing, saturation-percentage, saturation-token',
        ),
        (['--policy', 'static:tpu=3'], 'h100'),
    ],
)
def test_unknown_names_list_the_valid_ones(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, argv: list[str], expected: str
) -> None:
    code, _, err = run_cli(capsys, 'simulate', *argv, '--out', str(tmp_path), '--no-progress')
    assert code == 2
    assert expected in err
    assert 'Traceback' not in err
