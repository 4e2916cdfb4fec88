"""Kubernetes' HorizontalPodAutoscaler algorithm as pure functions (an exact HPA).

`pods` (which pods count), `replica_calculator` (one metric's proposal), `behavior` (rate
limits and the event history), `stabilization` (the recommendation windows) and `reconcile`
(one HPA's full reconcile). Pure: no clock, no I/O; the caller passes `now` and carries
`reconcile.HpaState`.
"""
