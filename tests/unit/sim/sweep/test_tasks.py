"""Tests of `sim.sweep.tasks`: a run is a pure function of its inputs, however often it runs."""

from __future__ import annotations

from llmscaler.sim.sweep import cache
from tests.support.sweep_fixtures import small_sweep


def test_a_run_gives_the_same_result_twice_in_one_process() -> None:
    # Policies that keep what they learn in themselves (a queue-based peer's memory of its
    # scale-ups, Kaito's cooldowns, the predictive policy's state).
    for task in small_sweep(policies=('keda-queue', 'kaito-realtime', 'predictive')):
        before = cache.key(identity=task.identity())
        first, second = task(), task()
        assert first.summary == second.summary, task.label
        assert cache.key(identity=task.identity()) == before, task.label
