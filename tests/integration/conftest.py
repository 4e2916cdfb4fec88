"""Every test here needs a real Prometheus (`pytest -m integration` runs them alone).

The marker is applied by path so that a new test file cannot forget it; end-to-end tests that
start a Prometheus carry it too.
"""

from __future__ import annotations

from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if item.path.resolve().is_relative_to(HERE):
            item.add_marker(pytest.mark.integration)
