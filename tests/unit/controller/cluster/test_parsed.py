"""Parses remembered by object version: what is looked up, what is parsed again, what is dropped."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pytest

from llmscaler.controller.cluster.parsed import ParsedObjects


def obj(*, rv: str | None, uid: str = 'u1', value: int = 1) -> dict[str, Any]:
    meta: dict[str, Any] = {'name': 'a', 'namespace': 'ns', 'uid': uid}
    if rv is not None:
        meta['resourceVersion'] = rv
    return {'metadata': meta, 'value': value}


class Counting:
    def __init__(self) -> None:
        self.calls = 0

    def __call__(self, o: Mapping[str, Any]) -> int:
        self.calls += 1
        return int(o['value']) * 10


def parse(memo: ParsedObjects, o: Mapping[str, Any], fn: Counting, what: str = 'T') -> int:
    return memo.parse(o, fn, what=what, namespace='ns', name='a')


def test_the_same_version_is_parsed_once_across_builds() -> None:
    memo, fn = ParsedObjects(), Counting()
    for _ in range(3):
        memo.start()
        assert parse(memo, obj(rv='5'), fn) == 10
        assert parse(memo, obj(rv='5'), fn) == 10
    assert fn.calls == 1


@pytest.mark.parametrize(
    'changed',
    [obj(rv='6', value=2), obj(rv='5', uid='u2', value=2)],
    ids=['resourceVersion', 'uid (deleted and created again)'],
)
def test_another_version_or_object_is_parsed_again(changed: dict[str, Any]) -> None:
    memo, fn = ParsedObjects(), Counting()
    memo.start()
    parse(memo, obj(rv='5'), fn)
    memo.start()
    assert parse(memo, changed, fn) == 20
    assert fn.calls == 2


def test_two_parses_of_one_object_are_kept_apart() -> None:
    memo, fn = ParsedObjects(), Counting()
    memo.start()
    assert parse(memo, obj(rv='5'), fn, what='A') == 10
    assert memo.parse(obj(rv='5'), lambda o: 'other', what='B', namespace='ns', name='a') == 'other'
    assert fn.calls == 1


@pytest.mark.parametrize('rv', [None, ''], ids=['absent', 'empty'])
def test_an_object_without_a_resource_version_is_parsed_every_time(rv: str | None) -> None:
    memo, fn = ParsedObjects(), Counting()
    for _ in range(3):
        memo.start()
        parse(memo, obj(rv=rv), fn)
    assert fn.calls == 3


def test_what_a_build_did_not_ask_for_is_dropped() -> None:
    memo, fn = ParsedObjects(), Counting()
    memo.start()
    parse(memo, obj(rv='5'), fn)
    memo.start()  # a build without the object
    memo.start()
    parse(memo, obj(rv='5'), fn)
    assert fn.calls == 2


def test_a_failing_parse_propagates_and_is_not_remembered() -> None:
    memo = ParsedObjects()
    memo.start()
    calls = []

    def broken(o: Mapping[str, Any]) -> int:
        calls.append(o)
        raise ValueError('bad')

    for _ in range(2):
        with pytest.raises(ValueError, match='bad'):
            memo.parse(obj(rv='5'), broken, what='T', namespace='ns', name='a')
    assert len(calls) == 2
