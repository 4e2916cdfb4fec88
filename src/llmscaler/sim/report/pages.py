"""The simulator report's pages: the HTML page and the Markdown summary, and their words.

Why: `sim.report.writer` writes the data files and the figures; the two pages around them, which a
reader opens first, are assembled here: the title, the table, the SLO line, the GPU lines and
notes, a short "how to read this", the plots with their captions, links to the data files and
the scenario as YAML. Everything a user gave (policy, model and variant names) is escaped.

Nothing here raises on odd input; the pages are returned as text for the caller to write.
"""

from __future__ import annotations

import html
from collections.abc import Mapping, Sequence
from pathlib import Path

from llmscaler.sim.report.table import one_line

_CAPTIONS = {
    'arrivals.png': 'Arrivals per minute.',
    'replicas.png': 'Replicas per variant (stacked, paid for) and ready replicas (dashed).',
    'ttft_p99.png': 'TTFT p99 per arrival minute, completed requests; the red line is the SLO.',
    'kv_usage.png': 'Fleet mean KV-cache usage.',
    'queue.png': 'Requests waiting in replicas plus the gateway queue.',
    'gpus.png': 'GPUs bound per accelerator type; the dashed lines are the inventory.',
}


def report_title(*, scenario: Mapping[str, object], workload: str = '') -> str:
    """'Simulation report: <scenario name> — <workload>', leaving out what is empty."""
    name = scenario.get('name')
    parts = [p for p in (name if isinstance(name, str) else '', workload) if p]
    return 'Simulation report' + (': ' + ' — '.join(parts) if parts else '')


def how_to_read(slo: str, reference: str, *, models: bool, gpus: bool) -> list[str]:
    extra = []
    if models:
        extra.append(
            'Each model’s row covers its requests and the replicas of its variants; “all” is '
            'the policy’s total, every request judged by its own model’s SLO.'
        )
    if gpus:
        extra.append(
            'A replica the GPU inventory cannot hold waits for GPUs (Pending, as a pod the '
            'scheduler cannot place) and costs nothing until it gets them; it counts as pending '
            'for the autoscaler. Freed GPUs go first come, ties by model then variant name. The '
            'GPU lines give the peak GPUs bound against the inventory and the waits.'
        )
    notes = [
        'Cost $ is replica-hours × price per replica-hour, counted from the creation of a '
        'replica to its removal, so start-up time is paid for. GPU hours are counted the same way.',
        f'vs {reference} divides the cost by that of the {reference} policy; below 1 means '
        'cheaper, usually bought with missed SLOs.',
        f'SLO % is the share of ALL requests that completed with {slo} '
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
    notes += extra
    return notes


def html_page(
    *,
    title: str,
    slo: str,
    table: tuple[list[str], list[list[str]]],
    notes: list[str],
    remarks: Sequence[str],
    pngs: Sequence[Path],
    files: Sequence[tuple[str, str, str | None]],
    scenario_yaml: str,
) -> str:
    e = html.escape
    headers, rows = table
    head = ''.join(f'<th>{e(one_line(h))}</th>' for h in headers)
    body = ''.join(
        '<tr>' + ''.join(f'<td>{e(cell)}</td>' for cell in row) + '</tr>\n' for row in rows
    )
    figures = ''.join(
        f'<figure><img src="{e(p.name)}" alt="{e(_CAPTIONS.get(p.name, p.name))}">'
        f'<figcaption>{e(_CAPTIONS.get(p.name, p.name))}</figcaption></figure>\n'
        for p in pngs
    )
    items = ''.join(f'<li>{e(note)}</li>\n' for note in notes)
    said = ''.join(f'<li>{e(remark)}</li>\n' for remark in remarks)
    said = f'<ul>\n{said}</ul>\n' if said else ''
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
<p>SLO: {e(slo)}</p>
<table>
<thead><tr>{head}</tr></thead>
<tbody>
{body}</tbody>
</table>
{said}<h2>How to read this</h2>
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


def markdown_page(
    *,
    title: str,
    slo: str,
    table: tuple[list[str], list[list[str]]],
    remarks: Sequence[str],
    pngs: Sequence[Path],
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
        f'SLO: {slo}',
        '',
        row([one_line(h) for h in headers]),
    ]
    texts = 2 if headers[1:2] == ['Model'] else 1
    lines.append('|' + '|'.join(['---'] * texts + ['---:'] * (len(headers) - texts)) + '|')
    lines += [row(r) for r in rows]
    if remarks:
        lines.append('')
        lines += [f'- {html.escape(r, quote=False)}' for r in remarks]
    lines += ['', 'Full report: [report.html](report.html); figures: [summary.json](summary.json).']
    for p in pngs:
        lines += ['', f'![{_CAPTIONS.get(p.name, p.name)}]({p.name})']
    return '\n'.join(lines) + '\n'
