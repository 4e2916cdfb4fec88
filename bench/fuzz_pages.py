"""Campaign `pages`: mutated vLLM and gateway pages → pod scraping → attribution → `decide()`.

Why: the metric pages are the input an attacker or a broken exporter controls most directly, and
the one the safety rules are about: a NaN, missing or out-of-range KV usage or queue length on a
ready pod must never be read as an idle replica.

One input is a small fleet of one model in namespace `fuzz`: variant `llama-h100` (1-3 pods)
and variant `llama-a100` (0-3 pods; the last pod of a variant is sometimes not ready), their pages
rendered from the example vLLM page or from the emulator's renderer (`fuzz_pages_content`), at an
idle or a busy load, and a gateway (EPP) page. Each input runs the pod-scraping source as the
controller does: with scale-to-zero on, two history scrapes of the first pod (request counters
only, at now-130 and now-30, so that the request count over the 100 s retention is known), then
the scrape of every page at `now`, of which one or more vLLM pages (and sometimes the EPP page)
are broken (`fuzz_pages_content.mutate_page`); then `read`, `attribute`, `decide()` and the VA
conditions. The campaign's size is counted in broken vLLM pages.

Pages are served in process (`fuzz_pages_serve.InProcess`: the source's own fetch code runs,
deadline, cap and decompression included, without sockets) to one source that lives for the
whole campaign, as a controller's does; one input in `REAL_HTTP_EVERY` is served by a loopback
aiohttp server to a source of its own instead.

Oracle: `fuzz_oracle.check` on the snapshot handed to `decide()`, plus what is known from the
pages themselves: a ready pod whose final page has no line of a KV-usage series with a number in
[0, 1], or none of `vllm:num_requests_waiting` with a number >= 0 (read generously: any number
after the labels, any model), or whose answer could not be used at all, must hold its model.
"""

from __future__ import annotations

import asyncio
import gzip
import math
import re
from collections.abc import Sequence
from dataclasses import dataclass

import httpx

from fuzz_common import LIMIT_SECONDS, Tally, excerpt, input_rng, stopwatch
from fuzz_oracle import check
from fuzz_pages_content import (
    MODEL,
    NAMESPACE,
    Answer,
    Template,
    epp_page,
    mutate_page,
    number,
    templates,
)
from fuzz_pages_serve import RETENTION, InProcess, Loopback, Scraper
from llmscaler.collect.attribution import PodInfo, TargetRef, attribute
from llmscaler.collect.scrape.source import ScrapeTarget
from llmscaler.config.resolved import (
    Config,
    CoreSettings,
    ModelConfig,
    SaturationConfig,
    ScaleToZeroConfig,
)
from llmscaler.controller.va import conditions
from llmscaler.domain.snapshot import EngineParams, Snapshot, Variant
from llmscaler.domain.state import EMPTY_STATE
from llmscaler.engine import decide
from llmscaler.kube import crd

NOW = 1_000_000.0
KV_NAMES = (b'vllm:kv_cache_usage_perc', b'vllm:gpu_cache_usage_perc')
QUEUE_NAMES = (b'vllm:num_requests_waiting',)

# --- one input --------------------------------------------------------------------------------


@dataclass(slots=True)
class Fleet:
    variants: tuple[Variant, ...]
    pods: tuple[PodInfo, ...]
    targets: tuple[ScrapeTarget, ...]
    config: Config
    history: tuple[dict[str, Answer], ...]
    """Answers at now-130 and now-30 (request counters only), when scale-to-zero is on."""
    final: dict[str, Answer]
    mutated_pages: int
    described: list[str]


def _url(pod: str) -> str:
    return f'http://fuzz.invalid/{pod}/metrics'


@dataclass(frozen=True, slots=True)
class Plan:
    """The shape of one input: drawn from its own random source, so that the number of mutated
    pages of any input is known without building it (`mutated_pages`)."""

    idle: bool
    zero: bool
    token: bool
    variants: tuple[Variant, ...]
    pods: tuple[PodInfo, ...]
    chosen: tuple[bool, ...]
    """Per pod: whether its final page is mutated."""

    @classmethod
    def draw(cls, *, seed: int, index: int) -> Plan:
        rng = input_rng(seed=seed, campaign='pages-plan', index=index)
        idle, zero, token = rng.random() < 0.5, rng.random() < 0.5, rng.random() < 0.3
        pods: list[PodInfo] = []
        variants: list[Variant] = []
        for name, count in (('llama-h100', rng.randint(1, 3)), ('llama-a100', rng.randint(0, 3))):
            ready = count - (1 if count and rng.random() < 0.15 else 0)
            pending = 1 if rng.random() < 0.1 else 0
            variants.append(
                Variant(
                    name=name,
                    namespace=NAMESPACE,
                    model_id=MODEL,
                    cost=3.9 if name.endswith('h100') else 3.67,
                    accelerator=name.rpartition('-')[2].upper(),
                    min_replicas=0 if zero or rng.random() < 0.3 else 1,
                    max_replicas=rng.choice((1, 2, 3, 4, 6)),
                    current_replicas=count + pending,
                    ready_replicas=ready,
                    pending_replicas=pending,
                    engine=EngineParams(),
                )
            )
            for i in range(count):
                owners = (('ReplicaSet', f'{name}-5d8b'), ('Deployment', name))
                pods.append(PodInfo(NAMESPACE, f'{name}-{i}', owners=owners, ready=i < ready))
        chosen = [rng.random() < 0.8 for _ in pods]
        if not any(chosen):
            chosen[0] = True
        return cls(idle, zero, token, tuple(variants), tuple(pods), tuple(chosen))


def mutated_pages(*, seed: int, index: int) -> int:
    return sum(Plan.draw(seed=seed, index=index).chosen)


def build_fleet(*, seed: int, index: int, kinds: Sequence[Template]) -> Fleet:
    plan = Plan.draw(seed=seed, index=index)
    rng = input_rng(seed=seed, campaign='pages', index=index)
    idle, zero, token, pods = plan.idle, plan.zero, plan.token, plan.pods
    template = rng.choice(kinds)
    final: dict[str, Answer] = {}
    past: dict[str, Answer] = {}
    older: dict[str, Answer] = {}
    described: list[str] = []
    mutated = 0
    for pod, chosen in zip(pods, plan.chosen, strict=True):
        served = rng.randint(100, 10_000)
        load = 0.0 if idle else float(rng.randint(1, 300))
        values = {
            'kv': number(rng.uniform(0.0, 0.1) if idle else rng.uniform(0.0, 1.0)),
            'waiting': number(0 if idle else rng.randint(0, 12)),
            'running': number(0 if idle else rng.randint(0, 60)),
        }
        for name, per_request in (
            ('success', 1),
            ('prompt_count', 1),
            ('gen_count', 1),
            ('prompt_sum', 900),
            ('gen_sum', 200),
        ):
            values[name] = number((served + load) * per_request)
        page = template.render(values)
        history = {name: number(served * per) for name, per in (('success', 1),)}
        url = _url(pod.name)
        older[url] = Answer(body=template.render(history, counters_only=True))
        past[url] = older[url]
        if chosen:
            final[url], what = mutate_page(rng, page)
            described.append(f'{pod.name}: {what}')
            mutated += 1
        else:
            final[url] = Answer(body=page)
    targets = [ScrapeTarget(NAMESPACE, p.name, _url(p.name), model_name=MODEL) for p in pods]
    if rng.random() < 0.7:
        queue = 0.0 if idle else float(rng.randint(0, 5))
        body = epp_page(queue=queue, attempts={p.name: 100.0 for p in pods})
        answer = Answer(body=body)
        if rng.random() < 0.3:
            answer, what = mutate_page(rng, body, epp=True)
            described.append(f'epp: {what}')
        final[_url('epp')] = answer
        targets.append(ScrapeTarget(NAMESPACE, 'epp', _url('epp'), kind='epp'))
    saturation = SaturationConfig(analyzer_name='saturation' if token else '')
    config = Config(
        settings=CoreSettings(),
        default=ModelConfig(
            saturation=saturation,
            scale_to_zero=ScaleToZeroConfig(enabled=zero, retention_period=RETENTION),
        ),
    )
    return Fleet(
        variants=plan.variants,
        pods=pods,
        targets=tuple(targets),
        config=config,
        history=(older, past) if zero else (),
        final=final,
        mutated_pages=mutated,
        described=described,
    )


def _lines_of(names: tuple[bytes, ...]) -> re.Pattern[bytes]:
    alternatives = b'|'.join(re.escape(name) for name in names)
    return re.compile(rb'(?:^|[\r\n])[ \t]*(?:' + alternatives + rb')([{ \t][^\r\n]*)')


KV_LINES = _lines_of(KV_NAMES)
QUEUE_LINES = _lines_of(QUEUE_NAMES)


def _has_usable(page: bytes, lines: re.Pattern[bytes], high: float) -> bool:
    """Whether some line of the series `lines` finds carries a number in [0, high] after its
    labels (read generously: any model, any token after the labels, any line ending)."""
    for match in lines.finditer(page):
        for token in match.group(1).rpartition(b'}')[2].split():
            try:
                value = float(token)
            except ValueError:
                continue
            if math.isfinite(value) and 0.0 <= value <= high:
                return True
    return False


def must_hold(fleet: Fleet) -> dict[str, list[tuple[str, str]]]:
    """The model must hold when a ready pod's final answer has no usable KV or queue line."""
    found: list[tuple[str, str]] = []
    for pod in fleet.pods:
        answer = fleet.final[_url(pod.name)]
        if not pod.ready:
            continue
        body = answer.body
        if answer.headers.get('content-encoding') == 'gzip' and answer.usable:
            body = gzip.decompress(body)
        if not answer.usable:
            why = 'unusable answer'
        elif not _has_usable(body, KV_LINES, 1.0):
            why = 'no usable KV line'
        elif not _has_usable(body, QUEUE_LINES, math.inf):
            why = 'no usable queue line'
        else:
            continue
        found.append((pod.owners[-1][1], f'{pod.name}: {why} on its page'))
    return {f'{MODEL}|{NAMESPACE}': found} if found else {}


async def run_input(
    *, fleet: Fleet, scraper: Scraper, now: float, hold: dict[str, list[tuple[str, str]]]
) -> tuple[list[tuple[str, str]], str]:
    """Scrape, read, attribute and decide one fleet; (rule, what) violations and a summary.

    `hold` is `must_hold(fleet)`, computed by the caller outside the input's timing."""
    reading = await scraper.read(
        targets=fleet.targets, history=fleet.history, final=fleet.final, now=now
    )
    refs = tuple(TargetRef(NAMESPACE, 'Deployment', v.name, v.name) for v in fleet.variants)
    found = attribute(reading=reading, variants=fleet.variants, targets=refs, pods=fleet.pods)
    snapshot = Snapshot(variants=fleet.variants, replicas=found.replicas, pools=found.pools)
    outcome = decide(snapshot=snapshot, config=fleet.config, state=EMPTY_STATE, now=now)
    problems = [
        (v.rule, v.what)
        for v in check(
            snapshot=snapshot,
            decisions=outcome.decisions,
            settings=fleet.config.settings,
            now=now,
            must_hold=must_hold(fleet),
        )
    ]
    for decision in outcome.decisions:
        updates = conditions.for_decision(
            kind='Deployment',
            name=decision.variant,
            decision=decision,
            source_errors=found.errors,
            source='pods',
        )
        metrics = next(u for u in updates if u.type == crd.CONDITION_METRICS_AVAILABLE)
        if not decision.metrics_available and (
            metrics.status != 'False'
            or metrics.reason not in crd.REASONS[crd.CONDITION_METRICS_AVAILABLE]
        ):
            problems.append(('status', f'{decision.key}: {metrics.status} {metrics.reason}'))
        if any('\n' in u.message for u in updates):
            problems.append(('status', f'{decision.key}: a condition message has a newline'))
    moves = ' '.join(f'{d.variant} {d.current}->{d.target}' for d in outcome.decisions)
    held = any(not d.metrics_available for d in outcome.decisions)
    return problems, f'{moves}{" held" if held else ""}'


async def _one(
    *,
    fleet: Fleet,
    steady: Scraper,
    loopback: Loopback | None,
    now: float,
    hold: dict[str, list[tuple[str, str]]],
) -> tuple[list[tuple[str, str]], str]:
    if loopback is None:
        return await run_input(fleet=fleet, scraper=steady, now=now, hold=hold)
    own = Scraper(server=loopback, client=None)
    try:
        return await run_input(fleet=fleet, scraper=own, now=now, hold=hold)
    finally:
        await own.source.aclose()


REAL_HTTP_EVERY = 36
"""One input in this many is served by the loopback server instead of in process."""


def inputs_for(*, seed: int, count: int) -> int:
    """How many inputs carry `count` mutated vLLM pages (the campaign's size is in pages)."""
    index = total = 0
    while total < count:
        total += mutated_pages(seed=seed, index=index)
        index += 1
    return index


def run(*, seed: int, indexes: range, verbose: bool = False) -> Tally:
    return asyncio.run(_run(seed=seed, indexes=indexes, verbose=verbose))


async def _run(*, seed: int, indexes: range, verbose: bool) -> Tally:
    tally = Tally(name='pages')
    kinds = templates()
    transport = InProcess()
    client = httpx.AsyncClient(transport=transport)
    steady = Scraper(server=transport, client=client)
    loopback = Loopback()
    await loopback.start()
    try:
        for index in indexes:
            fleet = build_fleet(seed=seed, index=index, kinds=kinds)
            real = index % REAL_HTTP_EVERY == REAL_HTTP_EVERY - 1
            data = '; '.join(fleet.described) + f' ({"loopback" if real else "in process"})'
            tally.inputs += 1
            tally.units += fleet.mutated_pages
            hold = must_hold(fleet)
            with stopwatch() as elapsed:
                try:
                    problems, summary = await asyncio.wait_for(
                        _one(
                            fleet=fleet,
                            steady=steady,
                            loopback=loopback if real else None,
                            now=NOW + 4000.0 * index,
                            hold=hold,
                        ),
                        timeout=LIMIT_SECONDS,
                    )
                except Exception as exc:  # what the fuzzer is here to find
                    tally.exception(index=index, exc=exc, data=data)
                    problems, summary = [], 'exception'
            tally.timed(index=index, seconds=elapsed(), data=data)
            tally.note('inputs over loopback HTTP' if real else 'inputs in process')
            if 'held' in summary:
                tally.note('inputs where the model held (MetricsAvailable=False)')
            for rule, what in problems:
                tally.violation(index=index, rule=rule, what=what, data=excerpt(data))
            if verbose:
                print(f'input {index}: {data}\n  decisions: {summary}')
                for name, answer in sorted(fleet.final.items()):
                    print(f'  {name}: {answer.status} {answer.headers} {excerpt(answer.body)}')
    finally:
        await client.aclose()
        await loopback.stop()
    return tally
