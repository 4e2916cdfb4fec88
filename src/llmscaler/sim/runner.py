"""The simulator's event loop: one policy against one trace on a simulated fleet, in virtual time.

Why: `llmscaler simulate` compares policies on the same traffic. This loop plays the controller
(control cycle, scale-from-zero period, scrape lag, actuation delay) around the cluster model of
`sim.fleet.cluster` and the metric view of `sim.fleet.observe`, so a policy is driven exactly as the
real controller would drive it.

The settings (`SimSettings`: the control loop, the gateway, measurement, the engines, the KV
link) are those a scenario file's `settings` gives and the benchmarks set; each field says what
it sets, `check_settings` which values are valid. The loop trusts what it is given once it is
checked, as the controller trusts what the cluster tells it: the fleet (`check_variants`: the one
the controller could manage) and the traces (`check_trace`: `Trace`'s promise).

Several models may share the fleet, each with its own trace (`run`'s `trace` is then a mapping
from model name to trace): their arrivals are merged in time order (ties: model name, then trace
order), and every request goes to its model's gateway (`sim.fleet.cluster`). With a GPU inventory
the fleet binds replicas to GPUs first come (`sim.fleet.cluster`); all the targets written at one
instant are written before any of their replicas is bound, so at equal decision times models (then
variants) take the last GPUs in name order.

Events, merged in time order; at equal times the order is fixed:

    time-out < replica ready < KV transfer done < actuation < arrival < scrape < wake < control
    < sample

so a replica that becomes Ready at t takes the arrivals of t (and the decode legs of P/D
requests whose KV transfer is done at t, `sim.fleet.disagg`), a scrape at t sees them, and the
timeline at t shows the result of everything else at t. Arrivals come from the trace; control
ticks every `cycle` (first at t = cycle), wake ticks every `wake_period` (first at t =
wake_period), scrapes and samples every `scrape_interval` / `sample_interval` from t = 0;
actuations fire `actuation_delay` after the decision; replicas become Ready `startup_delay` after
creation; with a `request_timeout`, a time-out event comes at the deadline of the oldest request
in a replica that has not completed (`Cluster.next_deadline`), so an abandoned request leaves its
replica at its deadline, not at the next event. Before handling an event every engine is
advanced to its time and the deadlines that have come are expired (`Cluster.expire`). A control
(wake) tick hands the policy a `ControlView` built from `Observer.snapshot`, and schedules an
actuation for every variant whose returned target differs from its current target; when the
actuation fires the target is clamped and, if it changed, a `ScaleEvent` with reason 'policy'
(or 'wake') is logged. A sample appends to the `Timeline`: replicas existing per
variant (bound to GPUs: pending, ready and terminating: what costs), ready non-terminating ones
per variant, and over every replica with an engine (terminating ones still serve) the mean KV
usage and the sums of waiting and running requests, plus the gateway queue length (of every
model; per model too with several); with an inventory, the GPUs bound per accelerator type
and the replicas waiting for GPUs per variant. The run stops at the longest trace's duration +
tail: requests not finished then stay unfinished (not failed); an engine step already started at
the end completes. Replicas are charged until the work is done (`charged_until`: the last
arrival or the last completion, whichever is later; the run's end while a request is neither
completed nor failed); what they cost after that is reported apart (`tail_replica_seconds`).

What fails: `run` raises `ValueError` for no variants, duplicate variant names, variants in
several namespaces, a model whose variants name different model ids or two models with one
model id (the controller groups variants by model id), one trace for variants of several models,
traces for models no variant serves or no trace for a model, a trace whose arrivals are not
finite, non-negative and non-decreasing, invalid settings (a period ≤ 0 or NaN, a negative lag,
delay or tail; `wake_period` and `gateway_timeout` may be inf to disable them;
`request_timeout` is None (off) or > 0 and finite), a bad inventory or initial replicas beyond
it (`sim.fleet.cluster`), and a policy returning an unknown variant name.
"""

from __future__ import annotations

import dataclasses
import heapq
import math
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Literal

import numpy as np

from llmscaler.domain.basics import group_key
from llmscaler.sim.fleet.cluster import Cluster
from llmscaler.sim.fleet.observe import Observer
from llmscaler.sim.vocabulary import (
    ControlView,
    Policy,
    ScaleEvent,
    SimRequest,
    SimResult,
    Timeline,
    Trace,
    VariantSpec,
)


@dataclasses.dataclass(frozen=True, slots=True)
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


TIMEOUT, READY, TRANSFER, ACTUATE, ARRIVAL, SCRAPE, WAKE, CONTROL, SAMPLE = range(9)


class _Loop:
    """The state of one run; `run` is its only user."""

    def __init__(
        self,
        *,
        traces: Sequence[tuple[str, Trace]],
        variants: Sequence[VariantSpec],
        policy: Policy,
        settings: SimSettings,
        inventory: Mapping[str, int] | None,
        progress: Callable[[float], None] | None,
    ) -> None:
        self.settings = settings
        self.policy = policy
        self.progress = progress
        self.end = max(t.duration for _, t in traces) + settings.tail
        self.cluster = Cluster(
            variants=variants,
            engine=settings.engine,
            router=settings.router,
            gateway_timeout=settings.gateway_timeout,
            request_timeout=(
                math.inf if settings.request_timeout is None else settings.request_timeout
            ),
            inventory=inventory,
            kv_bandwidth=settings.kv_link_gbps * 1e9 / 8,
            kv_latency=settings.kv_link_latency,
        )
        self.observer = Observer(
            scrape_interval=settings.scrape_interval,
            scrape_lag=settings.scrape_lag,
            retention_period=settings.retention_period,
        )
        names = self.cluster.variant_names
        models = self.cluster.model_names
        limited = self.cluster.inventory
        self.timeline = Timeline(
            replicas={v: [] for v in names},
            ready={v: [] for v in names},
            gateway_queues={m: [] for m in models} if len(models) > 1 else {},
            gpus={a: [] for a in limited},
            unbound={v: [] for v in names} if limited else {},
        )
        self.requests: list[SimRequest] = []
        self.events: list[ScaleEvent] = []
        self.actuations: list[tuple[float, int, str, int, str]] = []
        self._sequence = 0
        self._reported = -1.0

    # ---- ticks -------------------------------------------------------------------------------

    def view(self, now: float) -> ControlView:
        cluster = self.cluster
        return ControlView(
            now=now,
            snapshot=self.observer.snapshot(now=now, cluster=cluster),
            replicas=dict(cluster.targets),
            ready={v: cluster.ready_count(variant=v) for v in cluster.variant_names},
            gateways=self._gateways(),
        )

    def _gateways(self) -> dict[str, tuple[int, int]]:
        cluster = self.cluster
        found: dict[str, tuple[int, int]] = {}
        for model, gateway in sorted(cluster.gateways.items()):
            spec = cluster.specs[cluster.variants_of(model=model)[0]]
            found[group_key(model_id=spec.model_id, namespace=spec.namespace)] = (
                gateway.arrivals_total,
                len(gateway.queue),
            )
        return found

    def decide(self, now: float, wanted: dict[str, int], reason: str) -> None:
        targets = self.cluster.targets
        for variant in sorted(wanted):
            if variant not in targets:
                raise ValueError(
                    f'policy {self.policy.name!r} returned unknown variant {variant!r}; '
                    f'known: {", ".join(self.cluster.variant_names)}'
                )
            target = int(wanted[variant])
            if target != targets[variant]:
                self._sequence += 1
                heapq.heappush(
                    self.actuations,
                    (now + self.settings.actuation_delay, self._sequence, variant, target, reason),
                )

    def actuate(self, now: float) -> None:
        # Every target due now is written before any new replica is bound to GPUs, so the
        # last GPUs go first come, ties by model and variant name (`Cluster.schedule`).
        actuations, cluster = self.actuations, self.cluster
        while actuations and actuations[0][0] <= now:
            _, _, variant, target, reason = heapq.heappop(actuations)
            before, after = cluster.set_target(
                variant=variant, target=target, now=now, schedule=False
            )
            if after != before:
                self.events.append(
                    ScaleEvent(time=now, variant=variant, before=before, after=after, reason=reason)
                )
        cluster.schedule(now=now)

    def sample(self, now: float) -> None:
        cluster, timeline = self.cluster, self.timeline
        timeline.times.append(now)
        for variant in cluster.variant_names:
            timeline.replicas[variant].append(cluster.existing[variant])
            timeline.ready[variant].append(cluster.ready_count(variant=variant))
        kv, waiting, running = 0.0, 0, 0
        live = cluster.live
        for replica in live:
            engine = replica.engine
            assert engine is not None
            kv += engine.kv_usage
            waiting += engine.waiting
            running += engine.running
        timeline.kv_usage.append(kv / len(live) if live else 0.0)
        timeline.waiting.append(waiting)
        timeline.running.append(running)
        timeline.gateway_queue.append(cluster.queued)
        if timeline.gateway_queues:
            for model, gateway in cluster.gateways.items():
                timeline.gateway_queues[model].append(len(gateway.queue))
        for accelerator, series in timeline.gpus.items():
            series.append(cluster.gpus_used[accelerator])
        for variant, series in timeline.unbound.items():
            series.append(cluster.unbound_count(variant=variant))
        if self.progress is not None and self.end > 0:
            done = min(1.0, now / self.end)
            if done - self._reported >= 0.01:
                self._reported = done
                self.progress(done)

    # ---- the loop ----------------------------------------------------------------------------

    def run(self, traces: Sequence[tuple[str, Trace]]) -> None:
        s, cluster, end = self.settings, self.cluster, self.end
        arrivals = merged_arrivals(traces)
        nxt = next(arrivals, None)
        n_scrape = n_sample = 0
        n_control = n_wake = 1
        while True:
            t_scrape = n_scrape * s.scrape_interval
            t_sample = n_sample * s.sample_interval
            t_control = n_control * s.cycle
            t_wake = n_wake * s.wake_period
            t_act = self.actuations[0][0] if self.actuations else math.inf
            other = min(
                (cluster.next_deadline(), TIMEOUT),
                (cluster.next_ready_time(), READY),
                (cluster.next_transfer(), TRANSFER),
                (t_act, ACTUATE),
                (t_scrape, SCRAPE),
                (t_wake, WAKE),
                (t_control, CONTROL),
                (t_sample, SAMPLE),
            )
            if nxt is not None and (nxt[0], ARRIVAL) < other:
                # The hot path: every arrival before the next other event, without re-deciding.
                limit_t, limit_kind = other
                while nxt is not None and nxt[0] <= end:
                    t = nxt[0]
                    if t > limit_t or (t == limit_t and limit_kind < ARRIVAL):
                        break
                    cluster.advance(until=t)
                    if cluster.queued:
                        cluster.expire(now=t)
                    request = SimRequest(
                        rid=len(self.requests),
                        arrival=t,
                        input_tokens=nxt[1],
                        output_tokens=nxt[2],
                        model=nxt[3],
                        prefix=nxt[4],
                        prefix_block=nxt[5],
                    )
                    self.requests.append(request)
                    cluster.arrive(request=request, now=t)
                    nxt = next(arrivals, None)
                if nxt is not None and nxt[0] > end:
                    nxt = None
                continue
            t, kind = other
            if t > end:
                break
            cluster.advance(until=t)
            cluster.expire(now=t)
            if kind == TIMEOUT:
                pass  # `expire` above did it
            elif kind == READY:
                cluster.promote(now=t)
            elif kind == TRANSFER:
                cluster.deliver(now=t)
            elif kind == ACTUATE:
                self.actuate(t)
            elif kind == SCRAPE:
                self.observer.scrape(now=t, cluster=cluster)
                n_scrape += 1
            elif kind == WAKE:
                self.decide(t, self.policy.wake(view=self.view(t)), 'wake')
                n_wake += 1
            elif kind == CONTROL:
                self.decide(t, self.policy.targets(view=self.view(t)), 'policy')
                n_control += 1
            else:
                self.sample(t)
                n_sample += 1
        cluster.advance(until=end)
        cluster.expire(now=end)
        if self.progress is not None:
            self.progress(1.0)


def run(
    *,
    trace: Trace | Mapping[str, Trace],
    variants: Sequence[VariantSpec],
    policy: Policy,
    settings: SimSettings,
    inventory: Mapping[str, int] | None = None,
    progress: Callable[[float], None] | None = None,
) -> SimResult:
    """Replay the workload on a fleet of `variants` scaled by `policy`; deterministic.

    `trace` is one trace when the variants serve one model, else a trace per model name
    (`VariantSpec.model_name`). The variants share one namespace; the snapshot holds a pool per
    model. Each variant starts with `initial_replicas` Ready replicas. `inventory` limits the
    GPUs per accelerator type (`sim.fleet.cluster`; None: no limit). `progress(fraction_done)` is
    called now and then with a fraction of the simulated time; `SimResult.wall_seconds` is left
    at 0 for the caller to fill.
    """
    check_settings(settings=settings)
    check_variants(variants=variants)
    if settings.prefix_caching:
        variants = [dataclasses.replace(v, prefix_caching=True) for v in variants]
    traces = traces_by_model(trace=trace, variants=variants)
    for _, each in traces:
        check_trace(trace=each)
    loop = _Loop(
        traces=traces,
        variants=variants,
        policy=policy,
        settings=settings,
        inventory=inventory,
        progress=progress,
    )
    loop.run(traces)
    window = charged_until(
        requests=loop.requests, traces_end=max(t.duration for _, t in traces), end=loop.end
    )
    charged = loop.cluster.finish(end=window)
    whole = loop.cluster.finish(end=loop.end)
    return SimResult(
        policy=policy.name,
        trace=traces[0][1].name
        if len(traces) == 1
        else ', '.join(f'{m}: {t.name}' for m, t in traces),
        duration=loop.end,
        requests=loop.requests,
        variants=tuple(variants),
        replica_seconds=charged,
        charged_until=window,
        tail_replica_seconds={
            name: max(0.0, whole[name] - charged[name]) for name in sorted(whole)
        },
        events=loop.events,
        timeline=loop.timeline,
        sample_interval=settings.sample_interval,
        inventory=dict(loop.cluster.inventory),
        gpu_waits=loop.cluster.gpu_waits(end=loop.end),
    )


def charged_until(*, requests: Sequence[SimRequest], traces_end: float, end: float) -> float:
    """When the work of a run is done: its last arrival (`traces_end`) or its last completion,
    whichever is later, and `end` while a request is neither completed nor failed. A trace cut
    from continuous traffic says nothing of the load after its end: replicas kept after the work
    is done cost a policy only because it cannot know the trace ends, and are not charged."""
    done = traces_end
    for request in requests:
        if request.failed:
            continue
        if not math.isfinite(request.finished):
            return end
        done = max(done, request.finished)
    return min(done, end)


_CHUNK = 4096  # arrivals converted from numpy at a time
_BLOCK = 512  # the block size of absent prompt block ids (never read)


def check_variants(*, variants: Sequence[VariantSpec]) -> None:
    """Raise `ValueError` unless the variants are non-empty, uniquely named, in one namespace,
    and their models (`VariantSpec.model_name`) and model ids correspond one to one."""
    if not variants:
        raise ValueError('no variants to simulate')
    names = [v.name for v in variants]
    if len(set(names)) != len(names):
        raise ValueError(f'duplicate variant names: {sorted(names)}')
    namespaces = sorted({v.namespace for v in variants})
    if len(namespaces) > 1:
        raise ValueError(f'all variants must be in one namespace, got {", ".join(namespaces)}')
    ids: dict[str, set[str]] = {}
    models: dict[str, set[str]] = {}
    for spec in variants:
        ids.setdefault(spec.model_name, set()).add(spec.model_id)
        models.setdefault(spec.model_id, set()).add(spec.model_name)
    for model in sorted(ids):
        if len(ids[model]) > 1:
            raise ValueError(
                f'model {model}: its variants name several model ids: {sorted(ids[model])}'
            )
    for model_id in sorted(models):
        if len(models[model_id]) > 1:
            raise ValueError(
                f'models {" and ".join(sorted(models[model_id]))} both have model id '
                f'{model_id}: the controller would take them for one model'
            )


def traces_by_model(
    *, trace: Trace | Mapping[str, Trace], variants: Sequence[VariantSpec]
) -> list[tuple[str, Trace]]:
    """The traces by model name, in name order, checked against the variants' models."""
    served = sorted({v.model_name for v in variants})
    if isinstance(trace, Trace):
        if len(served) > 1:
            raise ValueError(
                f'one trace serves one model; the variants serve {len(served)} '
                f'({", ".join(served)}): give a trace per model'
            )
        return [(served[0], trace)]
    unknown = sorted(set(trace) - set(served))
    if unknown:
        raise ValueError(
            f'a trace for model {unknown[0]!r}, which no variant serves; models: '
            + ', '.join(served)
        )
    missing = [m for m in served if m not in trace]
    if missing:
        raise ValueError(f'no trace for model {missing[0]!r}')
    return [(m, trace[m]) for m in served]


def check_trace(*, trace: Trace) -> None:
    """Raise `ValueError` unless the arrivals are finite, >= 0 and in order (`Trace`'s promise)."""
    arrivals = trace.arrivals
    if not len(trace):
        return
    if not bool(np.all(np.isfinite(arrivals))) or float(arrivals[0]) < 0:
        raise ValueError(f'trace {trace.name!r}: arrivals must be finite and >= 0')
    if bool(np.any(np.diff(arrivals) < 0)):
        raise ValueError(f'trace {trace.name!r}: arrivals must be non-decreasing')


Arrival = tuple[float, int, int, str, Sequence[int] | None, int]


Prefix = Sequence[int] | None


def _prefixes(traces: Sequence[tuple[str, Trace]]) -> tuple[list[Prefix], list[int]] | None:
    """Every arrival's prompt block ids and their block size, trace after trace (None when no
    trace has ids)."""
    if all(t.prefixes is None for _, t in traces):
        return None
    ids: list[Prefix] = []
    sizes: list[int] = []
    for _, t in traces:
        ids += [None] * len(t) if t.prefixes is None else t.prefixes.tolist()
        sizes += [t.prefix_block] * len(t)
    return ids, sizes


def merged_arrivals(traces: Sequence[tuple[str, Trace]]) -> Iterator[Arrival]:
    """(time, input, output, model, prompt block ids, their block size) of every arrival of
    every trace, in time order (ties: model name order as given, then trace order)."""
    known = _prefixes(traces)
    ids: list[Prefix] | None = None if known is None else known[0]
    sizes: list[int] | None = None if known is None else known[1]
    if len(traces) == 1:
        model, trace = traces[0]
        arrivals, inputs, outputs = trace.arrivals, trace.input_tokens, trace.output_tokens
        labels: list[str] | None = None
    else:
        arrivals = np.concatenate([t.arrivals for _, t in traces])
        order = np.argsort(arrivals, kind='stable')
        arrivals = arrivals[order]
        inputs = np.concatenate([t.input_tokens for _, t in traces])[order]
        outputs = np.concatenate([t.output_tokens for _, t in traces])[order]
        index = np.repeat(np.arange(len(traces)), [len(t) for _, t in traces])[order]
        names = [m for m, _ in traces]
        labels = [names[i] for i in index.tolist()]
        model = ''
        if ids is not None and sizes is not None:
            picked = order.tolist()
            ids = [ids[i] for i in picked]
            sizes = [sizes[i] for i in picked]
    # Chunks keep the per-item cost of Python floats without materialising a huge list at once.
    for start in range(0, arrivals.shape[0], _CHUNK):
        stop = start + _CHUNK
        times = arrivals[start:stop].tolist()
        yield from zip(
            times,
            inputs[start:stop].tolist(),
            outputs[start:stop].tolist(),
            labels[start:stop] if labels is not None else [model] * len(times),
            [None] * len(times) if ids is None else ids[start:stop],
            [_BLOCK] * len(times) if sizes is None else sizes[start:stop],
            strict=True,
        )
