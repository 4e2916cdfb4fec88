"""`sim.vocabulary`: a request crosses a process boundary (pickle) and a deep copy whole."""

from __future__ import annotations

import copy
import dataclasses
import pickle

from llmscaler.sim.vocabulary import SimRequest


def lived() -> SimRequest:
    """A request with no field left at its default."""
    return SimRequest(
        rid=7,
        arrival=1.5,
        input_tokens=900,
        output_tokens=40,
        dispatched=1.6,
        first_token=2.25,
        finished=4.0,
        failed=True,
        failure='replica-timeout',
        variant='h100',
        replica='h100-3',
        preemptions=2,
        model='llama',
        prefix=(11, 12, 13),
        prefix_block=16,
        cached_tokens=32,
        kv_ready=48,
    )


def values(request: SimRequest) -> dict[str, object]:
    return {f.name: getattr(request, f.name) for f in dataclasses.fields(SimRequest)}


def test_every_field_left_at_a_default_is_a_field_this_test_sets() -> None:
    defaults = values(SimRequest(rid=0, arrival=0.0, input_tokens=1, output_tokens=1))
    assert all(value != defaults[name] for name, value in values(lived()).items())


def test_a_request_is_the_same_after_pickling_and_after_a_deep_copy() -> None:
    request = lived()
    for back in (pickle.loads(pickle.dumps(request, protocol=5)), copy.deepcopy(request)):
        assert type(back) is SimRequest
        assert back is not request
        assert values(back) == values(request)
    shared = [request, request]
    first, second = pickle.loads(pickle.dumps(shared, protocol=5))
    assert first is second  # one object still, as a result's lists hold it
