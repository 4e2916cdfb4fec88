"""Workloads for the simulator: trace files, synthetic traces, shared prefixes."""
