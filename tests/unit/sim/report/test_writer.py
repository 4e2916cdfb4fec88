"""Tests of the simulator report: the table's cells, safe file names and the written folder."""

from __future__ import annotations

import csv
import dataclasses
import gzip
import json
import math
import re
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st
from rich.console import Console

from llmscaler.sim.report.pages import report_title
from llmscaler.sim.report.summary import PolicySummary, summarize_all
from llmscaler.sim.report.table import print_table, render_table, slo_text, table_cells
from llmscaler.sim.report.writer import RequestsCsv, file_stems, write_report
from llmscaler.sim.vocabulary import SLO, SimResult
from tests.support.sim_fixtures import SLO_1, empty_result, tiny_result

SCENARIO: dict[str, object] = {
    'name': 'tiny',
    'seed': 1,
    'variants': [{'name': 'a', 'max_replicas': 4}],
    'bad': math.nan,
    'extra': {'z': 1, 'b': (1, 2)},
}


def runs() -> tuple[list[SimResult], list[PolicySummary]]:
    # The reference costs 1 h of 'b' = $1.50; static:3 costs $14.25 (test_sim_metrics).
    results = [
        tiny_result('clairvoyant', replica_seconds={'b': 3600.0}),
        tiny_result('static:3'),
        empty_result('idle'),
    ]
    return results, summarize_all(results=results, slo=SLO_1)


def test_file_stems_make_names_safe_and_distinct() -> None:
    assert file_stems(policies=['static:3', 'static:h100=2,l40s=1', 'default']) == [
        'static_3',
        'static_h100_2_l40s_1',
        'default',
    ]
    # Same stem, or the same ignoring case, gets a counter; '/' cannot escape the folder.
    assert file_stems(policies=['a:b', 'a=b', 'A_b', '', '../x', '.hidden']) == [
        'a_b',
        'a_b-2',
        'A_b-3',
        'policy',
        '_._x',
        '_hidden',
    ]


@given(st.lists(st.text(max_size=100), max_size=8))
def test_file_stems_are_unique_and_safe(policies: list[str]) -> None:
    stems = file_stems(policies=policies)
    assert len(stems) == len(policies)
    assert len({s.casefold() for s in stems}) == len(stems)
    for stem in stems:
        assert re.fullmatch(r'[A-Za-z0-9_-][A-Za-z0-9._-]*', stem), stem


def test_table_cells_by_hand() -> None:
    headers, rows = table_cells(summaries=runs()[1])
    assert headers[2] == 'vs\nclairvoyant'
    assert len(headers) == 11
    reference, static, idle = rows
    # static:3: $14.25 = 9.5 × $1.50; 5.5 GPU-h; SLO 2/6 = 33.3 %; TTFT p50 0.65 s, p99 1.964 s;
    # ITL p50 50 ms, p99 197 ms; 4 completed, 1 failed, 1 open; 3 events, 1 up, 1 down.
    assert static == [
        'static:3',
        '14.25',
        '9.50×',
        '5.5',
        '33.3',
        '0.650',
        '1.964',
        '50.0',
        '197.0',
        '4 / 1 (+1 open)',
        '3 (1↑ 1↓)',
    ]
    assert reference[1:3] == ['1.50', '1.00×']
    # An empty run: numbers that do not exist read n/a.
    assert idle[4:9] == ['n/a'] * 5
    assert idle[9] == '0 / 0'


def test_failures_by_reason_get_a_column_when_there_are_any() -> None:
    summaries = runs()[1]
    headers, rows = table_cells(summaries=summaries)
    # No reason recorded (the tiny run's failure has none): the table of a run without failures.
    assert len(headers) == 11
    assert not any('reason' in h for h in headers)
    timed_out = dataclasses.replace(
        summaries[1], failed=6, failed_queue_timeout=2, failed_replica_timeout=3, failed_rejected=1
    )
    headers, rows = table_cells(summaries=[summaries[0], timed_out])
    assert len(headers) == 12
    assert headers[10] == 'Failed by reason\nqueue / replica / rejected'
    assert headers[9] == 'Completed\n/ failed'
    assert [row[10] for row in rows] == ['0 / 0 / 0', '2 / 3 / 1']
    assert rows[1][9] == '4 / 6 (+1 open)'
    console = Console(width=200, record=True, color_system=None)
    print_table(summaries=[timed_out], slo=SLO_1, console=console)
    assert '2 / 3 / 1' in console.export_text()


def test_the_title_names_the_scenario_and_its_workload() -> None:
    assert report_title(scenario={'name': 'mine'}, workload='trace a.csv ×2') == (
        'Simulation report: mine — trace a.csv ×2'
    )
    assert report_title(scenario={}, workload='trace a.csv') == 'Simulation report: trace a.csv'
    assert report_title(scenario={'name': 'mine'}) == 'Simulation report: mine'
    assert report_title(scenario={'name': 3}) == 'Simulation report'


def test_table_cells_without_reference_and_with_infinite_ratio() -> None:
    s = runs()[1][1]
    _, rows = table_cells(summaries=[dataclasses.replace(s, cost_vs_reference=None)])
    assert rows[0][2] == 'n/a'
    _, rows = table_cells(summaries=[dataclasses.replace(s, cost_vs_reference=math.inf)])
    assert rows[0][2] == 'inf×'


def test_slo_text() -> None:
    assert slo_text(slo=SLO(ttft=1.0, itl=0.07)) == 'TTFT ≤ 1 s, mean ITL ≤ 70 ms'
    assert slo_text(slo=SLO(ttft=math.nan, itl=0.05)) == 'TTFT ≤ n/a s, mean ITL ≤ 50 ms'


def test_render_table_has_a_row_per_policy() -> None:
    table = render_table(summaries=runs()[1], slo=SLO_1)
    assert table.row_count == 3
    assert len(table.columns) == 11
    assert 'TTFT ≤ 1 s' in str(table.title)


def test_print_table_keeps_numbers_whole_on_a_narrow_console() -> None:
    summaries = runs()[1]
    long_name = dataclasses.replace(summaries[1], policy='static:h100=2,l40s=1')
    for width in (200, 60):
        console = Console(width=width, record=True, color_system=None)
        print_table(summaries=[summaries[0], long_name], slo=SLO_1, console=console)
        text = console.export_text()
        assert 'static:h100=2,l40s=1' in text
        assert '14.25' in text
        assert '4 / 1 (+1 open)' in text


def test_print_table_prints_markup_in_names_literally() -> None:
    summary = dataclasses.replace(runs()[1][0], policy='[bold]x[/bold]')
    console = Console(width=200, record=True, color_system=None)
    print_table(summaries=[summary], slo=SLO_1, console=console)
    assert '[bold]x[/bold]' in console.export_text()


def test_write_report_files(tmp_path: Path) -> None:
    results, summaries = runs()
    out = tmp_path / 'deep' / 'report'
    html_path = write_report(
        out=out, results=results, summaries=summaries, slo=SLO_1, scenario=SCENARIO
    )
    assert html_path == out / 'report.html'
    names = sorted(p.name for p in out.iterdir())
    assert names == sorted(
        [
            'summary.json',
            'report.html',
            'report.md',
            'arrivals.png',
            'replicas.png',
            'ttft_p99.png',
            'kv_usage.png',
            'queue.png',
        ]
        + [f'timeline-{stem}.csv' for stem in ('clairvoyant', 'static_3', 'idle')]
        # Per-request files are compressed unless asked otherwise.
        + [f'requests-{stem}.csv.gz' for stem in ('clairvoyant', 'static_3', 'idle')]
    )


def test_summary_json(tmp_path: Path) -> None:
    results, summaries = runs()
    write_report(
        out=tmp_path,
        results=results,
        summaries=summaries,
        slo=SLO_1,
        scenario=SCENARIO,
        workload='trace t.csv',
        run={'version': '1.2.3', 'wall_seconds': 4.5, 'calibration_seconds': math.nan},
    )
    doc = json.loads((tmp_path / 'summary.json').read_text())
    assert list(doc) == ['scenario', 'workload', 'slo', 'reference', 'run', 'policies', 'files']
    assert doc['workload'] == 'trace t.csv'
    # What the caller says about the run, JSON-safe (sorted keys, NaN as null).
    assert doc['run'] == {'calibration_seconds': None, 'version': '1.2.3', 'wall_seconds': 4.5}
    assert doc['slo'] == {'ttft': 1.0, 'itl': 0.1}
    # Scenario keys sorted, NaN as null, tuples as lists.
    assert list(doc['scenario']) == ['bad', 'extra', 'name', 'seed', 'variants']
    assert doc['scenario']['bad'] is None
    assert doc['scenario']['extra'] == {'b': [1, 2], 'z': 1}
    # prefix_hit_rate is left out when no replica keeps a prefix cache.
    fields = [f.name for f in dataclasses.fields(PolicySummary) if f.name != 'prefix_hit_rate']
    assert [list(p) for p in doc['policies']] == [fields] * 3
    static = doc['policies'][1]
    assert static['policy'] == 'static:3'
    assert static['cost_usd'] == pytest.approx(14.25)
    assert static['cost_vs_reference'] == pytest.approx(9.5)
    assert static['replica_hours'] == {'a': 2.0, 'b': 1.5}
    assert doc['policies'][2]['ttft_p50'] is None
    assert doc['files'][1] == {
        'policy': 'static:3',
        'timeline': 'timeline-static_3.csv',
        'requests': 'requests-static_3.csv.gz',
    }


def test_csv_files(tmp_path: Path) -> None:
    results, summaries = runs()
    results[1].requests[4].failure = 'queue-timeout'
    write_report(
        out=tmp_path,
        results=results,
        summaries=summaries,
        slo=SLO_1,
        scenario={},
        requests_csv='plain',
    )
    with (tmp_path / 'timeline-static_3.csv').open(newline='') as f:
        timeline = list(csv.DictReader(f))
    assert list(timeline[0]) == [
        'time',
        'replicas:a',
        'ready:a',
        'replicas:b',
        'ready:b',
        'kv_usage',
        'waiting',
        'running',
        'gateway_queue',
    ]
    assert len(timeline) == 4
    assert timeline[1] == {
        'time': '10.0',
        'replicas:a': '2',
        'ready:a': '1',
        'replicas:b': '2',
        'ready:b': '1',
        'kv_usage': '0.1',
        'waiting': '1',
        'running': '5',
        'gateway_queue': '1',
    }
    with (tmp_path / 'requests-static_3.csv').open(newline='') as f:
        requests = list(csv.DictReader(f))
    assert len(requests) == 6
    assert requests[0] == {
        'rid': '0',
        'arrival': '0.0',
        'input': '100',
        'output': '11',
        'variant': 'a',
        'ttft': '0.5',
        'mean_itl': '0.05',
        'failed': '0',
        'failure': '',
    }
    # r2: TTFT 20.2 − 20 rounded to the microsecond; r3: one token, no ITL.
    assert requests[2]['ttft'] == '0.2'
    assert requests[3]['mean_itl'] == ''
    # r4 failed and never started; r5 started but never finished.
    assert (requests[4]['failed'], requests[4]['ttft'], requests[4]['variant']) == ('1', '', '')
    assert requests[4]['failure'] == 'queue-timeout'
    assert (requests[5]['ttft'], requests[5]['mean_itl']) == ('0.3', '')
    with (tmp_path / 'requests-idle.csv').open(newline='') as f:
        assert list(csv.reader(f)) == [
            [
                'rid',
                'arrival',
                'input',
                'output',
                'variant',
                'ttft',
                'mean_itl',
                'failed',
                'failure',
            ]
        ]


def test_requests_csv_compressed_or_not_written(tmp_path: Path) -> None:
    results, summaries = runs()
    choices: tuple[RequestsCsv, ...] = ('plain', 'gz', 'none')
    for how in choices:
        write_report(
            out=tmp_path / how,
            results=results,
            summaries=summaries,
            slo=SLO_1,
            scenario={},
            requests_csv=how,
        )
    plain = (tmp_path / 'plain' / 'requests-static_3.csv').read_bytes()
    packed = (tmp_path / 'gz' / 'requests-static_3.csv.gz').read_bytes()
    assert gzip.decompress(packed) == plain
    # No time stamp and no file name in the gzip header: equal runs give equal bytes.
    assert packed[4:8] == b'\0\0\0\0'
    assert packed[3] & 0x08 == 0
    assert not any(p.name.startswith('requests-') for p in (tmp_path / 'none').iterdir())
    doc = json.loads((tmp_path / 'none' / 'summary.json').read_text())
    assert [f['requests'] for f in doc['files']] == [None, None, None]
    page = (tmp_path / 'none' / 'report.html').read_text()
    assert 'requests-' not in page
    assert '<a href="timeline-static_3.csv">' in page
    with pytest.raises(ValueError, match='requests_csv'):
        write_report(
            out=tmp_path / 'bad',
            results=results,
            summaries=summaries,
            slo=SLO_1,
            scenario={},
            requests_csv='zip',  # type: ignore[arg-type]
        )


def test_short_timeline_series_are_padded(tmp_path: Path) -> None:
    result = tiny_result()
    result.timeline.kv_usage = [0.5]
    result.timeline.replicas['a'] = []
    write_report(
        out=tmp_path,
        results=[result],
        summaries=summarize_all(results=[result], slo=SLO_1),
        slo=SLO_1,
        scenario={},
    )
    with (tmp_path / 'timeline-default.csv').open(newline='') as f:
        rows = list(csv.DictReader(f))
    assert [r['kv_usage'] for r in rows] == ['0.5', '', '', '']
    assert [r['replicas:a'] for r in rows] == ['', '', '', '']


def test_html_and_markdown(tmp_path: Path) -> None:
    results, summaries = runs()
    page = write_report(
        out=tmp_path, results=results, summaries=summaries, slo=SLO_1, scenario=SCENARIO
    ).read_text()
    assert '<title>Simulation report: tiny</title>' in page
    assert '<th>vs clairvoyant</th>' in page
    assert (
        '<tr><td>static:3</td><td>14.25</td><td>9.50×</td><td>5.5</td><td>33.3</td>'
        '<td>0.650</td><td>1.964</td><td>50.0</td><td>197.0</td><td>4 / 1 (+1 open)</td>'
        '<td>3 (1↑ 1↓)</td></tr>'
    ) in page
    assert 'TTFT ≤ 1 s, mean ITL ≤ 100 ms' in page
    for png in ('arrivals', 'replicas', 'ttft_p99', 'kv_usage', 'queue'):
        assert f'<img src="{png}.png"' in page
    assert '<a href="requests-static_3.csv.gz">' in page
    assert 'How to read this' in page
    # The scenario as YAML, escaped, keys sorted.
    assert '<pre>bad: null\nextra:\n  b:\n  - 1\n  - 2\n  z: 1\nname: tiny\n' in page
    assert '<link' not in page
    assert 'http' not in page
    markdown = (tmp_path / 'report.md').read_text()
    assert '| static:3 | 14.25 | 9.50× | 5.5 | 33.3 |' in markdown
    assert '![Arrivals per minute.](arrivals.png)' in markdown
    assert '|---|---:|' in markdown


def test_names_are_escaped(tmp_path: Path) -> None:
    result = tiny_result('<b>|x')
    write_report(
        out=tmp_path,
        results=[result],
        summaries=summarize_all(results=[result], slo=SLO_1),
        slo=SLO_1,
        scenario={'name': '<script>'},
    )
    page = (tmp_path / 'report.html').read_text()
    assert '<b>' not in page
    assert '<script>' not in page
    assert '<td>&lt;b&gt;|x</td>' in page
    markdown = (tmp_path / 'report.md').read_text()
    assert '<b>' not in markdown
    assert '| &lt;b&gt;\\|x |' in markdown
    assert (tmp_path / 'timeline-_b_x.csv').exists()


def test_empty_report(tmp_path: Path) -> None:
    page = write_report(out=tmp_path, results=[], summaries=[], slo=SLO_1, scenario={})
    doc = json.loads((tmp_path / 'summary.json').read_text())
    assert doc['policies'] == []
    assert doc['scenario'] == {}
    assert '<title>Simulation report</title>' in page.read_text()
    assert (tmp_path / 'replicas.png').stat().st_size > 0
