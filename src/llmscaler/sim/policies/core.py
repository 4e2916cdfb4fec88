"""The policies the simulator compares: the decision core, a KEDA/HPA baseline, a fixed fleet.

Why: `llmscaler simulate` answers "what would this autoscaler have done on my traffic, and what
would the usual alternative have done?". Each policy here turns a `ControlView` (what the
controller would see at a control instant) into replica targets:

- `CorePolicy` runs `engine.decide()` exactly as the controller does, carrying the core `State`
  from one cycle to the next, and on the short wake period `scale_from_zero.wake()` and the
  fast path for bursts (`burst.burst`, on the gateway counts the view reads at each wake).
- `KedaQueuePolicy` (defined in `sim.policies.peers`, with `HpaKvPolicy`) is the common KEDA
  configuration on vLLM's queue (vLLM production-stack's helm/templates/scaledobject-vllm.yaml uses
  the same queue trigger): one KEDA ScaledObject per variant, Prometheus triggers
  `sum(vllm:num_requests_waiting)` (AverageValue 5) and `sum(vllm:kv_cache_usage_perc)`
  (AverageValue 0.8), run on the exact HPA of `llmscaler.hpa`.
- `StaticPolicy` holds a fixed fleet: the cost/latency of not autoscaling at all.
- `KaitoPolicy` (defined in `sim.policies.kaito`; `parse_kaito` reads its names) runs Kaito's
  LLMAutoScaler, the realtime and cron scalers of its proposal (kaito-project/kaito,
  docs/proposals/20250602-auto-scaler-for-inference-workloads.md), one autoscaler per variant.
- Each policy of the core's registry (`policies.registry`: `slo-queueing`, `predictive`, ...)
  is `CorePolicy` with the configuration the policy itself says a user stating the model's SLO
  and start-up time writes (`Policy.configure`, through `sim.scenario.setup.core_config`).

Every policy decides for every model of the fleet at once: the core's `decide()` groups the
snapshot's variants by model, the KEDA baseline is one ScaledObject per variant, and a static
fleet names variants of any model.

What fails: `parse_static` raises `ValueError` (naming the valid variants) on a malformed
`static:` policy name; `StaticPolicy` raises `ValueError` on a negative count.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from llmscaler import burst, gc_pause
from llmscaler.config.resolved import Config
from llmscaler.domain.snapshot import Decision, Snapshot
from llmscaler.domain.state import EMPTY_STATE, State
from llmscaler.enforce import scale_from_zero
from llmscaler.engine import decide
from llmscaler.sim.vocabulary import ControlView


class CorePolicy:
    """The decision core with one configuration, exactly as the controller runs it.

    `targets` calls `engine.decide()` on the view's snapshot and keeps the returned `State` for
    the next call; `last_decisions` holds the decisions of the latest cycle (analyzer figures for
    the report). `wake` is `scale_from_zero.wake()` on the same snapshot, and the fast path for
    bursts on the gateway counts of the views it has been handed, sized as the controller sizes
    it: with the variants of the view and the readings of the last cycle (`bursts` lists its
    raises).
    Targets are keyed by variant name: the simulated fleet has one namespace.
    """

    def __init__(self, *, name: str, config: Config) -> None:
        self._name = name
        self.config = config
        self._state: State = EMPTY_STATE
        self._decisions: tuple[Decision, ...] = ()
        self._counts: dict[str, tuple[burst.Count, ...]] = {}
        self._raised: dict[str, float] = {}
        self._checked: dict[str, float] = {}
        self._bursts: list[burst.Raise] = []
        self._snapshot: Snapshot | None = None

    @property
    def name(self) -> str:
        return self._name

    @property
    def state(self) -> State:
        """The core's memory after the latest cycle (`EMPTY_STATE` before the first)."""
        return self._state

    @property
    def bursts(self) -> tuple[burst.Raise, ...]:
        """Every raise of the fast path for bursts so far, in time order."""
        return tuple(self._bursts)

    @property
    def last_decisions(self) -> tuple[Decision, ...]:
        """The decisions of the latest `targets` call, sorted by namespace and variant."""
        return self._decisions

    def targets(self, *, view: ControlView) -> dict[str, int]:
        with gc_pause.paused():
            outcome = decide(
                snapshot=view.snapshot, config=self.config, state=self._state, now=view.now
            )
        self._state = outcome.state
        self._decisions = outcome.decisions
        self._snapshot = view.snapshot
        return {d.variant: d.target for d in outcome.decisions}

    def wake(self, *, view: ControlView) -> dict[str, int]:
        woken = scale_from_zero.wake(variants=view.snapshot.variants, pools=view.snapshot.pools)
        wanted = {w.variant: w.target for w in woken}
        for group, (arrived, queued) in sorted(view.gateways.items()):
            self._counts[group] = burst.record(
                counts=self._counts.get(group, ()),
                count=burst.Count(at=view.now, arrived=float(arrived), queued=float(queued)),
            )
        last = self._snapshot
        if last is None:
            return wanted  # before the first cycle there is nothing to size with
        raised = burst.burst(
            # As the controller has it: the variants now, the last cycle's readings and pools.
            snapshot=Snapshot(
                variants=view.snapshot.variants,
                replicas=last.replicas,
                pools=last.pools,
                gpu_limits=last.gpu_limits,
            ),
            config=self.config,
            state=self._state,
            counts=self._counts,
            raised=self._raised,
            now=view.now,
            checked=self._checked,
        )
        for group in raised.decided:
            self._checked[group] = view.now
        for one in raised.raises:
            self._raised[one.group] = view.now
            self._bursts.append(one)
            for decision in one.decisions:
                wanted[decision.variant] = max(wanted.get(decision.variant, 0), decision.target)
        return wanted


class StaticPolicy:
    """A fixed fleet: the same targets every cycle (in effect from the first one), never a wake.

    Variants not named in `targets` keep whatever target they have.
    """

    def __init__(self, *, targets: Mapping[str, int], name: str) -> None:
        for variant, count in sorted(targets.items()):
            if count < 0:
                raise ValueError(f'static target of {variant} must be >= 0, got {count}')
        self._name = name
        self._targets = dict(sorted(targets.items()))

    @property
    def name(self) -> str:
        return self._name

    @property
    def fixed(self) -> dict[str, int]:
        """The fixed targets, by variant name."""
        return dict(self._targets)

    def targets(self, *, view: ControlView) -> dict[str, int]:
        return dict(self._targets)

    def wake(self, *, view: ControlView) -> dict[str, int]:
        return {}


def _count(*, text: str, where: str) -> int:
    value = text.strip()
    if not value.isdigit() or not value.isascii():
        raise ValueError(f'{where}: replica count must be an integer >= 0, got {text!r}')
    return int(value)


def parse_static(*, text: str, variants: Sequence[str], first: Sequence[str] = ()) -> StaticPolicy:
    """Parse `static:N` or `static:VARIANT=N,...` into a `StaticPolicy` named `text`.

    `static:N` puts N replicas on each variant of `first` (default: the first of `variants`, in
    the order given; a fleet of several models gives the first variant of each model) and 0 on
    the others; `static:a=2,b=1` sets the named variants, 0 on the unnamed ones. Raises
    `ValueError` on a missing prefix, an empty or malformed list, a count that is not an
    integer >= 0, a repeated or unknown variant (the message lists the valid names).
    """
    valid = ', '.join(variants) if variants else '(none)'
    if not text.startswith('static:'):
        raise ValueError(f'not a static policy: {text!r} (expected static:N or static:VARIANT=N)')
    body = text.removeprefix('static:').strip()
    if not body:
        raise ValueError(f'{text}: empty; expected static:N or static:VARIANT=N,... ({valid})')
    targets = dict.fromkeys(variants, 0)
    if '=' not in body:
        if not variants:
            raise ValueError(f'{text}: no variants to place the replicas on')
        replicas = _count(text=body, where=text)
        for variant in first or variants[:1]:
            targets[variant] = replicas
        return StaticPolicy(targets=targets, name=text)
    seen: set[str] = set()
    for part in body.split(','):
        variant, sep, count = part.partition('=')
        variant = variant.strip()
        if not sep or not variant:
            raise ValueError(f'{text}: expected VARIANT=N, got {part!r}')
        if variant not in targets:
            raise ValueError(f'{text}: unknown variant {variant!r}; valid: {valid}')
        if variant in seen:
            raise ValueError(f'{text}: variant {variant!r} given twice')
        seen.add(variant)
        targets[variant] = _count(text=count, where=text)
    return StaticPolicy(targets=targets, name=text)
