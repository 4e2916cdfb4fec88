"""Tests of `controller.from_zero.pages`: the EPP pages scale-from-zero reads, against a real
loopback server, within the scrape configuration's page caps."""

from __future__ import annotations

import asyncio

import pytest

from llmscaler.clock import LoopClock
from llmscaler.collect.readings import ErrorReason, SourceError
from llmscaler.collect.scrape.source import ScrapeConfig, ScrapeTarget
from llmscaler.controller.from_zero import pages as pages_module
from llmscaler.controller.from_zero.pages import EppPages
from tests.support.raw_http import Behaviour, RawServer, serve

QUEUE = 'inference_extension_flow_control_queue_size'


def queue_page(*labels: str) -> bytes:
    return ''.join(f'{QUEUE}{{{text}}} 3\n' for text in labels).encode()


async def read(
    body: bytes, config: ScrapeConfig
) -> tuple[dict[tuple[str, str], float], list[SourceError]]:
    async with RawServer(serve(body)) as server:
        pages = EppPages(clock=LoopClock(), scrape=config, timeout=2.0, concurrency=2, client=None)
        target = ScrapeTarget(namespace='llm', pod='epp-0', url=f'{server.url}/metrics', kind='epp')
        try:
            sizes, _, errors = await pages.read([target], token=pages.token(), end=pages.end())
        finally:
            await pages.aclose()
    return sizes, errors


async def test_a_page_within_the_caps_gives_its_queues() -> None:
    sizes, errors = await read(queue_page('target_model_name="m"'), ScrapeConfig(max_labels=1))
    assert (sizes, errors) == ({('m', 'llm'): 3.0}, [])


@pytest.mark.parametrize(
    ('config', 'body', 'cap'),
    [
        (ScrapeConfig(max_labels=1), queue_page('a="1",target_model_name="m"'), 'max_labels'),
        (
            ScrapeConfig(max_line_length=100),
            queue_page('target_model_name="' + 'm' * 100 + '"'),
            'max_line_length',
        ),
        (
            ScrapeConfig(max_series_per_page=2),
            queue_page(*(f'target_model_name="m{i}"' for i in range(3))),
            'max_series_per_page',
        ),
    ],
)
async def test_a_page_over_a_cap_is_refused_naming_the_epp_pod(
    config: ScrapeConfig, body: bytes, cap: str
) -> None:
    sizes, errors = await read(body, config)
    assert sizes == {}  # unread, not an empty queue
    (error,) = errors
    assert error.reason is ErrorReason.BAD_RESPONSE
    assert error.message.startswith('page of EPP pod llm/epp-0 refused: line '), error.message
    assert f'({cap})' in error.message


def slowly(body: bytes, *, after: float) -> Behaviour:
    """The whole answer, `after` seconds late."""
    answer = serve(body)

    async def behave(writer: asyncio.StreamWriter) -> None:
        await asyncio.sleep(after)
        await answer(writer)

    return behave


async def test_within_a_tick_readers_share_a_page_and_one_giving_up_leaves_the_other_it() -> None:
    body = queue_page('target_model_name="m"')
    async with RawServer(slowly(body, after=0.3)) as server:
        pages = EppPages(
            clock=LoopClock(), scrape=ScrapeConfig(), timeout=2.0, concurrency=2, client=None
        )
        target = ScrapeTarget(namespace='llm', pod='epp-0', url=f'{server.url}/metrics', kind='epp')

        async def sizes() -> dict[tuple[str, str], float]:
            found, _, errors = await pages.read([target], token=pages.token(), end=pages.end())
            assert errors == []
            return found

        try:
            with pages.one_tick():
                given_up = asyncio.create_task(sizes())
                waiting = asyncio.create_task(sizes())
                await asyncio.sleep(0.1)
                given_up.cancel()
                assert await waiting == {('m', 'llm'): 3.0}
                assert await sizes() == {('m', 'llm'): 3.0}  # a third reader, same page
            assert len(server.seen) == 1
            # After the tick, the page is read afresh.
            assert await sizes() == {('m', 'llm'): 3.0}
            assert len(server.seen) == 2
        finally:
            await pages.aclose()


async def test_a_write_in_flight_holds_back_fetches_once_a_tick_and_not_for_long(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(pages_module, 'WRITE_FIRST', 0.5)
    async with RawServer(serve(queue_page('target_model_name="m"'))) as server:
        pages = EppPages(
            clock=LoopClock(), scrape=ScrapeConfig(), timeout=2.0, concurrency=2, client=None
        )
        targets = [
            ScrapeTarget(namespace='llm', pod=pod, url=f'{server.url}/{pod}', kind='epp')
            for pod in ('epp-0', 'epp-1')
        ]

        async def sizes(pod: int = 0) -> dict[tuple[str, str], float]:
            found, _, errors = await pages.read(
                [targets[pod]], token=pages.token(), end=pages.end()
            )
            assert errors == []
            return found

        try:
            with pages.one_tick():
                async with pages.writing():
                    held = asyncio.create_task(sizes())
                    await asyncio.sleep(0.05)
                    assert server.seen == [], 'a page was fetched while a write was in flight'
                # The write answered: the page goes at once.
                assert await asyncio.wait_for(held, 0.4) == {('m', 'llm'): 3.0}
            with pages.one_tick():
                # A write that stays in flight holds a fetch back for WRITE_FIRST at most...
                async with pages.writing():
                    started = asyncio.get_running_loop().time()
                    assert await asyncio.wait_for(sizes(), 2.0) == {('m', 'llm'): 3.0}
                    waited = asyncio.get_running_loop().time() - started
                    assert 0.45 <= waited < 1.5
                    # ...and a later write of the same tick holds nothing back.
                    async with pages.writing():
                        assert await asyncio.wait_for(sizes(1), 0.4) == {('m', 'llm'): 3.0}
            assert len(server.seen) == 3
        finally:
            await pages.aclose()
