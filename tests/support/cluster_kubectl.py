"""kubectl against a `Cluster`: as the real control plane's admin, or as a client of the fake API.

What fails: an assertion when kubectl is not built (a test that needs it checks the control
plane's binaries first); kubectl's own failures are returned, not raised, so a test can assert on
a refusal.
"""

from __future__ import annotations

import subprocess

from llmscaler.devcluster import binaries
from llmscaler.devcluster.cluster import Cluster


def kubectl(
    cluster: Cluster, *args: str, namespace: str, stdin: str | None = None
) -> subprocess.CompletedProcess[str]:
    """kubectl as the cluster's admin in `namespace` (on the fake API, which has no RBAC, a
    client of its own); the result, whatever its exit code."""
    path = binaries.find('kubectl')
    assert path is not None
    if cluster.real:
        config = cluster.control_plane.kubeconfig(
            cluster.workdir / 'admin-test.kubeconfig', namespace=namespace
        )
    else:
        config = cluster.kubeconfig(cluster.workdir / 'kubectl-test.kubeconfig', client='kubectl')
    return subprocess.run(
        [str(path), f'--kubeconfig={config}', *args],
        input=stdin,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
