"""The simulated vLLM engine: the reference and the fast engine, prefix cache, histograms.

Its modules are imported from a compiled copy where one was built from these very sources
(`llmscaler.sim.native.engine`), else from source."""

from llmscaler.sim.native import engine

__path__ = engine.search_path(package=list(__path__))
