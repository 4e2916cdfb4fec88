"""Where the tests find the repository, their data files, and what lies outside the repository.

Why: test modules sit at different depths of `tests/unit/`; counting parent folders in each would
break whenever one moves. Files outside the repository (the Azure traces, a reference `/metrics`
page) are prerequisites: a test asks for them through `prerequisites.need_file`.
"""

from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
"""The repository."""
DATA = Path(__file__).resolve().parent / 'data'
"""The tests' own data files."""
SHARED = ROOT.parent / 'shared'
"""What lies beside the repository: the Azure traces and a reference vLLM `/metrics` page."""
TRACES = SHARED / 'traces'
REFERENCE_PAGE = SHARED / 'reference' / 'vllm_metrics_example.txt'
