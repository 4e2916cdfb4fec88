"""A variant's capacity as an analyzer reports it, shared by the threshold and ballot tests."""

from __future__ import annotations

from llmscaler.domain.basics import Role
from llmscaler.domain.signals import VariantCapacity


def capacity(name: str, prc: float, role: Role = 'both', reason: str = 'P1-obs') -> VariantCapacity:
    return VariantCapacity(
        variant=name,
        namespace='ns',
        role=role,
        cost=10.0,
        accelerator='H100',
        gpus_per_replica=1,
        min_replicas=1,
        max_replicas=4,
        current_replicas=1,
        per_replica_capacity=prc,
        replica_count=1,
        pending=0,
        total_demand=0.0,
        reason=reason,
    )
