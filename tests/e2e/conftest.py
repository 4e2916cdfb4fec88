"""Every test here is end to end (`pytest -m e2e` runs them alone, `-m "not e2e"` leaves them out).

The marker is applied by path so that a new test file cannot forget it. The `cluster` fixture is
the fake cluster most of these tests run the controller against; a module that needs another
defines its own `cluster`, which takes precedence.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from llmscaler.devcluster.cluster import Cluster
from tests.support.e2e_controller import NS

HERE = Path(__file__).resolve().parent


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if item.path.resolve().is_relative_to(HERE):
            item.add_marker(pytest.mark.e2e)


@pytest.fixture
async def cluster(tmp_path: Path) -> AsyncIterator[Cluster]:
    """The fake cluster in namespace NS, its replicas' requests 64 tokens in and 32 out."""
    async with Cluster(namespace=NS, workdir=tmp_path, input_tokens=64, output_tokens=32) as c:
        yield c
