"""The Ray tier (``make test-ray``): ``ax3l-compare --ray`` on a real Ray cluster of this machine.

Not part of the default suite: it needs Ray, the optional extra ``ax3l-compare[ray]``, which
the default environment does not have. ``make test-ray`` installs it into an environment of its
own (``.run/venv-ray``) and sets ``AX3L_TEST_RAY``; without it nothing here is collected.

The cluster (``ray.cluster_utils.Cluster``) is a head and two worker nodes, all on 127.0.0.1
(``RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER=0`` keeps Ray from resolving 127.0.0.1 to the machine's
network address), with the dashboard off. The head has no CPU, so no repeat runs there; each
worker has one ``snakelab`` unit, so a comparison asking ``--ray-resource snakelab=1`` runs one
repeat per worker at a time and has to use both.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from typing import Any

import pytest

collect_ignore_glob: list[str] = []
if not os.environ.get("AX3L_TEST_RAY"):
    collect_ignore_glob.append("test_*.py")
else:
    # Before Ray is imported: every address Ray uses stays 127.0.0.1.
    os.environ.setdefault("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", "0")

LOCAL = "127.0.0.1"
# A lost node is noticed within about 3 s (the defaults: about 30 s).
SYSTEM_CONFIG = {"health_check_period_ms": 1000, "health_check_failure_threshold": 3}


def local_node(**extra: Any) -> dict[str, Any]:
    """``Cluster.add_node``'s arguments of a node bound to 127.0.0.1."""
    return {"node_ip_address": LOCAL, **extra}


@pytest.fixture
def node_args() -> Callable[..., dict[str, Any]]:
    """``Cluster.add_node``'s arguments of a node bound to 127.0.0.1 (keywords added)."""
    return local_node


@pytest.fixture(scope="session")
def ray_cluster() -> Iterator[Any]:
    """A head (no CPU, dashboard off) and two workers, each with one ``snakelab`` unit."""
    from ray.cluster_utils import Cluster

    cluster = Cluster(
        initialize_head=True,
        head_node_args=local_node(
            num_cpus=0,
            include_dashboard=False,
            dashboard_host=LOCAL,
            _system_config=SYSTEM_CONFIG,
        ),
    )
    try:
        for _ in range(2):
            cluster.add_node(**local_node(num_cpus=1, resources={"snakelab": 1}))
        cluster.wait_for_nodes()
        yield cluster
    finally:
        cluster.shutdown()
