"""`llmscaler manifests`: KEDA and HPA manifests for the scale targets of VariantAutoscalings.

`targets` reads the scale targets (VA files or command-line flags), `objects` builds the
ScaledObjects and HPAs of the common queue-based KEDA setup for vLLM (and the HPA or ScaledObject
that follows llmscaler's `wva_desired_replicas`), `command` is the command line. See
docs/manifests.md.
"""
