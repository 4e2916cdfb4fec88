"""The simulator's report: a terminal table, and a folder of JSON, CSV, PNG, HTML and Markdown.

Why: `llmscaler simulate` ends by telling the user which policy served their traffic best and
cheapest; the terminal table is the answer at a glance, the folder the evidence.

What it writes (`write_report`) into `out/` (created if missing):

- summary.json: {scenario, workload, slo, reference, run, policies: [every PolicySummary field,
  in field order; `prefix_hit_rate` only when the replicas keep a prefix cache], files:
  [policy → its CSV names]}; `workload` is the description of the workload that was run,
  `run` what the caller says about the run (the simulator version, wall seconds); mapping
  keys of the scenario sorted, NaN and ±inf as null;
- timeline-<policy>.csv: time, replicas:<v> and ready:<v> per variant (sorted), kv_usage,
  waiting, running, gateway_queue — one row per sample; with several models then
  gateway_queue:<m> per model, with a GPU inventory gpus:<a> per accelerator type and
  unbound:<v> per variant (replicas waiting for GPUs);
- requests-<policy>.csv.gz (or .csv, or nothing: `requests_csv` 'gz', 'plain' or 'none'): rid,
  arrival, input, output, variant, ttft, mean_itl, failed (0/1), failure (the reason, empty when
  none), and with several models its model — one row per request; times in seconds rounded to
  the microsecond; a value that does not
  exist (TTFT of a request that never started, mean ITL of a single-token or unfinished one) is
  empty. Plain, a file takes about 51 bytes per request (a 3-hour run at 15 req/s: about 8 MB
  per policy); gzip about 19. The gzip stream carries no time stamp or file name;
- the PNGs of `plots.plot_all` (gpus.png too with an inventory);
- report.html: one self-contained page (inline style; PNGs referenced by relative file name) with
  the table, the SLO, the GPU lines and notes (`sim.report.table`), a short "how to read this",
  the plots, links to the data files and the scenario as a YAML block; report.md: the same table
  in Markdown with the plots linked.

With several models (`model_summaries`, `slos`), the table has a row per policy and model and a
total per policy, the SLO line gives each model's, and summary.json gains `slos` (by model) and
`models` ([{policy, model, every PolicySummary field}]). With a GPU inventory summary.json gains
`gpus` ([{policy, the `metrics.GpuSummary` fields}]); with notes, `notes` (one string each).

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

from llmscaler.sim.report import summary as metrics
from llmscaler.sim.report.pages import how_to_read, html_page, markdown_page, report_title
from llmscaler.sim.report.plots import plot_all
from llmscaler.sim.report.summary import PolicySummary
from llmscaler.sim.report.table import (
    gpu_lines,
    model_table_cells,
    slo_text,
    slos_text,
    table_cells,
)
from llmscaler.sim.report.table import notes as result_notes
from llmscaler.sim.vocabulary import SLO, SimResult

RequestsCsv = Literal['none', 'gz', 'plain']
REQUESTS_CSV: tuple[RequestsCsv, ...] = ('none', 'gz', 'plain')

_UNSAFE = re.compile(r'[^A-Za-z0-9._-]+')


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
    plain = _plain_object(summary)
    if summary.prefix_hit_rate is None:
        del plain['prefix_hit_rate']  # prefix caching off: the summary stays as it was
    return plain


def _plain_object(value: object) -> dict[str, object]:
    # Field order, not sorted: policy first reads better and is just as stable.
    assert dataclasses.is_dataclass(value)
    assert not isinstance(value, type)
    return {f.name: _plain(getattr(value, f.name)) for f in dataclasses.fields(value)}


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
    for prefix, series in (
        ('gateway_queue', tl.gateway_queues),
        ('gpus', tl.gpus),
        ('unbound', tl.unbound),
    ):
        for key in sorted(series):
            header.append(f'{prefix}:{key}')
            columns.append(column(series[key]))
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
    columns = [
        [r.rid for r in reqs],
        _blank_nan(np.round(arrival, 6).tolist()),
        [r.input_tokens for r in reqs],
        [r.output_tokens for r in reqs],
        [r.variant for r in reqs],
        _blank_nan(np.round(first - arrival, 6).tolist()),
        _blank_nan(np.round(itl, 6).tolist()),
        [int(r.failed) for r in reqs],
        [r.failure for r in reqs],
    ]
    header = ['rid', 'arrival', 'input', 'output', 'variant', 'ttft', 'mean_itl', 'failed']
    header.append('failure')
    if len({v.model_name for v in result.variants}) > 1:
        header.append('model')
        columns.append([r.model for r in reqs])
    with _open_text(path, compressed=compressed) as f:
        writer = csv.writer(f, lineterminator='\n')
        writer.writerow(header)
        writer.writerows(zip(*columns, strict=True))


def remarks(*, results: Sequence[SimResult]) -> list[str]:
    """What is said below the table: the GPU lines, then the results' notes."""
    return [*gpu_lines(results=results), *result_notes(results=results)]


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
    slos: Mapping[str, SLO] | None = None,
    model_summaries: Sequence[Mapping[str, PolicySummary]] | None = None,
) -> Path:
    """Write the report folder (see the module docstring); returns the path of report.html.

    `workload` describes the workload run (it follows the scenario's name in the title);
    `run` goes into summary.json as is; `requests_csv` says how the per-request files are
    written ('gz', 'plain') or that they are not ('none'). With several models, `slos` gives
    each model's SLO and `model_summaries` each result's summary per model.
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
    if slos is not None:
        document['slos'] = _plain(slos)
    if model_summaries is not None:
        document['models'] = [
            {'model': model, **_summary_object(summary)}
            for models in model_summaries
            for model, summary in models.items()
        ]
    gpus = [(r.policy, metrics.gpu_summary(result=r)) for r in results]
    if any(g is not None for _, g in gpus):
        document['gpus'] = [{'policy': p, **_plain_object(g)} for p, g in gpus if g is not None]
    said = result_notes(results=results)
    if said:
        document['notes'] = said
    text = json.dumps(document, indent=2, ensure_ascii=False, allow_nan=False)
    (out / 'summary.json').write_text(text + '\n', encoding='utf-8')
    pngs = plot_all(out=out, results=results, summaries=summaries, slo=slo)
    title = report_title(scenario=scenario, workload=workload)
    if model_summaries is not None:
        table = model_table_cells(
            summaries=summaries, model_summaries=model_summaries, reference=reference
        )
    else:
        table = table_cells(summaries=summaries, reference=reference)
    slo_line = slos_text(slos=slos) if slos is not None else slo_text(slo=slo)
    scenario_yaml = yaml.safe_dump(
        plain_scenario, sort_keys=True, allow_unicode=True, default_flow_style=False
    )
    how = how_to_read(
        "its model's SLO" if slos is not None else slo_text(slo=slo),
        reference,
        models=model_summaries is not None,
        gpus='gpus' in document,
    )
    page = html_page(
        title=title,
        slo=slo_line,
        table=table,
        notes=how,
        remarks=remarks(results=results),
        pngs=pngs,
        files=files,
        scenario_yaml=scenario_yaml,
    )
    (out / 'report.md').write_text(
        markdown_page(
            title=title, slo=slo_line, table=table, remarks=remarks(results=results), pngs=pngs
        ),
        encoding='utf-8',
    )
    path = out / 'report.html'
    path.write_text(page, encoding='utf-8')
    return path
