"""Every test here is end to end (`pytest -m e2e` runs them alone, `-m "not e2e"` leaves them out).

The marker is applied by path so that a new test file cannot forget it. The `cluster` fixture
runs each test that takes it twice (through the `backend` fixture, which a module's own cluster
fixture may take too): on the fake API and on a real control plane (etcd, kube-apiserver,
kube-controller-manager and kube-scheduler built by `make binaries`). A test
marked `fake_api` needs what only the fake does on demand (injected 409s, 410s and 500s, dropped
watches, slow answers, its log of reads, InferencePools) and runs on the fake alone. A module
that needs another cluster defines its own `cluster`, which takes precedence.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from llmscaler.devcluster.cluster import CONTROL_PLANE_BINARIES, Cluster
from tests.support.e2e_controller import NS
from tests.support.prerequisites import need_built

HERE = Path(__file__).resolve().parent
BACKENDS = ('fake', 'real')


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    kept, fake_only = [], []
    for item in items:
        if not item.path.resolve().is_relative_to(HERE):
            kept.append(item)
            continue
        item.add_marker(pytest.mark.e2e)
        callspec = getattr(item, 'callspec', None)
        on_real = callspec is not None and callspec.params.get('backend') == 'real'
        if on_real and item.get_closest_marker('fake_api') is not None:
            fake_only.append(item)
        else:
            kept.append(item)
    if fake_only:
        config.hook.pytest_deselected(items=fake_only)
        items[:] = kept


def need_control_plane() -> None:
    """Skip (fail with CI=true) unless every binary of the real control plane is built."""
    for binary in CONTROL_PLANE_BINARIES:
        need_built(binary)


@pytest.fixture(params=BACKENDS)
def backend(request: pytest.FixtureRequest) -> bool:
    """True for the real control plane (skipped, or failed with CI=true, when not built)."""
    real: bool = request.param == 'real'
    if real:
        need_control_plane()
    return real


@pytest.fixture
async def cluster(backend: bool, tmp_path: Path) -> AsyncIterator[Cluster]:
    """The cluster in namespace NS, its replicas' requests 64 tokens in and 32 out."""
    async with Cluster(
        namespace=NS, workdir=tmp_path, input_tokens=64, output_tokens=32, control_plane=backend
    ) as c:
        yield c
