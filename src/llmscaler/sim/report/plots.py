"""The simulator report's figures: load, replicas, latency, KV cache and queues over time.

Why: a table says which policy was cheapest; the plots say why — when it scaled, how late, and
what the requests felt meanwhile. `plot_all` writes five PNGs into a folder:

- arrivals.png: requests per minute (one line per distinct trace; usually all runs share one;
  with several models, one line per model of the first run);
- replicas.png: one subplot per policy, replicas per variant stacked (what is paid for), the
  ready total as a dashed line; all subplots share both axes;
- ttft_p99.png: TTFT p99 per arrival minute per policy (completed requests only; log scale), with
  the SLO as a red dashed line;
- kv_usage.png: fleet mean KV-cache usage (%), one subplot per policy;
- queue.png: requests waiting in replicas plus the gateway queue, one subplot per policy;
- gpus.png, only when a run had a GPU inventory: GPUs bound per accelerator type, one subplot
  per policy, the inventory of each type as a dashed line of the same colour.

Overlaid noisy gauges of several policies are unreadable, hence one subplot each (shared axes).
A series longer than MAX_POINTS samples (a 24 h run has 8,640) is drawn as the mean of
consecutive bins with the bins' min–max range shaded, so spikes stay visible.

Time runs in minutes, or hours when the longest run exceeds three hours; a run's last sample
is held for one sample interval.

Rendering is headless and deterministic: figures are drawn on the Agg canvas explicitly
(`FigureCanvasAgg`, no pyplot), so no display is needed and the process-wide backend is left
alone; the style is matplotlib's 'default' (a user's matplotlibrc does not leak in); figure sizes
and dpi are fixed. PNG files carry no creation time unless asked to, and the one text chunk
matplotlib adds by default, 'Software' (its version), is removed with metadata={'Software': None}
(the option matplotlib documents for `print_png`; `svg.hashsalt` only concerns SVG). Equal input
therefore gives equal bytes with one matplotlib version. Series are drawn as whole arrays, so a
24 h run (8,640 samples per series) costs no Python loop per point.

Bad input: no results, or runs without samples, give figures saying so rather than an error;
series shorter than the timeline's time axis are padded with NaN, longer ones cut; NaN values
are gaps, except in the stacked replica counts where they count as 0; non-positive TTFTs are
not drawn on the log axis. A NaN, infinite or non-positive SLO TTFT draws no SLO line. The
output folder must exist and be writable (OSError otherwise).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import matplotlib as mpl
import matplotlib.style
import numpy as np
from matplotlib.artist import Artist
from matplotlib.axes import Axes
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.patches import Patch
from matplotlib.ticker import LogFormatter, MaxNLocator

from llmscaler.sim.report.summary import PolicySummary, model_part, models_of, per_minute
from llmscaler.sim.vocabulary import SLO, FloatArray, SimResult

if TYPE_CHECKING:
    from matplotlib.typing import RcKeyType  # matplotlib >= 3.9; annotations only

DPI = 100
WIDTH = 10.0
HEIGHT = 4.0
SUBPLOT_HEIGHT = 2.2
GAUGE_HEIGHT = 1.6
MAX_POINTS = 1000
FILES = ('arrivals.png', 'replicas.png', 'ttft_p99.png', 'kv_usage.png', 'queue.png')
GPU_FILE = 'gpus.png'
_RC: dict[RcKeyType, Any] = {
    'path.simplify': True,
    'agg.path.chunksize': 10_000,
    'svg.hashsalt': 'llmscaler',
}


def _policy_style(index: int) -> dict[str, Any]:
    # Ten colours, then the same colours dashed: a policy keeps its look in every figure.
    return {
        'color': mpl.colormaps['tab10'](index % 10),
        'linestyle': '-' if index < 10 else '--',
        'linewidth': 1.2,
    }


def _time_unit(results: Sequence[SimResult]) -> tuple[float, str]:
    longest = max((r.duration for r in results if math.isfinite(r.duration)), default=0.0)
    return (3600.0, 'time (h)') if longest > 3 * 3600.0 else (60.0, 'time (min)')


def _series(values: Sequence[float], n: int) -> FloatArray:
    data = np.asarray(values, dtype=np.float64)[:n]
    if data.shape[0] < n:
        data = np.concatenate((data, np.full(n - data.shape[0], math.nan)))
    return data


def _hold(x: FloatArray, end: float, *ys: FloatArray) -> tuple[FloatArray, ...]:
    """x with `end` appended and each y with its last value repeated: with steps-post the last
    sample is then drawn for its sample interval instead of as a bare vertical edge."""
    return (np.append(x, end), *(np.append(y, y[-1:]) for y in ys))


def _end(x: FloatArray, result: SimResult, unit: tuple[float, str]) -> float:
    step = result.sample_interval
    return float(x[-1]) + (step / unit[0] if math.isfinite(step) and step > 0.0 else 0.0)


def _variants(result: SimResult) -> list[str]:
    names = {v.name for v in result.variants}
    return sorted(names | set(result.timeline.replicas) | set(result.timeline.ready))


def _figure(height: float = HEIGHT) -> Figure:
    fig = Figure(figsize=(WIDTH, height), dpi=DPI, layout='constrained')
    FigureCanvasAgg(fig)
    return fig


def _save(fig: Figure, path: Path) -> Path:
    fig.savefig(path, format='png', dpi=DPI, metadata={'Software': None})
    return path


def _legend(ax: Axes) -> None:
    if ax.get_legend_handles_labels()[0]:
        ax.legend(loc='upper left', bbox_to_anchor=(1.01, 1.0), fontsize='small', frameon=False)


def _empty(ax: Axes, text: str) -> None:
    ax.text(0.5, 0.5, text, ha='center', va='center', transform=ax.transAxes, color='gray')


def _arrivals(path: Path, results: Sequence[SimResult], unit: tuple[float, str]) -> Path:
    fig = _figure()
    ax = fig.add_subplot()
    seen: set[str] = set()
    models = models_of(result=results[0]) if results else []
    if len(models) > 1:  # one line per model: the runs share the workload
        lines = [(m, model_part(result=results[0], model=m)) for m in models]
    else:
        lines = [(r.trace or '(trace)', r) for r in results]
    for index, (label, result) in enumerate(lines):
        if label in seen:
            continue
        seen.add(label)
        series = per_minute(result=result)
        counts = series['arrivals']
        edges = np.arange(counts.shape[0] + 1, dtype=np.float64) * 60.0 / unit[0]
        style = _policy_style(index)
        ax.stairs(counts, edges, baseline=None, label=label, **style)
    if not seen:
        _empty(ax, 'no runs')
    ax.set_title('Arrivals per minute')
    ax.set_xlabel(unit[1])
    ax.set_ylabel('requests / minute')
    ax.set_ylim(bottom=0)
    if len(seen) > 1:
        _legend(ax)
    return _save(fig, path)


def _replicas(
    path: Path,
    results: Sequence[SimResult],
    summaries: Sequence[PolicySummary],
    unit: tuple[float, str],
) -> Path:
    rows = max(1, len(results))
    fig = _figure(1.0 + SUBPLOT_HEIGHT * rows)
    axes = fig.subplots(rows, 1, sharex=True, sharey=True, squeeze=False)[:, 0]
    by_policy = {s.policy: s for s in reversed(summaries)}
    names = sorted({name for r in results for name in _variants(r)})
    colours = {n: mpl.colormaps['Set2'](i % 8) for i, n in enumerate(names)}
    for ax, result in zip(axes, results, strict=False):
        timeline = result.timeline
        n = len(timeline.times)
        x = np.asarray(timeline.times, dtype=np.float64) / unit[0]
        title = result.policy
        summary = by_policy.get(result.policy)
        if summary is not None:
            title += f'  (${summary.cost_usd:,.2f}'
            if math.isfinite(summary.mean_replicas):
                title += f', mean {summary.mean_replicas:.2f} replicas'
            title += ')'
        ax.set_title(title, loc='left', fontsize='medium')
        if n == 0:
            _empty(ax, 'no samples')
            continue
        end = _end(x, result, unit)
        lower = np.zeros(n)
        ready = np.zeros(n)
        for name in _variants(result):
            count = np.nan_to_num(_series(timeline.replicas.get(name, []), n))
            xs, low, high = _hold(x, end, lower, lower + count)
            ax.fill_between(xs, low, high, step='post', color=colours[name], lw=0)
            lower = lower + count
            ready += np.nan_to_num(_series(timeline.ready.get(name, []), n))
        xs, ready = _hold(x, end, ready)
        ax.plot(xs, ready, drawstyle='steps-post', color='black', ls='--', lw=1.0)
        ax.set_ylabel('replicas')
    if not results:
        _empty(axes[0], 'no runs')
    axes[0].yaxis.set_major_locator(MaxNLocator(integer=True))
    axes[0].set_ylim(bottom=0)
    axes[-1].set_xlabel(unit[1])
    # One legend for every subplot: variants may be missing from some runs' timelines.
    handles: list[Artist] = [Patch(color=colours[n], label=n) for n in names]
    handles.append(Line2D([], [], color='black', ls='--', lw=1.0, label='ready'))
    if names:
        axes[0].legend(
            handles=handles,
            loc='upper left',
            bbox_to_anchor=(1.01, 1.0),
            fontsize='small',
            frameon=False,
        )
    fig.suptitle('Replicas per variant (stacked) and ready replicas (dashed)')
    return _save(fig, path)


def _ttft(path: Path, results: Sequence[SimResult], slo: SLO, unit: tuple[float, str]) -> Path:
    fig = _figure()
    ax = fig.add_subplot()
    drawn = False
    for index, result in enumerate(results):
        series = per_minute(result=result)
        p99 = series['ttft_p99']
        p99 = np.where(p99 > 0.0, p99, math.nan)
        if not np.any(np.isfinite(p99)):
            continue
        drawn = True
        # The last minute's value is held to the minute's end, as `stairs` would draw it.
        x = np.append(series['start'], series['start'][-1] + 60.0) / unit[0]
        y = np.append(p99, p99[-1])
        ax.plot(x, y, drawstyle='steps-post', label=result.policy, **_policy_style(index))
    has_slo = math.isfinite(slo.ttft) and slo.ttft > 0.0
    if has_slo:
        ax.axhline(slo.ttft, color='red', ls='--', lw=1.0, label=f'SLO {slo.ttft:g} s')
    if drawn or has_slo:
        ax.set_yscale('log')
        # Plain numbers (0.5, 2, 10) rather than 2×10⁰: latencies span one or two decades.
        ax.yaxis.set_major_formatter(LogFormatter(labelOnlyBase=False))
        ax.yaxis.set_minor_formatter(LogFormatter(labelOnlyBase=False, minor_thresholds=(2, 0.5)))
    if not drawn:
        _empty(ax, 'no completed requests')
    ax.set_title('TTFT p99 per arrival minute (completed requests)')
    ax.set_xlabel(unit[1])
    ax.set_ylabel('seconds')
    _legend(ax)
    return _save(fig, path)


def bin_series(
    x: FloatArray, y: FloatArray
) -> tuple[FloatArray, FloatArray, FloatArray, FloatArray]:
    """(start, mean, min, max) of consecutive bins of samples, at most MAX_POINTS bins; a short
    series comes back as is (min = max = mean). NaN samples are ignored; an all-NaN bin is NaN."""
    size = math.ceil(x.shape[0] / MAX_POINTS)
    if size <= 1:
        return x, y, y, y
    pad = (-y.shape[0]) % size
    bins = np.concatenate((y, np.full(pad, math.nan))).reshape(-1, size)
    known = ~np.isnan(bins)
    count = known.sum(axis=1)
    total = np.where(known, bins, 0.0).sum(axis=1)
    mean = np.where(count > 0, total / np.maximum(count, 1), math.nan)
    return x[::size], mean, np.fmin.reduce(bins, axis=1), np.fmax.reduce(bins, axis=1)


def _gauge(
    path: Path,
    results: Sequence[SimResult],
    unit: tuple[float, str],
    *,
    title: str,
    ylabel: str,
    queue: bool,
) -> Path:
    rows = max(1, len(results))
    fig = _figure(1.0 + GAUGE_HEIGHT * rows)
    axes = fig.subplots(rows, 1, sharex=True, sharey=True, squeeze=False)[:, 0]
    binned = False
    for index, (ax, result) in enumerate(zip(axes, results, strict=False)):
        ax.set_title(result.policy, loc='left', fontsize='medium')
        ax.set_ylabel(ylabel)
        timeline = result.timeline
        n = len(timeline.times)
        if n == 0:
            _empty(ax, 'no samples')
            continue
        x = np.asarray(timeline.times, dtype=np.float64) / unit[0]
        if queue:
            y = _series(timeline.waiting, n) + _series(timeline.gateway_queue, n)
        else:
            y = _series(timeline.kv_usage, n) * 100.0
        xb, mean, low, high = bin_series(x, y)
        style = _policy_style(index)
        shaded = xb.shape[0] < n
        binned = binned or shaded
        xb, mean, low, high = _hold(xb, _end(x, result, unit), mean, low, high)
        if shaded:
            ax.fill_between(xb, low, high, step='post', color=style['color'], alpha=0.25, lw=0)
        ax.plot(xb, mean, drawstyle='steps-post', **style)
    if not results:
        _empty(axes[0], 'no runs')
    if queue:
        axes[0].set_ylim(bottom=0)
    else:
        axes[0].set_ylim(0.0, 105.0)
    axes[-1].set_xlabel(unit[1])
    fig.suptitle(title + (' — bin mean, shaded min–max' if binned else ''))
    return _save(fig, path)


def _gpus(path: Path, results: Sequence[SimResult], unit: tuple[float, str]) -> Path:
    rows = max(1, len(results))
    fig = _figure(1.0 + GAUGE_HEIGHT * rows)
    axes = fig.subplots(rows, 1, sharex=True, sharey=True, squeeze=False)[:, 0]
    types = sorted({a for r in results for a in r.inventory})
    colours = {a: mpl.colormaps['tab10'](i % 10) for i, a in enumerate(types)}
    for ax, result in zip(axes, results, strict=False):
        ax.set_title(result.policy, loc='left', fontsize='medium')
        ax.set_ylabel('GPUs')
        timeline = result.timeline
        n = len(timeline.times)
        if n == 0 or not result.inventory:
            _empty(ax, 'no samples' if result.inventory else 'no inventory')
            continue
        x = np.asarray(timeline.times, dtype=np.float64) / unit[0]
        end = _end(x, result, unit)
        for accelerator in sorted(result.inventory):
            xs, used = _hold(x, end, _series(timeline.gpus.get(accelerator, []), n))
            colour = colours[accelerator]
            ax.plot(xs, used, drawstyle='steps-post', color=colour, lw=1.2, label=accelerator)
            ax.axhline(result.inventory[accelerator], color=colour, ls='--', lw=1.0)
    axes[0].set_ylim(bottom=0)
    axes[-1].set_xlabel(unit[1])
    _legend(axes[0])
    fig.suptitle('GPUs bound per accelerator type (dashed: the inventory)')
    return _save(fig, path)


def plot_all(
    *, out: Path, results: Sequence[SimResult], summaries: Sequence[PolicySummary], slo: SLO
) -> list[Path]:
    """Write the figures into `out` (an existing folder); returns their paths in the order
    arrivals, replicas, ttft_p99, kv_usage, queue, and gpus when a run had an inventory."""
    unit = _time_unit(results)
    paths = [out / name for name in FILES]
    with matplotlib.style.context('default'), mpl.rc_context(_RC):
        extra = []
        if any(r.inventory for r in results):
            extra.append(_gpus(out / GPU_FILE, results, unit))
        return [
            _arrivals(paths[0], results, unit),
            _replicas(paths[1], results, summaries, unit),
            _ttft(paths[2], results, slo, unit),
            _gauge(
                paths[3],
                results,
                unit,
                title='KV-cache usage (fleet mean)',
                ylabel='% of KV blocks',
                queue=False,
            ),
            _gauge(
                paths[4],
                results,
                unit,
                title='Queued requests (waiting in replicas + gateway queue)',
                ylabel='requests',
                queue=True,
            ),
            *extra,
        ]
