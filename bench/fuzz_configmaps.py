"""Campaign `configmaps`: mutated and hostile scaling ConfigMaps through the live config watch.

Why: anyone who may edit a ConfigMap, a tenant in its own namespace included, feeds text to the
controller's YAML reader on the event loop that renews the Lease. The safety rules
(docs/reliability.md): a bad ConfigMap gets a clear error, keeps the last good configuration of that
ConfigMap, and never stops the other ConfigMaps from applying or the loop from running.

One input is two `ConfigWatch.update` calls, as the controller makes them when its ConfigMap
cache changes: first a good set (global saturation, scale-to-zero and queueing ConfigMaps in the
controller namespace, a tenant's saturation and scale-to-zero ConfigMaps), then the same set with
one ConfigMap mutated and another one validly edited. Mutations: hostile YAML in an entry (alias
bombs, 20,000 `[`, 5,000-digit numbers, `!!python/object`, `!!binary`, `!!float 0.5-`,
`2001-13-45`, duplicate keys, several documents, 70 KiB of text, control characters), hostile
numbers in a field, bytes of an entry broken (`fuzz_mutate`), many entries, or the object itself
broken (`data` not a mapping, values that are not strings, no name).

Checks, beyond exceptions and time:
- `masked-exception`: a problem that says a ConfigMap could not be read because of an
  unexpected exception (the watch survives it, but it is a bug in the reader);
- `config-in-force`: when the mutated ConfigMap is rejected, the configuration equals that of a
  fresh watch given the good set and then only the valid edit (its last good copy stays, the
  edit applies); when it is accepted, it equals that of a fresh watch given the final set;
- `blamed-other`: a problem reported on a ConfigMap that was not mutated;
- `problem-line`: a problem message with a line break or over `MAX_MESSAGE_CHARS`;
- then `decide()` runs under the configuration in force on a generated snapshot
  (`fuzz_snapshots.gen_snapshot`) and `fuzz_oracle.check` judges it.
A share of the inputs also puts the mutated ConfigMap in a `--config` file for `llmscaler decide`,
which must exit 0 or 2 with `llmscaler:` lines and no traceback.
"""

from __future__ import annotations

import contextlib
import copy
import io as text_io
import json
import random
import re
import tempfile
from pathlib import Path
from typing import Any

from fuzz_common import Tally, excerpt, input_rng, stopwatch, time_limit
from fuzz_mutate import HOSTILE_NUMBERS, mutate_bytes, mutate_value
from fuzz_oracle import check
from fuzz_snapshots import gen_snapshot
from llmscaler import cli, engine, io
from llmscaler.config.resolved import Config, CoreSettings
from llmscaler.config.yaml_loader import CONFIGMAP_MAX_BYTES
from llmscaler.controller.cluster.configwatch import MAX_MESSAGE_CHARS, ConfigWatch
from llmscaler.domain.state import EMPTY_STATE

GLOBAL = 'workload-variant-autoscaler-system'
TENANT = 'ns-a'
SETTINGS = CoreSettings(scale_to_zero=False)
SATURATION = """# WVA's defaults, in part
kvCacheThreshold: 0.80
queueLengthThreshold: 5
kvSpareTrigger: 0.10
enableLimiter: false
"""
OVERRIDE = """model_id: "model-1"
namespace: "ns-b"
analyzerName: "saturation"
scaleUpThreshold: 0.90
scaleDownBoundary: 0.75
"""
TENANT_SATURATION = 'kvCacheThreshold: 0.70\nqueueLengthThreshold: 3\n'
SCALE_TO_ZERO = 'enable_scale_to_zero: true\nretention_period: "5m"\n'
NO_ZERO = 'model_id: "model-1"\nenable_scale_to_zero: false\n'
QUEUEING = 'sloMultiplier: 3.0\ntuningEnabled: true\n'


def _cm(name: str, namespace: str, data: dict[str, str]) -> dict[str, Any]:
    return {
        'apiVersion': 'v1',
        'kind': 'ConfigMap',
        'metadata': {'name': name, 'namespace': namespace},
        'data': data,
    }


def good_set() -> list[dict[str, Any]]:
    """Small on purpose: every update parses every entry of the set again."""
    return [
        _cm('wva-saturation-scaling-config', GLOBAL, {'default': SATURATION, 'm1': OVERRIDE}),
        _cm('wva-model-scale-to-zero-config', GLOBAL, {'default': SCALE_TO_ZERO, 'm1': NO_ZERO}),
        _cm('wva-queueing-model-config', GLOBAL, {'default': QUEUEING}),
        _cm('wva-saturation-scaling-config', TENANT, {'default': TENANT_SATURATION}),
    ]


_ALIAS_BOMB = 'a: &a ["x","x","x","x","x","x","x","x","x"]\n' + ''.join(
    f'{chr(98 + i)}: &{chr(98 + i)} [*{chr(97 + i)},*{chr(97 + i)},*{chr(97 + i)},'
    f'*{chr(97 + i)},*{chr(97 + i)},*{chr(97 + i)},*{chr(97 + i)},*{chr(97 + i)}]\n'
    for i in range(8)
)
HOSTILE_YAML: tuple[str, ...] = (
    _ALIAS_BOMB,
    'kvCacheThreshold: &x 0.5\nkvSpareTrigger: *x\n',
    '<<: {kvCacheThreshold: 0.5}\n',
    '[' * 20_000,
    '{a: ' * 5_000,
    '- ' * 3_000 + 'x',
    'kvCacheThreshold: ' + '9' * 5_000,
    'kvCacheThreshold: 0.' + '1' * 5_000,
    'kvCacheThreshold: 2001-13-45',
    'kvCacheThreshold: !!float 0.5-',
    'queueLengthThreshold: !!int "7x"',
    'kvCacheThreshold: !!python/object/apply:os.system ["true"]',
    'kvCacheThreshold: !!binary aGVsbG8=',
    'analyzers: !!set {a, b}',
    'analyzers: !!omap [{a: 1}]',
    'x: !custom 1',
    'kvCacheThreshold: .nan',
    'kvCacheThreshold: -.inf',
    'kvCacheThreshold: 1e999',
    'kvCacheThreshold: 0x1F',
    'kvCacheThreshold: 0.5\nkvCacheThreshold: 0.9\n',
    'kvCacheThreshold: "0.5"',
    'enableLimiter: yes',
    'retention_period: 10',
    'retention_period: "-5m"',
    'retention_period: "1e400s"',
    'retention_period: "99999999999999999999h"',
    'enable_scale_to_zero: "true"',
    '---\nkvCacheThreshold: 0.5\n---\nkvCacheThreshold: 0.9\n',
    '- 1\n- 2\n',
    'just text',
    '',
    '~',
    'a: ' + 'x' * 70_000,
    'a: "\x00\x1b\x7f"',
    'a: "\\ud800"',
    '\ufeffkvCacheThreshold: 0.5',
    '? [a, b]\n: c\n',
    'analyzers:\n' + '  - name: saturation\n' * 3_000,
    'model_id: "model-0"\nnamespace: "' + 'n' * 10_000 + '"\n',
)


def _hostile_number(rng: random.Random, text: str) -> tuple[str, str]:
    numbers = list(re.finditer(r'(?<=: )[-0-9.]+|(?<=: )"[0-9]+m"|(?<=: )(true|false)', text))
    if not numbers:
        return text + f'\nkvCacheThreshold: {rng.choice(HOSTILE_NUMBERS)}\n', 'a field added'
    found = rng.choice(numbers)
    value = rng.choice(HOSTILE_NUMBERS)
    return text[: found.start()] + value + text[found.end() :], f'{found.group()} -> {value[:20]}'


def mutate_configmap(rng: random.Random, obj: dict[str, Any]) -> tuple[dict[str, Any], str]:
    obj = copy.deepcopy(obj)
    data: dict[str, str] = obj['data']
    key = rng.choice(sorted(data))
    roll = rng.random()
    if roll < 0.3:
        data[key] = rng.choice(HOSTILE_YAML)
        return obj, f'{key}: hostile YAML {data[key][:30]!r}'
    if roll < 0.55:
        data[key], what = _hostile_number(rng, data[key])
        return obj, f'{key}: {what}'
    if roll < 0.75:
        body, what = mutate_bytes(rng, data[key].encode(), heavy=rng.random() < 0.2)
        data[key] = body.decode('utf-8', 'replace')
        return obj, f'{key}: bytes {what}'
    if roll < 0.85:
        for i in range(rng.choice((50, 500, 2000))):
            data[f'extra-{i}'] = rng.choice(HOSTILE_YAML[:8])
        return obj, 'many hostile entries'
    part = rng.choice(('data', 'metadata', 'root'))
    if part == 'root':
        return mutate_value(rng, obj), 'object mutated'
    obj[part] = mutate_value(rng, obj[part])
    return obj, f'{part} mutated'


EDITS = 4
"""Valid edits per ConfigMap of the good set (few, so that their references are computed once)."""


def edit(obj: dict[str, Any], choice: int) -> dict[str, Any]:
    """Valid edit number `choice` of a ConfigMap of the good set."""
    obj = copy.deepcopy(obj)
    name, data = obj['metadata']['name'], obj['data']
    if name == 'wva-saturation-scaling-config':
        value = f'{0.5 + 0.1 * choice:.2f}'
        data['default'] = re.sub(
            r'kvCacheThreshold: [0-9.]+', f'kvCacheThreshold: {value}', data['default']
        )
    elif name == 'wva-model-scale-to-zero-config':
        data['default'] = f'enable_scale_to_zero: true\nretention_period: "{choice + 1}m"\n'
    else:
        data['default'] = f'sloMultiplier: {1.5 + choice}\ntuningEnabled: false\n'
    return obj


class References:
    """The watch after the good set (copied for each input) and, per valid edit, the
    configuration a watch that saw the good set and then only that edit has in force."""

    def __init__(self) -> None:
        self.good = good_set()
        self.primed = _watch()
        first = self.primed.update(configmaps=self.good)
        if first.problems:
            raise AssertionError(f'the good set is rejected: {first.problems}')
        self._edited: dict[tuple[int, int], Config] = {}

    def edited(self, other: int, choice: int) -> Config:
        key = (other, choice)
        if key not in self._edited:
            watch = copy.deepcopy(self.primed)
            changed = [edit(cm, choice) if i == other else cm for i, cm in enumerate(self.good)]
            self._edited[key] = watch.update(configmaps=changed).config
        return self._edited[key]


_MASKED = re.compile(r'\(unexpected \w+\)')
"""How the watch and the file reader name an exception they caught (its type in brackets)."""


def _key(obj: dict[str, Any]) -> tuple[str, str]:
    return obj['metadata']['namespace'], obj['metadata']['name']


def _watch() -> ConfigWatch:
    return ConfigWatch(settings=SETTINGS, controller_namespace=GLOBAL)


def run_input(
    rng: random.Random,
    tally: Tally,
    index: int,
    folder: Path,
    described: list[str],
    references: References,
) -> None:
    """One input; counts its findings in `tally` and says what it was in `described`."""
    good = references.good
    target, other = rng.sample(range(len(good)), 2)
    mutated, what = mutate_configmap(rng, good[target])
    choice = rng.randrange(EDITS)
    edited = edit(good[other], choice)
    data = f'{"/".join(_key(good[target]))}: {what}; {"/".join(_key(good[other]))} edited'
    described.append(data)
    final = [mutated if i == target else edited if i == other else cm for i, cm in enumerate(good)]
    # A mutated name or namespace moves the object to another key: blame cannot be judged.
    renamed = what.startswith(('metadata', 'object'))
    watch = copy.deepcopy(references.primed)
    with stopwatch() as elapsed:
        update = watch.update(configmaps=final)
        snapshot = io.parse_snapshot(data=json.dumps(gen_snapshot(rng))).snapshot
        outcome = engine.decide(
            snapshot=snapshot, config=update.config, state=EMPTY_STATE, now=10_000.0
        )
    tally.timed(index=index, seconds=elapsed(), data=data)
    for problem in update.problems:
        where = (problem.namespace, problem.name)
        if _MASKED.search(problem.message):
            tally.exceptions += 1
            tally.keep(index=index, kind='exception', what=problem.message[:300], data=data)
        if where != _key(good[target]) and not renamed:
            tally.violation(index=index, rule='blamed-other', what=problem.message, data=data)
        if '\n' in problem.message or len(problem.message) > MAX_MESSAGE_CHARS:
            what = f'{len(problem.message)} chars: {problem.message[:100]!r}'
            tally.violation(index=index, rule='problem-line', what=what, data=data)
    rejected = any((p.namespace, p.name) == _key(good[target]) for p in update.problems)
    tally.note('mutated ConfigMap rejected' if rejected else 'mutated ConfigMap accepted')
    if rejected:
        expected = references.edited(other, choice)
    else:
        expected = _watch().update(configmaps=final).config
    if update.config != expected:
        what = 'last good copy or the valid edit not in force' if rejected else 'differs'
        tally.violation(index=index, rule='config-in-force', what=what, data=data)
    for v in check(
        snapshot=snapshot,
        decisions=outcome.decisions,
        settings=update.config.settings,
        now=10_000.0,
    ):
        tally.violation(index=index, rule=v.rule, what=v.what, data=data)
    if rng.random() < 0.1:
        _decide_with(mutated, folder=folder, tally=tally, index=index, data=data)


def _decide_with(obj: dict[str, Any], *, folder: Path, tally: Tally, index: int, data: str) -> None:
    snapshot = folder / 'snapshot.json'
    snapshot.write_text(json.dumps(gen_snapshot(random.Random(index))), encoding='utf-8')
    config = folder / 'config.yaml'
    try:
        text = json.dumps({'configMaps': [obj]})  # JSON is YAML, and far quicker to write
    except (RecursionError, ValueError):
        return  # the object cannot be written at all: nothing a user could hand over
    if len(text) > CONFIGMAP_MAX_BYTES:
        return  # the API server refuses a ConfigMap this large: nobody can dump one to a file
    config.write_text(text, encoding='utf-8')
    out, err = text_io.StringIO(), text_io.StringIO()
    argv = ['decide', '--snapshot', str(snapshot), '--config', str(config)]
    with stopwatch() as elapsed, contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = cli.main(argv)
    tally.timed(index=index, seconds=elapsed(), data=f'decide --config with {data}')
    tally.note(f'decide --config: exit {code}')
    lines = err.getvalue().splitlines()
    if code not in (0, 2) or any(not line.startswith('llmscaler: ') for line in lines):
        tally.violation(
            index=index,
            rule='decide-config',
            data=data,
            what=f'exit {code}: {excerpt(err.getvalue(), limit=200)}',
        )


def run(*, seed: int, indexes: range, verbose: bool = False) -> Tally:
    tally = Tally(name='configmaps')
    references = References()
    with tempfile.TemporaryDirectory(prefix='fuzz-configmaps-') as folder:
        for index in indexes:
            rng = input_rng(seed=seed, campaign='configmaps', index=index)
            tally.inputs += 1
            described: list[str] = []
            try:
                with time_limit():
                    run_input(rng, tally, index, Path(folder), described, references)
            except Exception as exc:  # what the fuzzer is here to find
                tally.exception(index=index, exc=exc, data=' '.join(described)[:300])
            if verbose:
                print(f'input {index}: {" ".join(described)}')
    return tally
