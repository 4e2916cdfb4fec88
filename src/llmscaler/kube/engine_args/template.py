"""Engine parameters (vLLM or SGLang) parsed from the containers of a pod template.

Why: the token-based analyzer prices a replica from its serving arguments when it has no live
metrics (WVA's P3 "derived" capacity and its capacity store, v0.9.0,
internal/engines/analyzers/saturation_v2/), and the optimizer needs the GPUs per replica. For a
LeaderWorkerSet (kubernetes-sigs/lws) the caller passes the leader template, which starts the API
server.

Two steps: `kube.engine_args.command` finds the serving container and its command line (through
Kubernetes `$(VAR)` expansion and `sh -c` scripts), then `kube.engine_args.flags` reads the engine's
flags into `EngineParams` with each engine's defaults. This module holds the entry points and
`gpus_per_replica`, which reads the containers' resources, not their command lines.

What fails: nothing raises. A malformed or out-of-range value (not a positive integer, a
utilization outside (0, 1], a flag missing its value) keeps that field's default and adds a
warning (see `parse_engine_args_report`); an unterminated quote in a script falls back to
splitting on whitespace. No recognised serving container → None.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

from llmscaler.domain.snapshot import EngineParams
from llmscaler.kube.engine_args.command import serving_container
from llmscaler.kube.engine_args.flags import sglang_params, vllm_params

GPU_RESOURCES = ('nvidia.com/gpu', 'amd.com/gpu', 'intel.com/gpu', 'google.com/tpu')


def parse_engine_args_report(
    *, containers: Sequence[Mapping[str, object]]
) -> tuple[EngineParams | None, tuple[str, ...]]:
    """The serving parameters of a pod template's containers, and the warnings about them."""
    warnings: list[str] = []
    found = serving_container(containers=containers, warnings=warnings)
    if found is None:
        return None, tuple(warnings)
    found.warnings = warnings
    params = sglang_params(found=found) if found.engine == 'sglang' else vllm_params(found=found)
    return params, tuple(warnings)


def parse_engine_args(*, containers: Sequence[Mapping[str, object]]) -> EngineParams | None:
    """The serving parameters of a pod template's containers; None if none serves a model."""
    params, _ = parse_engine_args_report(containers=containers)
    return params


def _count(value: object) -> int | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value if value >= 0 else None
    if isinstance(value, float) and math.isfinite(value) and value.is_integer() and value >= 0:
        return int(value)
    if isinstance(value, str):
        body = value.strip()
        return int(body) if body.isdecimal() else None
    return None


def gpus_per_replica(*, containers: Sequence[Mapping[str, object]]) -> int:
    """Accelerators requested by the containers of one pod template (limits win over requests).

    Sums `nvidia.com/gpu`, `amd.com/gpu`, `intel.com/gpu` and `google.com/tpu`; per container and
    resource the limit is used when present, else the request. Values that are not whole
    non-negative numbers (`1.5`, `500m`, `abc`) are ignored. For a LeaderWorkerSet replica the
    caller adds leader GPUs + (size − 1) × worker GPUs (a group is one leader and size − 1 workers).
    """
    total = 0
    for container in containers:
        if not isinstance(container, Mapping):
            continue
        resources = container.get('resources')
        if not isinstance(resources, Mapping):
            continue
        limits = resources.get('limits')
        requests = resources.get('requests')
        for resource in GPU_RESOURCES:
            for source in (limits, requests):
                if isinstance(source, Mapping) and resource in source:
                    count = _count(source[resource])
                    if count is not None:
                        total += count
                    break
    return total
