"""Every test here is end to end (`pytest -m e2e` runs them alone, `-m "not e2e"` leaves them out).

The marker is applied by path so that a new test file cannot forget it.
"""

from __future__ import annotations

from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if item.path.resolve().is_relative_to(HERE):
            item.add_marker(pytest.mark.e2e)
