"""The validation table: every published run replayed in the simulator stays in its band, the
table covers what it must, and docs/fidelity.md shows what the code computes."""

from __future__ import annotations

import pytest

from llmscaler.sim.hardware import fidelity, published
from llmscaler.sim.hardware.measurement import Figure, LoadKind, Regime, preset_match, regime
from tests.support.paths import ROOT

DOC = ROOT / 'docs' / 'fidelity.md'
ROWS = fidelity.rows()


@pytest.mark.parametrize('row', ROWS, ids=[r.record.key for r in ROWS])
def test_every_row_stays_in_its_band(row: fidelity.Row) -> None:
    lo, hi = row.band
    assert lo <= row.ratio <= hi, (
        f'{row.record.key}: simulated {row.simulated:.4g}, ×{row.ratio:.3f}'
    )


def test_the_table_covers_the_regimes_on_three_presets() -> None:
    assert len(ROWS) >= 12
    within = [r for r in ROWS if r.within_goal]
    assert len(within) >= 12
    exact: dict[str, set[Regime]] = {}
    for r in within:
        match = preset_match(r.record)
        if match is not None and match[1]:
            exact.setdefault(match[0], set()).add(regime(r.record))
    assert len(exact) >= 3
    covered = set().union(*exact.values())
    assert {Regime.LIGHT, Regime.MODERATE, Regime.SATURATION} <= covered
    figures = {r.record.figure for r in within}
    assert {Figure.ITL, Figure.TPOT, Figure.OUTPUT_THROUGHPUT} <= figures


def test_rows_outside_the_goal_say_why_and_nothing_else_has_a_band_of_its_own() -> None:
    keys = {r.record.key for r in ROWS}
    assert set(fidelity.OUTSIDE) <= keys
    for r in ROWS:
        if r.within_goal:
            continue
        assert r.why, r.record.key
        assert r.band != fidelity.GOAL
    # A row with its own band really is outside the goal (or the band would hide a fix).
    for r in ROWS:
        if r.record.key in fidelity.OUTSIDE:
            assert not r.within_goal, f'{r.record.key} is back within ±10 %: drop its band'


def test_every_record_is_replayed_or_says_why_not() -> None:
    replayed = {r.record.key for r in ROWS}
    skipped = dict(fidelity.not_replayed())
    assert replayed | set(skipped) == {m.key for m in published.MEASUREMENTS}
    assert not replayed & set(skipped)
    assert all(skipped.values())
    with pytest.raises(ValueError, match='not replayable'):
        fidelity.simulate(published.measurement('redhat-mlperf51-8b-fp8-h100-server'))


def test_the_doc_shows_the_table_the_code_computes() -> None:
    text = DOC.read_text()
    body = text.split('<!-- fidelity-table:begin -->\n', 1)[1].split(
        '\n<!-- fidelity-table:end -->'
    )[0]
    assert body == fidelity.table(ROWS), 'regenerate: python bench/fidelity.py --write-docs'


def test_replays_follow_the_published_setup() -> None:
    m = published.measurement('musgrave-8b-a100-40gb-c8-tput')
    spec = fidelity.variant(m)
    assert (spec.accelerator, spec.gpus_per_replica, spec.max_num_seqs) == ('A100-40GB', 1, 256)
    requests = fidelity.run(m)
    assert len(requests) == 160  # 20 prompts per concurrency slot
    assert {(r.input_tokens, r.output_tokens) for r in requests} == {(1024, 128)}
    # A closed loop: never more than 8 in flight.
    events = sorted([(r.arrival, 1) for r in requests] + [(r.finished, -1) for r in requests])
    in_flight = peak = 0
    for _, step in events:
        in_flight += step
        peak = max(peak, in_flight)
    assert peak == 8


def test_sharegpt_lengths_have_the_published_means() -> None:
    m = published.measurement('sglang060-8b-a100-offline')
    assert m.load.kind is LoadKind.ALL_AT_ONCE
    inputs, outputs = fidelity.lengths(m, n=5000)
    assert sum(inputs) / 5000 == pytest.approx(215, rel=0.01)
    assert sum(outputs) / 5000 == pytest.approx(194.3, rel=0.01)
    assert max(inputs) <= 1024
    assert max(i + o for i, o in zip(inputs, outputs, strict=True)) <= 2048
