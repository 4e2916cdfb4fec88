"""Campaign `vas`: mutated VariantAutoscaling objects through `parse_va` → world → `decide()`.

Why: VA objects are written by users (and by other controllers) and reach the controller as decoded
JSON of any shape; so do their scale targets and pods. The safety rules ask that a malformed CR gets
a clear error on its status, never crashes the loop and never touches replicas, and that whatever
parses still obeys the other rules.

One input is the cluster of one model in namespace `ns-a` as the informers hold it: two
Deployments (`llama-h100`, `llama-a100`) with their pods (owned through a ReplicaSet, some not
ready) and a VA each, and the metrics of the pods as a source would read them (one ready pod
sometimes without KV usage, an idle or a busy model, a gateway queue, a request count). Then one
object is broken (`fuzz_mutate.mutate_data`: hostile values, wrong types, keys dropped or added,
items doubled): a VA (most inputs), a Deployment or a pod; some VAs instead get a value nested
100 to 5,000 levels deep at a random place.

The controller's path runs: `build_world` (which calls `parse_va` and reads the targets and
pods), `attribute`, `decide()`, and the conditions of each VA (`conditions.for_decision`,
`target_resolved`, `invalid_spec`).

Checks, beyond exceptions and time: `fuzz_oracle.check`; `spec-bounds`: a variant's bounds are
its VA's `minReplicas`/`maxReplicas` (defaults 1 and 2); `order-dependent`: the same objects in
reverse order give the same world; `status-message`: every condition message is one line of at
most 32,768 characters (the CRD's limit: a longer one could never be written).
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Any

from fuzz_common import Tally, excerpt, input_rng, short_repr, stopwatch, time_limit
from fuzz_mutate import deep, mutate_data
from fuzz_oracle import check
from llmscaler.collect.attribution import attribute
from llmscaler.collect.readings import ModelReading, PodReading, Reading
from llmscaler.config.resolved import Config, CoreSettings, ModelConfig, ScaleToZeroConfig
from llmscaler.controller.cluster.world import World, build_world
from llmscaler.controller.va import conditions
from llmscaler.domain.snapshot import Snapshot
from llmscaler.domain.state import EMPTY_STATE
from llmscaler.engine import decide
from llmscaler.kube.nextstatus import ConditionUpdate

NAMESPACE = 'ns-a'
MODEL = 'meta-llama/Llama-3.1-8B-Instruct'
NOW = 50_000.0
MAX_CONDITION_MESSAGE = 32_768


def deployment(name: str, *, replicas: int, ready: int, gpu: str) -> dict[str, Any]:
    return {
        'apiVersion': 'apps/v1',
        'kind': 'Deployment',
        'metadata': {'name': name, 'namespace': NAMESPACE},
        'spec': {
            'replicas': replicas,
            'selector': {'matchLabels': {'app': name}},
            'template': {
                'metadata': {'labels': {'app': name}},
                'spec': {
                    'nodeSelector': {'nvidia.com/gpu.product': gpu},
                    'containers': [
                        {
                            'name': 'vllm',
                            'command': ['vllm', 'serve'],
                            'args': [MODEL, '--max-model-len=8192', '--max-num-seqs=256'],
                            'resources': {'limits': {'nvidia.com/gpu': '1'}},
                        }
                    ],
                },
            },
        },
        'status': {'replicas': replicas, 'readyReplicas': ready},
    }


def pod(deployment_name: str, index: int, *, ready: bool) -> dict[str, Any]:
    return {
        'apiVersion': 'v1',
        'kind': 'Pod',
        'metadata': {
            'name': f'{deployment_name}-5d8b-{index}',
            'namespace': NAMESPACE,
            'labels': {'app': deployment_name, 'pod-template-hash': '5d8b'},
            'ownerReferences': [
                {'kind': 'ReplicaSet', 'name': f'{deployment_name}-5d8b', 'controller': True}
            ],
        },
        'status': {
            'phase': 'Running',
            'podIP': f'10.0.0.{index + 1}',
            'conditions': [{'type': 'Ready', 'status': 'True' if ready else 'False'}],
        },
    }


def va(name: str, *, low: int, high: int, cost: str, desired: int | None) -> dict[str, Any]:
    obj: dict[str, Any] = {
        'apiVersion': 'llmd.ai/v1alpha1',
        'kind': 'VariantAutoscaling',
        'metadata': {'name': name, 'namespace': NAMESPACE, 'generation': 1},
        'spec': {
            'scaleTargetRef': {'apiVersion': 'apps/v1', 'kind': 'Deployment', 'name': name},
            'modelID': MODEL,
            'minReplicas': low,
            'maxReplicas': high,
            'variantCost': cost,
        },
    }
    if desired is not None:
        obj['status'] = {
            'desiredOptimizedAlloc': {'numReplicas': desired, 'lastRunTime': '2025-01-01T00:00:00Z'}
        }
    return obj


@dataclass(slots=True)
class Cluster:
    vas: list[Any]
    targets: list[Any]
    pods: list[Any]
    reading: Reading
    config: Config
    troubled: list[tuple[int, int, str]]
    """(Deployment index, pod index, why) of the ready pods without usable metrics."""


def cluster(rng: random.Random) -> Cluster:
    """VAs, Deployments and pods of one model, its metrics, and the configuration. A ready pod
    sometimes has no reading (its page failed) or no KV usage; a pod that is not ready (say,
    terminating) sometimes still has a complete reading."""
    idle = rng.random() < 0.5
    zero = rng.random() < 0.5
    found = Cluster([], [], [], Reading(), Config(), [])
    readings: list[PodReading] = []
    for which, (name, gpu, cost) in enumerate(
        (
            ('llama-h100', 'NVIDIA-H100-80GB-HBM3', '3.9'),
            ('llama-a100', 'NVIDIA-A100-SXM4-80GB', '3.67'),
        )
    ):
        replicas = rng.randint(0, 3)
        ready = replicas - (1 if replicas and rng.random() < 0.2 else 0)
        low = 0 if zero or rng.random() < 0.3 else 1
        high = rng.randint(max(1, low), 6)
        desired = rng.choice((None, None, rng.randint(0, 6)))
        found.vas.append(va(name, low=low, high=high, cost=cost, desired=desired))
        found.targets.append(deployment(name, replicas=replicas, ready=ready, gpu=gpu))
        for i in range(replicas):
            found.pods.append(pod(name, i, ready=i < ready))
            roll = rng.random()
            if i < ready and roll < 0.1:
                found.troubled.append((which, i, 'no reading'))
                continue
            if i >= ready and roll < 0.5:
                continue
            missing = i < ready and roll < 0.2
            if missing:
                found.troubled.append((which, i, 'no KV usage'))
            readings.append(
                PodReading(
                    namespace=NAMESPACE,
                    pod=f'{name}-5d8b-{i}',
                    observed_at=NOW - 5,
                    model_name=MODEL,
                    labels=(('model_name', MODEL),),
                    kv_usage=None if missing else rng.uniform(0, 0.1 if idle else 1.0),
                    queue_length=0.0 if idle else float(rng.randint(0, 8)),
                    num_gpu_blocks=27500,
                    block_size=16,
                )
            )
    model = ModelReading(
        model_id=MODEL,
        namespace=NAMESPACE,
        observed_at=NOW - 5,
        queue_size=0.0 if idle or rng.random() < 0.5 else float(rng.randint(1, 5)),
        request_count=0.0 if idle else float(rng.randint(0, 20)),
    )
    found.reading = Reading(pods=tuple(readings), models=(model,))
    found.config = Config(
        settings=CoreSettings(),
        default=ModelConfig(scale_to_zero=ScaleToZeroConfig(enabled=zero, retention_period=600.0)),
    )
    return found


def must_hold(
    world: World, troubled: list[tuple[int, int, str]], *, untouched: set[int]
) -> dict[str, list[tuple[str, str]]]:
    """The model must hold for a troubled ready pod whose Deployment (`untouched`: not mutated,
    pod not mutated either) is the resolved target of the VA of the same name, still a variant
    of the model."""
    names = ('llama-h100', 'llama-a100')
    resolved = {
        e.key.partition('/')[2]
        for e in world.entries
        if e.target is not None
        and e.variant is not None
        and e.target.name == e.key.partition('/')[2]
        and (e.variant.model_id, e.variant.namespace) == (MODEL, NAMESPACE)
    }
    found = [
        (names[which], f'{names[which]}-5d8b-{i}: {why}')
        for which, i, why in troubled
        if which in untouched and names[which] in resolved
    ]
    return {f'{MODEL}|{NAMESPACE}': found} if found else {}


def _insert_deep(rng: random.Random, obj: Any) -> Any:
    if not isinstance(obj, dict):
        return obj
    node: Any = obj
    while isinstance(node, dict) and node and rng.random() < 0.7:
        key = rng.choice(sorted(node, key=str))
        if not isinstance(node[key], dict):
            break
        node = node[key]
    node[rng.choice(('spec', 'status', 'metadata', 'modelID', 'extra'))] = deep(
        rng.choice((100, 1000, 5000))
    )
    return obj


def _keyed(objects: list[Any]) -> dict[tuple[str, str, str], Any]:
    """The target cache as the controller keys it (kind, namespace, name), from intact keys."""
    keyed = {}
    for index, obj in enumerate(objects):
        keyed[('Deployment', NAMESPACE, ('llama-h100', 'llama-a100')[index])] = obj
    return keyed


def _messages(world: World, updates: list[ConditionUpdate]) -> list[str]:
    found = [u.message for u in updates]
    found += [
        conditions.invalid_spec(message=problem.message).message for _, problem in world.invalid
    ]
    found += [
        conditions.target_resolved(kind='Deployment', name=e.key, problem=e.target_problem).message
        for e in world.entries
        if e.target_problem
    ]
    return found


def run_input(rng: random.Random, tally: Tally, index: int, described: list[str]) -> None:
    world_in = cluster(rng)
    vas, targets, pods, reading, config = (
        world_in.vas,
        world_in.targets,
        world_in.pods,
        world_in.reading,
        world_in.config,
    )
    untouched = {0, 1}
    roll = rng.random()
    if roll < 0.65:
        which = rng.randrange(len(vas))
        vas[which] = mutate_data(rng, vas[which])
        what = f'VA {which} mutated'
        broken = vas[which]
    elif roll < 0.75:
        which = rng.randrange(len(vas))
        vas[which] = _insert_deep(rng, vas[which])
        what = f'VA {which} deeply nested'
        broken = vas[which]
    elif roll < 0.9:
        which = rng.randrange(len(targets))
        targets[which] = mutate_data(rng, targets[which])
        untouched.discard(which)
        what = f'Deployment {which} mutated'
        broken = targets[which]
    else:
        which = rng.randrange(len(pods)) if pods else 0
        if pods:
            pods[which] = mutate_data(rng, pods[which])
            untouched.clear()
        what = f'pod {which} mutated'
        broken = pods[which] if pods else None
    data = f'{what}: {excerpt(short_repr(broken))}'
    described.append(data)
    with stopwatch() as elapsed:
        world = build_world(vas=vas, targets=_keyed(targets), pods=pods, config=config)
        found = attribute(
            reading=reading, variants=world.variants, targets=world.targets, pods=world.pods
        )
        snapshot = Snapshot(variants=world.variants, replicas=found.replicas, pools=found.pools)
        outcome = decide(snapshot=snapshot, config=config, state=EMPTY_STATE, now=NOW)
        updates: list[ConditionUpdate] = []
        for decision in outcome.decisions:
            updates.extend(
                conditions.for_decision(
                    kind='Deployment',
                    name=decision.variant,
                    decision=decision,
                    source_errors=(),
                    source='pods',
                )
            )
        again = build_world(vas=vas[::-1], targets=_keyed(targets), pods=pods[::-1], config=config)
    tally.timed(index=index, seconds=elapsed(), data=data)
    hold = must_hold(world, world_in.troubled, untouched=untouched)
    for v in check(
        snapshot=snapshot,
        decisions=outcome.decisions,
        settings=config.settings,
        now=NOW,
        must_hold=hold,
    ):
        tally.violation(index=index, rule=v.rule, what=v.what, data=data)
    if again.variants != world.variants or again.invalid != world.invalid:
        tally.violation(index=index, rule='order-dependent', what='world differs', data=data)
    for entry in world.entries:
        spec = entry.obj.get('spec', {}) if isinstance(entry.obj, dict) else {}
        if entry.variant is None or not isinstance(spec, dict):
            continue
        low, high = spec.get('minReplicas', 1), spec.get('maxReplicas', 2)
        if (entry.variant.min_replicas, entry.variant.max_replicas) != (low, high):
            what = f'{entry.key}: bounds {entry.variant.min_replicas}..{entry.variant.max_replicas}'
            tally.violation(
                index=index, rule='spec-bounds', what=f'{what}, spec {low}..{high}', data=data
            )
    for message in _messages(world, updates):
        if '\n' in message or len(message) > MAX_CONDITION_MESSAGE:
            tally.violation(
                index=index,
                rule='status-message',
                data=data,
                what=f'{len(message)} chars: {message[:100]!r}',
            )
    tally.note('inputs with an invalid VA' if world.invalid else 'inputs with every VA valid')


def run(*, seed: int, indexes: range, verbose: bool = False) -> Tally:
    tally = Tally(name='vas')
    for index in indexes:
        rng = input_rng(seed=seed, campaign='vas', index=index)
        tally.inputs += 1
        described: list[str] = []
        try:
            with time_limit():
                run_input(rng, tally, index, described)
        except Exception as exc:  # what the fuzzer is here to find
            tally.exception(index=index, exc=exc, data=' '.join(described)[:300])
        if verbose:
            print(f'input {index}: {" ".join(described)}')
    return tally
