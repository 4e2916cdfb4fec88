"""Which build of the decision core is running: its analyzers and optimizers compiled or not.

Why: the same source runs two ways. `tools/compile_core.py` compiles `llmscaler.analyze` and
`llmscaler.optimize` with mypyc (the container image ships that build); an editable install or a
plain wheel runs them in the interpreter. Their decisions are the same (tests/unit/
test_compiled.py); their speed is not (docs/performance.md), so `llmscaler --version` and the
benchmarks say which one they ran.

Nothing is imported to find out: the import system is asked where the module would load from.
"""

from __future__ import annotations

import importlib.machinery
import importlib.util

PROBE = 'llmscaler.analyze.slo_queueing'
"""A compiled module of the core; it is an extension module exactly when the core is compiled."""


def core_build() -> str:
    """`compiled` when the core's modules load from extension modules, else `interpreted`."""
    spec = importlib.util.find_spec(PROBE)
    origin = spec.origin if spec is not None else None
    if origin is not None and origin.endswith(tuple(importlib.machinery.EXTENSION_SUFFIXES)):
        return 'compiled'
    return 'interpreted'
