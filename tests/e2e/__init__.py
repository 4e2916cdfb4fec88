"""End-to-end tests: `llmscaler run` as a process against a fake cluster (`cluster.Cluster`)."""
