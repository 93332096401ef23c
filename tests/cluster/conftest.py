"""Real nats-server processes on loopback, shared per test module.

``cluster3`` is one 3-server JetStream cluster (R3) for a whole module,
``cluster1`` one single server (R1); each test uses its own crawl name
(``crawl_name`` fixture), so tests sharing a cluster never see each
other's streams or buckets. The servers choose free ports, are waited on
through their health endpoint, and are stopped by PID at module end.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator

import pytest

from crawl.cluster import DevCluster

_names = itertools.count(1)


@pytest.fixture(scope="module")
def cluster3(tmp_path_factory: pytest.TempPathFactory) -> Iterator[DevCluster]:
    with DevCluster(tmp_path_factory.mktemp("nats3"), 3) as c:
        yield c


@pytest.fixture(scope="module")
def cluster1(tmp_path_factory: pytest.TempPathFactory) -> Iterator[DevCluster]:
    with DevCluster(tmp_path_factory.mktemp("nats1"), 1) as c:
        yield c


@pytest.fixture
def crawl_name(request: pytest.FixtureRequest) -> str:
    return f"t{next(_names)}_{request.node.name[:30].replace('[', '_').replace(']', '')}".replace(
        "-", "_")
