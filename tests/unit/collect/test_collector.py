"""Tests of `collect.collector`: the cyclic collector held off across overlapping steps."""

from __future__ import annotations

import gc
from collections.abc import Iterator

import pytest

from llmscaler.collect.collector import collector_paused


@pytest.fixture
def collector_on() -> Iterator[None]:
    was = gc.isenabled()
    gc.enable()
    yield
    if not was:
        gc.disable()


def test_overlapping_steps_resume_the_collector_after_the_last(collector_on: None) -> None:
    first = collector_paused()
    second = collector_paused()
    first.__enter__()
    second.__enter__()
    assert not gc.isenabled()
    first.__exit__(None, None, None)
    assert not gc.isenabled()  # the second step still runs
    second.__exit__(None, None, None)
    assert gc.isenabled()


def test_a_collector_off_before_stays_off(collector_on: None) -> None:
    gc.disable()
    with collector_paused():
        assert not gc.isenabled()
    assert not gc.isenabled()


def test_a_step_that_raises_resumes_the_collector(collector_on: None) -> None:
    with pytest.raises(RuntimeError), collector_paused():
        raise RuntimeError('boom')
    assert gc.isenabled()
