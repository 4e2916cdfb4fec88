"""Token demand of the scheduler (EPP flow-control) queue, as WVA's token-based analyzer counts it.

Source: llm-d workload-variant-autoscaler v0.9.0, internal/engines/analyzers/saturation_v2/.

Why: requests held in the inference gateway's flow-control queue have not reached any engine yet,
so no replica metric counts them; without this term a model whose gateway is queueing looks idle.
The token-based analyzer (`saturation.tokens`) adds this demand to the model totals and shares it
between the P/D roles.

What it computes:
- `workload_averages`: the model-level means Ī, Ō and h̄ (prefix-cache hit rate) over the engine
  instances that report an average input or output length (I > 0 or O > 0);
- `scheduler_queue_demand`: with q = queue size and b = queue bytes,
  inputTok = max(b / 4, q·Ī) × (1 − h̄) and outputTok = q·Ō, 4 being WVA's `BytesPerToken`;
- `QueueDemand.for_role`: prefill gets inputTok, decode and both get inputTok + outputTok.
The prefix-cache discount applies only here: queued requests have not done a prefix lookup yet,
while the engines' local queues have (so `waiting_queue_demand` does not discount).

Bad input: NaN, Inf, zero and negative token lengths, queue sizes and byte counts count as absent
(0); a missing hit rate counts as 0 (no discount, as in WVA) and one outside [0, 1] is dropped (0).
Finite figures never overflow: means are exact (`finite_sums`), and a demand of finite figures
beyond the float range is the largest float, never 0 (a huge queue read as no queue would invite
a scale-down). No pool (the gateway metrics were not collected) means no queue demand.
Nothing raises.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from dataclasses import dataclass

from llmscaler.analyze import finite_sums
from llmscaler.domain.basics import Role, finite, positive_or_zero
from llmscaler.domain.snapshot import PoolMetrics, ReplicaMetrics

BYTES_PER_TOKEN = 4.0
"""WVA `BytesPerToken`: a conservative characters-per-token figure for the queue bytes."""


@dataclass(frozen=True, slots=True)
class WorkloadAverages:
    """Model-level means over the instances that report token lengths."""

    avg_input: float = 0.0
    avg_output: float = 0.0
    hit_rate: float = 0.0


@dataclass(frozen=True, slots=True)
class QueueDemand:
    """Token demand of the scheduler (EPP flow-control) queue."""

    input_tokens: float = 0.0
    output_tokens: float = 0.0

    @property
    def total(self) -> float:
        return finite_sums.total((self.input_tokens, self.output_tokens))

    def for_role(self, role: Role) -> float:
        """Prefill stores the prompts; decode receives them and generates; both does all."""
        if role == 'prefill':
            return self.input_tokens
        return self.total


def _mean(values: Sequence[float]) -> float:
    return positive_or_zero(finite_sums.mean(values))


def workload_averages(*, replicas: Sequence[ReplicaMetrics]) -> WorkloadAverages:
    """Means of I, O and the prefix-cache hit rate over instances with I > 0 or O > 0.

    As in WVA, an instance without a hit rate counts as 0 (no discount); a hit rate outside
    [0, 1] is dropped (0), as the collector does.
    """
    inputs: list[float] = []
    outputs: list[float] = []
    hits: list[float] = []
    # The means are exact (`finite_sums.mean`), so the replicas' order does not matter.
    for rm in replicas:
        inp, out = positive_or_zero(rm.avg_input_tokens), positive_or_zero(rm.avg_output_tokens)
        if inp <= 0 and out <= 0:
            continue
        hit = finite(rm.prefix_cache_hit_rate)
        inputs.append(inp)
        outputs.append(out)
        hits.append(hit if hit is not None and 0 <= hit <= 1 else 0.0)
    if not inputs:
        return WorkloadAverages()
    return WorkloadAverages(
        avg_input=_mean(inputs), avg_output=_mean(outputs), hit_rate=_mean(hits)
    )


def scheduler_queue_demand(*, pool: PoolMetrics | None, averages: WorkloadAverages) -> QueueDemand:
    """inputTok = max(bytes / 4, q·Ī) × (1 − h̄), outputTok = q·Ō (WVA's formula)."""
    if pool is None:
        return QueueDemand()
    size, size_bytes = positive_or_zero(pool.queue_size), positive_or_zero(pool.queue_bytes)
    if size <= 0 and size_bytes <= 0:
        return QueueDemand()
    input_tokens = max(size_bytes / BYTES_PER_TOKEN, _saturated(size * averages.avg_input))
    input_tokens = _saturated(input_tokens * (1 - averages.hit_rate))
    output_tokens = _saturated(size * averages.avg_output)
    return QueueDemand(input_tokens=input_tokens, output_tokens=output_tokens)


def _saturated(product: float) -> float:
    """A product of finite non-negative figures, at most the largest float (never Inf, never 0
    for an overflow); NaN and negatives are 0."""
    if not product > 0:
        return 0.0
    return min(product, sys.float_info.max)
