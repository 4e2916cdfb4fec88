"""The written-out soundness check of `analyze.validity` agrees with the field-by-field rules.

`replica_problems` and `pool_problems` skip the rules for a record the generated predicate
passes; that is only right if the predicate passes exactly the records with no problem. Checked
on records whose numeric fields take any value: floats (NaN, ±Inf, -0.0, subnormals), integers
past a float's range, bools, strings and None.
"""

from __future__ import annotations

import dataclasses
import math

from hypothesis import given, settings
from hypothesis import strategies as st

from llmscaler.analyze import validity
from llmscaler.domain.snapshot import PoolMetrics, ReplicaMetrics

SOUND_REPLICA = ReplicaMetrics(
    pod='a-0',
    variant='a',
    namespace='ns',
    observed_at=1000.0,
    kv_usage=0.5,
    queue_length=2.0,
    num_gpu_blocks=1000,
    block_size=16,
    avg_input_tokens=500.0,
    avg_output_tokens=100.0,
    arrival_rate=1.5,
    avg_ttft=0.1,
    avg_itl=0.02,
    running_requests=8.0,
)
SOUND_POOL = PoolMetrics(model_id='m', namespace='ns', observed_at=1000.0, request_count=5.0)

ANY_VALUE = (
    st.none()
    | st.floats()
    | st.integers(min_value=-(2**70), max_value=2**70)
    | st.booleans()
    | st.sampled_from([0, 1, -0.0, 1.0, 2.0, 5e-324, math.nextafter(1.0, 2.0), 'x', 1j])
)


def changed(record: object, fields: tuple[validity._Field, ...], data: st.DataObject) -> object:
    names = data.draw(st.sets(st.sampled_from([f.name for f in fields]), max_size=3))
    values = {name: data.draw(ANY_VALUE, label=name) for name in sorted(names)}
    return dataclasses.replace(record, **values)  # type: ignore[type-var]


@settings(max_examples=400, deadline=None)
@given(data=st.data())
def test_the_replica_check_passes_exactly_the_records_without_problems(
    data: st.DataObject,
) -> None:
    record = changed(SOUND_REPLICA, validity._REPLICA_FIELDS, data)
    slow = validity._problems(record, validity._REPLICA_FIELDS)
    assert validity._SOUND_REPLICA(record) == (slow == ()), slow


@settings(max_examples=200, deadline=None)
@given(data=st.data())
def test_the_pool_check_passes_exactly_the_records_without_problems(data: st.DataObject) -> None:
    record = changed(SOUND_POOL, validity._POOL_FIELDS, data)
    slow = validity._problems(record, validity._POOL_FIELDS)
    assert validity._SOUND_POOL(record) == (slow == ()), slow


def test_the_check_refuses_a_missing_required_figure_and_a_float_count() -> None:
    assert validity._SOUND_REPLICA(SOUND_REPLICA)
    for broken in (
        dataclasses.replace(SOUND_REPLICA, kv_usage=None),
        dataclasses.replace(SOUND_REPLICA, num_gpu_blocks=1000.0),  # type: ignore[arg-type]
        dataclasses.replace(SOUND_REPLICA, queue_length=True),
        dataclasses.replace(SOUND_REPLICA, kv_usage=math.nan),
    ):
        assert not validity._SOUND_REPLICA(broken)
        assert validity.replica_problems(broken)
