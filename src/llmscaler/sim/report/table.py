"""The simulator's summary table: one row per policy, or per policy and model, and GPU lines.

Why: the terminal table is the answer of `llmscaler simulate` at a glance, and the HTML and
Markdown reports (`sim.report.writer`) repeat it; its cells are made once, here, so every face
quotes the same rounded figures.

One model: a row per policy (`table_cells`), as it always was. Several models
(`model_table_cells`): per policy a row for each model, then the policy's total ('all'), with a
Model column after the policy (the policy named on its first row only); the title gives each
model's SLO. With a GPU inventory, `gpu_lines` says per policy the peak GPUs bound against the
inventory per accelerator type and how long replicas waited for GPUs; `notes` are the results'
remarks (the clairvoyant baseline's fleet not fitting the inventory).

Bad input: NaN figures show as 'n/a'; rich markup in policy and model names is printed literally.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

from rich import box
from rich.cells import cell_len
from rich.console import Console
from rich.measure import Measurement
from rich.table import Table
from rich.text import Text

from llmscaler.sim.report.summary import PolicySummary, gpu_summary
from llmscaler.sim.vocabulary import SLO, SimResult


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
    cached = any(s.prefix_hit_rate is not None for s in summaries)
    if cached:
        headers.append('Prefix\nhits %')
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
                *([_num(s.prefix_hit_rate, '.1f', 100.0)] if cached else []),
            ]
        )
    return headers, rows


def one_line(header: str) -> str:
    return header.replace('\n', ' ')


def render_table(
    *,
    summaries: Sequence[PolicySummary],
    slo: SLO,
    reference: str = 'clairvoyant',
    model_summaries: Sequence[Mapping[str, PolicySummary]] | None = None,
    slos: Mapping[str, SLO] | None = None,
) -> Table:
    """The summary as a rich table, one row per policy (per policy and model with
    `model_summaries`), the SLO (each model's with `slos`) in the title."""
    if model_summaries is not None:
        headers, rows = model_table_cells(
            summaries=summaries, model_summaries=model_summaries, reference=reference
        )
    else:
        headers, rows = table_cells(summaries=summaries, reference=reference)
    title = slos_text(slos=slos) if slos is not None else slo_text(slo=slo)
    table = Table(
        title=f'SLO: {title}',
        title_justify='left',
        box=box.SIMPLE_HEAD,
        collapse_padding=True,
        pad_edge=False,
    )
    # Numbers are never cut (min_width is their widest cell); on a narrow terminal the policy
    # column folds instead.
    table.add_column(headers[0], justify='left', overflow='fold', min_width=8)
    texts = 2 if model_summaries is not None else 1  # the model column is text too
    if texts == 2:
        table.add_column(headers[1], justify='left', overflow='fold', min_width=3)
    for index, header in enumerate(headers[texts:], start=texts):
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
    model_summaries: Sequence[Mapping[str, PolicySummary]] | None = None,
    slos: Mapping[str, SLO] | None = None,
) -> None:
    """Print the table whole: on a console narrower than the table (80 columns is also what a
    pipe gets) it is printed at its natural width rather than squeezed, which would cut numbers
    and drop the policy column."""
    table = render_table(
        summaries=summaries,
        slo=slo,
        reference=reference,
        model_summaries=model_summaries,
        slos=slos,
    )
    natural = Measurement.get(console, console.options.update_width(10_000), table).maximum
    if natural > console.width:
        # A fixed width overrides the console's; crop=False keeps the long lines.
        table.width = natural
    console.print(table, crop=False)


def model_table_cells(
    *,
    summaries: Sequence[PolicySummary],
    model_summaries: Sequence[Mapping[str, PolicySummary]],
    reference: str = 'clairvoyant',
) -> tuple[list[str], list[list[str]]]:
    """Headers and rows of the table of a fleet of several models (see the module docstring);
    `model_summaries[i]` are the models of `summaries[i]`."""
    # All at once, so that every row has the columns any row needs (the failure reasons).
    everything = [*summaries, *(s for models in model_summaries for s in models.values())]
    headers, cells = table_cells(summaries=everything, reference=reference)
    per_model = iter(cells[len(summaries) :])
    rows: list[list[str]] = []
    for total, models in zip(cells[: len(summaries)], model_summaries, strict=True):
        group = [[model, *next(per_model)[1:]] for model in models]
        group.append(['all', *total[1:]])
        for index, row in enumerate(group):
            rows.append([total[0] if index == 0 else '', *row])
    return [headers[0], 'Model', *headers[1:]], rows


def slos_text(*, slos: Mapping[str, SLO]) -> str:
    """Each model's SLO, e.g. 'chat: TTFT ≤ 1 s, mean ITL ≤ 70 ms; big: ...'."""
    return '; '.join(f'{model}: {slo_text(slo=slo)}' for model, slo in sorted(slos.items()))


def _minutes(seconds: float) -> str:
    return f'{seconds / 60:.1f} min'


def gpu_lines(*, results: Sequence[SimResult]) -> list[str]:
    """One line per policy run with a GPU inventory (none without one)."""
    lines = []
    for result in results:
        gpus = gpu_summary(result=result)
        if gpus is None:
            continue
        use = ', '.join(f'{a} {gpus.peak[a]}/{n}' for a, n in gpus.inventory.items())
        line = f'{result.policy}: peak GPUs {use}'
        if gpus.waited:
            line += (
                f'; {gpus.waited} replica{"s" if gpus.waited > 1 else ""} waited for GPUs, '
                f'{_minutes(gpus.wait_seconds)} in all, longest {_minutes(gpus.longest_wait)}'
            )
            if gpus.never_bound:
                line += f' ({gpus.never_bound} never got them)'
        else:
            line += '; no replica waited for GPUs'
        lines.append(line)
    return lines


def notes(*, results: Sequence[SimResult]) -> list[str]:
    """The results' notes, in order."""
    return [note for result in results for note in result.notes]
