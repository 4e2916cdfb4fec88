"""The emulator's HTTP endpoints, served by aiohttp's test server and driven by a fake clock.

Nothing ticks on its own here: the clock moves when a test sets it, and the emulator catches up
at the next `tick()` or request. Worked numbers use the 8B-H100 step model (see
test_emulate_fleet): step = 7 ms + 0.042 ms · decoding seqs + 24 µs · prefill tokens + ….
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import pytest
from aiohttp import web
from aiohttp.test_utils import TestClient, TestServer

from llmscaler.emulate.exposition import CONTENT_TYPE
from llmscaler.emulate.http import Completion, epp_app, parse_completion, replica_app
from tests.support.emulate_fixtures import (
    MODEL,
    OPENMETRICS,
    T0,
    FakeClock,
    emulator,
    samples,
    until,
)

Client = TestClient[web.Request, web.Application]


@asynccontextmanager
async def serving(app: web.Application) -> AsyncIterator[Client]:
    async with TestClient(TestServer(app)) as client:
        yield client


# ---- pages ---------------------------------------------------------------------------------------


async def test_pages_are_text_0_0_4_even_when_openmetrics_is_asked() -> None:
    emu = emulator(FakeClock(), replicas=1)
    async with serving(replica_app(emulator=emu, slot=0)) as replica:
        response = await replica.get('/metrics', headers={'Accept': OPENMETRICS})
        assert response.headers['Content-Type'] == CONTENT_TYPE
        text = await response.text()
        assert 'vllm:kv_cache_usage_perc{' in text
        assert 'vllm_' not in text
        assert (await replica.get('/health')).status == 200
    async with serving(epp_app(emulator=emu)) as epp:
        response = await epp.get('/metrics', headers={'Accept': OPENMETRICS})
        assert response.headers['Content-Type'] == CONTENT_TYPE
        page = samples(await response.text())
        assert page[('inference_extension_flow_control_queue_size', '')] == 0
        assert (await epp.get('/health')).status == 404  # the EPP port has no health check


async def test_a_gone_replica_answers_503() -> None:
    emu = emulator(FakeClock(), replicas=2)
    emu.scale(replicas=1)  # slot 1 held nothing: it is gone at once
    async with serving(replica_app(emulator=emu, slot=1)) as replica:
        response = await replica.get('/metrics')
        assert (response.status, await response.text()) == (503, 'replica gone\n')
        response = await replica.post('/v1/completions', json={'prompt': 'a'})
        assert response.status == 503
        error = await response.json()
    assert error == {
        'object': 'error',
        'message': 'replica slot 1 is not serving',
        'type': 'ServiceUnavailableError',
        'param': None,
        'code': 503,
    }


# ---- completions -------------------------------------------------------------------------------


async def test_streamed_completion_arrives_as_sse_chunks() -> None:
    clock = FakeClock()
    emu = emulator(clock, replicas=1)
    pod = emu.pod(0)
    assert pod is not None
    body = {
        'model': MODEL,
        'prompt': 'a b c',
        'max_tokens': 20,
        'stream': True,
        'stream_options': {'include_usage': True},
    }
    async with (
        serving(replica_app(emulator=emu, slot=0)) as replica,
        replica.post('/v1/completions', json=body) as response,
    ):
        assert response.status == 200
        assert response.headers['Content-Type'].startswith('text/event-stream')
        assert pod.inflight
        # First step: 7 ms + 3 × 24 µs = 7.07 ms, so the first token exists at +10 ms; the
        # next 19 decode steps (~7.04 ms each) end near +141 ms.
        clock.t = T0 + 0.010
        emu.tick()
        first = json.loads((await response.content.readuntil(b'\n\n'))[6:])
        assert first['choices'][0]['text'] == ' tok'
        assert first['choices'][0]['finish_reason'] is None
        assert pod.inflight  # the request is still generating
        clock.t = T0 + 1.0
        emu.tick()
        rest = (await response.read()).decode()
    events = [e.removeprefix('data: ') for e in rest.split('\n\n') if e]
    assert events[-1] == '[DONE]'
    chunks = [first, *(json.loads(e) for e in events[:-1])]
    texts = [c['choices'][0]['text'] for c in chunks if c['choices']]
    assert texts == [' tok'] * 20
    reasons = [c['choices'][0]['finish_reason'] for c in chunks if c['choices']]
    assert reasons == [None] * 19 + ['length']
    usage = chunks[-1]['usage']
    # 3 prompt words + 20 generated tokens.
    assert usage == {'prompt_tokens': 3, 'total_tokens': 23, 'completion_tokens': 20}


async def test_completion_returns_usage_and_updates_the_counters() -> None:
    clock = FakeClock()
    emu = emulator(clock, replicas=1, wall_start=1.7e9)
    body = {'prompt': 'ignored', 'prompt_tokens': 100, 'max_tokens': 5}
    async with serving(replica_app(emulator=emu, slot=0)) as replica:
        task = asyncio.create_task(replica.post('/v1/completions', json=body))
        await until(lambda: emu.queue_size == 0 and emu.pods[0].engine.in_flight == 1)
        clock.t = T0 + 2.0
        emu.tick()
        response = await task
        assert response.status == 200
        answer = await response.json()
        page = samples(await (await replica.get('/metrics')).text())
    assert answer['id'] == 'cmpl-1'
    assert answer['object'] == 'text_completion'
    assert answer['created'] == 1_700_000_002  # wall start 1.7e9 + 2 s of clock
    assert answer['model'] == MODEL
    assert answer['choices'][0]['text'] == ' tok' * 5
    assert answer['choices'][0]['finish_reason'] == 'length'
    assert answer['usage'] == {'prompt_tokens': 100, 'total_tokens': 105, 'completion_tokens': 5}
    assert page[('vllm:request_success_total', 'length')] == 1.0
    assert page[('vllm:prompt_tokens_total', '')] == 100.0
    assert page[('vllm:generation_tokens_total', '')] == 5.0


@pytest.mark.parametrize(
    ('body', 'status'),
    [
        (b'{not json', 400),
        (b'[1, 2]', 400),
        (json.dumps({'max_tokens': 3}).encode(), 400),
        (json.dumps({'prompt': 'a', 'max_tokens': 0}).encode(), 400),
        (json.dumps({'prompt': '', 'max_tokens': 3}).encode(), 400),
        (json.dumps({'prompt': 'a', 'model': 'other'}).encode(), 404),
        (json.dumps({'prompt_tokens': 131_072, 'prompt': 'a'}).encode(), 400),
        (json.dumps({'prompt': 'a', 'stream': 'yes'}).encode(), 400),
    ],
)
async def test_bad_completion_requests_are_refused(body: bytes, status: int) -> None:
    emu = emulator(FakeClock(), replicas=1)
    async with serving(replica_app(emulator=emu, slot=0)) as replica:
        response = await replica.post('/v1/completions', data=body)
        assert response.status == status
        error = await response.json()
    assert (error['object'], error['code']) == ('error', status)
    assert emu.pods[0].engine.in_flight == 0


async def test_requests_pending_when_the_emulator_stops_get_503() -> None:
    emu = emulator(FakeClock(), replicas=1)
    async with serving(replica_app(emulator=emu, slot=0)) as replica:
        plain = asyncio.create_task(replica.post('/v1/completions', json={'prompt': 'a'}))
        body = {'prompt': 'a', 'stream': True}
        async with replica.post('/v1/completions', json=body) as streamed:
            await until(lambda: emu.pods[0].engine.in_flight == 2)
            emu.abort_all()
            events = (await streamed.read()).decode().split('\n\n')
        response = await plain
        assert response.status == 503
        assert (await response.json())['message'] == 'the emulator is stopping'
    error = {'error': {'message': 'the emulator is stopping', 'code': 503}}
    assert events == [f'data: {json.dumps(error, separators=(",", ":"))}', 'data: [DONE]', '']


def parse(body: object) -> Completion | tuple[int, str]:
    return parse_completion(body=body, model_name='m', max_model_len=100, limit=50)


def test_parse_completion_defaults_and_prompt_forms() -> None:
    assert parse({'prompt': ' a  b c '}) == Completion(3, 16, False, False)
    assert parse({'prompt': [1, 2], 'max_tokens': None}) == Completion(2, 16, False, False)
    parsed = parse({'prompt': 'x', 'stream': True, 'stream_options': {'include_usage': True}})
    assert parsed == Completion(1, 16, True, True)
    # The cache holds 50 tokens, max_model_len is 100: 45 + 10 passes vLLM's length check and
    # the prompt fits the cache (the replica cuts the output at the cache limit).
    assert parse({'prompt_tokens': 45, 'max_tokens': 10}) == Completion(45, 10, False, False)
    assert parse({'prompt_tokens': 51, 'max_tokens': 1}) == (400, CONTEXT.format(52, 51, 1))
    assert parse({'prompt_tokens': 90, 'max_tokens': 11}) == (400, CONTEXT.format(101, 90, 11))
    assert parse({'prompt_tokens': True}) == (400, 'prompt_tokens must be an integer')
    assert parse({'prompt': ['a', 'b']}) == (400, 'prompt must be a string or a list of token ids')
    assert parse({'prompt': 'a', 'model': 'x'}) == (404, 'The model `x` does not exist.')
    assert parse({'prompt': 'a', 'stream_options': [1]}) == (
        400,
        'stream must be a boolean and stream_options an object',
    )


CONTEXT = (
    "This model's maximum context length is 50 tokens. However, you requested {} tokens ({} in "
    'the prompt, {} for the completion).'
)


# ---- the gateway ---------------------------------------------------------------------------------


async def test_gateway_completion_waits_for_a_replica() -> None:
    clock = FakeClock()
    emu = emulator(clock, replicas=0)
    raw = json.dumps({'prompt': 'one two three', 'max_tokens': 4}).encode()
    async with serving(epp_app(emulator=emu)) as epp:
        task = asyncio.create_task(epp.post('/v1/completions', data=raw))
        await until(lambda: emu.queue_size == 1)
        page = samples(await (await epp.get('/metrics')).text())
        assert page[('inference_extension_flow_control_queue_size', '')] == 1
        # A request over HTTP weighs its body in the queue.
        assert page[('inference_extension_flow_control_queue_bytes', '')] == len(raw)
        emu.scale(replicas=1)
        clock.t = T0 + 1.0
        emu.tick()
        response = await task
        assert response.status == 200
        assert (await response.json())['usage']['completion_tokens'] == 4
