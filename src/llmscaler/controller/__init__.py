"""The Kubernetes controller (`llmscaler run`): informers, the decision cycle and its outputs."""
