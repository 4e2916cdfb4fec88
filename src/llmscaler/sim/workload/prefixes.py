"""Shared system prompts and multi-turn sessions for synthetic traces: the prompts' block ids.

Why: prefix caching (`sim.vllm.prefix_cache`) and prefix-aware routing only matter when prompts
share their beginnings, and the synthetic generator (`sim.workload.synthetic`) draws lengths only.
This module gives a synthetic trace what real chat traffic has: a few long system prompts that most
requests start with, and conversations whose every turn resends the whole conversation so far.

What it computes (`PrefixSpec`, applied by `add_prefixes` to a trace whose lengths were drawn):

- **System prompts.** With `system_prompts` = N > 0, each new conversation starts with one of N
  system prompts of `system_tokens` tokens, prompt k (1-based) with probability ∝ 1/k^`skew`
  (Zipf: a few popular prompts, a long tail). The drawn input length is the user's text, after
  the system prompt.
- **Sessions.** Each request continues an open conversation with probability `followup`, else
  starts a new one. A follow-up picks one of the `open_sessions` most recently active
  conversations uniformly; its prompt is that conversation's previous prompt, then the previous
  answer (the previous turn's output tokens), then the drawn input as the new user text. A
  follow-up that would not fit `max_model_len` with its output starts a new conversation
  instead (a client would start over too).
- **Block ids.** Every prompt is a sequence of segments (a system prompt, a user text, an
  answer; each its own identity) and gets chained ids over blocks of `block` tokens (default
  16, vLLM's block size): id i hashes id i − 1 and the pieces of segments in block i, so two
  prompts share id i exactly when their first (i + 1)·block tokens are the same segments
  (`SimRequest.prefix`).

The draws use their own generator seeded from the trace's seed, so a trace's arrivals and
lengths are the same with or without prefixes. Inputs grow by the system prompt and the
conversation; outputs are unchanged.

Bad input is refused when the spec is built (ValueError naming the field): a negative number of
system prompts, system_tokens < 1 with system prompts, a negative skew, a followup outside
[0, 1), open_sessions < 1, a block < 1.
"""

from __future__ import annotations

import math
from array import array
from dataclasses import dataclass, replace

import numpy as np

from llmscaler.sim.vocabulary import Trace, object_array


@dataclass(frozen=True, slots=True)
class PrefixSpec:
    """What prompts share (see the module docstring)."""

    system_prompts: int = 0
    system_tokens: int = 1000
    skew: float = 1.0
    followup: float = 0.0
    open_sessions: int = 100
    block: int = 16

    def __post_init__(self) -> None:
        if self.system_prompts < 0:
            raise ValueError(f'system_prompts must be >= 0, got {self.system_prompts}')
        if self.system_prompts and self.system_tokens < 1:
            raise ValueError(f'system_tokens must be >= 1, got {self.system_tokens}')
        if not (math.isfinite(self.skew) and self.skew >= 0):
            raise ValueError(f'skew must be finite and >= 0, got {self.skew}')
        if not 0 <= self.followup < 1:
            raise ValueError(f'followup must be in [0, 1), got {self.followup}')
        if self.open_sessions < 1:
            raise ValueError(f'open_sessions must be >= 1, got {self.open_sessions}')
        if self.block < 1:
            raise ValueError(f'block must be >= 1, got {self.block}')


Segment = tuple[int, int]  # (identity, tokens)


def chain_ids(segments: list[Segment], block: int) -> array[int]:
    """Chained ids of the blocks of `block` tokens of a prompt made of `segments` (64-bit ints
    in an array: a long conversation has hundreds)."""
    ids: array[int] = array('q')
    previous = 0
    pieces: list[tuple[int, int, int]] = []
    room = block
    for identity, length in segments:
        offset = 0
        while offset < length:
            take = min(room, length - offset)
            pieces.append((identity, offset, offset + take))
            offset += take
            room -= take
            if room == 0:
                previous = hash((previous, tuple(pieces)))
                ids.append(previous)
                pieces = []
                room = block
    if pieces:
        ids.append(hash((previous, tuple(pieces))))
    return ids


def add_prefixes(
    *, trace: Trace, spec: PrefixSpec, seed: int | tuple[int, ...], max_model_len: int
) -> Trace:
    """`trace` with system prompts and sessions: longer inputs and every prompt's block ids."""
    base = (seed,) if isinstance(seed, int) else tuple(seed)
    rng = np.random.default_rng((*base, 0x5EED))
    n = len(trace)
    users = trace.input_tokens.tolist()
    outputs = trace.output_tokens.tolist()
    weights = 1.0 / np.arange(1, spec.system_prompts + 1, dtype=np.float64) ** spec.skew
    systems = (
        rng.choice(spec.system_prompts, size=n, p=weights / weights.sum()).tolist()
        if spec.system_prompts
        else [0] * n
    )
    follows = (rng.random(n) < spec.followup).tolist()
    picks = rng.integers(0, spec.open_sessions, size=n).tolist()
    # A session: its segments so far (the last prompt plus its answer) and its last request.
    open_: list[list[Segment]] = []
    inputs: list[int] = []
    ids: list[array[int]] = []
    for i in range(n):
        # Identities: system prompt k is 3k, request i's user text 3i + 1 and its answer 3i + 2
        # (non-negative: Python hashes -1 like -2).
        user: Segment = (3 * i + 1, users[i])
        segments: list[Segment] | None = None
        if follows[i] and open_:
            k = picks[i] % len(open_)
            tokens = sum(length for _, length in open_[k]) + users[i]
            if tokens + outputs[i] <= max_model_len:
                segments = [*open_.pop(k), user]
        if segments is None:
            system = [(3 * systems[i], spec.system_tokens)] if spec.system_prompts else []
            segments = [*system, user]
            if sum(length for _, length in segments) + outputs[i] > max_model_len:
                segments = [user]  # no room for the system prompt: the user text alone
        inputs.append(sum(length for _, length in segments))
        ids.append(chain_ids(segments, spec.block))
        # The answer joins the conversation.
        open_.append([*segments, (3 * i + 2, outputs[i])])
        if len(open_) > spec.open_sessions:
            del open_[0]
    return replace(
        trace,
        input_tokens=np.asarray(inputs, dtype=np.int64),
        prefixes=object_array(ids),
        prefix_block=spec.block,
    )
