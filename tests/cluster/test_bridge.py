"""The bridge with real processes: `crawl cluster bridge` nodes over a real 3-server cluster.

Links put into one node's outbox land in their owners' inboxes, each once;
a SIGKILL of the stream leader mid-stream loses nothing; a poison message
is set aside and counted; a node that dies loses its shards to the others
after TTL and grace, with the links that waited for it; a drain hands shards
over through the handoff spool; a bridge that cannot heartbeat fences its
node; `crawl cluster status` shows members, epoch, shards and problems.
"""

from __future__ import annotations

import asyncio
import signal
import subprocess
import sys
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import orjson
import pytest

from crawl.cluster import DevCluster, vshard_of_url
from crawl.cluster.kv import Cluster, ClusterConfig, connect, stream_name, subject
from crawl.core import Spool

CRAWL = [sys.executable, "-m", "crawl"]
SLOW = 60.0  # the test's own NATS calls: "did not hang", not speed (a loaded 2-core box)


class Nodes:
    """Bridge processes started by one test (killed by PID at its end)."""

    def __init__(self, root: Path, servers: str, crawl: str) -> None:
        self.root, self.servers, self.crawl = root, servers, crawl
        self.procs: dict[str, subprocess.Popen[bytes]] = {}
        self.auto: set[str] = set()
        self._done = threading.Event()
        threading.Thread(target=self._answer_drains, daemon=True).start()

    def _answer_drains(self) -> None:
        """Stand in for an idle crawl process: a shard to hand over has nothing queued.

        (Bridges started a second apart make the first take every shard and
        hand some over to the second; the node side's part of that handoff,
        with real queues, is tested in test_node.py.)
        """
        while not self._done.wait(0.1):
            for node in list(self.auto):
                m = self.map(node)
                done = self.root / node / "cluster" / "handoff-done.json"
                if m.get("draining") and not done.exists():
                    done.write_bytes(orjson.dumps({"vshards": m["draining"], "epoch": m["epoch"],
                                                   "count": 0}))

    def start(self, node: str, auto_handoff: bool = True) -> Path:
        if auto_handoff:
            self.auto.add(node)
        d = self.root / node
        d.mkdir(parents=True, exist_ok=True)
        log = open(d / "bridge.log", "ab")  # noqa: SIM115
        self.procs[node] = subprocess.Popen(
            [*CRAWL, "cluster", "bridge", str(d), "--servers", self.servers, "--crawl", self.crawl,
             "--node", node], stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
        log.close()
        return d

    def kill(self, node: str, sig: int = signal.SIGKILL) -> None:
        p = self.procs[node]
        if p.poll() is None:
            p.send_signal(sig)
        p.wait(timeout=20)

    def map(self, node: str) -> dict[str, Any]:
        try:
            return orjson.loads((self.root / node / "cluster" / "map.json").read_bytes())
        except (FileNotFoundError, orjson.JSONDecodeError):
            return {}

    def status(self, node: str) -> dict[str, Any]:
        try:
            return orjson.loads((self.root / node / "cluster" / "bridge-status.json").read_bytes())
        except (FileNotFoundError, orjson.JSONDecodeError):
            return {}

    def log(self, node: str) -> str:
        return (self.root / node / "bridge.log").read_text(errors="replace")

    def stop_all(self) -> None:
        self._done.set()
        for p in self.procs.values():
            if p.poll() is None:
                p.kill()
            p.wait(timeout=20)


def wait_for(pred: Callable[[], Any], timeout: float = 30.0, what: str = "condition") -> Any:
    deadline = time.monotonic() + timeout
    while True:
        got = pred()
        if got:
            return got
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.05)


def init(cluster: DevCluster, crawl: str, **cfg: Any) -> None:
    async def go() -> None:
        nc = await connect(cluster.servers_arg)
        try:
            # asked again while the servers cannot answer yet, as crawl cluster init does
            await Cluster(nc, crawl, timeout=SLOW).init_patiently(ClusterConfig(crawl=crawl, **cfg), attempts=4)
        finally:
            await nc.close()
    asyncio.run(go())


@pytest.fixture(scope="module")
def pair(cluster3: DevCluster, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Nodes]:
    """Two bridges, a and b, on one crawl of 16 vshards, shared by the tests that only add
    traffic (each looks at its own records)."""
    n = Nodes(tmp_path_factory.mktemp("pair"), cluster3.servers_arg, "pair")
    init(cluster3, "pair", v=16, ttl=3, grace=5, ip_group=3)
    n.start("a"), n.start("b")
    wait_for(formed(n, ["a", "b"], 16), what="a map that gives every shard to a or b")
    yield n
    n.stop_all()


@pytest.fixture
def nodes(cluster3: DevCluster, crawl_name: str, tmp_path: Path) -> Iterator[Nodes]:
    n = Nodes(tmp_path, cluster3.servers_arg, crawl_name)
    yield n
    n.stop_all()


def links(n: int, v: int, prefix: str = "h") -> list[dict[str, Any]]:
    out = []
    for i in range(n):
        url = f"http://{prefix}{i % 997}.test/p{i}"
        out.append({"kind": "link", "v": 1, "url": url, "vshard": vshard_of_url(url, v)})
    return out


def inbox_urls(d: Path) -> list[str]:
    with Spool(d / "cluster" / "inbox") as sp:
        return [orjson.loads(r)["url"] for r in sp.peek(claimed=True)]


def formed(nodes: Nodes, names: list[str], v: int) -> Callable[[], bool]:
    def check() -> bool:
        maps = [nodes.map(n) for n in names]
        if not all(maps) or len({m["epoch"] for m in maps}) != 1:
            return False
        owned = [set(m["owned"]) for m in maps]
        return (sum(len(o) for o in owned) == v and set().union(*owned) == set(range(v))
                and all(owned) and not any(m["draining"] for m in maps))
    return check


def test_links_cross_nodes_and_land_once_in_their_owners_inbox(pair: Nodes) -> None:
    a, b = pair.root / "a", pair.root / "b"
    ma, mb = pair.map("a"), pair.map("b")
    assert not set(ma["owned"]) & set(mb["owned"])
    recs = links(3000, 16)
    st0 = pair.status("a")
    before, msgs_before = st0.get("published", 0), st0.get("messages", 0)
    with Spool(a / "cluster" / "outbox") as sp:
        sp.put(recs)
    want_b = sorted(r["url"] for r in recs if r["vshard"] in mb["owned"])
    want_a = sorted(r["url"] for r in recs if r["vshard"] in ma["owned"])
    assert want_a and want_b
    wait_for(lambda: len(inbox_urls(b)) >= len(want_b) and len(inbox_urls(a)) >= len(want_a),
             what="every link in its owner's inbox")
    assert sorted(inbox_urls(b)) == want_b  # crossed from a to b, each once
    assert sorted(inbox_urls(a)) == want_a
    with Spool(a / "cluster" / "outbox") as sp:
        wait_for(lambda: sp.counts() == {"queued": 0, "claimed": 0}, what="outbox acked")
    st = wait_for(lambda: (s := pair.status("a")).get("published") == before + 3000 and s,
                  what="status")
    assert st["heartbeat_ok"] and not st["fenced"] and st["epoch"] == ma["epoch"]
    # one claim (the put was one transaction), one message per owner node: not one per vshard
    assert st["messages"] - msgs_before == 2
    assert wait_for(lambda: pair.status("b").get("consumed") == len(want_b), what="b consumed")
    with Spool(b / "cluster" / "inbox") as sp:  # the node side's part: admit and ack
        for batch in sp.drain():
            sp.ack(k for k, _ in batch)
    with Spool(a / "cluster" / "inbox") as sp:
        for batch in sp.drain():
            sp.ack(k for k, _ in batch)


def test_leader_sigkilled_mid_stream_loses_nothing(nodes: Nodes, cluster3: DevCluster,
                                                   crawl_name: str) -> None:
    init(cluster3, crawl_name, v=8, streams=1, ttl=6, grace=30)
    a, b = nodes.start("a"), nodes.start("b")
    wait_for(formed(nodes, ["a", "b"], 8), what="the map")
    owned_b = set(nodes.map("b")["owned"])
    recs = [r for r in links(30000, 8, "k") if r["vshard"] in owned_b][:10000]

    def produce() -> None:
        with Spool(a / "cluster" / "outbox") as sp:
            for i in range(0, len(recs), 250):
                sp.put(recs[i:i + 250])
                time.sleep(0.02)

    producer = threading.Thread(target=produce)
    producer.start()
    wait_for(lambda: len(inbox_urls(b)) >= 1000, what="the stream under way")

    async def leader() -> str:
        nc = await connect(cluster3.servers_arg)
        try:
            return (await nc.jetstream(timeout=SLOW).stream_info(stream_name(crawl_name, 0))).cluster.leader
        finally:
            await nc.close()

    name = asyncio.run(leader())
    i = [s.name for s in cluster3.servers].index(name)
    cluster3.kill(i)  # SIGKILL of the stream leader while messages flow
    time.sleep(2)
    cluster3.restart(i)
    producer.join()
    want = Counter(r["url"] for r in recs)
    wait_for(lambda: set(inbox_urls(b)) >= set(want), timeout=90, what="every link after the kill")
    got = Counter(inbox_urls(b))
    assert set(got) == set(want)  # none lost
    dupes = sum(got.values()) - len(want)
    st = wait_for(lambda: nodes.status("b") or None, what="b status")
    assert dupes <= st["redelivered"] + nodes.status("a").get("republished", 0)


def test_poison_message_is_set_aside_and_counted(pair: Nodes) -> None:
    b = pair.root / "b"
    v1, v2 = pair.map("b")["owned"][:2]
    dead0 = pair.status("b").get("dead", 0)

    async def publish() -> None:
        nc = await connect(pair.servers)
        try:
            js = nc.jetstream(timeout=SLOW)
            await js.publish(subject("pair", v1), b"{not json\n")
            await js.publish(subject("pair", v2), b'{"kind":"link","url":"http://x.test/"}')
        finally:
            await nc.close()

    asyncio.run(publish())
    wait_for(lambda: pair.status("b").get("dead") == dead0 + 1 and "http://x.test/" in inbox_urls(b),
             what="the poison counted")
    with Spool(b / "cluster" / "dead") as sp:
        dead = [orjson.loads(r) for r in sp.peek()]
    assert dead[-1]["data"] == "{not json\n" and dead[-1]["subject"] == subject("pair", v1)
    assert inbox_urls(b).count("http://x.test/") == 1
    assert "poison" in pair.log("b")
    st = wait_for(lambda: (s := pair.status("b")).get("queued_in_streams") == 0 and s,
                  what="nothing waiting")
    assert st["dead"] == dead0 + 1  # acked: not redelivered for ever


def test_dead_node_loses_its_shards_with_the_links_that_waited(nodes: Nodes, cluster3: DevCluster,
                                                               crawl_name: str) -> None:
    init(cluster3, crawl_name, v=16, ttl=2, grace=1)
    a, _ = nodes.start("a"), nodes.start("b")
    wait_for(formed(nodes, ["a", "b"], 16), what="the map")
    owned_b = set(nodes.map("b")["owned"])
    nodes.kill("b")  # SIGKILL: no goodbye, its durable consumers stay behind
    recs = [r for r in links(600, 16, "w") if r["vshard"] in owned_b]
    with Spool(a / "cluster" / "outbox") as sp:
        sp.put(recs)
    wait_for(lambda: nodes.status("a").get("published") == len(recs), what="published for b")
    assert set(nodes.map("a")["owned"]).isdisjoint(owned_b)  # b's shards wait out TTL and grace
    wait_for(lambda: set(nodes.map("a")["owned"]) == set(range(16)), timeout=20,
             what="a taking b's shards")
    wait_for(lambda: sorted(inbox_urls(a)) == sorted(r["url"] for r in recs), what="the waiting links")
    assert "took over from b" in nodes.log("a")


def test_drain_hands_shards_over_through_the_handoff_spool(nodes: Nodes, cluster3: DevCluster,
                                                           crawl_name: str) -> None:
    init(cluster3, crawl_name, v=16, ttl=3, grace=5)
    a, b = nodes.start("a"), nodes.start("b")
    wait_for(formed(nodes, ["a", "b"], 16), what="the map")
    nodes.auto.discard("a")  # from here on, a's handoff is done by hand below
    a_shards = set(nodes.map("a")["owned"])
    drain = subprocess.run([*CRAWL, "cluster", "drain", "a", "--servers", cluster3.servers_arg,
                            "--crawl", crawl_name, "--no-wait"], capture_output=True, text=True)
    assert drain.returncode == 0, drain.stderr
    m = wait_for(lambda: (m := nodes.map("a")).get("draining") and m, what="a draining")
    assert set(m["draining"]) == a_shards and not nodes.map("b")["draining"]

    async def filters() -> set[str]:
        nc = await connect(cluster3.servers_arg)
        try:
            out: set[str] = set()
            for k in range(3):
                for c in await nc.jetstream(timeout=SLOW).consumers_info(stream_name(crawl_name, k)):
                    if c.name.startswith("a_"):
                        out |= set(c.config.filter_subjects or [])
            return out
        finally:
            await nc.close()

    assert not asyncio.run(filters())  # a stopped reading its shards before announcing the drain
    # links for a's shards published meanwhile wait in the stream
    late = [r for r in links(400, 16, "late") if r["vshard"] in a_shards]
    with Spool(b / "cluster" / "outbox") as sp:
        sp.put(late)
    # the crawl process's part (N): the slice into handoff-out, then handoff-done.json
    slice_ = [{"kind": "url", "url": r["url"].replace("late", "queued"), "vshard": r["vshard"]}
              for r in late[:50]]
    with Spool(a / "cluster" / "handoff-out") as sp:
        sp.put(slice_)
    (a / "cluster" / "handoff-done.json").write_bytes(orjson.dumps(
        {"vshards": sorted(a_shards), "epoch": m["epoch"], "count": len(slice_)}))
    wait_for(lambda: set(nodes.map("b")["owned"]) == set(range(16)), what="b owning everything")
    assert nodes.map("a")["owned"] == [] and nodes.map("a")["epoch"] > m["epoch"]
    want = sorted([r["url"] for r in late] + [r["url"] for r in slice_])
    wait_for(lambda: sorted(inbox_urls(b)) == want, what="the slice and the late links at b")
    wait_for(lambda: not (a / "cluster" / "handoff-done.json").exists(), what="handoff done")
    done = subprocess.run([*CRAWL, "cluster", "drain", "a", "--servers", cluster3.servers_arg,
                           "--crawl", crawl_name, "--timeout", "10s"], capture_output=True, text=True)
    assert done.returncode == 0 and "owns no shard" in done.stdout


def placed(d: Path) -> dict[str, int]:
    """The bridge's answers in a node's placed spool: host -> vshard."""
    with Spool(d / "cluster" / "placed") as sp:
        return {r["host"]: r["vshard"] for r in map(orjson.loads, sp.peek(claimed=True))}


def host_on(vs: list[int], v: int, skip: set[str] = frozenset()) -> str:  # type: ignore[assignment]
    return next(h for h in (f"g{i}.test" for i in range(10_000)) if vshard_of_url(f"http://{h}/", v) in vs
                and h not in skip)


def test_small_ip_groups_get_one_home_large_ones_counted_shares(pair: Nodes) -> None:
    """Hosts sharing an address go to the vshard of the first one placed while the group
    is small (ip_group 3 here), each answered in its node's placed spool and known to
    every bridge (homes.json); beyond that they stay, and the address is split by count."""
    a_vs, b_vs = pair.map("a")["owned"], pair.map("b")["owned"]
    ha = host_on(a_vs, 16)
    with Spool(pair.root / "a" / "cluster" / "outbox") as sp:
        sp.put([{"kind": "ip", "host": ha, "ip": "127.0.0.9", "vshard": vshard_of_url(f"http://{ha}/", 16)},
                {"kind": "ip", "host": "hc.test", "ip": "127.0.0.10", "vshard": a_vs[0]}])
    wait_for(lambda: len(placed(pair.root / "a")) == 2, what="a's answers")
    home = placed(pair.root / "a")[ha]
    assert home == vshard_of_url(f"http://{ha}/", 16)  # the first host gives the address its home
    hb = host_on([v for v in b_vs if v != home], 16)
    hd = host_on([v for v in b_vs if v != home], 16, {hb})
    he = host_on([v for v in b_vs if v != home], 16, {hb, hd})
    for h in (hb, hd, he):  # one by one: the group's size decides
        with Spool(pair.root / "b" / "cluster" / "outbox") as sp:
            sp.put([{"kind": "ip", "host": h, "ip": "127.0.0.9", "vshard": vshard_of_url(f"http://{h}/", 16)}])
        wait_for(lambda h=h: h in placed(pair.root / "b"), what=f"b's answer for {h}")
    got = placed(pair.root / "b")
    assert (got[hb], got[hd]) == (home, home)  # re-homed: one owner for the small group
    assert got[he] == vshard_of_url(f"http://{he}/", 16)  # the fourth: the group is large, it stays
    for n in "ab":  # every bridge learns the overrides; the address is held by two nodes now
        wait_for(lambda n=n: {hb: home, hd: home}.items() <= jload(pair.root / n / "cluster" / "homes.json")
                 .get("homes", {}).items(), what=f"{n}'s homes.json")
        wait_for(lambda n=n: pair.map(n).get("ip_share") == {"127.0.0.9": 2}, what=f"{n}'s ip_share")
    for n in "ab":  # not routed as links
        with Spool(pair.root / n / "cluster" / "inbox") as sp:
            assert not [r for r in sp.peek(claimed=True) if orjson.loads(r).get("kind") == "ip"]


def jload(path: Path) -> dict[str, Any]:
    try:
        return orjson.loads(path.read_bytes())
    except (FileNotFoundError, orjson.JSONDecodeError):
        return {}


def test_status_shows_members_epoch_shards_and_problems(pair: Nodes, cluster3: DevCluster) -> None:
    cmd = [*CRAWL, "cluster", "status", "--crawl", "pair"]
    ok = subprocess.run([*cmd, "--servers", cluster3.servers_arg], capture_output=True, text=True)
    assert ok.returncode == 0, ok.stdout + ok.stderr
    epoch = pair.map("a")["epoch"]
    assert f"map: epoch {epoch}, 16 vshards" in ok.stdout
    per = {n: len(pair.map(n)["owned"]) for n in "ab"}
    for n in "ab":
        assert any(line.split()[:3] == [n, "shards", str(per[n])] for line in ok.stdout.splitlines())
    assert "no problems found" in ok.stdout
    # one server given is down: the status says which, and exits 1
    bad = subprocess.run([*cmd, "--servers", cluster3.servers_arg + ",nats://127.0.0.1:9"],
                         capture_output=True, text=True)
    assert bad.returncode == 1 and "nats://127.0.0.1:9" in bad.stdout and "UNREACHABLE" in bad.stdout
    assert "crawl: error: the cluster has 1 problem" in bad.stderr and "Traceback" not in bad.stderr


def test_status_makes_a_cluster_that_did_not_form_visible(tmp_path: Path) -> None:
    with DevCluster(tmp_path / "x", 1) as x, DevCluster(tmp_path / "y", 1) as y:
        r = subprocess.run([*CRAWL, "cluster", "status", "--crawl", "c", "--servers",
                            f"{x.servers_arg},{y.servers_arg}"], capture_output=True, text=True)
    assert r.returncode == 1 and "Traceback" not in r.stderr
    assert r.stdout.count("standalone, in no cluster") == 2


def test_bridge_fences_its_node_when_heartbeats_fail(tmp_path: Path) -> None:
    with DevCluster(tmp_path / "one", 1) as c:
        init(c, "f", v=4, ttl=2, grace=5)
        n = Nodes(tmp_path, c.servers_arg, "f")
        try:
            n.start("a")
            wait_for(formed(n, ["a"], 4), what="the map")
            assert n.map("a")["fenced"] is False and n.map("a")["fence_after"] == 1.0
            c.kill(0)  # the only server: no heartbeat can be written
            wait_for(lambda: n.map("a")["fenced"] is True, what="a fenced")
            c.restart(0)
            wait_for(lambda: n.map("a")["fenced"] is False, what="a unfenced after a heartbeat")
            assert "fenced" in n.log("a")
        finally:
            n.stop_all()



def test_a_bridge_with_no_server_to_reach_stops_on_sigterm(tmp_path: Path) -> None:
    """nats-py tries to connect for ever; a bridge given a wrong address ignored SIGTERM."""
    import socket

    # A port held bound and not listening: connections to it are refused, and no server
    # of a test running beside this one can take it meanwhile (a port only looked up as
    # free was once handed to another test's NATS cluster, and the bridge met a server).
    held = socket.socket()
    held.bind(("127.0.0.1", 0))
    port = held.getsockname()[1]
    p = subprocess.Popen([*CRAWL, "cluster", "bridge", str(tmp_path), "--servers", f"nats://127.0.0.1:{port}",
                          "--crawl", "x", "--node", "n"], stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                         stderr=subprocess.STDOUT)
    try:
        # up (its signal handlers set) and trying to connect: it made DIR/cluster
        wait_for(lambda: (tmp_path / "cluster").is_dir() or p.poll() is not None, timeout=60, what="bridge up")
        time.sleep(1)
        assert p.poll() is None
        p.send_signal(signal.SIGTERM)
        out, _ = p.communicate(timeout=60)
    finally:
        held.close()
        if p.poll() is None:
            p.kill()
            p.wait()
    assert p.returncode == 0 and b"Traceback" not in out, out[-2000:]


def test_bridges_with_no_server_stop_on_sigterm_whenever_it_comes(tmp_path: Path) -> None:
    """The same at many moments: nats-py's connect attempt is an asyncio.wait_for, which on
    Python 3.11 dropped a cancellation that came as a refused connection failed, and the
    bridge then retried for ever (2 of 25 bridges hung, SIGTERMed at random moments under
    load). Six bridges at once, each sent SIGTERM at its own moment of its retries."""
    import socket

    held = socket.socket()
    held.bind(("127.0.0.1", 0))  # bound, not listening: refused at once
    port = held.getsockname()[1]
    for i in range(6):
        (tmp_path / f"d{i}").mkdir()
    procs = [subprocess.Popen([*CRAWL, "cluster", "bridge", str(tmp_path / f"d{i}"), "--servers",
                               f"nats://127.0.0.1:{port}", "--crawl", "x", "--node", f"n{i}"],
                              stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
             for i in range(6)]
    try:
        for i, p in enumerate(procs):
            wait_for(lambda p=p, i=i: (tmp_path / f"d{i}" / "cluster").is_dir() or p.poll() is not None,
                     timeout=60, what=f"bridge {i} up")
        for i, p in enumerate(procs):
            time.sleep(0.05 + 0.13 * i)  # spread over its 0.5 s back-off and its attempts
            assert p.poll() is None
            p.send_signal(signal.SIGTERM)
        outs = [p.communicate(timeout=60)[0] for p in procs]
    finally:
        held.close()
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()
    assert [p.returncode for p in procs] == [0] * 6
    assert not any(b"Traceback" in out for out in outs)


# -- the outbox window, slices on carriers, placement in one round --------------------------

def start_windowed(nodes: Nodes, node: str, window: float) -> subprocess.Popen[bytes]:
    """A bridge process with an outbox window of ``window`` seconds (the command has none)."""
    d = nodes.root / node
    d.mkdir(parents=True, exist_ok=True)
    code = ("import sys; from crawl.cluster.bridge import run_bridge; "
            "sys.exit(run_bridge(sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4], out_window=float(sys.argv[5])))")
    log = open(d / "bridge.log", "ab")  # noqa: SIM115
    p = subprocess.Popen([sys.executable, "-c", code, nodes.servers, nodes.crawl, node, str(d), str(window)],
                         stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
    log.close()
    nodes.procs[node] = p
    nodes.auto.add(node)
    return p


def spool_counts(path: Path) -> dict[str, int]:
    with Spool(path) as sp:
        return sp.counts()


def test_links_wait_for_the_window_ip_reports_do_not_and_a_sigkill_while_held_loses_nothing(
        nodes: Nodes, cluster3: DevCluster, crawl_name: str) -> None:
    """Links are held (claimed, unpublished) until the window ends; an address report in
    the same outbox is answered at once; a bridge SIGKILLed while it holds links leaves
    them claimed by a dead process, and its successor publishes them: each lands once."""
    init(cluster3, crawl_name, v=16, ttl=3, grace=5, expect=2)
    start_windowed(nodes, "a", 3600.0)
    b = nodes.start("b")
    wait_for(formed(nodes, ["a", "b"], 16), what="the map")
    a = nodes.root / "a"
    owned_b = set(nodes.map("b")["owned"])
    recs = [r for r in links(900, 16, "held") if r["vshard"] in owned_b][:300]
    host = host_on(nodes.map("a")["owned"], 16)
    with Spool(a / "cluster" / "outbox") as sp:
        sp.put([*recs, {"kind": "ip", "host": host, "ip": "127.0.0.77", "vshard": vshard_of_url(f"http://{host}/", 16)}])
    wait_for(lambda: host in placed(a), what="the address answered within the window")
    wait_for(lambda: spool_counts(a / "cluster" / "outbox") == {"queued": 0, "claimed": len(recs)},
             what="the links claimed and held")
    time.sleep(1.0)
    assert inbox_urls(b) == []  # held for the window: nothing published
    nodes.kill("a")  # SIGKILL while holding them
    nodes.start("a")  # the successor (default window) finds the dead process's claims
    want = sorted(r["url"] for r in recs)
    wait_for(lambda: len(inbox_urls(b)) >= len(want), timeout=60, what="the held links at b")
    assert sorted(inbox_urls(b)) == want  # none lost, each once
    wait_for(lambda: spool_counts(a / "cluster" / "outbox") == {"queued": 0, "claimed": 0}, what="outbox acked")


def test_a_clean_stop_publishes_the_links_held_for_the_window(nodes: Nodes, cluster3: DevCluster,
                                                              crawl_name: str) -> None:
    init(cluster3, crawl_name, v=16, ttl=3, grace=5, expect=2)
    pa = start_windowed(nodes, "a", 3600.0)
    b = nodes.start("b")
    wait_for(formed(nodes, ["a", "b"], 16), what="the map")
    a = nodes.root / "a"
    owned_b = set(nodes.map("b")["owned"])
    recs = [r for r in links(400, 16, "flush") if r["vshard"] in owned_b][:100]
    with Spool(a / "cluster" / "outbox") as sp:
        sp.put(recs)
    wait_for(lambda: spool_counts(a / "cluster" / "outbox")["claimed"] == len(recs), what="held")
    pa.send_signal(signal.SIGTERM)
    assert pa.wait(timeout=60) == 0
    wait_for(lambda: sorted(inbox_urls(b)) == sorted(r["url"] for r in recs), what="the held links at b")
    assert spool_counts(a / "cluster" / "outbox") == {"queued": 0, "claimed": 0}


def test_slices_ride_with_links_and_a_stray_slice_is_forwarded_to_its_owner(pair: Nodes) -> None:
    """A re-homed host's records (state, done URLs, queued URLs) go in the owner's one
    message with the links; one that reaches a node by another shard's subject after the
    map changed is passed on by the bridge, never written into that node's inbox."""
    a, b = pair.root / "a", pair.root / "b"
    for d in (a, b):  # what earlier tests left in the inboxes
        with Spool(d / "cluster" / "inbox") as sp:
            for batch in sp.drain():
                sp.ack(k for k, _ in batch)
    va, vb = pair.map("a")["owned"], pair.map("b")["owned"]
    hb = host_on(vb, 16, {"g0.test"})
    v = vshard_of_url(f"http://{hb}/", 16)
    slice_ = [{"kind": "host", "host": hb, "vshard": v, "next": 0},
              {"kind": "seen", "host": hb, "vshard": v, "fps": ["00ff"]},
              {"kind": "url", "url": f"http://{hb}/queued", "vshard": v, "handoff": True}]
    plain = [r for r in links(200, 16, "ride") if r["vshard"] in vb][:40]
    msgs0 = pair.status("a").get("messages", 0)
    pub0 = pair.status("a").get("published", 0)
    with Spool(a / "cluster" / "outbox") as sp:
        sp.put([*plain, *slice_])

    def landed() -> list[dict[str, Any]]:
        with Spool(b / "cluster" / "inbox") as sp:
            return [orjson.loads(r) for r in sp.peek(claimed=True)]

    wait_for(lambda: len(landed()) >= len(plain) + 3, what="links and slice at b")
    got = landed()
    assert [r for r in got if r.get("kind") in ("host", "seen") or r.get("handoff")] == slice_
    st = wait_for(lambda: (s := pair.status("a")).get("published") == pub0 + len(plain) + 3 and s, what="status")
    assert st["messages"] - msgs0 == 1  # one message to the one owner
    # a slice record for a's shard arriving on one of b's subjects (published before a map change)
    stray = {"kind": "host", "host": host_on(va, 16), "vshard": va[0], "next": 0}
    fwd0 = pair.status("b").get("forwarded", 0)

    async def publish() -> None:
        nc = await connect(pair.servers)
        try:
            await nc.jetstream(timeout=SLOW).publish(subject("pair", vb[0]), orjson.dumps(stray))
        finally:
            await nc.close()

    asyncio.run(publish())

    def at_a() -> bool:
        with Spool(a / "cluster" / "inbox") as sp:
            return stray in [orjson.loads(r) for r in sp.peek(claimed=True)]

    wait_for(at_a, what="the stray slice record at its owner")
    assert stray not in landed()
    wait_for(lambda: pair.status("b").get("forwarded", 0) == fwd0 + 1, what="counted as forwarded")
    for d in (a, b):
        with Spool(d / "cluster" / "inbox") as sp:
            for batch in sp.drain():
                sp.ack(k for k, _ in batch)


def test_one_batch_of_new_hosts_on_an_address_fills_its_small_group_once(pair: Nodes) -> None:
    """Placement asks KV once per address per batch (the home, the group's size) and counts
    the batch's own hosts as they join: of five new hosts in one outbox batch, the first
    gives the home and only two more join (ip_group 3); the rest stay on their own shards."""
    names = (f"batch{i}.test" for i in range(10_000))  # hosts no other test placed
    v0 = next(names)
    home = vshard_of_url(f"http://{v0}/", 16)
    others = [h for h in names if vshard_of_url(f"http://{h}/", 16) != home][:4]
    hosts = [v0, *others]
    with Spool(pair.root / "a" / "cluster" / "outbox") as sp:
        sp.put([{"kind": "ip", "host": h, "ip": "127.0.0.55", "vshard": vshard_of_url(f"http://{h}/", 16)}
                for h in hosts])
    got = wait_for(lambda: (p := placed(pair.root / "a")) and all(h in p for h in hosts) and p, what="answers")
    assert got[v0] == home
    assert [got[h] == home for h in others] == [True, True, False, False]
    assert all(got[h] == vshard_of_url(f"http://{h}/", 16) for h in others[2:])


def test_a_member_that_leaves_does_not_restart_the_idle_wait(tmp_path: Path) -> None:
    """The first node to judge the crawl over exits and its key expires a TTL later;
    a node whose judgement lags must still finish, not wait again from the start
    (then the grace ran out, it took over the leaver's shards and never ended). A
    member that joins, or whose totals move, does start the wait again."""
    from crawl.cluster.bridge import PLAN_QUIET, Bridge

    b = Bridge("nats://127.0.0.1:1", "t", "c1", tmp_path)  # the rule alone: nothing is dialled
    b.cfg = ClusterConfig(crawl="t", v=4, ttl=4.0)
    b.map = {"owner": {str(v): "c1" for v in range(4)}}
    wait = max(5.0, b.cfg.ttl) + PLAN_QUIET
    three = {n: {"idle": True, "published": 5, "consumed": 5} for n in ("c1", "c2", "c3")}
    assert b._judge_idle(three, 0) is False  # the wait starts
    started = b._idle_since
    b._idle_since = started - wait + 1.0  # most of it has passed
    two = {n: three[n] for n in ("c1", "c2")}
    assert b._judge_idle(two, 0) is False  # c3 left: not over yet, but the wait goes on
    b._idle_since -= 1.0
    assert b._judge_idle(two, 0) is True  # and it ends when it was due
    # a member that joins, or totals that move, start the wait again
    b._idle_sig, b._idle_since = None, 0.0
    assert b._judge_idle(two, 0) is False
    b._idle_since -= wait
    assert b._judge_idle(three, 0) is False  # c3 joined
    b._idle_since -= wait
    moved = {**three, "c2": {"idle": True, "published": 6, "consumed": 5}}
    assert b._judge_idle(moved, 0) is False
    b._idle_since -= wait
    assert b._judge_idle(moved, 0) is True
    assert b._judge_idle({**moved, "c1": {"idle": False, "published": 6, "consumed": 5}}, 0) is False
