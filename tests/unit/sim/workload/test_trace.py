"""Trace loading (Azure 2023/2024, generic CSV, JSONL), bad rows, windows and rate scaling."""

from __future__ import annotations

import json
import math
import pickle
import tempfile
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from llmscaler.sim.vocabulary import Trace
from llmscaler.sim.workload.formats import INPUT_NAMES, OUTPUT_NAMES, TIME_NAMES, TraceError
from llmscaler.sim.workload.trace import load_trace, scale_rate
from tests.support.paths import TRACES
from tests.support.prerequisites import need_file

CONV = TRACES / 'AzureLLMInferenceTrace_conv.csv'
CODE = TRACES / 'AzureLLMInferenceTrace_code.csv'
AZURE_HEADER = 'TIMESTAMP,ContextTokens,GeneratedTokens'


def write(directory: Path, name: str, text: str) -> Path:
    path = directory / name
    path.write_text(text, encoding='utf-8')
    return path


def trace_of(arrivals: list[float], tokens: list[tuple[int, int]] | None = None) -> Trace:
    pairs = tokens or [(100 + i, 1 + i) for i in range(len(arrivals))]
    return Trace(
        name='t',
        arrivals=np.asarray(arrivals, dtype=np.float64),
        input_tokens=np.asarray([p[0] for p in pairs], dtype=np.int64),
        output_tokens=np.asarray([p[1] for p in pairs], dtype=np.int64),
    )


# --- the real Azure 2023 files ------------------------------------------------------------------


@pytest.mark.parametrize(
    ('path', 'rows', 'minutes', 'mean_in', 'mean_out'),
    [
        # Figures measured on the Azure LLM inference traces 2023 (Azure/AzurePublicDataset).
        (CONV, 19_366, 58.4, 1155.0, 211.0),
        (CODE, 8_819, 57.3, 2048.0, 27.9),
    ],
)
def test_real_azure_files(
    path: Path, rows: int, minutes: float, mean_in: float, mean_out: float
) -> None:
    trace = load_trace(path=need_file(path, what='real traces live outside the repository'))
    assert len(trace) == rows
    assert trace.skipped_rows == 0
    assert trace.arrivals[0] == 0.0
    assert bool(np.all(np.diff(trace.arrivals) >= 0))
    assert trace.duration / 60 == pytest.approx(minutes, abs=0.1)
    assert float(trace.input_tokens.mean()) == pytest.approx(mean_in, rel=0.01)
    assert float(trace.output_tokens.mean()) == pytest.approx(mean_out, rel=0.01)
    assert trace.name == path.stem


def test_real_conv_first_gaps() -> None:
    trace = load_trace(path=need_file(CONV))
    # 18:15:50.9951690 − 18:15:46.6805900 = 4.3145790 s.
    assert trace.arrivals[1] == pytest.approx(4.314579, abs=1e-6)
    assert (int(trace.input_tokens[0]), int(trace.output_tokens[0])) == (374, 44)


# --- formats ------------------------------------------------------------------------------------


def test_azure_2023_timestamps(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        'a.csv',
        f'{AZURE_HEADER}\n'
        '2023-11-16 18:17:03.9799600,4808,10\n'
        '2023-11-16 18:17:04.0319600,3180,8\n'
        '2023-11-16 23:59:59.5000000,100,1\n'
        '2023-11-17 00:00:00.2500000,50,2\n',
    )
    trace = load_trace(path=path)
    # 18:17:04.03196 − 18:17:03.97996 = 0.052; 23:59:59.5 − 18:17:03.97996 = 5 h 42 min 55.52004
    # = 20575.52004; across midnight +0.75 s = 20576.27004.
    assert trace.arrivals.tolist() == pytest.approx([0.0, 0.052, 20575.52004, 20576.27004])
    assert trace.input_tokens.tolist() == [4808, 3180, 100, 50]
    assert trace.output_tokens.tolist() == [10, 8, 1, 2]


def test_azure_2024_offsets(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        'b.csv',
        f'{AZURE_HEADER}\n'
        '2024-05-10 00:00:00.010000+00:00,10,1\n'
        '2024-05-10 02:00:01.000000+02:00,20,2\n'
        '2024-05-09 23:00:02.000000-01:00,30,3\n'
        '2024-05-10T00:00:03Z,40,4\n',
    )
    trace = load_trace(path=path)
    # UTC: 00:00:00.01, 00:00:01, 00:00:02, 00:00:03 → 0, 0.99, 1.99, 2.99.
    assert trace.arrivals.tolist() == pytest.approx([0.0, 0.99, 1.99, 2.99])
    assert trace.input_tokens.tolist() == [10, 20, 30, 40]


def test_azure_header_in_any_case_and_order(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        'c.csv',
        'generatedtokens,timestamp,contexttokens\n7,2023-11-16 00:00:01.5,70\n8,2023-11-16 '
        '00:00:03.0,80\n',
    )
    trace = load_trace(path=path)
    assert trace.arrivals.tolist() == pytest.approx([0.0, 1.5])
    assert trace.input_tokens.tolist() == [70, 80]
    assert trace.output_tokens.tolist() == [7, 8]


@pytest.mark.parametrize('time_name', TIME_NAMES)
@pytest.mark.parametrize(
    ('in_name', 'out_name'),
    list(zip(INPUT_NAMES, OUTPUT_NAMES, strict=True)),
)
def test_generic_csv_column_names(
    tmp_path: Path, time_name: str, in_name: str, out_name: str
) -> None:
    path = write(
        tmp_path,
        'g.csv',
        f'extra,{time_name},{in_name},{out_name}\nx,10.5,100,20\ny,12.0,200,30\n',
    )
    trace = load_trace(path=path, fmt='csv')
    assert trace.arrivals.tolist() == pytest.approx([0.0, 1.5])
    assert trace.input_tokens.tolist() == [100, 200]
    assert trace.output_tokens.tolist() == [20, 30]


def test_generic_csv_auto_detected(tmp_path: Path) -> None:
    # Vidur's reformatted Splitwise header.
    path = write(
        tmp_path,
        'vidur.csv',
        'arrived_at,num_prefill_tokens,num_decode_tokens\n0.5,10,2\n2.0,20,3\n',
    )
    assert load_trace(path=path).arrivals.tolist() == pytest.approx([0.0, 1.5])


def test_milliseconds_column(tmp_path: Path) -> None:
    path = write(
        tmp_path, 'ms.csv', 'timestamp_ms,input_tokens,output_tokens\n1000,5,1\n1500,6,1\n'
    )
    # (1500 − 1000) ms = 0.5 s.
    assert load_trace(path=path).arrivals.tolist() == pytest.approx([0.0, 0.5])


def test_column_priority_and_quotes(tmp_path: Path) -> None:
    # 'timestamp' comes before 'time' in TIME_NAMES, input_length before prompt_tokens.
    path = write(
        tmp_path,
        'p.csv',
        '"time","timestamp","prompt_tokens","input_length","output_length"\n'
        '9,"1",99,10,"2"\n0,3,99,11,3\n',
    )
    trace = load_trace(path=path)
    assert trace.arrivals.tolist() == pytest.approx([0.0, 2.0])
    assert trace.input_tokens.tolist() == [10, 11]


def test_jsonl(tmp_path: Path) -> None:
    rows = [
        {'arrival_time': 3.0, 'prompt_tokens': 30, 'completion_tokens': 3},
        {'arrival_time': 1.0, 'prompt_tokens': 10, 'completion_tokens': 1, 'other': 'x'},
        {'arrival_time': '2.5', 'prompt_tokens': '25', 'completion_tokens': 2.0},
    ]
    path = write(tmp_path, 'j.jsonl', '\n'.join(json.dumps(r) for r in rows) + '\n')
    trace = load_trace(path=path)
    # Sorted: 1.0, 2.5, 3.0 → rebased 0, 1.5, 2.
    assert trace.arrivals.tolist() == pytest.approx([0.0, 1.5, 2.0])
    assert trace.input_tokens.tolist() == [10, 25, 30]
    assert trace.output_tokens.tolist() == [1, 2, 3]


def test_jsonl_detected_by_content_and_mooncake_milliseconds(tmp_path: Path) -> None:
    text = (
        '{"timestamp": 27482, "input_length": 6955, "output_length": 52, "hash_ids": [1, 2]}\n'
        '{"timestamp": 30535, "input_length": 6472, "output_length": 26, "hash_ids": [3]}\n'
    )
    path = write(tmp_path, 'mooncake.txt', text)
    # Mooncake timestamps are ms: (30535 − 27482) / 1000 = 3.053 s.
    assert load_trace(path=path).arrivals.tolist() == pytest.approx([0.0, 3.053])
    plain = write(tmp_path, 'plain.jsonl', text.replace(', "hash_ids": [1, 2]', ''))
    # Without hash_ids on the first object, `timestamp` is seconds: 30535 − 27482 = 3053.
    assert load_trace(path=plain).arrivals.tolist() == pytest.approx([0.0, 3053.0])


def test_unsorted_rows_are_sorted_stably(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        'u.csv',
        'time,input_tokens,output_tokens\n5,1,1\n3,2,1\n5,3,1\n3,4,1\n-1,5,1\n',
    )
    trace = load_trace(path=path)
    # Sorted times −1, 3, 3, 5, 5 (ties in file order) → rebased 0, 4, 4, 6, 6.
    assert trace.arrivals.tolist() == [0.0, 4.0, 4.0, 6.0, 6.0]
    assert trace.input_tokens.tolist() == [5, 2, 4, 1, 3]


def test_zero_output_is_read_as_one(tmp_path: Path) -> None:
    path = write(tmp_path, 'z.csv', 'time,input_tokens,output_tokens\n0,5,0\n1,5,3\n')
    assert load_trace(path=path).output_tokens.tolist() == [1, 3]


def test_blank_lines_and_bom_are_ignored(tmp_path: Path) -> None:
    path = tmp_path / 'bom.csv'
    path.write_bytes(b'\xef\xbb\xbftime,input_tokens,output_tokens\r\n\r\n0,5,1\r\n\r\n2,6,1\r\n')
    trace = load_trace(path=path)
    assert trace.arrivals.tolist() == [0.0, 2.0]
    assert trace.skipped_rows == 0


# --- bad rows -----------------------------------------------------------------------------------

GENERIC = 'time,input_tokens,output_tokens\n'


@pytest.mark.parametrize(
    ('name', 'header', 'bad', 'why'),
    [
        ('g.csv', GENERIC, '1.0,10', 'expected 3 columns, got 2'),
        ('g.csv', GENERIC, '1.0,10,5,7', 'expected 3 columns, got 4'),
        ('g.csv', GENERIC, 'soon,10,5', "time 'soon' is not a number"),
        ('g.csv', GENERIC, 'nan,10,5', "time 'nan' is not finite"),
        ('g.csv', GENERIC, 'inf,10,5', "time 'inf' is not finite"),
        ('g.csv', GENERIC, '1.0,ten,5', "input tokens 'ten' is not a number"),
        ('g.csv', GENERIC, '1.0,10.5,5', "input tokens '10.5' is not a whole number"),
        ('g.csv', GENERIC, '1.0,,5', "input tokens '' is not a number"),
        ('g.csv', GENERIC, '1.0,0,5', 'input tokens 0 < 1'),
        ('g.csv', GENERIC, '1.0,-3,5', 'input tokens -3 < 1'),
        ('g.csv', GENERIC, '1.0,10,-1', 'output tokens -1 < 0'),
        ('g.csv', GENERIC, '1.0,10,2000000000', 'output tokens 2000000000 exceeds 1000000000'),
        ('a.csv', f'{AZURE_HEADER}\n', 'yesterday,10,5', 'is not a date-time'),
        ('a.csv', f'{AZURE_HEADER}\n', '2023-13-01 00:00:00.0,10,5', 'invalid date'),
        ('a.csv', f'{AZURE_HEADER}\n', '2023-11-16 24:00:00.0,10,5', 'invalid time of day'),
        ('j.jsonl', '', '{"time": 1, "input_tokens": 2', 'not valid JSON'),
        ('j.jsonl', '', '[1, 2, 3]', 'expected a JSON object, got list'),
        ('j.jsonl', '', '{"time": 1, "input_tokens": 2}', "missing key 'output_tokens'"),
        ('j.jsonl', '', '{"time": null, "input_tokens": 2, "output_tokens": 1}', 'None'),
        ('j.jsonl', '', '{"time": true, "input_tokens": 2, "output_tokens": 1}', 'True'),
    ],
)
def test_bad_row_names_file_and_line(
    tmp_path: Path, name: str, header: str, bad: str, why: str
) -> None:
    if name.endswith('.jsonl'):
        good = ['{"time": 0, "input_tokens": 5, "output_tokens": 1}'] * 2
    elif header.startswith('TIMESTAMP'):
        good = ['2023-11-16 00:00:00.0,5,1', '2023-11-16 00:00:09.0,5,1']
    else:
        good = ['0,5,1', '9,5,1']
    # header (if any) + good row + blank line + bad row + good row: the bad row is on line 4
    # for CSV (the header is line 1) and line 3 for JSONL.
    text = header + f'{good[0]}\n\n{bad}\n{good[1]}\n'
    path = write(tmp_path, name, text)
    line = 4 if header else 3
    with pytest.raises(TraceError) as caught:
        load_trace(path=path)
    message = str(caught.value)
    assert message.startswith(f'{path}:{line}: ')
    assert why in message
    assert '\n' not in message
    assert caught.value.line == line

    skipped = load_trace(path=path, skip_bad=True)
    assert len(skipped) == 2
    assert skipped.skipped_rows == 1


def test_skip_bad_counts_every_bad_row(tmp_path: Path) -> None:
    path = write(tmp_path, 's.csv', GENERIC + '0,5,1\nx,1,1\n1,0,1\n2,5\n3,5,1\n4,5,1.5\n')
    trace = load_trace(path=path, skip_bad=True)
    assert trace.arrivals.tolist() == [0.0, 3.0]
    assert trace.skipped_rows == 4


def test_all_rows_bad_is_an_error_even_when_skipping(tmp_path: Path) -> None:
    path = write(tmp_path, 's.csv', GENERIC + 'x,1,1\n1,0,1\n')
    with pytest.raises(TraceError, match=r'no valid rows \(2 skipped\)'):
        load_trace(path=path, skip_bad=True)


def test_missing_file(tmp_path: Path) -> None:
    path = tmp_path / 'nope.csv'
    with pytest.raises(TraceError) as caught:
        load_trace(path=path)
    assert str(caught.value) == f'{path}: no such file'


def test_directory_is_not_a_trace(tmp_path: Path) -> None:
    with pytest.raises(TraceError, match='cannot read'):
        load_trace(path=tmp_path)


def test_binary_file(tmp_path: Path) -> None:
    path = tmp_path / 'bin.csv'
    path.write_bytes(b'\xff\xfe\x00\x01')
    with pytest.raises(TraceError, match='not UTF-8 text'):
        load_trace(path=path)


@pytest.mark.parametrize('text', ['', '\n\n', '   \n'])
def test_empty_file(tmp_path: Path, text: str) -> None:
    path = write(tmp_path, 'e.csv', text)
    with pytest.raises(TraceError) as caught:
        load_trace(path=path)
    assert str(caught.value) == f'{path}:1: empty file'


def test_header_only(tmp_path: Path) -> None:
    path = write(tmp_path, 'h.csv', f'{AZURE_HEADER}\n')
    with pytest.raises(TraceError, match='no data rows'):
        load_trace(path=path)


@pytest.mark.parametrize(
    ('name', 'text', 'line'),
    [
        ('x.csv', 'when,input_tokens,output_tokens\n1,2,3\n', 1),
        ('x.csv', '\ntime,tokens_in,output_tokens\n1,2,3\n', 2),
        ('x.csv', 'time,input_tokens\n1,2\n', 1),
        ('x.jsonl', '\n{"when": 1, "input_tokens": 2, "output_tokens": 3}\n', 2),
    ],
)
def test_unknown_header_lists_accepted_names(
    tmp_path: Path, name: str, text: str, line: int
) -> None:
    path = write(tmp_path, name, text)
    with pytest.raises(TraceError) as caught:
        load_trace(path=path)
    message = str(caught.value)
    assert message.startswith(f'{path}:{line}: unknown columns')
    for accepted in ('arrived_at', '_ms', 'num_prefill_tokens', 'GeneratedTokens'):
        assert accepted in message
    assert '\n' not in message


def test_azure_file_read_as_generic_csv_fails_on_the_first_row(tmp_path: Path) -> None:
    path = write(tmp_path, 'a.csv', f'{AZURE_HEADER}\n2023-11-16 00:00:00.0,5,1\n')
    with pytest.raises(TraceError, match=r':2: time .* is not a number'):
        load_trace(path=path, fmt='csv')


def test_unknown_format_is_a_value_error(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="unknown trace format 'parquet'"):
        load_trace(path=tmp_path / 'x', fmt='parquet')


def test_trace_error_pickles() -> None:
    error = TraceError(path='f.csv', line=7, why='bad')
    copy = pickle.loads(pickle.dumps(error))
    assert (str(copy), copy.line, copy.path) == ('f.csv:7: bad', 7, 'f.csv')


# --- windows ------------------------------------------------------------------------------------


@pytest.fixture
def ten_rows(tmp_path: Path) -> Path:
    # Arrivals 100, 101, …, 109 → rebased 0 … 9; input = 10 + i.
    rows = ''.join(f'{100 + i},{10 + i},1\n' for i in range(10))
    return write(tmp_path, 'w.csv', GENERIC + rows)


def test_window_selects_and_rebases(ten_rows: Path) -> None:
    trace = load_trace(path=ten_rows, start=2.5, duration=4.0)
    # [2.5, 6.5) holds rebased 3, 4, 5, 6 → rebased again to 0 … 3.
    assert trace.arrivals.tolist() == [0.0, 1.0, 2.0, 3.0]
    assert trace.input_tokens.tolist() == [13, 14, 15, 16]


def test_window_end_is_exclusive_and_defaults(ten_rows: Path) -> None:
    assert load_trace(path=ten_rows, duration=3.0).input_tokens.tolist() == [10, 11, 12]
    assert load_trace(path=ten_rows, start=7.0).input_tokens.tolist() == [17, 18, 19]
    assert len(load_trace(path=ten_rows, start=0.0, duration=math.inf)) == 10


def test_window_past_the_end_is_empty(ten_rows: Path) -> None:
    trace = load_trace(path=ten_rows, start=50.0)
    assert len(trace) == 0
    assert trace.duration == 0.0


@pytest.mark.parametrize(
    ('start', 'duration'),
    [(-1.0, None), (math.nan, None), (math.inf, None), (0.0, 0.0), (0.0, -5.0), (0.0, math.nan)],
)
def test_bad_window_is_a_value_error(ten_rows: Path, start: float, duration: float | None) -> None:
    with pytest.raises(ValueError, match='window'):
        load_trace(path=ten_rows, start=start, duration=duration)


# --- rate scaling -------------------------------------------------------------------------------


def test_scale_rate_on_the_real_trace() -> None:
    trace = load_trace(path=need_file(CONV))
    half = scale_rate(trace=trace, factor=0.5, seed=1)
    more = scale_rate(trace=trace, factor=2.5, seed=1)
    # 19366 × 0.5 = 9683; 19366 × 2.5 = 48415. Binomial sd ≈ 70 and ≈ 70: 3 % is > 8 sd.
    assert len(half) == pytest.approx(9683, rel=0.03)
    assert len(more) == pytest.approx(48415, rel=0.03)
    # Time-preserving: the scaled trace spans the same hour.
    assert more.arrivals[0] == 0.0
    assert more.duration == trace.duration
    assert half.duration == pytest.approx(trace.duration, rel=0.01)
    # Token means stay those of the original (1155 in, 211 out) within 3 %.
    assert float(more.input_tokens.mean()) == pytest.approx(1155, rel=0.03)
    assert float(half.output_tokens.mean()) == pytest.approx(211, rel=0.03)
    # The per-minute shape is kept: counts per minute correlate strongly with the original.
    bins = np.arange(0, trace.duration + 60, 60)
    base = np.histogram(trace.arrivals, bins)[0]
    scaled = np.histogram(more.arrivals, bins)[0]
    assert float(np.corrcoef(base, scaled)[0, 1]) > 0.95


def test_scale_rate_worked_example() -> None:
    trace = trace_of([0.0, 10.0, 20.0])
    doubled = scale_rate(trace=trace, factor=2.0, seed=3)
    # factor 2: each request once more (frac 0), its copy in [arrival, next arrival); the last
    # gap is 0, so the last copy sits on the original: 6 requests, two at t=20.
    assert len(doubled) == 6
    assert bool(np.all(np.diff(doubled.arrivals) >= 0))
    assert doubled.arrivals.tolist().count(20.0) == 2
    for i, t in enumerate(doubled.arrivals.tolist()):
        original = min(int(t // 10), 2)
        assert int(doubled.input_tokens[i]) == 100 + original
    assert scale_rate(trace=trace, factor=1.0, seed=3) is trace


@pytest.mark.parametrize('factor', [0.0, -1.0, math.nan, math.inf])
def test_scale_rate_rejects_bad_factors(factor: float) -> None:
    with pytest.raises(ValueError, match='rate scale factor'):
        scale_rate(trace=trace_of([0.0, 1.0]), factor=factor, seed=0)


def test_scale_rate_of_an_empty_trace() -> None:
    empty = trace_of([])
    assert len(scale_rate(trace=empty, factor=3.0, seed=0)) == 0


def test_load_trace_applies_scale_rate(ten_rows: Path) -> None:
    plain = load_trace(path=ten_rows)
    scaled = load_trace(path=ten_rows, rate_scale=3.5, seed=9)
    expected = scale_rate(trace=plain, factor=3.5, seed=9)
    assert scaled.arrivals.tolist() == expected.arrivals.tolist()
    assert scaled.input_tokens.tolist() == expected.input_tokens.tolist()


arrival_lists = st.lists(
    st.floats(min_value=0.0, max_value=1000.0, allow_nan=False), min_size=1, max_size=60
).map(sorted)


@given(
    arrivals=arrival_lists,
    factor=st.floats(min_value=0.05, max_value=6.0),
    seed=st.integers(min_value=0, max_value=2**32),
)
def test_scale_rate_properties(arrivals: list[float], factor: float, seed: int) -> None:
    trace = trace_of(arrivals)
    scaled = scale_rate(trace=trace, factor=factor, seed=seed)
    again = scale_rate(trace=trace, factor=factor, seed=seed)
    assert scaled.arrivals.tolist() == again.arrivals.tolist()
    assert scaled.input_tokens.tolist() == again.input_tokens.tolist()
    assert bool(np.all(np.diff(scaled.arrivals) >= 0))
    if len(scaled):
        assert scaled.arrivals[0] >= arrivals[0]
        assert scaled.arrivals[-1] <= arrivals[-1]
    pairs = set(zip(trace.input_tokens.tolist(), trace.output_tokens.tolist(), strict=True))
    got = zip(scaled.input_tokens.tolist(), scaled.output_tokens.tolist(), strict=True)
    assert set(got) <= pairs
    n = len(arrivals)
    if factor >= 1:
        # Every original kept; at most ceil(factor) copies of each in all.
        assert set(arrivals) <= set(scaled.arrivals.tolist())
        assert n * math.floor(factor) <= len(scaled) <= n * math.ceil(factor)
    else:
        assert len(scaled) <= n


rows_strategy = st.lists(
    st.tuples(
        st.integers(min_value=0, max_value=10**6),
        st.integers(min_value=1, max_value=10**6),
        st.integers(min_value=1, max_value=10**4),
    ),
    min_size=1,
    max_size=40,
)


@settings(max_examples=50)
@given(rows=rows_strategy, jsonl=st.booleans())
def test_round_trip(rows: list[tuple[int, int, int]], jsonl: bool) -> None:
    # Times in ms so every value is exact in the file and after the division.
    with tempfile.TemporaryDirectory() as directory:
        if jsonl:
            lines = [
                json.dumps({'arrival_ms': t, 'input_tokens': i, 'output_tokens': o})
                for t, i, o in rows
            ]
            path = write(Path(directory), 'r.jsonl', '\n'.join(lines))
        else:
            body = ''.join(f'{t},{i},{o}\n' for t, i, o in rows)
            path = write(Path(directory), 'r.csv', 'arrival_ms,input_tokens,output_tokens\n' + body)
        trace = load_trace(path=path)
    expected = sorted(rows, key=lambda row: row[0])  # stable, like the loader
    first = expected[0][0]
    assert trace.arrivals.tolist() == pytest.approx([(t - first) / 1000 for t, _, _ in expected])
    assert trace.input_tokens.tolist() == [i for _, i, _ in expected]
    assert trace.output_tokens.tolist() == [o for _, _, o in expected]
