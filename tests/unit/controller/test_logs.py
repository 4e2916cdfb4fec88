"""The controller's logs: INFO tells the story once (no HTTP request lines, no line repeated every
cycle while a hold or a source error lasts), the HTTP libraries stay at WARNING even at DEBUG,
and `--log-format json` writes one parseable object per line.

The cycles run against the fake apiserver with the in-memory source of test_controller_cycle;
every API request goes through lightkube's HTTP client, which logs each one at INFO unless told
otherwise.
"""

from __future__ import annotations

import io
import json
import logging
from collections.abc import Iterator

import pytest

from llmscaler.collect.readings import ErrorReason, SourceError
from llmscaler.controller.logs import HTTP_LOGGERS, configure_logging
from llmscaler.controller.va.story import Story, hold_of
from llmscaler.devcluster.fakeapi.server import FakeAPI
from llmscaler.domain.basics import Action
from llmscaler.domain.snapshot import Decision
from tests.support.controller_harness import (
    SATURATED,
    FakeSource,
    caught_up,
    informed,
    seed_variant,
)

FAILURE = SourceError(
    target='http://10.0.1.1:8000/metrics', reason=ErrorReason.UNREACHABLE, message='refused'
)


@pytest.fixture
def restore_logging() -> Iterator[None]:
    """Puts the root and HTTP library loggers back as they were."""
    root = logging.getLogger()
    level, handlers = root.level, list(root.handlers)
    levels = {name: logging.getLogger(name).level for name in HTTP_LOGGERS}
    yield
    for handler in list(root.handlers):
        if handler not in handlers:
            root.removeHandler(handler)
    root.setLevel(level)
    for name, old in levels.items():
        logging.getLogger(name).setLevel(old)


def lines(caplog: pytest.LogCaptureFixture) -> list[str]:
    """The main cycle's lines."""
    cycle = 'llmscaler.controller.va.cycle'
    return [f'{r.levelname} {r.getMessage()}' for r in caplog.records if r.name == cycle]


@pytest.mark.usefixtures('restore_logging')
async def test_a_cycle_at_info_logs_no_request_and_repeats_nothing(
    api: FakeAPI, caplog: pytest.LogCaptureFixture
) -> None:
    seed_variant(api, 'a')
    source = FakeSource(api, load={'a': SATURATED}, errors=(FAILURE,))
    caplog.set_level(logging.INFO)
    async with informed(api, source) as controller:
        # Without the configuration, the API client logs every request at INFO.
        await controller.cycle.run_once()
        assert any(r.name in HTTP_LOGGERS for r in caplog.records)
        caplog.clear()

        configure_logging(level='info', format='text', stream=io.StringIO())
        for _ in range(3):  # the source keeps failing: said once, not every cycle
            await caught_up(controller, api)
            await controller.cycle.run_once()
        assert lines(caplog) == []
        source.errors = ()  # recovered: the variant scales
        await caught_up(controller, api)
        await controller.cycle.run_once()
    names = {r.name for r in caplog.records}
    assert all(name.startswith('llmscaler.') for name in names), names
    assert lines(caplog) == [
        'INFO metrics: http://10.0.1.1:8000/metrics readable again (was Unreachable)',
        'INFO ns/a: no longer holding (saturation-only mode)',
        'INFO scaled Deployment ns/a: 1 -> 2 (saturation-only mode)',
    ]


@pytest.mark.usefixtures('restore_logging')
async def test_a_hold_and_a_source_error_are_logged_when_they_start(
    api: FakeAPI, caplog: pytest.LogCaptureFixture
) -> None:
    seed_variant(api, 'a')
    source = FakeSource(api, load={'a': SATURATED}, errors=(FAILURE,))
    configure_logging(level='info', format='text', stream=io.StringIO())
    caplog.set_level(logging.INFO)
    async with informed(api, source) as controller:
        await controller.cycle.run_once()
        await caught_up(controller, api)
        await controller.cycle.run_once()
    assert lines(caplog) == [
        'WARNING metrics: http://10.0.1.1:8000/metrics: Unreachable: refused',
        'INFO holding ns/a at 1 replicas: MetricsMissing: 0 of 1 ready replicas report metrics',
    ]


@pytest.mark.usefixtures('restore_logging')
def test_http_libraries_stay_at_warning_even_at_debug() -> None:
    stream = io.StringIO()
    configure_logging(level='debug', format='text', stream=stream)
    for name in ('httpx', 'httpcore.http11', 'hpack.hpack', 'h2.connection', 'httpx2'):
        logging.getLogger(name).info('GET /metrics 200')
        logging.getLogger(name).debug('send_request_headers.started')
    logging.getLogger('llmscaler.controller').debug('a decision')
    assert stream.getvalue().count('\n') == 1
    assert 'DEBUG llmscaler.controller: a decision' in stream.getvalue()
    configure_logging(level='info', format='text', http_level='debug', stream=stream)
    logging.getLogger('httpx').debug('now shown')
    assert 'DEBUG httpx: now shown' in stream.getvalue()


@pytest.mark.usefixtures('restore_logging')
def test_json_lines_parse_with_extra_fields_and_exceptions() -> None:
    stream = io.StringIO()
    configure_logging(level='info', format='json', stream=stream)
    log = logging.getLogger('llmscaler.controller.va.cycle')
    log.info('scaled %s: %d -> %d', 'ns/a', 1, 2, extra={'variant': 'a', 'replicas': 2})
    try:
        raise RuntimeError('boom\nsecond line')
    except RuntimeError:
        log.exception('cycle failed')
    log.warning('odd value', extra={'thing': object()})
    rows = [json.loads(line) for line in stream.getvalue().splitlines()]
    assert len(rows) == 3
    first = rows[0]
    assert first['time'].endswith('Z')
    assert (first['level'], first['logger'], first['message']) == (
        'info',
        'llmscaler.controller.va.cycle',
        'scaled ns/a: 1 -> 2',
    )
    assert (first['variant'], first['replicas']) == ('a', 2)
    assert rows[1]['level'] == 'error'
    assert 'RuntimeError: boom' in rows[1]['exception']
    assert rows[2]['thing'].startswith('<object object')


@pytest.mark.usefixtures('restore_logging')
def test_configuring_again_replaces_its_own_handler_only(caplog: pytest.LogCaptureFixture) -> None:
    first, second = io.StringIO(), io.StringIO()
    configure_logging(level='info', format='text', stream=first)
    configure_logging(level='info', format='text', stream=second)
    caplog.set_level(logging.INFO)
    logging.getLogger('llmscaler.x').info('once')
    assert (first.getvalue(), second.getvalue().count('once')) == ('', 1)
    assert [r.getMessage() for r in caplog.records] == ['once']  # the capture is still there


# --- the story, on its own ----------------------------------------------------------------------


def decision(
    *, current: int = 2, target: int = 2, available: bool = True, reason: str = 'steady'
) -> Decision:
    return Decision(
        variant='a',
        namespace='ns',
        model_id='m',
        accelerator='L40S',
        current=current,
        target=target,
        action=Action.NO_CHANGE if target == current else Action.SCALE_UP,
        reason=reason,
        metrics_available=available,
        metrics_reason='MetricsFound' if available else 'MetricsMissing',
        message='' if available else 'pod a-0: kv_usage missing',
    )


def test_hold_of() -> None:
    assert hold_of(decision()) is None
    assert hold_of(decision(available=False)) == ('MetricsMissing', 'steady')
    assert hold_of(decision(reason='hold: no vote: x')) == ('MetricsFound', 'hold: no vote: x')
    assert hold_of(decision(available=False, target=3)) is None  # scaling up is not holding


def test_story_logs_changes_only(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO)
    story = Story(limit=2)
    story.decisions([decision(available=False)])
    story.decisions([decision(available=False)])
    story.decisions([decision(reason='hold: analyzer: quiet')])
    story.decisions([decision()])
    story.decisions([decision()])
    errors = [SourceError(f'http://p{i}', ErrorReason.TIMEOUT, 'slow') for i in range(4)]
    story.source_errors(errors)
    story.source_errors(errors)
    story.source_errors(errors[:1])
    story.invalid([('ns/x', 'minReplicas above maxReplicas')])
    story.invalid([('ns/x', 'minReplicas above maxReplicas')])
    assert [r.getMessage() for r in caplog.records] == [
        'holding ns/a at 2 replicas: MetricsMissing: pod a-0: kv_usage missing',
        'holding ns/a at 2 replicas: hold: analyzer: quiet',
        'ns/a: no longer holding (steady)',
        'metrics: http://p0: Timeout: slow',
        'metrics: http://p1: Timeout: slow',
        'metrics: 2 more sources failing',
        'metrics: http://p1 readable again (was Timeout)',
        'metrics: http://p2 readable again (was Timeout)',
        'metrics: 1 more sources readable again',
        'VariantAutoscaling ns/x is invalid: minReplicas above maxReplicas',
    ]
