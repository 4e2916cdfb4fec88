"""The SLO analyzer: a model's workload, its tuned queueing model, and how many replicas of
each variant keep the latency targets; what vLLM's histograms say of attainment."""
