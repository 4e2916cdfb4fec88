"""Tests of the report figures: valid, deterministic PNGs of fixed size, whatever the input."""

from __future__ import annotations

import math
import struct
from pathlib import Path

import numpy as np
import pytest

from llmscaler.sim.report.plots import DPI, FILES, HEIGHT, MAX_POINTS, WIDTH, bin_series, plot_all
from llmscaler.sim.report.summary import summarize_all
from llmscaler.sim.vocabulary import SLO, SimResult
from tests.support.sim_fixtures import SLO_1, empty_result, tiny_result, tiny_timeline

SIGNATURE = b'\x89PNG\r\n\x1a\n'


def chunks(data: bytes) -> list[tuple[bytes, bytes]]:
    """(type, payload) of every PNG chunk."""
    out = []
    at = len(SIGNATURE)
    while at < len(data):
        (length,) = struct.unpack('>I', data[at : at + 4])
        kind = data[at + 4 : at + 8]
        out.append((kind, data[at + 8 : at + 8 + length]))
        at += 12 + length
    return out


def size(data: bytes) -> tuple[int, int]:
    kind, payload = chunks(data)[0]
    assert kind == b'IHDR'
    width, height = struct.unpack('>II', payload[:8])
    return int(width), int(height)


def run(out: Path, results: list[SimResult], slo: SLO = SLO_1) -> list[Path]:
    return plot_all(
        out=out, results=results, summaries=summarize_all(results=results, slo=slo), slo=slo
    )


def test_writes_five_valid_pngs(tmp_path: Path) -> None:
    results = [tiny_result('clairvoyant'), tiny_result('static:3')]
    paths = run(tmp_path, results)
    assert [p.name for p in paths] == list(FILES)
    for path in paths:
        data = path.read_bytes()
        assert data.startswith(SIGNATURE)
        assert len(data) > 1000
        assert [k for k, _ in chunks(data)][-1] == b'IEND'
    # 10 in × 100 dpi wide; single-axes figures 4 in high, replicas 1 + 2.2 in per policy.
    assert size(paths[0].read_bytes()) == (WIDTH * DPI, HEIGHT * DPI)
    assert size(paths[1].read_bytes()) == (1000, 540)


def test_png_bytes_are_deterministic_and_carry_no_text(tmp_path: Path) -> None:
    results = [tiny_result('a'), tiny_result('b')]
    runs = []
    for name in ('one', 'two'):
        (tmp_path / name).mkdir()
        runs.append([p.read_bytes() for p in run(tmp_path / name, results)])
    assert runs[0] == runs[1]
    for data in runs[0]:
        kinds = {k for k, _ in chunks(data)}
        assert kinds.isdisjoint({b'tEXt', b'iTXt', b'zTXt', b'tIME'})


def test_empty_inputs_still_give_figures(tmp_path: Path) -> None:
    for name, results in (('none', []), ('empty', [empty_result()])):
        out = tmp_path / name
        out.mkdir()
        for path in run(out, results, slo=SLO(ttft=math.nan, itl=math.nan)):
            assert path.read_bytes().startswith(SIGNATURE)


def test_bad_series_do_not_break_plots(tmp_path: Path) -> None:
    timeline = tiny_timeline(6)
    timeline.kv_usage = [math.nan, 0.5]
    timeline.replicas['a'] = [1, 2, 3, 4, 5, 6, 7, 8]
    timeline.waiting = []
    no_ttft = tiny_result(requests=[], timeline=timeline)
    zero = tiny_result('zero')
    for r in zero.requests:
        r.first_token = r.arrival
    paths = run(tmp_path, [no_ttft, zero], slo=SLO(ttft=0.0, itl=math.inf))
    assert all(p.stat().st_size > 0 for p in paths)


def test_long_run_is_binned_and_plotted(tmp_path: Path) -> None:
    # 24 h at 10 s: 8,640 samples per series; time axis in hours.
    timeline = tiny_timeline(8640)
    result = tiny_result(duration=86_400.0, timeline=timeline)
    paths = run(tmp_path, [result])
    assert size(paths[3].read_bytes()) == (1000, 260)


def test_binned_by_hand() -> None:
    n = 2 * MAX_POINTS + MAX_POINTS // 2
    x = np.arange(n, dtype=np.float64)
    y = np.arange(n, dtype=np.float64)
    y[3] = math.nan
    start, mean, low, high = bin_series(x, y)
    # ⌈2500 / 1000⌉ = 3 samples per bin, 834 bins; the last holds only sample 2499.
    assert start.shape == (834,)
    assert start[:2].tolist() == [0.0, 3.0]
    assert (mean[0], low[0], high[0]) == (1.0, 0.0, 2.0)
    # Bin 1 is [NaN, 4, 5]: the NaN is ignored.
    assert (mean[1], low[1], high[1]) == (4.5, 4.0, 5.0)
    assert (mean[-1], low[-1], high[-1]) == (2499.0, 2499.0, 2499.0)
    short = np.array([1.0, math.nan])
    same = bin_series(short, short)
    assert all(np.array_equal(a, short, equal_nan=True) for a in same)


def test_all_nan_bin_is_nan() -> None:
    y = np.full(3 * MAX_POINTS, math.nan)
    _, mean, low, high = bin_series(np.arange(y.shape[0], dtype=np.float64), y)
    assert np.isnan(mean).all()
    assert np.isnan(low).all()
    assert np.isnan(high).all()


def test_missing_folder_raises(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError):
        run(tmp_path / 'missing', [tiny_result()])
