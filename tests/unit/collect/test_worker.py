"""Tests of `collect.worker`: a source's jobs in one thread of its own, in turn."""

from __future__ import annotations

import threading

import pytest

from llmscaler.collect.worker import Worker


async def test_jobs_run_in_one_thread_other_than_the_loops() -> None:
    worker = Worker(name='test')
    try:
        first = await worker.run(threading.get_ident)
        second = await worker.run(threading.get_ident)
    finally:
        worker.close()
    assert first == second != threading.get_ident()


async def test_a_job_that_raises_raises_and_the_worker_goes_on() -> None:
    worker = Worker(name='test')

    def fail() -> None:
        raise RuntimeError('boom')

    try:
        with pytest.raises(RuntimeError, match='boom'):
            await worker.run(fail)
        assert await worker.run(lambda: 2) == 2
    finally:
        worker.close()


async def test_a_closed_worker_starts_afresh() -> None:
    worker = Worker(name='test')
    before = await worker.run(threading.get_ident)
    worker.close()
    assert await worker.run(lambda: 3) == 3
    worker.close()
    assert before != threading.get_ident()
