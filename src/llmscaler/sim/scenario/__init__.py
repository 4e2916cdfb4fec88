"""Scenarios: the document, its checks, the benchmark cases and what a run needs set up."""
