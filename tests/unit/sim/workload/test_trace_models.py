"""Traces of several models: the model column of CSV and JSONL files, selecting and splitting.

| case | expectation |
|---|---|
| `load_trace(model=M)` | M's rows only, on the file's timeline (not rebased to M's first) |
| `load_by_model` | one trace per model, values mapped to names; every model gets one |
| a row naming no known model | `file:line` error, or skipped and counted with skip_bad |
| a JSON model that is not a string | a malformed row |
| no model column (an Azure trace), a model absent from the file | one-line `TraceError` |
| a window | cut on the file's timeline, the same for every model |
| rate scaling per model | seeded per model, deterministic |
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from llmscaler.sim.workload.formats import MODEL_NAMES, TraceError
from llmscaler.sim.workload.trace import load_by_model, load_trace

CSV = """time,input_tokens,output_tokens,model
10.0,100,5,chat
10.5,200,6,code
11.0,300,7,chat
13.0,400,8,code
14.0,500,9,chat
"""


def write(directory: Path, name: str, text: str) -> Path:
    path = directory / name
    path.write_text(text, encoding='utf-8')
    return path


def test_the_model_column_names() -> None:
    assert MODEL_NAMES == ('model', 'model_id', 'model_name')


def test_one_model_of_a_file_keeps_the_files_timeline(tmp_path: Path) -> None:
    path = write(tmp_path, 'mixed.csv', CSV)
    code = load_trace(path=path, model='code')
    assert code.arrivals.tolist() == [0.5, 3.0]
    assert code.input_tokens.tolist() == [200, 400]
    chat = load_trace(path=path, model='chat')
    assert chat.arrivals.tolist() == [0.0, 1.0, 4.0]
    # Without a model, every row, as before.
    assert len(load_trace(path=path)) == 5


def test_a_file_split_by_model(tmp_path: Path) -> None:
    path = write(tmp_path, 'mixed.csv', CSV.replace(',code', ',org/code-model'))
    split = load_by_model(
        path=path, models={'chat': 'chat', 'org/code-model': 'code', 'idle': 'idle'}
    )
    assert sorted(split.traces) == ['chat', 'code', 'idle']
    assert split.traces['code'].arrivals.tolist() == [0.5, 3.0]
    assert split.traces['chat'].output_tokens.tolist() == [5, 7, 9]
    assert len(split.traces['idle']) == 0
    assert split.skipped_rows == 0


def test_a_window_is_cut_on_the_files_timeline(tmp_path: Path) -> None:
    path = write(tmp_path, 'mixed.csv', CSV)
    split = load_by_model(path=path, models={'chat': 'chat', 'code': 'code'}, start=0.5)
    # The window starts at the file's request at 0.5 (code's): rebased there for both.
    assert split.traces['code'].arrivals.tolist() == [0.0, 2.5]
    assert split.traces['chat'].arrivals.tolist() == [0.5, 3.5]


def test_a_row_of_an_unknown_model_is_malformed(tmp_path: Path) -> None:
    path = write(tmp_path, 'mixed.csv', CSV + '15.0,100,5,gpt-4\n')
    with pytest.raises(TraceError) as caught:
        load_by_model(path=path, models={'chat': 'chat', 'code': 'code'})
    assert str(caught.value) == (
        f"{path}:7: model 'gpt-4' is not a model of the scenario; models: chat, code"
    )
    split = load_by_model(path=path, models={'chat': 'chat', 'code': 'code'}, skip_bad=True)
    assert split.skipped_rows == 1
    assert sum(len(t) for t in split.traces.values()) == 5
    # Picking one model's rows ignores the others.
    assert len(load_trace(path=path, model='chat')) == 3


def test_jsonl_with_a_model_key(tmp_path: Path) -> None:
    rows = [
        {'timestamp': 0, 'input_length': 10, 'output_length': 2, 'model_id': 'a'},
        {'timestamp': 1, 'input_length': 11, 'output_length': 3, 'model_id': 'b'},
        {'timestamp': 2, 'input_length': 12, 'output_length': 4, 'model_id': 7},
        {'timestamp': 3, 'input_length': 13, 'output_length': 5},
    ]
    path = write(tmp_path, 'mixed.jsonl', '\n'.join(json.dumps(r) for r in rows) + '\n')
    with pytest.raises(TraceError, match=r':3: model must be a string, got int'):
        load_trace(path=path, model='a')
    split = load_by_model(path=path, models={'a': 'a', 'b': 'b'}, skip_bad=True)
    assert split.skipped_rows == 2  # the number, and the row without the key
    assert [len(split.traces[m]) for m in ('a', 'b')] == [1, 1]
    keyless = write(
        tmp_path, 'keyless.jsonl', '\n'.join(json.dumps(r) for r in rows[:2] + rows[3:]) + '\n'
    )
    with pytest.raises(TraceError, match=r":3: missing key 'model_id'"):
        load_by_model(path=keyless, models={'a': 'a', 'b': 'b'})


def test_a_file_without_a_model_column_cannot_be_split(tmp_path: Path) -> None:
    azure = write(
        tmp_path,
        'azure.csv',
        'TIMESTAMP,ContextTokens,GeneratedTokens\n2023-11-16 18:17:03.98,100,5\n',
    )
    with pytest.raises(TraceError, match=r'no model column .* an Azure trace holds one model'):
        load_trace(path=azure, model='chat')
    with pytest.raises(TraceError, match='no model column'):
        load_by_model(path=azure, models={'chat': 'chat'})
    mixed = write(tmp_path, 'mixed.csv', CSV)
    with pytest.raises(TraceError, match="no request of model 'chta'; the file has chat, code"):
        load_trace(path=mixed, model='chta')


def test_rate_scaling_is_per_model_and_deterministic(tmp_path: Path) -> None:
    lines = ['time,input_tokens,output_tokens,model']
    lines += [f'{i * 0.1:.1f},100,5,{"chat" if i % 2 else "code"}' for i in range(400)]
    path = write(tmp_path, 'many.csv', '\n'.join(lines) + '\n')
    models = {'chat': 'chat', 'code': 'code'}
    first = load_by_model(path=path, models=models, rate_scale=0.5, seed=3)
    again = load_by_model(path=path, models=models, rate_scale=0.5, seed=3)
    for model in models:
        assert first.traces[model].arrivals.tolist() == again.traces[model].arrivals.tolist()
        assert 50 < len(first.traces[model]) < 150
    # Each model is thinned with its own draw, not the same positions.
    chat = (first.traces['chat'].arrivals * 10).round().astype(int) // 2
    code = (first.traces['code'].arrivals * 10).round().astype(int) // 2
    assert chat.tolist() != code.tolist()
