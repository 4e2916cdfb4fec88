"""Kubernetes adapters: the VariantAutoscaling resource and its conditions, and the scale
targets it points at (Deployment, StatefulSet, LeaderWorkerSet) read through one accessor."""
