"""Domain types shared by every stage of the decision core.

Why: the analyzers, the optimizer, the enforcer and `engine.decide()` must agree on one vocabulary,
and the adapters (Prometheus, pod scraping, the simulator, the kube watcher) must build exactly this
vocabulary and nothing else. Everything here is an immutable dataclass with no I/O and no clock.

Units that must not drift:

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

The types live in four modules: `domain.basics` (ranges, keys, roles, freshness, actions),
`domain.snapshot` (what the adapters hand the core and the decisions it returns),
`domain.signals` (what the analyzers hand the optimizers) and `domain.state` (the memory between
cycles).
"""
