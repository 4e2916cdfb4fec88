"""Campaign `snapshots`: mutated snapshot and configuration files through `llmscaler decide`.

Why: `llmscaler decide` is the core's JSON face; whoever writes the file controls every figure.
Its promise: strict input (types, ranges, finiteness, size and depth), one line on stderr naming
the field and exit 2 for anything bad, otherwise exit 0 with valid JSON on stdout, and the core's
safety rules on what it accepted.

Inputs start from the two snapshots in examples/ and from generated ones (one or two models, up
to three variants each, idle or busy, pools with or without queued requests), written as JSON and
then broken: values inside the document (`fuzz_mutate.mutate_data`: hostile numbers, wrong types,
keys dropped or unknown, items doubled), bytes of the text, or text splices (100,000 nested `[`,
a 5,000-digit number, `1e999`, duplicate keys, a lone surrogate escape). A share of the inputs
adds a `--now` (sometimes hostile: `nan`, `inf`, `1e999`, ...) or a `--config` file (the example
configuration, or one enabling scale-to-zero, sometimes with a mutated line).

Inputs run in process (`cli.main` with stdout and stderr captured); every `SUBPROCESS_EVERY`-th
one runs as a real `python -m llmscaler decide` subprocess as well, whose exit status and stderr
are checked the same way.

Checks: exit status 0 or 2 and no exception out of `main`; on 2, stderr is one or more lines
that each start with `llmscaler:` and no traceback; on 0, stdout is JSON without NaN or
Infinity, the accepted snapshot holds only figures in their ranges (`accepted-invalid`
otherwise), and its decisions pass `fuzz_oracle.check`.
"""

from __future__ import annotations

import contextlib
import io as text_io
import json
import math
import random
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from fuzz_common import Tally, excerpt, input_rng, stopwatch, time_limit
from fuzz_mutate import HOSTILE_NUMBERS, mutate_bytes, mutate_data
from fuzz_oracle import check, pool_faults, replica_faults
from llmscaler import cli, io
from llmscaler.config import file as config_file
from llmscaler.config.resolved import Config
from llmscaler.domain.basics import Action
from llmscaler.domain.snapshot import Decision

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = tuple(json.loads(p.read_text()) for p in sorted((ROOT / 'examples').glob('*.json')))
CONFIG_EXAMPLE = (ROOT / 'examples' / 'config-token.yaml').read_text()
ZERO_CONFIG = """settings:
  WVA_SCALE_TO_ZERO: "true"
configMaps:
  - apiVersion: v1
    kind: ConfigMap
    metadata: {name: wva-model-scale-to-zero-config, namespace: workload-variant-autoscaler-system}
    data:
      default: |
        enable_scale_to_zero: true
        retention_period: "5m"
"""
SUBPROCESS_EVERY = 50
"""One input in this many also runs as a real subprocess."""
_NOW = 10_000.0


def gen_snapshot(rng: random.Random) -> dict[str, Any]:
    """A valid snapshot: one or two models of up to three variants, idle or busy."""
    variants: list[dict[str, Any]] = []
    replicas: list[dict[str, Any]] = []
    pools: list[dict[str, Any]] = []
    for m in range(rng.randint(1, 2)):
        model, namespace = f'model-{m}', rng.choice(('ns-a', 'ns-b'))
        idle = rng.random() < 0.5
        for v in range(rng.randint(1, 3)):
            name = f'{model}-v{v}'
            current = rng.randint(0, 3)
            ready = max(0, current - rng.choice((0, 0, 0, 1)))
            low = rng.choice((0, 0, 1))
            variants.append(
                {
                    'name': name,
                    'namespace': namespace,
                    'model_id': model,
                    'cost': rng.choice((1.9, 3.67, 3.9, 15.6)),
                    'accelerator': rng.choice(('H100', 'A100', 'L40S')),
                    'min_replicas': low,
                    'max_replicas': rng.randint(max(1, low), 6),
                    'current_replicas': current,
                    'ready_replicas': ready,
                    'pending_replicas': current - ready,
                }
            )
            for r in range(ready):
                replicas.append(
                    {
                        'pod': f'{name}-{r}',
                        'variant': name,
                        'namespace': namespace,
                        'observed_at': _NOW - rng.choice((1.0, 5.0, 30.0, 90.0, 400.0)),
                        'kv_usage': round(rng.uniform(0, 0.1 if idle else 1.0), 3),
                        'queue_length': 0 if idle else rng.randint(0, 8),
                        'num_gpu_blocks': 27500,
                        'block_size': 16,
                        'avg_input_tokens': 900.0,
                        'avg_output_tokens': 200.0,
                    }
                )
        if rng.random() < 0.8:
            pools.append(
                {
                    'model_id': model,
                    'namespace': namespace,
                    'observed_at': _NOW - 2,
                    'queue_size': 0.0 if idle or rng.random() < 0.5 else float(rng.randint(1, 9)),
                    'request_count': 0.0 if idle else float(rng.randint(0, 50)),
                }
            )
    return {'now': _NOW, 'variants': variants, 'replicas': replicas, 'pools': pools}


_SPLICES = (
    ('[' * 100_000, ''),
    ('{"a":' * 50_000, ''),
    ('9' * 5000, ''),
    ('1e999', ''),
    ('-1e999', ''),
    ('"\\ud800"', ''),
    ('"x", "variants": []', ''),
    ('\ufeff', 'start'),
    (' garbage', 'end'),
)


def _splice(rng: random.Random, text: str) -> tuple[str, str]:
    """Put a hostile piece of text at a random value position (after a ':' or a '[')."""
    splice, where = rng.choice(_SPLICES)
    if where == 'start':
        return splice + text, f'splice {splice!r}'
    if where == 'end':
        return text + splice, f'splice {splice!r}'
    marks = [i for i, c in enumerate(text) if c in ':[']
    at = rng.choice(marks) + 1 if marks else 0
    end = at
    while end < len(text) and text[end] not in ',]}':
        end += 1
    return text[:at] + splice + text[end:], f'splice {splice[:20]!r}'


def edge_case(rng: random.Random, doc: dict[str, Any]) -> tuple[dict[str, Any], str]:
    """A valid document in a state the safety rules are about: a replica left out or without KV
    usage, old or future metrics, more ready replicas than reports, requests queued while none
    completed, no request count, current above the maximum."""
    replicas, variants, pools = doc['replicas'], doc['variants'], doc['pools']
    move = rng.randrange(8)
    if move == 0 and replicas:
        del replicas[rng.randrange(len(replicas))]
        return doc, 'a replica left out'
    if move == 1 and replicas:
        rng.choice(replicas).pop(rng.choice(('kv_usage', 'queue_length')), None)
        return doc, 'a required figure left out'
    if move == 2 and replicas:
        rng.choice(replicas)['observed_at'] = _NOW + rng.choice((-200.0, -1e6, 1e6, -59.9))
        return doc, 'observed_at moved'
    if move == 3 and variants:
        variant = rng.choice(variants)
        variant['ready_replicas'] += 1
        variant['current_replicas'] += 1
        return doc, 'one more ready replica than reports'
    if move == 4 and pools:
        pool = rng.choice(pools)
        pool.update(queue_size=float(rng.randint(1, 5)), request_count=0.0)
        return doc, 'requests queued, none completed'
    if move == 5 and pools:
        rng.choice(pools).pop('request_count', None)
        return doc, 'no request count'
    if move == 6 and variants:
        variant = rng.choice(variants)
        variant['current_replicas'] = variant['max_replicas'] + rng.randint(1, 3)
        return doc, 'current above the maximum'
    if replicas:
        replica = rng.choice(replicas)
        replica.update(kv_usage=0.0, queue_length=float(rng.randint(1, 4)))
        return doc, 'waiting requests on an idle replica'
    return doc, 'unchanged'


def snapshot_text(rng: random.Random) -> tuple[str, str]:
    base = rng.choice(EXAMPLES) if rng.random() < 0.3 else gen_snapshot(rng)
    roll = rng.random()
    if roll < 0.25:
        doc, what = edge_case(rng, json.loads(json.dumps(base)))
        if rng.random() < 0.5:
            doc, more = edge_case(rng, doc)
            what += f', {more}'
        return json.dumps(doc), what
    if roll < 0.55:
        data = mutate_data(rng, base)
        return json.dumps(data, allow_nan=True), 'values'
    text = json.dumps(base, indent=rng.choice((None, 2)))
    if roll < 0.8:
        body, what = mutate_bytes(rng, text.encode(), heavy=False)
        return body.decode('utf-8', 'replace'), what
    if roll < 0.95:
        return _splice(rng, text)
    return text, 'unchanged'


def config_text(rng: random.Random) -> tuple[str, str]:
    text = rng.choice((CONFIG_EXAMPLE, ZERO_CONFIG))
    if rng.random() < 0.3:
        lines = text.splitlines()
        at = rng.randrange(len(lines))
        key = lines[at].partition(':')[0]
        lines[at] = f'{key}: {rng.choice(HOSTILE_NUMBERS)}'
        return '\n'.join(lines) + '\n', f'config line {at + 1}'
    return text, 'config'


def _strict_float(text: str) -> float:
    raise ValueError(f'{text} in the output')


def _decisions(data: dict[str, Any]) -> list[Decision]:
    return [
        Decision(
            variant=d['variant'],
            namespace=d['namespace'],
            model_id=d['model_id'],
            accelerator=d['accelerator'],
            current=d['current'],
            target=d['target'],
            action=Action(d['action']),
            reason=d['reason'],
            metrics_available=d['metrics_available'],
        )
        for d in data['decisions']
    ]


def judge(
    *, code: int, out: str, err: str, snapshot: Path, config: Path | None, now: str | None
) -> list[tuple[str, str]]:
    """The rules one run of `llmscaler decide` broke, as (rule, what)."""
    if code not in (0, 2):
        return [('exit-status', f'exit {code}: {excerpt(err, limit=200)}')]
    if 'Traceback' in err:
        return [('traceback', excerpt(err, limit=200))]
    if code == 2:
        lines = err.splitlines()
        if not lines or any(not line.startswith('llmscaler: ') for line in lines) or out:
            return [('error-lines', excerpt(err, limit=200))]
        return []
    try:
        output = json.loads(out, parse_constant=_strict_float)
    except ValueError as exc:
        return [('output-json', f'{exc}: {excerpt(out, limit=100)}')]
    document = io.parse_snapshot(data=snapshot.read_text(encoding='utf-8'))
    found = [
        ('accepted-invalid', f'{item!r:.200}: {", ".join(faults)}')
        for item, all_faults in [
            *((r, replica_faults(r)) for r in document.replicas),
            *((p, pool_faults(p)) for p in document.pools),
        ]
        if (faults := [f for f in all_faults if not f.endswith(' missing')])
    ]
    settings = Config().settings
    if config is not None:
        settings = config_file.load_config_file(path=str(config))[0].settings
    moment = float(now) if now is not None else document.effective_now
    if not math.isfinite(output['now']) or output['now'] != moment:
        found.append(('output-json', f'now {output["now"]} is not {moment}'))
    violations = check(
        snapshot=document.snapshot, decisions=_decisions(output), settings=settings, now=moment
    )
    return found + [(v.rule, v.what) for v in violations]


def _in_process(argv: list[str]) -> tuple[int, str, str]:
    out, err = text_io.StringIO(), text_io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = cli.main(argv)
    return code, out.getvalue(), err.getvalue()


def _subprocess(argv: list[str]) -> tuple[int, str, str]:
    done = subprocess.run(
        [sys.executable, '-m', 'llmscaler', *argv],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    return done.returncode, done.stdout, done.stderr


def run(*, seed: int, indexes: range, verbose: bool = False) -> Tally:
    tally = Tally(name='snapshots')
    with tempfile.TemporaryDirectory(prefix='fuzz-snapshots-') as folder:
        snapshot = Path(folder) / 'snapshot.json'
        config = Path(folder) / 'config.yaml'
        for index in indexes:
            rng = input_rng(seed=seed, campaign='snapshots', index=index)
            text, what = snapshot_text(rng)
            snapshot.write_text(text, encoding='utf-8', errors='surrogatepass')
            argv = ['decide', '--snapshot', str(snapshot)]
            now: str | None = None
            used_config: Path | None = None
            if rng.random() < 0.15:
                now = rng.choice((*HOSTILE_NUMBERS, '10000', '9990.5', '1e4'))
                argv.append(f'--now={now}')
                what += f', --now {now[:20]!r}'
            if rng.random() < 0.4:
                body, about = config_text(rng)
                config.write_text(body, encoding='utf-8')
                argv += ['--config', str(config)]
                used_config = config
                what += f', {about}'
            data = f'{what}: {excerpt(text)}'
            tally.inputs += 1
            runners = [('in process', _in_process)]
            if index % SUBPROCESS_EVERY == SUBPROCESS_EVERY - 1:
                runners.append(('subprocess', _subprocess))
            for label, runner in runners:
                tally.note(f'runs {label}')
                with stopwatch() as elapsed:
                    try:
                        with time_limit():
                            code, out, err = runner(argv)
                    except (Exception, SystemExit) as exc:  # main must return, not exit
                        tally.exception(index=index, exc=exc, data=data)
                        continue
                if label == 'in process':
                    tally.timed(index=index, seconds=elapsed(), data=data)
                tally.note(f'exit {code} ({label})')
                try:
                    problems = judge(
                        code=code,
                        out=out,
                        err=err,
                        snapshot=snapshot,
                        config=used_config,
                        now=now,
                    )
                except Exception as exc:  # the oracle could not read what decide accepted
                    problems = [('accepted-unreadable', f'{type(exc).__name__}: {exc}'[:300])]
                for rule, detail in problems:
                    tally.violation(index=index, rule=rule, what=detail, data=data)
                if verbose:
                    print(f'input {index} ({label}): {data}\n  exit {code}\n  {err[:500]}')
    return tally
