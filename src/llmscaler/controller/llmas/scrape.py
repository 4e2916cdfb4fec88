"""The LLMAutoScaler's metrics scraper: every metric read from every pod of the target.

Source: the "Metrics Scraper" of Kaito's LLMAutoScaler proposal (kaito-project/kaito,
docs/proposals/20250602-auto-scaler-for-inference-workloads.md).

Why: Kaito's realtime scaler needs no Prometheus: every 15 s it reads each metric of its spec at
`protocol://{pod IP}:port/path` (defaults `http`, 5000, `/metrics`, `vllm:num_requests_waiting`)
from each pod of the scale target and averages it over the pods. The pages are read the way every
page of the project is read (`collect.scrape.source.fetch_page`: the scrape configuration's TLS, a
total deadline per page, a size cap, no credential sent to a vLLM page), so this module only says
which pages to read and what to take from them.

What it computes (`read_pods`): per pod, per distinct endpoint of the metrics (protocol, port,
path), one page, read once however many metrics it holds; per pod and metric, the sum of the samples
named exactly the metric's name (a vLLM with several engines has one series per engine), or None
when the value could not be read: the pod has no IP yet (pending), its page failed, or the page
lacks the metric. Pods that are terminating or finished are not the target's pods any more and are
left out, as the ReplicaSet controller does. The averages with the proposal's missing-pod rule are
`policies.kaito.realtime.average`.

Which pods (`list_target_pods`): those the selector of the target's `/scale` selects, listed from
the API server when they are needed (the proposal's "pods referenced by the ScaleTargetRef");
`selector_terms` turns the selector string (`k=v`, `k!=v`, `k in (a,b)`, `k notin (a,b)`, `k`,
`!k`) into lightkube's form, and a selector it cannot read is a problem, like a failed list.

Bounds: all pages of one call share `scrape_deadline` (a page not in by then is missing) and at
most `concurrency` are in flight; each page has the `timeout`, the `max_page_bytes` cap and the
page caps (line length, labels, series: `ScrapeConfig.page_limits`) of the scrape configuration;
a page over one is a problem naming the cap, its metrics missing.

What fails: nothing raises; a page that fails is a one-line problem naming the pod and the URL
(at most `MAX_PROBLEMS` are kept, then a count), for the autoscaler's condition.
"""

from __future__ import annotations

import asyncio
import ipaddress
import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

import httpx
from lightkube import AsyncClient, operators
from lightkube.resources.core_v1 import Pod

from llmscaler.collect import http
from llmscaler.collect.exposition import parse
from llmscaler.collect.scrape.source import ScrapeConfig, ScrapeTarget, fetch_page, pod_url
from llmscaler.controller.cluster.pods import as_mapping, as_text, metadata_of
from llmscaler.kube.client import as_dict, describe_error
from llmscaler.kube.llmautoscaler import Metric

MAX_PROBLEMS: Final = 3
_TERMINAL_PHASES: Final = frozenset({'Succeeded', 'Failed'})

Endpoint = tuple[str, str, str]
"""(protocol, port, path) of a metrics page."""


@dataclass(frozen=True, slots=True)
class TargetPod:
    """A pod of the scale target: its name and IP ('' while it has none)."""

    name: str
    ip: str


@dataclass(frozen=True, slots=True)
class PodValues:
    """Per metric key, one value per pod (in `pods` order), None where it could not be read."""

    pods: tuple[str, ...]
    values: Mapping[str, tuple[float | None, ...]]
    problems: tuple[str, ...]

    def missing(self, key: str) -> tuple[str, ...]:
        """The pods whose value of metric `key` could not be read."""
        return tuple(
            p for p, v in zip(self.pods, self.values.get(key, ()), strict=True) if v is None
        )


def target_pods(pods: Sequence[Mapping[str, Any]]) -> tuple[TargetPod, ...]:
    """The live pods among `pods` (a list answer), sorted by name."""
    found: dict[str, TargetPod] = {}
    for obj in pods:
        meta = metadata_of(obj)
        status = as_mapping(obj.get('status'))
        name = as_text(meta.get('name'))
        if not name or meta.get('deletionTimestamp') is not None:
            continue
        if status.get('phase') in _TERMINAL_PHASES:
            continue
        ip = as_text(status.get('podIP'))
        try:
            ipaddress.ip_address(ip)
        except ValueError:
            ip = ''
        found[name] = TargetPod(name=name, ip=ip)
    return tuple(found[name] for name in sorted(found))


def endpoint(metric: Metric) -> Endpoint:
    s = metric.source
    return (s.protocol, s.port, s.path)


async def read_pods(
    *,
    client: httpx.AsyncClient,
    config: ScrapeConfig,
    namespace: str,
    pods: Sequence[TargetPod],
    metrics: Sequence[Metric],
) -> PodValues:
    """Every metric of every pod, read once per page (see the module docstring)."""
    endpoints = sorted({endpoint(m) for m in metrics})
    names = {e: frozenset(m.source.name for m in metrics if endpoint(m) == e) for e in endpoints}
    gate = asyncio.Semaphore(max(1, config.concurrency))
    end = asyncio.get_running_loop().time() + config.scrape_deadline
    token = http.Token()  # vLLM pages get no credential (`fetch_page` sends EPP pages only)
    jobs = [(pod, e) for pod in pods if pod.ip for e in endpoints]

    async def one(pod: TargetPod, where: Endpoint) -> dict[str, float] | str:
        protocol, port, path = where
        url = pod_url(ip=pod.ip, port=int(port), scheme=protocol, path=path)
        target = ScrapeTarget(namespace=namespace, pod=pod.name, url=url)

        async def get(deadline: float) -> bytes | http.Failure:
            return await fetch_page(
                client=client, target=target, config=config, token=token, deadline=deadline
            )

        body = await http.within(
            end=end,
            gate=gate,
            deadline=config.timeout,
            overall=f'the scrape deadline of {http.seconds(config.scrape_deadline)}s',
            work=get,
        )
        if isinstance(body, http.Failure):
            return f'{pod.name} {url}: {body.message}'
        page = await asyncio.to_thread(
            parse, page=body, families=names[where], limits=config.page_limits()
        )
        if page.refused is not None:
            return f'{pod.name} {url}: page refused: {page.refused}'
        sums: dict[str, float] = {}
        for sample in page.samples:
            if sample.name in names[where] and math.isfinite(sample.value):
                sums[sample.name] = sums.get(sample.name, 0.0) + sample.value
        return sums

    answers = await asyncio.gather(*(one(pod, e) for pod, e in jobs))
    pages: dict[tuple[str, Endpoint], dict[str, float]] = {}
    problems: list[str] = []
    for (pod, where), answer in zip(jobs, answers, strict=True):
        if isinstance(answer, str):
            problems.append(answer)
        else:
            pages[(pod.name, where)] = answer
    values: dict[str, tuple[float | None, ...]] = {}
    for metric in metrics:
        where = endpoint(metric)
        values[metric.key] = tuple(
            pages.get((pod.name, where), {}).get(metric.source.name) for pod in pods
        )
    shown = problems[:MAX_PROBLEMS]
    if len(problems) > MAX_PROBLEMS:
        shown.append(f'and {len(problems) - MAX_PROBLEMS} more')
    return PodValues(pods=tuple(p.name for p in pods), values=values, problems=tuple(shown))


def selector_terms(text: str) -> dict[str, Any] | str:
    """A label-selector string (as /scale reports it) as lightkube pairs, or why not."""
    terms: list[str] = []
    depth, start = 0, 0
    for index, char in enumerate(text):
        depth += {'(': 1, ')': -1}.get(char, 0)
        if char == ',' and depth == 0:
            terms.append(text[start:index])
            start = index + 1
    terms.append(text[start:])
    pairs: dict[str, Any] = {}
    value: Any
    for raw in terms:
        term = raw.strip()
        if not term:
            return f'selector {text!r}: an empty term'
        found = re.fullmatch(r'([^\s!=(),]+)\s+(in|notin)\s+\(([^()]*)\)', term)
        if found:
            values = [v.strip() for v in found.group(3).split(',') if v.strip()]
            op = operators.in_(values) if found.group(2) == 'in' else operators.not_in(values)
            key, value = found.group(1), op
        elif re.fullmatch(r'![^\s!=(),]+', term):
            key, value = term[1:], operators.not_exists()
        elif re.fullmatch(r'[^\s!=(),]+', term):
            key, value = term, operators.exists()
        elif match := re.fullmatch(r'([^\s!=(),]+)\s*(!=|==|=)\s*([^\s!=(),]*)', term):
            key, op_text, text_value = match.groups()
            value = operators.not_equal(text_value) if op_text == '!=' else text_value
        else:
            return f'selector {text!r}: {term!r} is not a selector term'
        if key in pairs:
            return f'selector {text!r}: {key!r} appears twice'
        pairs[key] = value
    return pairs


async def list_target_pods(
    client: AsyncClient, namespace: str, selector: str
) -> list[TargetPod] | str:
    """The target's live pods, listed by the selector its /scale reports, or why not."""
    if not selector.strip():
        return 'its /scale reports no pod selector'
    terms = selector_terms(selector)
    if isinstance(terms, str):
        return terms
    try:
        pods = [as_dict(p) async for p in client.list(Pod, namespace=namespace, labels=terms)]
    except Exception as exc:  # an API failure is a missing reading, never a crash
        return f'pods not listed: {describe_error(exc)}'
    return list(target_pods(pods))
