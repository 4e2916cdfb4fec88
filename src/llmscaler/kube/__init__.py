"""Kubernetes adapters: the VariantAutoscaling custom resource and its conditions."""
