"""Leader election on a coordination.k8s.io/v1 Lease, with client-go's semantics.

Why: two controller replicas must never scale the same targets at once, and a standby must take
over when the leader dies. client-go's `leaderelection` package is the proven recipe; this module
copies it so the controller behaves like every other Kubernetes controller (and interoperates
with tools that read the same Lease).

What it does (`LeaderElector`):

- An attempt gets the Lease, creates it when missing (409 on create means another replica won the
  race: retry later), else replaces it with a PUT carrying the read resourceVersion, so that a
  concurrent writer makes one of the two writes fail 409.
- A Lease held by another identity is taken over only when its record (holder, renewTime,
  resourceVersion) has not changed for `leaseDurationSeconds` of the *locally observed* time: the
  elector remembers when it first saw the current record (client-go's observedTime) and never
  compares the remote renewTime with its own wall clock, so clock skew between nodes cannot cause
  two leaders. An empty (or absent) holderIdentity means the Lease is free. A record without a
  positive leaseDurationSeconds is judged with our own `lease_duration`.
- `leaseTransitions` is incremented whenever the holder changes; `acquireTime` is kept across
  renewals by the same holder. `renewTime`/`acquireTime` are written as MicroTime strings.
- `acquire()` tries now and then every `retry_period`; its attempts are bounded only by the
  client's request timeout, since a slow attempt there cannot make two leaders.
- `hold()` renews every `retry_period`. Each renewal attempt is bounded on the injected clock by
  what is left of `renew_deadline` since the last successful renewal (a hung request cannot keep
  us believing we lead while the Lease lapses). It returns when renewal has failed for
  `renew_deadline`, or at once when another holder is seen.
- Renewal runs as a task of its own (the controller starts `hold()` beside its loops), so it
  waits for no cycle; what can still delay it is an event loop held by synchronous work, which is
  why the metric sources parse and fold off the loop. Every renewal attempt is counted with how
  late it started against its schedule (`renewals`, `late_max`, and `on_renewal(late, ok)` for
  the controller's metrics), so that a held loop shows before it costs the Lease.
- `write_refusal()` says whether this replica may write now: only while it leads and its last
  successful renewal is younger than `renew_deadline`. The controller checks it before every
  write but the Lease's own (`kube.write_fence.fence_writes`), so a leader frozen past its deadline
  cannot send a write from where it stopped before `hold()` notices the loss.
- `release()` (clean shutdown) writes an empty holder, `leaseDurationSeconds: 1` and renewTime
  now, so a standby takes over at its next retry instead of waiting out the lease. A 409 (our
  copy is stale) leads to one fresh read, and the write is retried only if we still hold it. It
  gives up after `retry_period`, so shutdown cannot hang on a dead API server.

What fails and how: API errors (lightkube `ApiError`) and transport failures (httpx2 errors) are
logged with the Lease they concern and the attempt counts as failed; `acquire()` retries every
`retry_period` forever, `hold()` turns failures into a return when the deadline passes, and
`release()` never raises (after it, `is_leader` is False even if the write failed: the Lease then
expires on its own). A bad `LeaderConfig` (non-positive times, renew_deadline not below
lease_duration, retry_period above renew_deadline, empty identity) raises ValueError.
"""

from __future__ import annotations

import asyncio
import datetime as _dt
import enum
import logging
import math
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, Final, TypeVar

import httpx2
import msgspec
from lightkube import AsyncClient
from lightkube.core.exceptions import ApiError
from lightkube.models.coordination_v1 import LeaseSpec
from lightkube.models.meta_v1 import ObjectMeta
from lightkube.resources.coordination_v1 import Lease

from llmscaler.clock import Clock, rfc3339
from llmscaler.kube.client import describe_error, error_code

logger = logging.getLogger(__name__)

_T = TypeVar('_T')
_API_ERRORS = (ApiError, httpx2.HTTPError)


LEASE_NAME: Final = '72dd1cf1.llm-d.ai'
"""WVA's Lease name: llmscaler and WVA in one namespace elect one leader between them."""
SHADOW_LEASE_NAME: Final = 'llmscaler-shadow.llm-d.ai'
"""The Lease of `llmscaler run --shadow`, which must never take the lead from the autoscaler it
watches."""


@dataclass(frozen=True, slots=True)
class LeaderConfig:
    """Where the Lease lives, who we are, and client-go's three timings (seconds)."""

    namespace: str
    identity: str
    name: str = LEASE_NAME
    lease_duration: float = 60.0
    renew_deadline: float = 50.0
    retry_period: float = 10.0

    def __post_init__(self) -> None:
        if not self.identity:
            raise ValueError('leader election needs a non-empty identity')
        if not self.namespace or not self.name:
            raise ValueError('leader election needs a Lease namespace and name')
        times = (self.lease_duration, self.renew_deadline, self.retry_period)
        if not all(math.isfinite(t) and t > 0 for t in times):
            raise ValueError(f'leader election timings must be positive: {times}')
        if not self.renew_deadline < self.lease_duration:
            raise ValueError('renew_deadline must be shorter than lease_duration')
        if self.retry_period > self.renew_deadline:
            raise ValueError('retry_period must not exceed renew_deadline')


class _Outcome(enum.Enum):
    OURS = 'ours'  # we hold the Lease now (created, taken over or renewed)
    TAKEN = 'taken'  # another identity holds a Lease that is still valid
    FAILED = 'failed'  # the attempt failed (API error, conflict, timeout)


@dataclass(frozen=True, slots=True)
class _Record:
    holder: str
    duration: int | None
    transitions: int
    acquired: _dt.datetime | None
    renewed: _dt.datetime | None
    resource_version: str

    @classmethod
    def of(cls, lease: Lease) -> _Record:
        spec = lease.spec or LeaseSpec()
        meta = lease.metadata or ObjectMeta()
        return cls(
            holder=spec.holderIdentity or '',
            duration=spec.leaseDurationSeconds,
            transitions=spec.leaseTransitions or 0,
            acquired=spec.acquireTime,
            renewed=spec.renewTime,
            resource_version=meta.resourceVersion or '',
        )

    @property
    def key(self) -> tuple[str, _dt.datetime | None, str]:
        return (self.holder, self.renewed, self.resource_version)


def _micro_time(wall: float) -> Any:
    # Typed Any on purpose: msgspec renders a datetime whose microseconds are 0 without the
    # fraction, and the apiserver's MicroTime parser demands all six digits, so MicroTime fields
    # are sent as ready strings (msgspec encodes whatever a field holds).
    return rfc3339(wall=wall, micro=True)


async def _within(clock: Clock, seconds: float, work: Awaitable[_T]) -> tuple[bool, _T | None]:
    """(True, result) when `work` finished within `seconds` of the clock, else (False, None)."""
    task = asyncio.ensure_future(work)
    timer = asyncio.ensure_future(clock.sleep(seconds))
    try:
        await asyncio.wait({task, timer}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for pending in (task, timer):
            if not pending.done():
                pending.cancel()
        await asyncio.wait({task, timer})
    if task.cancelled():
        return False, None
    return True, task.result()


class LeaderElector:
    """One replica's side of the election; see the module docstring for the rules."""

    def __init__(
        self,
        *,
        client: AsyncClient,
        clock: Clock,
        config: LeaderConfig,
        on_change: Callable[[bool], None] | None = None,
        on_renewal: Callable[[float, bool], None] | None = None,
    ) -> None:
        self._client = client
        self._clock = clock
        self._config = config
        self._on_change = on_change
        self._on_renewal = on_renewal
        self.renewals = 0
        """Renewal attempts made by `hold()`, successful or not."""
        self.late_max = 0.0
        """The latest start of a renewal attempt against its schedule, in seconds."""
        self._leader = False
        self._transitions = 0
        self._lease: Lease | None = None  # the last Lease we wrote as holder
        self._renewed_at = 0.0  # monotonic start of our last successful write
        self._observed_key: tuple[str, _dt.datetime | None, str] | None = None
        self._observed_at = 0.0
        self._where = f'lease {config.namespace}/{config.name}'

    @property
    def is_leader(self) -> bool:
        return self._leader

    def write_refusal(self) -> str | None:
        """None while this replica may write as the leader; else why it may not.

        `hold()` notices a lapsed Lease only when it next runs. A process frozen past its renew
        deadline (SIGSTOP, a paused VM, a long swap) resumes wherever it stopped, perhaps just
        before a write, while a standby may already lead. This check runs on the injected clock,
        which kept going while the process was frozen, so such a write is refused instead."""
        if not self._leader:
            return f'not the holder of {self._where}'
        age = self._clock.monotonic() - self._renewed_at
        if age < self._config.renew_deadline:
            return None
        return (
            f'{self._where} last renewed {age:.1f} s ago '
            f'(renew deadline {self._config.renew_deadline:g} s)'
        )

    @property
    def transitions(self) -> int:
        """The leaseTransitions of the last Lease record read or written."""
        return self._transitions

    async def acquire(self) -> None:
        """Return once we hold the Lease, trying now and then every `retry_period`."""
        while not self._leader:
            if await self._attempt() is _Outcome.OURS:
                self._set_leader(True)
                logger.info(
                    'acquired %s as %s (transitions %d)',
                    self._where,
                    self._config.identity,
                    self._transitions,
                )
                return
            await self._clock.sleep(self._config.retry_period)

    async def hold(self) -> None:
        """Renew every `retry_period`; return when leadership is lost (at once if not leader)."""
        config = self._config
        while self._leader:
            left = self._renewed_at + config.renew_deadline - self._clock.monotonic()
            wait = max(0.0, min(config.retry_period, left))
            due = self._clock.monotonic() + wait
            await self._clock.sleep(wait)
            late = max(0.0, self._clock.monotonic() - due)
            left = self._renewed_at + config.renew_deadline - self._clock.monotonic()
            if left <= 0:
                self._renewed(late=late, ok=False)
                self._lose(f'renewal failed for {config.renew_deadline:g} s')
                return
            done, outcome = await _within(self._clock, left, self._attempt())
            self._renewed(late=late, ok=done and outcome is _Outcome.OURS)
            if not done:
                logger.warning('renewing %s timed out', self._where)
            elif outcome is _Outcome.TAKEN:
                self._lose(f'now held by {self._observed_key[0] if self._observed_key else "?"}')
                return

    async def release(self) -> None:
        """Give the Lease up on clean shutdown so a standby need not wait it out; never raises."""
        if not self._leader:
            return
        try:
            done, released = await _within(
                self._clock, self._config.retry_period, self._write_release()
            )
            if not done:
                logger.warning('releasing %s timed out; it will expire on its own', self._where)
            elif released:
                logger.info('released %s as %s', self._where, self._config.identity)
        except Exception:
            logger.exception('releasing %s failed; it will expire on its own', self._where)
        finally:
            self._set_leader(False)

    # -- one attempt ---------------------------------------------------------------------------

    async def _attempt(self) -> _Outcome:
        """client-go's tryAcquireOrRenew: get, create if missing, else take or renew by PUT."""
        now, wall = self._clock.monotonic(), self._clock.wall()
        try:
            lease = await self._client.get(
                Lease, self._config.name, namespace=self._config.namespace
            )
        except _API_ERRORS as exc:
            if error_code(exc) == 404:
                return await self._create(now=now, wall=wall)
            logger.warning('reading %s failed: %s', self._where, describe_error(exc))
            return _Outcome.FAILED
        record = _Record.of(lease)
        if record.key != self._observed_key:
            self._observed_key, self._observed_at = record.key, now
        self._transitions = record.transitions
        ours = record.holder == self._config.identity
        if record.holder and not ours:
            duration = record.duration
            if duration is None or duration <= 0:
                duration = math.ceil(self._config.lease_duration)
            if now < self._observed_at + duration:
                logger.debug('%s is held by %s', self._where, record.holder)
                return _Outcome.TAKEN
            logger.info('%s held by %s has expired; taking it over', self._where, record.holder)
        acquired = wall
        if ours and record.acquired is not None:
            acquired = record.acquired.timestamp()
        body = self._lease_body(
            meta=lease.metadata or ObjectMeta(),
            base=lease.spec or LeaseSpec(),
            holder=self._config.identity,
            duration=math.ceil(self._config.lease_duration),
            acquired=acquired,
            renewed=wall,
            transitions=record.transitions + (0 if ours else 1),
        )
        try:
            written = await self._client.replace(body)
        except _API_ERRORS as exc:
            logger.warning('writing %s failed: %s', self._where, describe_error(exc))
            return _Outcome.FAILED
        self._wrote(written, now=now)
        return _Outcome.OURS

    async def _create(self, *, now: float, wall: float) -> _Outcome:
        body = self._lease_body(
            meta=ObjectMeta(),
            base=LeaseSpec(),
            holder=self._config.identity,
            duration=math.ceil(self._config.lease_duration),
            acquired=wall,
            renewed=wall,
            transitions=0,
        )
        try:
            written = await self._client.create(body)
        except _API_ERRORS as exc:
            if error_code(exc) == 409:
                logger.info('%s was created by another replica first', self._where)
            else:
                logger.warning('creating %s failed: %s', self._where, describe_error(exc))
            return _Outcome.FAILED
        self._wrote(written, now=now)
        return _Outcome.OURS

    async def _write_release(self) -> bool:
        lease = self._lease
        for _ in range(2):
            if lease is None or _Record.of(lease).holder != self._config.identity:
                logger.info('%s is no longer ours; nothing to release', self._where)
                return False
            record, wall = _Record.of(lease), self._clock.wall()
            body = self._lease_body(
                meta=lease.metadata or ObjectMeta(),
                base=lease.spec or LeaseSpec(),
                holder='',
                duration=1,
                acquired=wall,
                renewed=wall,
                transitions=record.transitions,
            )
            try:
                await self._client.replace(body)
                return True
            except _API_ERRORS as exc:
                if error_code(exc) != 409:
                    logger.warning('releasing %s failed: %s', self._where, describe_error(exc))
                    return False
            # Our copy is stale (409): release only if a fresh read still names us.
            try:
                lease = await self._client.get(
                    Lease, self._config.name, namespace=self._config.namespace
                )
            except _API_ERRORS as exc:
                logger.warning('reading %s failed: %s', self._where, describe_error(exc))
                return False
        logger.warning('releasing %s kept conflicting; it will expire on its own', self._where)
        return False

    # -- state ---------------------------------------------------------------------------------

    def _lease_body(
        self,
        *,
        meta: ObjectMeta,
        base: LeaseSpec,
        holder: str,
        duration: int,
        acquired: float,
        renewed: float,
        transitions: int,
    ) -> Lease:
        # Every field read is kept (labels, annotations, resourceVersion, preferredHolder ...);
        # only the election record is rewritten.
        metadata = msgspec.structs.replace(
            meta, name=self._config.name, namespace=self._config.namespace
        )
        spec = msgspec.structs.replace(
            base,
            holderIdentity=holder or None,
            leaseDurationSeconds=duration,
            acquireTime=_micro_time(acquired),
            renewTime=_micro_time(renewed),
            leaseTransitions=transitions,
        )
        return Lease(metadata=metadata, spec=spec)

    def _wrote(self, lease: Lease, *, now: float) -> None:
        record = _Record.of(lease)
        self._lease = lease
        self._renewed_at = now
        self._observed_key, self._observed_at = record.key, now
        self._transitions = record.transitions

    def _renewed(self, *, late: float, ok: bool) -> None:
        self.renewals += 1
        self.late_max = max(self.late_max, late)
        if late > 1.0:
            logger.warning('renewing %s started %.1f s late: the event loop was held', self._where,
                           late)  # fmt: skip
        if self._on_renewal is None:
            return
        try:
            self._on_renewal(late, ok)
        except Exception:
            logger.exception('the renewal callback failed')

    def _lose(self, why: str) -> None:
        logger.warning('lost %s as %s: %s', self._where, self._config.identity, why)
        self._set_leader(False)

    def _set_leader(self, leader: bool) -> None:
        if leader == self._leader:
            return
        self._leader = leader
        if self._on_change is None:
            return
        try:
            self._on_change(leader)
        except Exception:
            logger.exception('the leadership callback failed (leader=%s)', leader)
