"""Domain types shared by every stage of the decision core.

Why: the analyzers, the optimizer, the enforcer and `engine.decide()` must agree on one vocabulary,
and the adapters (Prometheus, pod scraping, the simulator, the kube watcher) must build exactly this
vocabulary and nothing else. Everything here is an immutable dataclass with no I/O and no clock.

Units that must not drift (design.md §4):

- A *replica* is a scale-target replica: a pod of a Deployment/StatefulSet, or a leader+workers
  group of a LeaderWorkerSet. `ReplicaMetrics` describes one *engine instance*; with data
  parallelism (DP > 1) a replica hosts several instances; the analyzers convert to replicas.
- Token capacities are KV-cache tokens. Times are seconds (float) on the clock of the caller; the
  core only compares them with the `now` it is handed.
- Every collection is a tuple in a stable order; code that needs a lookup builds its own dict and
  iterates in sorted order, so no result depends on dict or set order.

Ranges are declared once, on the fields, as `annotated_types` metadata (pure metadata, no
validation library): the JSON face (`llmscaler.io`) validates and publishes them through pydantic,
and `replica_problems` / `pool_problems` read the same metadata to judge the metrics the adapters
hand to `engine.decide()`.

What fails: nothing here raises on odd values; construction does not validate. A metric that is
missing, non-finite or outside its declared range makes its model hold (`engine`), and the
analyzers still treat NaN, Inf and negatives as absent.

The types live in three modules, re-exported here (import them from `llmscaler.model`):
`model.basics` (ranges, keys, roles, freshness, actions), `model.snapshot` (what the adapters
hand the core and the decisions it returns) and `model.state` (the memory between cycles).
"""

from __future__ import annotations

from llmscaler.model.basics import _STRICT_KEYS as _STRICT_KEYS
from llmscaler.model.basics import COUNT_MAX as COUNT_MAX
from llmscaler.model.basics import REQUIRED_POOL_FIGURES as REQUIRED_POOL_FIGURES
from llmscaler.model.basics import REQUIRED_REPLICA_FIGURES as REQUIRED_REPLICA_FIGURES
from llmscaler.model.basics import ROLES as ROLES
from llmscaler.model.basics import Action as Action
from llmscaler.model.basics import Count as Count
from llmscaler.model.basics import EngineKind as EngineKind
from llmscaler.model.basics import Fraction as Fraction
from llmscaler.model.basics import Freshness as Freshness
from llmscaler.model.basics import NonNegative as NonNegative
from llmscaler.model.basics import PositiveCount as PositiveCount
from llmscaler.model.basics import Role as Role
from llmscaler.model.basics import finite as finite
from llmscaler.model.basics import group_key as group_key
from llmscaler.model.basics import positive_or_zero as positive_or_zero
from llmscaler.model.basics import variant_key as variant_key
from llmscaler.model.snapshot import UNLIMITED_GPUS as UNLIMITED_GPUS
from llmscaler.model.snapshot import Decision as Decision
from llmscaler.model.snapshot import EngineParams as EngineParams
from llmscaler.model.snapshot import GpuLimit as GpuLimit
from llmscaler.model.snapshot import LatencyHistogram as LatencyHistogram
from llmscaler.model.snapshot import PoolMetrics as PoolMetrics
from llmscaler.model.snapshot import ReplicaMetrics as ReplicaMetrics
from llmscaler.model.snapshot import Snapshot as Snapshot
from llmscaler.model.snapshot import Variant as Variant
from llmscaler.model.snapshot import action_for as action_for
from llmscaler.model.snapshot import tokens_in_use_of as tokens_in_use_of
from llmscaler.model.state import EMPTY_STATE as EMPTY_STATE
from llmscaler.model.state import CapacityRecord as CapacityRecord
from llmscaler.model.state import K2Sample as K2Sample
from llmscaler.model.state import KalmanRecord as KalmanRecord
from llmscaler.model.state import RateSample as RateSample
from llmscaler.model.state import State as State
from llmscaler.model.state import VariantLearning as VariantLearning
from llmscaler.model.state import sorted_items as sorted_items
