"""The shard map, membership and the IP registry in JetStream KV, on a real 3-server cluster."""

from __future__ import annotations

import asyncio
import time
from asyncio import run

import pytest

from crawl.cluster import DevCluster
from crawl.cluster.kv import (
    Cluster,
    ClusterConfig,
    Planner,
    complete_moves,
    connect,
    ip_share,
    rendezvous,
    stream_name,
    stream_ranges,
)
from crawl.core import UsageError

# A call that takes long on a loaded 2-core box is not a failure here: these tests say
# "exactly one wins", "nothing lost", not how fast (two xdist workers share the cores).
SLOW = 60.0


async def _open(c: DevCluster, crawl: str, **cfg) -> Cluster:
    """A crawl made as ``crawl cluster init`` makes it: asked again while the just-started
    servers' JetStream has no one answering for a new stream yet."""
    cl = Cluster(await connect(c.servers_arg), crawl, timeout=SLOW)
    await cl.init_patiently(ClusterConfig(crawl=crawl, **cfg), attempts=4)
    return cl


def test_init_creates_range_streams_once_and_keeps_v(cluster3: DevCluster, crawl_name: str) -> None:
    async def go() -> None:
        cl = await _open(cluster3, crawl_name, v=64, streams=3, replicas=3)
        try:
            subjects = []
            for k in range(3):
                info = await cl.js.stream_info(stream_name(crawl_name, k))
                assert info.config.num_replicas == 3
                assert str(getattr(info.config.retention, "value", info.config.retention)) == "workqueue"
                assert info.config.duplicate_window == 120.0
                subjects += info.config.subjects
            assert sorted(subjects) == sorted(f"crawl.{crawl_name}.links.{v}" for v in range(64))
            again = Cluster(cl.nc, crawl_name, timeout=SLOW)
            assert await again.init(ClusterConfig(crawl=crawl_name, v=64)) is False
            with pytest.raises(UsageError, match="64 vshards"):
                await Cluster(cl.nc, crawl_name).init(ClusterConfig(crawl=crawl_name, v=128))
            m, _ = await cl.read_map()
            assert m == {"epoch": 0, "V": 64, "owner": {}, "moving": {}}
            with pytest.raises(UsageError, match="cluster init"):
                await Cluster(cl.nc, crawl_name + "x").open()
        finally:
            await cl.nc.close()
    run(go())


def test_map_cas_race_has_exactly_one_winner(cluster3: DevCluster, crawl_name: str) -> None:
    async def go() -> None:
        a = await _open(cluster3, crawl_name, v=16)
        b = Cluster(await connect(cluster3.urls[2]), crawl_name, timeout=SLOW)  # through another server
        await b.open()
        try:
            for rnd in range(5):
                cur, rev = await a.read_map()
                mine = {**cur, "epoch": cur["epoch"] + 1, "owner": {"0": f"a{rnd}"}}
                theirs = {**cur, "epoch": cur["epoch"] + 1, "owner": {"0": f"b{rnd}"}}
                won = await asyncio.gather(a.cas_map(mine, rev), b.cas_map(theirs, rev))
                assert sorted(won) == [False, True]
                after, rev2 = await b.read_map()
                assert after["epoch"] == cur["epoch"] + 1 and rev2 > rev
                assert after["owner"]["0"] == (f"a{rnd}" if won[0] else f"b{rnd}")
        finally:
            await a.nc.close()
            await b.nc.close()
    run(go())


def test_rendezvous_moves_only_what_it_must() -> None:
    three = {v: rendezvous(v, ["n1", "n2", "n3"]) for v in range(1024)}
    four = {v: rendezvous(v, ["n1", "n2", "n3", "n4"]) for v in range(1024)}
    moved = [v for v in range(1024) if three[v] != four[v]]
    assert all(four[v] == "n4" for v in moved)  # shards only move to the newcomer
    assert 1024 // 4 - 80 < len(moved) < 1024 // 4 + 80
    two = {v: rendezvous(v, ["n1", "n3"]) for v in range(1024)}
    assert all(two[v] == three[v] for v in range(1024) if three[v] != "n2")
    assert {len([v for v in three if three[v] == n]) > 250 for n in ("n1", "n2", "n3")} == {True}


def test_silent_node_loses_its_shards_after_ttl_and_grace(cluster3: DevCluster, crawl_name: str) -> None:
    async def go() -> None:
        cl = await _open(cluster3, crawl_name, v=32, ttl=3, grace=1.0)
        try:
            await cl.heartbeat("a", {})
            await cl.heartbeat("b", {})
            planner = Planner(cl, settle=0)
            m, _, wrote = await planner.step()
            assert wrote and set(m["owner"].values()) == {"a", "b"} and len(m["owner"]) == 32
            a_shards = {v for v, n in m["owner"].items() if n == "a"}
            assert a_shards
            # b keeps beating, a falls silent: while a's heartbeat lives, nothing moves
            await cl.heartbeat("b", {})
            assert "a" in await cl.members()
            assert (await planner.step())[2] is False
            deadline = time.monotonic() + 15
            while "a" in await cl.members():
                assert time.monotonic() < deadline, "a's heartbeat never expired"
                await cl.heartbeat("b", {})
                await asyncio.sleep(0.2)
            gone_at = time.time()
            m, _, wrote = await planner.step(now=gone_at)
            assert not wrote and {v for v, n in m["owner"].items() if n == "a"} == a_shards  # grace
            await cl.heartbeat("b", {})
            m, _, wrote = await planner.step(now=planner.absent_since["a"] + 1.01)
            assert wrote and set(m["owner"].values()) == {"b"} and m["moving"] == {}
        finally:
            await cl.nc.close()
    run(go())


def test_restarted_node_within_grace_keeps_its_shards(cluster3: DevCluster, crawl_name: str) -> None:
    async def go() -> None:
        cl = await _open(cluster3, crawl_name, v=16, ttl=60, grace=30)
        try:
            await cl.heartbeat("a", {})
            await cl.heartbeat("b", {})
            planner = Planner(cl, settle=0)
            before, _, _ = await planner.step()
            await cl.forget("a")  # a stops (its key is gone at once)
            m, _, wrote = await planner.step()
            assert not wrote and m["owner"] == before["owner"]
            await cl.heartbeat("a", {})  # back within the grace: same shards, same epoch
            m, _, wrote = await planner.step()
            assert not wrote and m["owner"] == before["owner"] and not planner.absent_since
        finally:
            await cl.nc.close()
    run(go())


def test_drain_moves_shards_through_a_handoff(cluster3: DevCluster, crawl_name: str) -> None:
    async def go() -> None:
        cl = await _open(cluster3, crawl_name, v=16)
        try:
            for n in ("a", "b"):
                await cl.heartbeat(n, {})
            planner = Planner(cl, settle=0)
            m0, _, _ = await planner.step()
            a_shards = {int(v) for v, n in m0["owner"].items() if n == "a"}
            await cl.set_drain("a")
            m1, rev, wrote = await planner.step()
            # a is alive: its shards are marked moving, not flipped (it must hand them over)
            assert wrote and m1["owner"] == m0["owner"]
            assert {int(v) for v in m1["moving"]} == a_shards and set(m1["moving"].values()) == {"b"}
            done = complete_moves(m1, "a", a_shards)
            assert await cl.cas_map(done, rev)
            m2, _, wrote = await planner.step()
            assert not wrote and set(m2["owner"].values()) == {"b"} and m2["moving"] == {}
            assert m2["epoch"] == m1["epoch"] + 1
            await cl.set_drain("a", False)
            assert await cl.leaving() == set()
        finally:
            await cl.nc.close()
    run(go())


def test_ip_registry_counts_nodes_per_ip(cluster3: DevCluster, crawl_name: str) -> None:
    async def go() -> None:
        cl = await _open(cluster3, crawl_name, v=16)
        try:
            owner = {str(v): ("a" if v < 8 else "b") for v in range(16)}
            await cl.register_ips({"127.0.0.5": {1, 2}, "::1": {3}})
            await asyncio.gather(cl.register_ips({"127.0.0.5": {9}}),
                                 cl.register_ips({"127.0.0.5": {10}}))  # racing writers both land
            reg = await cl.ip_registry()
            assert reg == {"127.0.0.5": [1, 2, 9, 10], "::1": [3]}
            assert ip_share(reg, owner) == {"127.0.0.5": 2}
        finally:
            await cl.nc.close()
    run(go())


def test_stream_ranges_cover_every_vshard_once() -> None:
    for v, s in ((1024, 3), (16, 3), (2, 5), (1, 1)):
        rs = stream_ranges(v, s)
        assert [x for r in rs for x in r] == list(range(v))
