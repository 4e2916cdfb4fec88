"""Emulator helpers shared by the emulate tests: a trace builder, the 8B-H100 spec with a linear
step model, a fake clock and an emulator on it, and readers of the pages the emulator serves.

The step model keeps the arithmetic of the worked numbers visible: step = 7 ms + 0.042 ms ·
decoding seqs + 24 µs · prefill tokens + 0.052 µs · context tokens.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable

import numpy as np
from prometheus_client.parser import text_string_to_metric_families

from llmscaler.emulate.fleet import Emulator
from llmscaler.sim.hardware.presets import preset
from llmscaler.sim.vocabulary import Trace, VariantSpec
from tests.support.sim_fixtures import LINEAR as LINEAR


def trace_of(
    times: list[float], *, inputs: list[int] | None = None, outputs: list[int] | None = None
) -> Trace:
    """A trace at `times`; lengths 1, 2, 3, … and 10, 11, 12, … unless given."""
    n = len(times)
    return Trace(
        name='t',
        arrivals=np.array(times, dtype=np.float64),
        input_tokens=np.array(inputs or range(1, n + 1), dtype=np.int64),
        output_tokens=np.array(outputs or range(10, 10 + n), dtype=np.int64),
    )


MODEL = 'meta-llama/Llama-3.1-8B-Instruct'
T0 = 1000.0


def h100(**overrides: int) -> VariantSpec:
    return preset(
        name='llama-3.1-8b-h100', variant_name='llama-3.1-8b-h100', perf=LINEAR, **overrides
    )


class FakeClock:
    def __init__(self, t: float = T0) -> None:
        self.t = t

    def __call__(self) -> float:
        return self.t


def emulator(
    clock: FakeClock, *, replicas: int, spec: VariantSpec | None = None, **kw: object
) -> Emulator:
    return Emulator(
        spec=spec or h100(),
        replicas=replicas,
        model_name=MODEL,
        namespace='ns',
        clock=clock,
        **kw,  # type: ignore[arg-type]
    )


OPENMETRICS = 'application/openmetrics-text; version=1.0.0; charset=utf-8'


def samples(text: str) -> dict[tuple[str, str], float]:
    """(sample name, one distinguishing label value or '') → value, buckets left out."""
    out: dict[tuple[str, str], float] = {}
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            key = s.labels.get('finished_reason') or s.labels.get('pod_name') or ''
            if 'le' not in s.labels:
                out[(s.name, key)] = s.value
    return out


async def until(condition: Callable[[], bool], timeout: float = 2.0) -> None:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while not condition():
        assert loop.time() < deadline, 'timed out'
        await asyncio.sleep(0.002)
