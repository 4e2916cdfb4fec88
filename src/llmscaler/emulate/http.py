"""The HTTP face of an emulator: vLLM's and the EPP's endpoints as aiohttp applications.

Why: clients, Prometheus and the gateway tests talk to emulated pods as to vLLM: scrape
`/metrics`, probe `/health`, send an OpenAI completion and get a JSON answer or an SSE stream,
or a vLLM-style error. This module maps those requests onto an `Emulator` (`fleet`); opening
the ports is `server`'s business.

What: `replica_app(emulator=, slot=)` serves `GET /metrics`, `GET /health` and
`POST /v1/completions` straight to the replica in `slot` (a draining replica is still scraped
but refuses completions with 503; once it is gone its page is a 503 too);
`epp_app(emulator=)` serves `GET /metrics` and `POST /v1/completions` through the gateway's
router and queue. Pages go out as text format 0.0.4 whatever the Accept header. A completion's
prompt counts one token per whitespace-separated word (a list of token ids counts its length);
the non-OpenAI field `prompt_tokens` overrides that; `max_tokens` defaults to 16; the text is
' tok' per token. A stream sends one SSE chunk per token: the first when the model produced it;
the next ones at an estimated pace (`Pod.pace`), never past n − 1 before the request is
finished; the rest when it finishes; then `data: [DONE]`. The model may be one engine step
(milliseconds) ahead of the clock. A client that disconnects does not abort its request.

What fails: a body that is not JSON, not an object, without a usable prompt, with max_tokens
< 1, an empty prompt or a wrong stream flag gets a vLLM-style 400 (404 for another model name);
a prompt too long for the model is refused with 400 before it reaches a replica. A request the
replica drops (too long for its cache) ends with 400, one pending when the emulator stops with
503; a stream that has begun reports these as an SSE error chunk.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Final

from aiohttp import web

from llmscaler.emulate.exposition import CONTENT_TYPE
from llmscaler.emulate.fleet import Emulator, ReplicaUnavailable

DEFAULT_MAX_TOKENS: Final = 16
TOKEN_TEXT: Final = ' tok'

_ERROR_TYPES: Final = {400: 'BadRequestError', 404: 'NotFoundError', 503: 'ServiceUnavailableError'}


def replica_app(*, emulator: Emulator, slot: int) -> web.Application:
    """The application of the replica in `slot`: its page, health and completions."""

    async def metrics(request: web.Request) -> web.Response:
        page = emulator.metrics_page(slot=slot)
        if page is None:
            return web.Response(status=503, text='replica gone\n')
        return _page(page)

    app = web.Application()
    app.router.add_get('/metrics', metrics)
    app.router.add_get('/health', _health)
    app.router.add_post('/v1/completions', _completions(emulator=emulator, slot=slot))
    return app


def epp_app(*, emulator: Emulator) -> web.Application:
    """The gateway's application: its page, and completions routed or queued."""

    async def metrics(request: web.Request) -> web.Response:
        return _page(emulator.epp_page())

    app = web.Application()
    app.router.add_get('/metrics', metrics)
    app.router.add_post('/v1/completions', _completions(emulator=emulator, slot=None))
    return app


@dataclass(frozen=True, slots=True)
class Completion:
    """What the emulator needs of a `/v1/completions` body."""

    input_tokens: int
    max_tokens: int
    stream: bool
    include_usage: bool


def _is_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def parse_completion(
    *, body: object, model_name: str, max_model_len: int, limit: int
) -> Completion | tuple[int, str]:
    """The request's figures, or (HTTP status, message) when vLLM would refuse it."""
    if not isinstance(body, dict):
        return 400, 'the body must be a JSON object'
    model = body.get('model', model_name)
    if model != model_name:
        return 404, f'The model `{model}` does not exist.'
    hint, prompt = body.get('prompt_tokens'), body.get('prompt')
    if hint is not None:
        if not _is_int(hint):
            return 400, 'prompt_tokens must be an integer'
        size = int(hint)
    elif isinstance(prompt, str):
        size = len(prompt.split())
    elif isinstance(prompt, list) and all(_is_int(t) for t in prompt):
        size = len(prompt)
    else:
        return 400, 'prompt must be a string or a list of token ids'
    max_tokens = body.get('max_tokens', DEFAULT_MAX_TOKENS)
    if max_tokens is None:
        max_tokens = DEFAULT_MAX_TOKENS
    if not _is_int(max_tokens) or max_tokens < 1:
        return 400, f'max_tokens must be at least 1, got {max_tokens}'
    if size < 1:
        return 400, 'The prompt cannot be empty.'
    if size + max_tokens > max_model_len or size > limit:
        return 400, (
            f"This model's maximum context length is {min(max_model_len, limit)} tokens. "
            f'However, you requested {size + max_tokens} tokens ({size} in the prompt, '
            f'{max_tokens} for the completion).'
        )
    stream = body.get('stream', False)
    options = body.get('stream_options') or {}
    if not isinstance(stream, bool) or not isinstance(options, dict):
        return 400, 'stream must be a boolean and stream_options an object'
    return Completion(size, int(max_tokens), stream, bool(options.get('include_usage')))


class _Stream:
    """A Listener an HTTP handler awaits."""

    def __init__(self) -> None:
        self.tokens = 0
        self.done = False
        self.reason = ''
        self.error: tuple[int, str] | None = None
        self._changed = asyncio.Event()

    def progress(self, *, tokens: int) -> None:
        if tokens > self.tokens:
            self.tokens = tokens
            self._changed.set()

    def finish(self, *, tokens: int, reason: str) -> None:
        self.tokens, self.done, self.reason = tokens, True, reason
        self._changed.set()

    def reject(self, *, status: int, message: str) -> None:
        self.error, self.done = (status, message), True
        self._changed.set()

    async def changed(self) -> None:
        await self._changed.wait()
        self._changed.clear()


def _page(text: str) -> web.Response:
    return web.Response(body=text.encode(), headers={'Content-Type': CONTENT_TYPE})


async def _health(request: web.Request) -> web.Response:
    return web.Response(status=200)


def _error(status: int, message: str) -> web.Response:
    body = {
        'object': 'error',
        'message': message,
        'type': _ERROR_TYPES.get(status, 'Error'),
        'param': None,
        'code': status,
    }
    return web.json_response(body, status=status)


def _sse(payload: Mapping[str, object]) -> bytes:
    return b'data: ' + json.dumps(payload, separators=(',', ':')).encode() + b'\n\n'


def _completions(
    *, emulator: Emulator, slot: int | None
) -> Callable[[web.Request], Awaitable[web.StreamResponse]]:
    async def handler(request: web.Request) -> web.StreamResponse:
        return await _complete(emulator, request, slot)

    return handler


async def _complete(
    emulator: Emulator, request: web.Request, slot: int | None
) -> web.StreamResponse:
    raw = await request.read()
    try:
        body = json.loads(raw)
    except ValueError:
        return _error(400, 'the body is not valid JSON')
    parsed = parse_completion(
        body=body,
        model_name=emulator.model_name,
        max_model_len=emulator.spec.max_model_len,
        limit=emulator.limit,
    )
    if isinstance(parsed, tuple):
        return _error(*parsed)
    listener = _Stream()
    try:
        rid = emulator.submit(
            input_tokens=parsed.input_tokens,
            max_tokens=parsed.max_tokens,
            listener=listener,
            slot=slot,
            size_bytes=len(raw),
        )
    except ReplicaUnavailable as exc:
        return _error(503, str(exc))
    try:
        if parsed.stream:
            return await _stream(emulator, request, listener, rid, parsed)
        while not listener.done:
            await listener.changed()
        if listener.error is not None:
            return _error(*listener.error)
        text = TOKEN_TEXT * listener.tokens
        return web.json_response(
            _chunk(emulator, rid, text, listener.reason, parsed, listener.tokens, usage=True)
        )
    finally:
        emulator.detach(rid)


def _chunk(
    emulator: Emulator,
    rid: int,
    text: str,
    reason: str | None,
    parsed: Completion,
    tokens: int,
    *,
    usage: bool,
) -> dict[str, object]:
    choice = {
        'index': 0,
        'text': text,
        'logprobs': None,
        'finish_reason': reason,
        'stop_reason': None,
    }
    counts = {
        'prompt_tokens': parsed.input_tokens,
        'total_tokens': parsed.input_tokens + tokens,
        'completion_tokens': tokens,
    }
    return {
        'id': f'cmpl-{rid}',
        'object': 'text_completion',
        'created': int(emulator.wall_time),
        'model': emulator.model_name,
        'choices': [choice] if text or reason else [],
        'usage': counts if usage else None,
    }


async def _stream(
    emulator: Emulator, request: web.Request, listener: _Stream, rid: int, parsed: Completion
) -> web.StreamResponse:
    response = web.StreamResponse(
        headers={'Content-Type': 'text/event-stream', 'Cache-Control': 'no-cache'}
    )
    await response.prepare(request)
    sent = 0
    try:
        while True:
            if listener.error is not None:
                status, message = listener.error
                error = {'error': {'message': message, 'code': status}}
                await response.write(_sse(error))
                break
            events = []
            while sent < listener.tokens:
                sent += 1
                last = listener.done and sent == listener.tokens
                reason = listener.reason if last else None
                events.append(
                    _sse(_chunk(emulator, rid, TOKEN_TEXT, reason, parsed, 0, usage=False))
                )
            if events:
                await response.write(b''.join(events))
            if listener.done:
                if parsed.include_usage:
                    await response.write(
                        _sse(_chunk(emulator, rid, '', None, parsed, sent, usage=True))
                    )
                break
            await listener.changed()
        await response.write(b'data: [DONE]\n\n')
        await response.write_eof()
    except ConnectionError:
        pass  # the client went away; the request goes on in the model
    return response
