"""The simulator's report: a terminal table, and a folder of JSON, CSV, PNG, HTML and Markdown.

Why: `llmscaler simulate` ends by telling the user which policy served their traffic best and
cheapest; the terminal table is the answer at a glance, the folder the evidence.

What it writes (`write_report`) into `out/` (created if missing):

- summary.json: {scenario, workload, slo, reference, run, policies: [every PolicySummary field,
  in field order], files: [policy → its CSV names]}; `workload` is the description of the
  workload that was run, `run` what the caller says about the run (the simulator version, wall
  seconds); mapping keys of the scenario sorted, NaN and ±inf as null;
- timeline-<policy>.csv: time, replicas:<v> and ready:<v> per variant (sorted), kv_usage,
  waiting, running, gateway_queue — one row per sample;
- requests-<policy>.csv.gz (or .csv, or nothing: `requests_csv` 'gz', 'plain' or 'none'): rid,
  arrival, input, output, variant, ttft, mean_itl, failed (0/1), failure (the reason, empty when
  none) — one row per request; times in seconds rounded to the microsecond; a value that does not
  exist (TTFT of a request that never started, mean ITL of a single-token or unfinished one) is
  empty. Plain, a file takes about 51 bytes per request (a 3-hour run at 15 req/s: about 8 MB
  per policy); gzip about 19. The gzip stream carries no time stamp or file name;
- the five PNGs of `plots.plot_all`;
- report.html: one self-contained page (inline style; PNGs referenced by relative file name) with
  the table, the SLO, a short "how to read this", the plots, links to the data files and the
  scenario as a YAML block; report.md: the same table in Markdown with the plots linked.

Policy names may hold any character ('static:3', 'static:h100=2'); `file_stems` turns them into
safe, distinct file-name parts. Nothing written depends on the wall clock except what the caller
passes as `run` (wall seconds), so equal runs give equal files but for that.

Bad input: NaN figures show as 'n/a' in tables; rich markup in policy names is printed
literally; a scenario value JSON cannot hold is written as its str(). Raises OSError when `out`
cannot be written.
"""

from __future__ import annotations

import csv
import dataclasses
import gzip
import html
import io
import json
import math
import re
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Literal, TextIO

import numpy as np
import yaml
from rich import box
from rich.cells import cell_len
from rich.console import Console
from rich.measure import Measurement
from rich.table import Table
from rich.text import Text

from llmscaler.sim.metrics import PolicySummary
from llmscaler.sim.plots import plot_all
from llmscaler.sim.types import SLO, SimResult

RequestsCsv = Literal['none', 'gz', 'plain']
REQUESTS_CSV: tuple[RequestsCsv, ...] = ('none', 'gz', 'plain')

_UNSAFE = re.compile(r'[^A-Za-z0-9._-]+')
_CAPTIONS = {
    'arrivals.png': 'Arrivals per minute.',
    'replicas.png': 'Replicas per variant (stacked, paid for) and ready replicas (dashed).',
    'ttft_p99.png': 'TTFT p99 per arrival minute, completed requests; the red line is the SLO.',
    'kv_usage.png': 'Fleet mean KV-cache usage.',
    'queue.png': 'Requests waiting in replicas plus the gateway queue.',
}


def file_stems(*, policies: Sequence[str]) -> list[str]:
    """A file-name part per entry of `policies`: runs of characters other than letters, digits,
    '.', '_' and '-' become '_', a leading '.' becomes '_', at most 80 characters, and repeats
    (ignoring case, for case-insensitive file systems) get '-2', '-3', ... in order."""
    stems: list[str] = []
    taken: set[str] = set()
    for policy in policies:
        base = _UNSAFE.sub('_', policy)[:80] or 'policy'
        if base.startswith('.'):
            base = '_' + base[1:]
        stem, n = base, 1
        while stem.casefold() in taken:
            n += 1
            stem = f'{base}-{n}'
        taken.add(stem.casefold())
        stems.append(stem)
    return stems


def _num(value: float | None, spec: str, scale: float = 1.0) -> str:
    if value is None or math.isnan(value):
        return 'n/a'
    if math.isinf(value):
        return 'inf' if value > 0 else '-inf'
    return format(value * scale, spec)


def slo_text(*, slo: SLO) -> str:
    """The SLO in words, e.g. 'TTFT ≤ 1 s, mean ITL ≤ 70 ms'."""
    return f'TTFT ≤ {_num(slo.ttft, "g")} s, mean ITL ≤ {_num(slo.itl, "g", 1000.0)} ms'


def table_cells(
    *, summaries: Sequence[PolicySummary], reference: str = 'clairvoyant'
) -> tuple[list[str], list[list[str]]]:
    """Headers and rows of the summary table. Headers hold a line break (name, then unit) that
    keeps the terminal table narrow; HTML and Markdown join the two lines with a space."""
    headers = [
        'Policy',
        'Cost\n$',
        f'vs\n{reference}',
        'GPU\nhours',
        'SLO\n%',
        'TTFT p50\ns',
        'TTFT p99\ns',
        'ITL p50\nms',
        'ITL p99\nms',
        'Completed\n/ failed',
        'Scale\nevents',
    ]
    rows = []
    # The reasons only when the simulator recorded any: a run without failures (or a result
    # built without reasons) keeps the narrower table.
    by_reason = any(
        s.failed_queue_timeout or s.failed_replica_timeout or s.failed_rejected for s in summaries
    )
    if by_reason:
        headers.insert(10, 'Failed by reason\nqueue / replica / rejected')
    for s in summaries:
        done = f'{s.completed:,} / {s.failed:,}'
        if s.incomplete:
            done += f' (+{s.incomplete:,} open)'
        ratio = _num(s.cost_vs_reference, '.2f')
        reasons = (
            [f'{s.failed_queue_timeout:,} / {s.failed_replica_timeout:,} / {s.failed_rejected:,}']
            if by_reason
            else []
        )
        rows.append(
            [
                s.policy,
                _num(s.cost_usd, ',.2f'),
                ratio + ('×' if s.cost_vs_reference is not None else ''),
                _num(s.gpu_hours, ',.1f'),
                _num(s.slo_attainment, '.1f', 100.0),
                _num(s.ttft_p50, '.3f'),
                _num(s.ttft_p99, '.3f'),
                _num(s.itl_p50, '.1f', 1000.0),
                _num(s.itl_p99, '.1f', 1000.0),
                done,
                *reasons,
                f'{s.scale_events:,} ({s.scale_ups:,}↑ {s.scale_downs:,}↓)',
            ]
        )
    return headers, rows


def _one_line(header: str) -> str:
    return header.replace('\n', ' ')


def render_table(
    *, summaries: Sequence[PolicySummary], slo: SLO, reference: str = 'clairvoyant'
) -> Table:
    """The summary as a rich table, one row per policy, the SLO in the title."""
    headers, rows = table_cells(summaries=summaries, reference=reference)
    table = Table(
        title=f'SLO: {slo_text(slo=slo)}',
        title_justify='left',
        box=box.SIMPLE_HEAD,
        collapse_padding=True,
        pad_edge=False,
    )
    # Numbers are never cut (min_width is their widest cell); on a narrow terminal the policy
    # column folds instead.
    table.add_column(headers[0], justify='left', overflow='fold', min_width=8)
    for index, header in enumerate(headers[1:], start=1):
        widest = max((cell_len(row[index]) for row in rows), default=1)
        table.add_column(header, justify='right', no_wrap=True, min_width=widest)
    for row in rows:
        table.add_row(*(Text(cell) for cell in row))
    return table


def print_table(
    *,
    summaries: Sequence[PolicySummary],
    slo: SLO,
    console: Console,
    reference: str = 'clairvoyant',
) -> None:
    """Print the table whole: on a console narrower than the table (80 columns is also what a
    pipe gets) it is printed at its natural width rather than squeezed, which would cut numbers
    and drop the policy column."""
    table = render_table(summaries=summaries, slo=slo, reference=reference)
    natural = Measurement.get(console, console.options.update_width(10_000), table).maximum
    if natural > console.width:
        # A fixed width overrides the console's; crop=False keeps the long lines.
        table.width = natural
    console.print(table, crop=False)


def _plain(value: object) -> object:
    """`value` as JSON/YAML-safe data: mappings with sorted string keys, lists, finite numbers."""
    if value is None or isinstance(value, bool | int | str):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, np.generic):
        return _plain(value.item())
    if isinstance(value, Mapping):
        return {str(k): _plain(value[k]) for k in sorted(value, key=str)}
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return _plain(dataclasses.asdict(value))
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    if isinstance(value, set | frozenset):
        return [_plain(v) for v in sorted(value, key=repr)]
    return str(value)


def _summary_object(summary: PolicySummary) -> dict[str, object]:
    # Field order, not sorted: policy first reads better and is just as stable.
    return {f.name: _plain(getattr(summary, f.name)) for f in dataclasses.fields(summary)}


def _blank_nan(values: list[float]) -> list[float | str]:
    return [v if v == v else '' for v in values]


def _write_timeline(path: Path, result: SimResult) -> None:
    tl = result.timeline
    n = len(tl.times)
    names = sorted({v.name for v in result.variants} | set(tl.replicas) | set(tl.ready))

    def column(values: Sequence[float], digits: int | None = None) -> list[float | str]:
        data = np.asarray(values, dtype=np.float64)[:n]
        data = np.concatenate((data, np.full(n - data.shape[0], math.nan)))
        if digits is None:
            return [int(v) if v == v else '' for v in data.tolist()]
        return _blank_nan(np.round(data, digits).tolist())

    header = ['time']
    columns = [column(tl.times, 6)]
    for name in names:
        header += [f'replicas:{name}', f'ready:{name}']
        columns += [column(tl.replicas.get(name, [])), column(tl.ready.get(name, []))]
    header += ['kv_usage', 'waiting', 'running', 'gateway_queue']
    columns += [column(tl.kv_usage, 6), column(tl.waiting), column(tl.running)]
    columns.append(column(tl.gateway_queue))
    with path.open('w', newline='', encoding='utf-8') as f:
        writer = csv.writer(f, lineterminator='\n')
        writer.writerow(header)
        writer.writerows(zip(*columns, strict=True))


@contextmanager
def _open_text(path: Path, *, compressed: bool) -> Iterator[TextIO]:
    if not compressed:
        with path.open('w', newline='', encoding='utf-8') as f:
            yield f
        return
    # No name and no time in the gzip header: equal runs give equal bytes.
    with (
        path.open('wb') as raw,
        gzip.GzipFile(filename='', mode='wb', fileobj=raw, mtime=0, compresslevel=6) as packed,
        io.TextIOWrapper(packed, encoding='utf-8', newline='') as f,
    ):
        yield f


@np.errstate(invalid='ignore', divide='ignore', over='ignore')
def _write_requests(path: Path, result: SimResult, *, compressed: bool) -> None:
    reqs = result.requests
    arrival = np.array([r.arrival for r in reqs], dtype=np.float64)
    first = np.array([r.first_token for r in reqs], dtype=np.float64)
    finished = np.array([r.finished for r in reqs], dtype=np.float64)
    output = np.array([r.output_tokens for r in reqs], dtype=np.float64)
    itl = np.where(output > 1.0, (finished - first) / np.maximum(output - 1.0, 1.0), math.nan)
    columns = (
        [r.rid for r in reqs],
        _blank_nan(np.round(arrival, 6).tolist()),
        [r.input_tokens for r in reqs],
        [r.output_tokens for r in reqs],
        [r.variant for r in reqs],
        _blank_nan(np.round(first - arrival, 6).tolist()),
        _blank_nan(np.round(itl, 6).tolist()),
        [int(r.failed) for r in reqs],
        [r.failure for r in reqs],
    )
    with _open_text(path, compressed=compressed) as f:
        writer = csv.writer(f, lineterminator='\n')
        writer.writerow(
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
        )
        writer.writerows(zip(*columns, strict=True))


def report_title(*, scenario: Mapping[str, object], workload: str = '') -> str:
    """'Simulation report: <scenario name> — <workload>', leaving out what is empty."""
    name = scenario.get('name')
    parts = [p for p in (name if isinstance(name, str) else '', workload) if p]
    return 'Simulation report' + (': ' + ' — '.join(parts) if parts else '')


def _how_to_read(slo: SLO, reference: str) -> list[str]:
    return [
        'Cost $ is replica-hours × price per replica-hour, counted from the creation of a '
        'replica to its removal, so start-up time is paid for. GPU hours are counted the same way.',
        f'vs {reference} divides the cost by that of the {reference} policy; below 1 means '
        'cheaper, usually bought with missed SLOs.',
        f'SLO % is the share of ALL requests that completed with {slo_text(slo=slo)} '
        '(single-token answers: TTFT only). Failed requests and requests still open at the end '
        'count as misses. A request fails when it times out in the gateway queue, when its '
        'client’s request time-out (if one is set) runs out while it waits or runs in a replica, '
        'or when the replica rejects it as longer than it can hold.',
        'TTFT and ITL percentiles cover completed requests only: a policy that drops requests can '
        'look fast, so read them next to Completed / failed. ITL is each request’s mean '
        'inter-token latency.',
        'Scale events are changes of a variant’s replica target (↑ up, ↓ down); many events '
        'means churn.',
        'In the plots, time runs from the start of the trace. TTFT p99 is per minute of '
        'arrival, so a burst shows where it arrived, however long its requests waited.',
    ]


def _html(
    *,
    title: str,
    slo: SLO,
    table: tuple[list[str], list[list[str]]],
    notes: list[str],
    pngs: Sequence[Path],
    files: Sequence[tuple[str, str, str | None]],
    scenario_yaml: str,
) -> str:
    e = html.escape
    headers, rows = table
    head = ''.join(f'<th>{e(_one_line(h))}</th>' for h in headers)
    body = ''.join(
        '<tr>' + ''.join(f'<td>{e(cell)}</td>' for cell in row) + '</tr>\n' for row in rows
    )
    figures = ''.join(
        f'<figure><img src="{e(p.name)}" alt="{e(_CAPTIONS.get(p.name, p.name))}">'
        f'<figcaption>{e(_CAPTIONS.get(p.name, p.name))}</figcaption></figure>\n'
        for p in pngs
    )
    items = ''.join(f'<li>{e(note)}</li>\n' for note in notes)
    links = ''.join(
        f'<li>{e(policy)}: <a href="{e(timeline)}">{e(timeline)}</a>'
        + (f', <a href="{e(requests)}">{e(requests)}</a>' if requests else '')
        + '</li>\n'
        for policy, timeline, requests in files
    )
    return f"""<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<title>{e(title)}</title>
<style>
body {{ font-family: system-ui, sans-serif; margin: 2em auto; max-width: 72em; color: #222; }}
table {{ border-collapse: collapse; margin: 1em 0; }}
th, td {{ border-bottom: 1px solid #ddd; padding: 0.3em 0.7em; text-align: right; }}
th:first-child, td:first-child {{ text-align: left; }}
th {{ background: #f4f4f4; }}
img {{ max-width: 100%; }}
figure {{ margin: 1.5em 0; }}
pre {{ background: #f7f7f7; padding: 1em; overflow-x: auto; }}
</style>
</head>
<body>
<h1>{e(title)}</h1>
<p>SLO: {e(slo_text(slo=slo))}</p>
<table>
<thead><tr>{head}</tr></thead>
<tbody>
{body}</tbody>
</table>
<h2>How to read this</h2>
<ul>
{items}</ul>
<h2>Plots</h2>
{figures}<h2>Data</h2>
<ul>
<li><a href="summary.json">summary.json</a>: every figure of the table, unrounded</li>
{links}</ul>
<h2>Scenario</h2>
<pre>{e(scenario_yaml)}</pre>
</body>
</html>
"""


def _markdown(
    *, title: str, slo: SLO, table: tuple[list[str], list[list[str]]], pngs: Sequence[Path]
) -> str:
    def row(cells: Sequence[str]) -> str:
        # '<' and '&' escaped too: Markdown renders inline HTML, and names are user input.
        return (
            '| ' + ' | '.join(html.escape(c, quote=False).replace('|', '\\|') for c in cells) + ' |'
        )

    headers, rows = table
    lines = [
        f'# {title}',
        '',
        f'SLO: {slo_text(slo=slo)}',
        '',
        row([_one_line(h) for h in headers]),
    ]
    lines.append('|' + '|'.join(['---'] + ['---:'] * (len(headers) - 1)) + '|')
    lines += [row(r) for r in rows]
    lines += ['', 'Full report: [report.html](report.html); figures: [summary.json](summary.json).']
    for p in pngs:
        lines += ['', f'![{_CAPTIONS.get(p.name, p.name)}]({p.name})']
    return '\n'.join(lines) + '\n'


def write_report(
    *,
    out: Path,
    results: Sequence[SimResult],
    summaries: Sequence[PolicySummary],
    slo: SLO,
    scenario: Mapping[str, object],
    reference: str = 'clairvoyant',
    workload: str = '',
    run: Mapping[str, object] | None = None,
    requests_csv: RequestsCsv = 'gz',
) -> Path:
    """Write the report folder (see the module docstring); returns the path of report.html.

    `workload` describes the workload run (it follows the scenario's name in the title);
    `run` goes into summary.json as is; `requests_csv` says how the per-request files are
    written ('gz', 'plain') or that they are not ('none').
    """
    if requests_csv not in REQUESTS_CSV:
        raise ValueError(
            f'requests_csv must be one of {", ".join(REQUESTS_CSV)}, got {requests_csv!r}'
        )
    out.mkdir(parents=True, exist_ok=True)
    stems = file_stems(policies=[r.policy for r in results])
    suffix = {'none': None, 'gz': '.csv.gz', 'plain': '.csv'}[requests_csv]
    files = [
        (r.policy, f'timeline-{stem}.csv', None if suffix is None else f'requests-{stem}{suffix}')
        for r, stem in zip(results, stems, strict=True)
    ]
    for result, (_, timeline, requests) in zip(results, files, strict=True):
        _write_timeline(out / timeline, result)
        if requests is not None:
            _write_requests(out / requests, result, compressed=requests_csv == 'gz')
    plain_scenario = _plain(scenario)
    document = {
        'scenario': plain_scenario,
        'workload': workload,
        'slo': {'ttft': _plain(slo.ttft), 'itl': _plain(slo.itl)},
        'reference': reference,
        'run': _plain(run or {}),
        'policies': [_summary_object(s) for s in summaries],
        'files': [{'policy': p, 'timeline': t, 'requests': q} for p, t, q in files],
    }
    text = json.dumps(document, indent=2, ensure_ascii=False, allow_nan=False)
    (out / 'summary.json').write_text(text + '\n', encoding='utf-8')
    pngs = plot_all(out=out, results=results, summaries=summaries, slo=slo)
    title = report_title(scenario=scenario, workload=workload)
    table = table_cells(summaries=summaries, reference=reference)
    scenario_yaml = yaml.safe_dump(
        plain_scenario, sort_keys=True, allow_unicode=True, default_flow_style=False
    )
    page = _html(
        title=title,
        slo=slo,
        table=table,
        notes=_how_to_read(slo, reference),
        pngs=pngs,
        files=files,
        scenario_yaml=scenario_yaml,
    )
    (out / 'report.md').write_text(
        _markdown(title=title, slo=slo, table=table, pngs=pngs), encoding='utf-8'
    )
    path = out / 'report.html'
    path.write_text(page, encoding='utf-8')
    return path
