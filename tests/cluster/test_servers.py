"""The dev cluster: real nats-server processes, free ports, health waits, stop by PID."""

from __future__ import annotations

import asyncio
import json
import os
import time
from asyncio import run

import pytest
from nats import errors
from nats.js import errors as js_errors

from crawl.cluster import DevCluster, stop_recorded
from crawl.cluster.kv import connect
from crawl.core import CrawlError, pid_alive


def test_three_servers_form_one_cluster_with_fsync_always(cluster3: DevCluster) -> None:
    conf = (cluster3.servers[0].dir / "nats.conf").read_text()
    assert "sync_interval: always" in conf
    ports = {p for s in cluster3.servers for p in (s.port, s.cluster_port, s.http_port)}
    assert len(ports) == 9
    for s in cluster3.servers:
        assert s.healthz()[0] == 200
    recorded = json.loads((cluster3.root / "servers.json").read_text())
    assert [s["pid"] for s in recorded["servers"]] == [s.pid for s in cluster3.servers]

    async def replicated() -> tuple[int, list[str]]:
        from nats.js import api
        nc = await connect(cluster3.servers_arg)
        try:
            js = nc.jetstream()
            info = await js.add_stream(name="FORMED", subjects=["formed.x"], num_replicas=3,
                                       storage=api.StorageType.FILE)
            # a new R3 stream answers once its leader is elected: until then a publish
            # finds no responder (seen when the other worker loaded the machine)
            deadline = time.monotonic() + 60
            while True:
                try:
                    await js.publish("formed.x", b"1")
                    break
                except (errors.NoRespondersError, errors.TimeoutError, js_errors.NoStreamResponseError):
                    if time.monotonic() > deadline:
                        raise
                    await asyncio.sleep(0.5)
            info = await js.stream_info("FORMED")
            peers = [info.cluster.leader] + [r.name for r in info.cluster.replicas or []]
            await js.delete_stream("FORMED")
            return info.state.messages, sorted(peers)
        finally:
            await nc.close()

    msgs, peers = run(replicated())
    assert msgs == 1
    assert peers == ["n1", "n2", "n3"]  # an R3 stream placed on all three: the cluster formed


def test_kill_and_restart_waits_for_health(cluster3: DevCluster) -> None:
    old = cluster3.servers[2].pid
    cluster3.kill(2)
    assert not cluster3.servers[2].alive()
    assert cluster3.servers[2].healthz()[0] == 0
    cluster3.restart(2)
    assert cluster3.servers[2].pid != old
    assert cluster3.servers[2].healthz()[0] == 200


def test_single_server_has_no_routes(tmp_path) -> None:
    with DevCluster(tmp_path, 1) as c:
        conf = (c.servers[0].dir / "nats.conf").read_text()
        assert "cluster {" not in conf and "jetstream {" in conf
        assert c.servers[0].healthz()[0] == 200
    assert not c.servers[0].alive()


def test_stop_recorded_ends_only_its_servers(tmp_path) -> None:
    c = DevCluster(tmp_path / "d", 1).start()
    pid = c.servers[0].pid
    # a stale record for a PID that is not a nats-server of this dir is left alone
    data = json.loads((tmp_path / "d" / "servers.json").read_text())
    data["servers"].append({"name": "x", "pid": os.getpid(), "dir": str(tmp_path / "nope")})
    (tmp_path / "d" / "servers.json").write_text(json.dumps(data))
    assert stop_recorded(tmp_path / "d") == 1
    c.servers[0].proc.wait(timeout=10)
    assert not pid_alive(pid) or c.servers[0].proc.returncode is not None
    with pytest.raises(CrawlError, match="no dev cluster"):
        stop_recorded(tmp_path / "empty")


def test_a_server_that_cannot_start_is_one_error(tmp_path) -> None:
    c = DevCluster(tmp_path, 1)
    c._plan()
    busy = c.servers[0]
    import socket
    hold = socket.socket()
    hold.bind(("127.0.0.1", 0))
    hold.listen()
    try:
        c._plan = lambda: None  # keep the plan, with the client port taken
        busy.port = hold.getsockname()[1]
        with pytest.raises(CrawlError, match="exited at start|not healthy"):
            c.start(timeout=10)
    finally:
        hold.close()
    assert not busy.alive()
