"""The simulated vLLM engine: the reference and the fast engine, prefix cache, histograms."""
