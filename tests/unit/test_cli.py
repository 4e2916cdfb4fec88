"""`llmscaler decide` and `llmscaler schema`: the JSON face of the core.

Matrix covered: the two shipped examples decide; state written and read back; a bad snapshot
(missing file, invalid JSON, bad field, unknown key, bad state, bad config file, invalid
ConfigMap entry) gives one line on stderr naming file/field/why and exit status 2 with no
traceback; the committed JSON Schema equals the generated one; the console script runs.
Strict input: coerced types ("3", true, 4.0, 1e30 for an int), non-finite numbers, values out of
range, min above max, duplicate variants, 5,000-digit numbers, 100,000 nested brackets, oversized
files, the same for state files, and `--now nan`: one line naming the field, exit 2. Output is
strict JSON; a missing KV usage holds and says so; the schema publishes the ranges. Output paths
are checked before any work (`--state-out` into a missing directory, `simulate --out` on a file);
a reader that closes the pipe early gets no traceback; `--version`; `simulate`, `tune`, `emulate`
and `demo` without a package of the `sim` extra (`emulate` and `demo`: aiohttp too) say what to
install, in one line. `simulate`'s options: a request time-out that is not a positive finite
duration, or a start fleet naming no variant, outside the bounds or with `--warm-start`, gives one
line and exit 2 before any work; a run names its trace in the header and the report, prints a
line per policy without the progress bar, and records the version and wall time in summary.json;
the per-request files can be left out.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from importlib import metadata
from pathlib import Path

import pytest

from llmscaler import io
from llmscaler.cli import main
from tests.support.paths import ROOT
from tests.support.ray_cluster import free_port, ray_program

TWO = ROOT / 'examples' / 'snapshot-two-variants.json'
PD = ROOT / 'examples' / 'snapshot-pd.json'
TOKEN_CONFIG = ROOT / 'examples' / 'config-token.yaml'


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def decide_with_config(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, text: str
) -> tuple[int, str, str]:
    """`llmscaler decide` on the two-variant example with `text` as its config.yaml."""
    config = tmp_path / 'config.yaml'
    config.write_text(text)
    return run(capsys, 'decide', '--snapshot', str(TWO), '--config', str(config))


def test_two_variant_example_scales_the_cheapest_variant(
    capsys: pytest.CaptureFixture[str],
) -> None:
    code, out, err = run(capsys, 'decide', '--snapshot', str(TWO))
    assert code == 0, err
    result = json.loads(out)
    targets = {d['variant']: (d['current'], d['target']) for d in result['decisions']}
    # l40s (cost 1.90) is cheaper than h100 (3.90): V1 adds one replica to it.
    assert targets == {'llama-8b-h100': (1, 1), 'llama-8b-l40s': (2, 3)}
    assert result['now'] == 1000.0


def test_pd_example_decides_per_role_with_the_token_config(
    capsys: pytest.CaptureFixture[str],
) -> None:
    code, out, err = run(capsys, 'decide', '--snapshot', str(PD), '--config', str(TOKEN_CONFIG))
    assert code == 0, err
    decisions = json.loads(out)['decisions']
    assert {d['variant'] for d in decisions} == {'llama-70b-decode', 'llama-70b-prefill'}
    assert all(d['analyzer'] == 'saturation-token' for d in decisions)
    decode = next(d for d in decisions if d['variant'] == 'llama-70b-decode')
    # Decode replicas are at 0.88/0.91 KV usage, above the 0.80 threshold: more are needed.
    assert decode['target'] > decode['current']


def test_state_out_feeds_the_next_run(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    state = tmp_path / 'state.json'
    code, out, _ = run(
        capsys, 'decide', '--snapshot', str(TWO), '--config', str(TOKEN_CONFIG),
        '--state-out', str(state),
    )  # fmt: skip
    assert code == 0
    assert json.loads(state.read_text()) == json.loads(out)['state']
    code, out, err = run(
        capsys, 'decide', '--snapshot', str(TWO), '--config', str(TOKEN_CONFIG),
        '--state', str(state), '--now', '1030',
    )  # fmt: skip
    assert code == 0, err
    assert json.loads(out)['now'] == 1030.0


def bad_input(tmp_path: Path, text: str) -> Path:
    path = tmp_path / 'snap.json'
    path.write_text(text)
    return path


@pytest.mark.parametrize(
    ('text', 'expected'),
    [
        ('{"variants": [', 'line 1 column'),
        ('[]', '(top level)'),
        ('{"variants": [{"name": "a", "namespace": "n", "model_id": "m", "cost": "x"}]}',
         'variants.0.cost: Input should be a valid number'),
        ('{"variants": [{"name": "a", "namespace": "n", "model_id": "m", "cots": 1}]}',
         'variants.0.cots: Unexpected keyword argument'),
        ('{"replicas": [{"pod": "p", "variant": "a", "namespace": "n"}]}',
         'replicas.0.observed_at: Field required'),
        ('{"variants": [{"name": "a", "namespace": "n", "model_id": "m", "role": "x"}]}',
         "variants.0.role: Input should be 'both', 'prefill' or 'decode'"),
    ],
)  # fmt: skip
def test_bad_snapshot_gives_one_line_and_exit_2(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, text: str, expected: str
) -> None:
    path = bad_input(tmp_path, text)
    code, out, err = run(capsys, 'decide', '--snapshot', str(path))
    assert code == 2
    assert out == ''
    lines = err.strip().splitlines()
    assert len(lines) == 1
    assert str(path) in lines[0]
    assert expected in lines[0]
    assert 'Traceback' not in err


def test_missing_and_non_utf8_files(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    code, _, err = run(capsys, 'decide', '--snapshot', str(tmp_path / 'none.json'))
    assert code == 2
    assert 'none.json: no such file' in err
    binary = tmp_path / 'bin.json'
    binary.write_bytes(b'{"a": "\xff"}')
    code, _, err = run(capsys, 'decide', '--snapshot', str(binary))
    assert code == 2
    assert 'not UTF-8' in err


def test_bad_state_file(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    state = tmp_path / 'state.json'
    state.write_text('{"last_desired": [["ns/a", "many"]]}')
    code, _, err = run(capsys, 'decide', '--snapshot', str(TWO), '--state', str(state))
    assert code == 2
    assert 'state.json: last_desired.0.1' in err


def test_invalid_configmap_entry_is_named(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    code, out, err = decide_with_config(
        capsys,
        tmp_path,
        'configMaps:\n'
        '  - metadata: {name: wva-saturation-scaling-config}\n'
        '    data:\n'
        '      default: |\n'
        '        kvCacheThreshold: 1.5\n',
    )
    assert code == 2
    assert out == ''
    assert 'wva-saturation-scaling-config' in err
    assert 'kvCacheThreshold' in err
    assert '1.5' in err


def test_unparseable_config_file(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    code, _, err = decide_with_config(capsys, tmp_path, 'settings: [unclosed\n')
    assert code == 2
    assert len(err.strip().splitlines()) == 1
    assert 'config.yaml' in err


def test_committed_schema_matches_the_code() -> None:
    committed = json.loads((ROOT / 'docs' / 'snapshot.schema.json').read_text())
    assert committed == io.snapshot_schema()


def test_examples_validate_against_the_schema_types() -> None:
    for path in (TWO, PD):
        document = io.load_snapshot(path=path)
        assert document.variants


def test_console_script_runs() -> None:
    script = shutil.which('llmscaler', path=str(Path(sys.executable).parent))
    assert script is not None
    done = subprocess.run(
        [script, 'decide', '--snapshot', str(TWO)], capture_output=True, text=True, check=False
    )
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)['decisions']


def test_config_warning_is_printed_but_not_fatal(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    code, out, err = decide_with_config(
        capsys,
        tmp_path,
        'configMaps:\n'
        '  - metadata: {name: wva-model-scale-to-zero-config}\n'
        '    data:\n'
        '      default: |\n'
        '        enable_scale_to_zero: true\n'
        '        retention_period: 48h\n',
    )
    assert code == 0
    assert json.loads(out)['decisions']
    assert 'warning' in err
    assert 'retention_period' in err


def test_emulate_passes_its_options_through(capsys: pytest.CaptureFixture[str]) -> None:
    # Bad options are the emulator's own to reject: status 2 and its usage line, no traceback.
    code = main(['emulate', '--replicas', '-1'])
    _, err = capsys.readouterr()
    assert code == 2
    assert 'replicas' in err
    assert 'Traceback' not in err


# --- strict input: types, finiteness, ranges, size and depth ----------------------------------


def mutated(tmp_path: Path, old: str, new: str) -> Path:
    text = TWO.read_text()
    assert old in text
    return bad_input(tmp_path, text.replace(old, new, 1))


@pytest.mark.parametrize(
    ('old', 'new', 'expected'),
    [
        ('"max_replicas": 4', '"max_replicas": "3"',
         'variants.0.max_replicas: Input should be a valid integer (got "3")'),
        ('"max_replicas": 4', '"max_replicas": true',
         'variants.0.max_replicas: Input should be a valid integer (got true)'),
        ('"max_replicas": 4', '"max_replicas": 1e30', 'variants.0.max_replicas: Input should be'),
        ('"max_replicas": 4', '"max_replicas": 4.0', 'variants.0.max_replicas: Input should be'),
        ('"max_replicas": 4', '"max_replicas": 2147483648',
         'variants.0.max_replicas: Input should be less than or equal to 2147483647'),
        ('"max_replicas": 4', '"max_replicas": 0', 'variants.0.max_replicas: Input should be'),
        ('"current_replicas": 1', '"current_replicas": -1', 'variants.0.current_replicas'),
        ('"min_replicas": 0', '"min_replicas": 5',
         'variants.0.min_replicas: 5 is above max_replicas 4'),
        ('"cost": 3.9', '"cost": -1', 'variants.0.cost: Input should be greater than or equal'),
        ('"cost": 3.9', '"cost": "3.9"', 'variants.0.cost: Input should be a valid number'),
        ('"kv_usage": 0.75', '"kv_usage": 7', 'replicas.0.kv_usage: Input should be less than'),
        ('"kv_usage": 0.75', '"kv_usage": -0.1', 'replicas.0.kv_usage: Input should be greater'),
        ('"kv_usage": 0.75', '"kv_usage": 1e999', 'replicas.0.kv_usage: Input should be a finite'),
        ('"kv_usage": 0.75', '"kv_usage": NaN', 'replicas.0.kv_usage: Input should be a finite'),
        ('"queue_length": 2', '"queue_length": -Infinity', 'replicas.0.queue_length'),
        ('"observed_at": 995.0', '"observed_at": NaN', 'replicas.0.observed_at: Input should'),
        ('"prefix_cache_hit_rate": 0.2', '"prefix_cache_hit_rate": 1.2',
         'replicas.0.prefix_cache_hit_rate'),
        ('"num_gpu_blocks": 27500', '"num_gpu_blocks": 0', 'replicas.0.num_gpu_blocks'),
        ('"now": 1000.0', '"now": NaN', 'now: Input should be a finite number'),
        ('"now": 1000.0', '"now": ' + '9' * 5000, 'number out of range'),
        ('"cost": 3.9', '"cost": ' + '9' * 1000, 'variants.0.cost: Input should be a finite'),
        ('"max_model_len": 8192', '"max_model_len": -5', 'variants.0.engine.max_model_len'),
    ],
)  # fmt: skip
def test_strict_values_give_one_line_naming_the_field(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, old: str, new: str, expected: str
) -> None:
    path = mutated(tmp_path, old, new)
    code, out, err = run(capsys, 'decide', '--snapshot', str(path))
    assert (code, out) == (2, '')
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert lines[0].startswith(f'llmscaler: {path}: ')
    assert expected in lines[0]
    assert len(lines[0]) < 400


def test_duplicate_variants_are_refused(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    document = json.loads(TWO.read_text())
    document['variants'].append(document['variants'][0])
    path = bad_input(tmp_path, json.dumps(document))
    code, _, err = run(capsys, 'decide', '--snapshot', str(path))
    assert code == 2
    assert 'variants.2: duplicate variant llm-inference/llama-8b-h100 (also variants.0)' in err


@pytest.mark.parametrize('text', ['[' * 100_000, '{"variants": ' + '[' * 100_000, '9' * 5000])
def test_deep_or_huge_json_gives_one_line(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, text: str
) -> None:
    path = bad_input(tmp_path, text)
    code, _, err = run(capsys, 'decide', '--snapshot', str(path))
    assert code == 2
    assert len(err.strip().splitlines()) == 1
    assert 'Invalid JSON' in err


def test_oversized_file_is_refused_before_parsing(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(io, 'MAX_INPUT_BYTES', 100)
    code, _, err = run(capsys, 'decide', '--snapshot', str(TWO))
    assert code == 2
    assert 'larger than' in err


@pytest.mark.parametrize(
    ('text', 'expected'),
    [
        ('{"last_desired": [["ns/a", "3"]]}', 'last_desired.0.1: Input should be a valid integer'),
        ('{"last_desired": [["ns/a", -1]]}', 'last_desired.0.1: Input should be greater'),
        ('{"last_informative": [["m|ns|a", NaN]]}', 'last_informative.0.1: Input should be a'),
        ('{"k2_history": [["k", [{"value": -5, "at": 1.0}]]]}', 'k2_history.0.1.0.value'),
        ('{"last_desired": {"ns/a": 3}}', 'last_desired: Input should be a valid'),
    ],
)
def test_state_files_are_as_strict(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, text: str, expected: str
) -> None:
    state = tmp_path / 'state.json'
    state.write_text(text)
    code, out, err = run(capsys, 'decide', '--snapshot', str(TWO), '--state', str(state))
    assert (code, out) == (2, '')
    assert len(err.strip().splitlines()) == 1
    assert f'{state}: {expected}' in err


@pytest.mark.parametrize('now', ['nan', 'inf', '-inf', '1e999', 'soon'])
def test_now_must_be_finite(capsys: pytest.CaptureFixture[str], now: str) -> None:
    code, out, err = run(capsys, 'decide', '--snapshot', str(TWO), f'--now={now}')
    assert (code, out) == (2, '')
    assert err == f'llmscaler: --now: must be a finite number of seconds, got {now!r}\n'


def strict_json(text: str) -> object:
    def refuse(constant: str) -> object:
        raise AssertionError(f'{constant} is not JSON')

    return json.loads(text, parse_constant=refuse)


def test_output_is_strict_json(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, 'decide', '--snapshot', str(TWO), '--now', '1e300')
    assert code == 0
    result = strict_json(out)
    assert isinstance(result, dict)
    assert result['now'] == 1e300


def test_a_replica_without_kv_usage_holds_and_says_so(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    path = mutated(tmp_path, '"kv_usage": 0.75', '"kv_usage": null')
    code, out, _ = run(capsys, 'decide', '--snapshot', str(path))
    assert code == 0
    h100 = next(d for d in json.loads(out)['decisions'] if d['variant'] == 'llama-8b-h100')
    assert h100['target'] >= h100['current']
    assert (h100['metrics_available'], h100['metrics_reason']) == (False, 'MetricsMissing')
    assert 'llama-8b-h100-7c9f-abcde: kv_usage missing' in h100['message']


def test_schema_publishes_the_ranges() -> None:
    defs = io.snapshot_schema()['$defs']
    kv = defs['ReplicaMetrics']['properties']['kv_usage']['anyOf'][0]
    assert (kv['minimum'], kv['maximum']) == (0.0, 1.0)
    replicas = defs['Variant']['properties']['max_replicas']
    assert (replicas['minimum'], replicas['maximum']) == (1, 2**31 - 1)
    assert defs['Variant']['properties']['cost']['minimum'] == 0.0


# --- output paths, pipes, --version -----------------------------------------------------------


def test_state_out_into_a_missing_directory_fails_before_deciding(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    target = tmp_path / 'missing' / 'state.json'
    code, out, err = run(capsys, 'decide', '--snapshot', str(TWO), '--state-out', str(target))
    assert (code, out) == (2, '')
    assert err == f'llmscaler: --state-out {target}: directory {target.parent} does not exist\n'
    code, out, err = run(capsys, 'decide', '--snapshot', str(TWO), '--state-out', str(tmp_path))
    assert (code, out) == (2, '')
    assert 'is a directory' in err


def test_simulate_out_on_an_existing_file_fails_before_the_run(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    existing = tmp_path / 'report'
    existing.write_text('keep me')
    code, out, err = run(capsys, 'simulate', '--out', str(existing), '--no-progress')
    assert code == 2
    assert out == ''
    assert err == f'llmscaler: --out {existing}: exists and is not a directory\n'
    assert existing.read_text() == 'keep me'


@pytest.mark.parametrize('value', ['0', '-2', 'two', '1.5', '', 'nan'])
def test_simulate_refuses_a_jobs_that_is_not_a_whole_number_of_one_or_more_in_one_line(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, value: str
) -> None:
    code, out, err = run(
        capsys, 'simulate', f'--jobs={value}', '--out', str(tmp_path / 'o'), '--no-progress'
    )
    assert (code, out) == (2, '')
    assert err == f'llmscaler: --jobs: must be a whole number ≥ 1, got {value!r}\n'
    assert not (tmp_path / 'o').exists()


def test_simulate_on_a_ray_address_nobody_answers_fails_in_one_line(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    ray_program()  # Ray installed: the address is what is missing
    port = free_port()  # nothing listens on it
    code, out, err = run(
        capsys, 'simulate', '--ray', f'127.0.0.1:{port}', '--out', str(tmp_path / 'o')
    )
    assert (code, out) == (2, '')
    assert err.startswith(f'llmscaler: --ray 127.0.0.1:{port}: no Ray cluster answers there')
    assert err.count('\n') == 1


def test_simulate_with_ray_but_without_the_extra_says_what_to_install(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(sys.modules, 'ray', None)  # what `import ray` finds absent
    code, out, err = run(capsys, 'simulate', '--ray', 'auto', '--out', str(tmp_path / 'o'))
    assert (code, out) == (2, '')
    assert err == "llmscaler: --ray needs Ray: pip install 'llmscaler[sim,ray]' (ray>=2.9)\n"


def test_simulate_takes_jobs_or_ray_not_both(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    code, out, err = run(
        capsys, 'simulate', '--jobs', '2', '--ray', 'auto', '--out', str(tmp_path / 'o')
    )
    assert (code, out) == (2, '')
    assert err.startswith('llmscaler: --jobs and --ray: one or the other')


def test_a_reader_that_stops_early_ends_the_command_quietly(tmp_path: Path) -> None:
    # Output larger than a pipe buffer, so the write meets the closed pipe.
    document = json.loads(TWO.read_text())
    document['variants'] = [dict(document['variants'][0], name=f'v{i}') for i in range(2000)]
    document['replicas'] = []
    path = bad_input(tmp_path, json.dumps(document))
    script = shutil.which('llmscaler', path=str(Path(sys.executable).parent))
    assert script is not None
    with subprocess.Popen(
        [script, 'decide', '--snapshot', str(path)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    ) as process:
        assert process.stdout is not None
        assert process.stderr is not None
        assert process.stdout.read(10) == b'{\n  "now":'
        process.stdout.close()
        err = process.stderr.read().decode()
        code = process.wait(timeout=60)
    assert err == ''
    assert code == 0


def test_version_is_the_package_version_and_the_cores_build() -> None:
    script = shutil.which('llmscaler', path=str(Path(sys.executable).parent))
    assert script is not None
    env = {k: v for k, v in os.environ.items() if k != 'PYTHONPATH'}
    done = subprocess.run(
        [script, '--version'], capture_output=True, text=True, check=False, env=env
    )
    assert done.returncode == 0
    version = metadata.version('llmscaler')
    assert done.stdout == f'llmscaler {version}\n'


@pytest.mark.parametrize(
    ('command', 'package'),
    [
        *(
            (command, package)
            for command in ('simulate', 'tune', 'emulate', 'demo')
            for package in ('numpy', 'matplotlib', 'rich')
        ),
        # The servers of the emulated pods and of the development cluster.
        ('emulate', 'aiohttp'),
        ('demo', 'aiohttp'),
    ],
)
def test_simulator_commands_without_the_sim_extra_say_what_to_install(
    command: str, package: str, tmp_path: Path
) -> None:
    # The package is blocked as if it were not installed (None in sys.modules fails its import).
    code = (
        f'import sys; sys.modules[{package!r}] = None; '
        'from llmscaler.cli import main; '
        f'sys.exit(main([{command!r}, "--out", {str(tmp_path / "out")!r}]))'
    )
    done = subprocess.run(
        [sys.executable, '-c', code], capture_output=True, text=True, check=False, timeout=60
    )
    assert (done.returncode, done.stdout) == (2, '')
    assert done.stderr == (
        f"llmscaler {command} needs the simulator's packages: pip install 'llmscaler[sim]'\n"
    )


# ---- simulate: time-outs, start fleet, reporting ----------------------------------------------


def small_trace(tmp_path: Path) -> Path:
    path = tmp_path / 'small-trace.csv'
    rows = [f'{i * 0.5},{200 + i},{50 + i}' for i in range(120)]
    path.write_text('timestamp,input_length,output_length\n' + '\n'.join(rows) + '\n')
    return path


@pytest.mark.parametrize('value', ['0', '-5', '0s', 'nan', 'inf', 'soon', '10x', '', '-1m'])
def test_simulate_refuses_a_bad_request_timeout(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, value: str
) -> None:
    out = tmp_path / 'report'
    code, stdout, err = run(
        capsys, 'simulate', f'--request-timeout={value}', '--out', str(out), '--no-progress'
    )
    assert (code, stdout) == (2, '')
    assert err.startswith('llmscaler: --request-timeout: must be a positive, finite duration')
    assert err.count('\n') == 1
    assert not out.exists()


@pytest.mark.parametrize(
    ('argv', 'expected'),
    [
        (['--initial', 'h100=9'], 'scenario: initial.h100: 9 is outside [0, 8]'),
        (['--initial', 'tpu=1'], 'scenario: initial.tpu: no such variant; variants: h100, l40s'),
        (['--initial', 'h100'], '--initial: expected VARIANT=N'),
        (['--initial', 'h100=1', '--warm-start'], 'give initial or warm_start, not both'),
    ],
)
def test_simulate_refuses_a_bad_start_fleet(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, argv: list[str], expected: str
) -> None:
    out = tmp_path / 'report'
    code, stdout, err = run(capsys, 'simulate', *argv, '--out', str(out), '--no-progress')
    assert (code, stdout) == (2, '')
    assert expected in err
    assert err.count('\n') == 1
    assert not out.exists()


def test_simulate_names_its_trace_and_reports_each_policy_as_it_ends(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    out = tmp_path / 'report'
    code, stdout, err = run(
        capsys, 'simulate', '--trace', str(small_trace(tmp_path)), '--policy', 'static:1',
        '--policy', 'clairvoyant', '--request-timeout', '1m30s', '--initial', 'h100=2,l40s=0',
        '--out', str(out), '--no-progress',
    )  # fmt: skip
    assert code == 0, err
    header = ' '.join(stdout.split())  # the console wraps long lines
    assert 'default: Llama-3.1-8B on H100 and L40S — trace small-trace.csv: 120 requests' in header
    assert 'conversation-like' not in header
    assert 'start h100=2, l40s=0' in header
    assert 'requests time out after 90 s' in header
    lines = stdout.splitlines()
    calibration = [line for line in lines if line.startswith('calibration: ')]
    assert len(calibration) == 1
    assert 'h100 ' in calibration[0]
    # One line per policy, in order: name, cost, SLO attainment, wall time.
    ended = [line for line in lines if line.startswith(('static:1: $', 'clairvoyant: $'))]
    assert [line.split(': $')[0] for line in ended] == ['static:1', 'clairvoyant']
    assert all(', SLO ' in line and line.endswith(' s') for line in ended)
    summary = json.loads((out / 'summary.json').read_text())
    assert summary['workload'] == 'trace small-trace.csv'
    assert summary['run']['version'] == metadata.version('llmscaler')
    assert summary['run']['wall_seconds'] > 0
    assert summary['run']['initial'] == {'h100': 2, 'l40s': 0}
    assert [p['policy'] for p in summary['run']['policies']] == ['static:1', 'clairvoyant']
    assert summary['scenario']['settings']['request_timeout'] == 90.0
    assert summary['files'][0]['requests'] == 'requests-static_1.csv.gz'
    assert (out / 'requests-static_1.csv.gz').read_bytes()[:2] == b'\x1f\x8b'
    assert (
        'Simulation report: default: Llama-3.1-8B on H100 and L40S — trace small-trace.csv'
        in (out / 'report.html').read_text()
    )


def test_simulate_can_leave_out_the_request_files(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    out = tmp_path / 'report'
    code, _, err = run(
        capsys, 'simulate', '--trace', str(small_trace(tmp_path)), '--policy', 'static:1',
        '--requests-csv', 'none', '--out', str(out), '--no-progress',
    )  # fmt: skip
    assert code == 0, err
    assert not any(p.name.startswith('requests-') for p in out.iterdir())
    with pytest.raises(SystemExit) as exited:
        main(['simulate', '--requests-csv', 'zip', '--out', str(out)])
    assert exited.value.code == 2
    assert "invalid choice: 'zip'" in capsys.readouterr().err


@pytest.mark.parametrize('command', ['simulate', 'tune'])
def test_an_unknown_native_engine_mode_gives_one_line_and_exit_2(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, command: str
) -> None:
    monkeypatch.setenv('LLMSCALER_NATIVE', 'yes')
    code, out, err = run(capsys, command)
    assert code == 2
    assert out == ''
    assert err.strip() == "llmscaler: LLMSCALER_NATIVE must be one of auto, off, got 'yes'"
