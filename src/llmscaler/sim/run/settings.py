"""The settings of a simulated run: control loop, gateway, measurement, engines, KV link.

Why: the event loop (`sim.run.loop`), the scenario reader (`sim.scenario.loader`) and the benchmarks
all speak of the same settings; they are kept here with their checks, apart from the loop itself.
Each field says what it sets; `sim.run.loop` says how the loop uses them.

What fails: `check_settings` raises ValueError naming the first invalid setting (a period <= 0
or NaN, a negative lag, delay or tail, a request time-out that is not > 0 and finite, a KV link
that is not > 0 and finite or a negative latency).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Literal


@dataclass(frozen=True, slots=True)
class SimSettings:
    """Timing of the simulated control loop, gateway and measurement (seconds)."""

    cycle: float = 30.0
    """Main control period (`policy.targets`)."""
    wake_period: float = 1.0
    """Scale-from-zero period (`policy.wake`); inf disables it."""
    scrape_interval: float = 5.0
    """Prometheus scrape period of every replica and of the gateway."""
    scrape_lag: float = 10.0
    """The controller sees samples at least this old."""
    actuation_delay: float = 2.0
    """Decision → scale subresource written."""
    gateway_timeout: float = 120.0
    """A request queued at the gateway fails after this; inf disables it."""
    request_timeout: float | None = None
    """A request not completed this long after its arrival is abandoned by its client and
    fails, wherever it is (`sim.fleet.cluster`); None: clients wait forever."""
    router: Literal['least-loaded', 'round-robin', 'prefix-aware'] = 'least-loaded'
    """How each gateway picks a replica (`sim.fleet.gateway`)."""
    prefix_caching: bool = False
    """Whether the replicas keep vLLM's prefix cache (`sim.vllm.prefix_cache`); off by default."""
    kv_link_gbps: float = 100.0
    """P/D: the link a prompt's KV crosses from its prefill to its decode replica, Gb/s
    (`sim.fleet.disagg`)."""
    kv_link_latency: float = 0.002
    """P/D: seconds per KV transfer besides its bytes."""
    sample_interval: float = 10.0
    """Timeline sampling period."""
    retention_period: float = 600.0
    """Window of the request count in the snapshot (the scale-to-zero retention)."""
    tail: float = 300.0
    """Keep simulating this long after the last arrival."""
    engine: Literal['fast', 'reference'] = 'fast'


def check_settings(*, settings: SimSettings) -> None:
    """Raise `ValueError` naming the first invalid setting."""
    for name in ('cycle', 'scrape_interval', 'sample_interval', 'retention_period'):
        value = getattr(settings, name)
        if not (value > 0 and math.isfinite(value)):
            raise ValueError(f'settings.{name} must be > 0 and finite, got {value!r}')
    for name in ('wake_period', 'gateway_timeout'):
        value = getattr(settings, name)
        if not value > 0:
            raise ValueError(f'settings.{name} must be > 0 (inf disables it), got {value!r}')
    for name in ('scrape_lag', 'actuation_delay', 'tail'):
        value = getattr(settings, name)
        if not (value >= 0 and math.isfinite(value)):
            raise ValueError(f'settings.{name} must be >= 0 and finite, got {value!r}')
    if not (settings.kv_link_gbps > 0 and math.isfinite(settings.kv_link_gbps)):
        raise ValueError(
            f'settings.kv_link_gbps must be > 0 and finite, got {settings.kv_link_gbps!r}'
        )
    if not (settings.kv_link_latency >= 0 and math.isfinite(settings.kv_link_latency)):
        raise ValueError(
            f'settings.kv_link_latency must be >= 0 and finite, got {settings.kv_link_latency!r}'
        )
    timeout = settings.request_timeout
    if timeout is not None and not (timeout > 0 and math.isfinite(timeout)):
        raise ValueError(
            f'settings.request_timeout must be > 0 and finite (or absent), got {timeout!r}'
        )
