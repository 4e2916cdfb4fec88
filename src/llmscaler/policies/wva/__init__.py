"""The llm-d Workload Variant Autoscaler's policies: percentage and token saturation, the SLO
queueing model (alone or in hybrid), and the ballot and optimizer they share."""
