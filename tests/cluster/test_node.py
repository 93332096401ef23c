"""A shared crawl's node side at the spool level: no NATS, two real crawl directories.

Each directory gets a hand-made ``cluster/map.json`` (what the bridge would
write) and the test plays the bridge by moving records from one node's
outbox or handoff spool into the other's inbox. What is checked: links go
to the outbox of the right shard and nowhere else, the inbox is admitted
(and admitting it twice changes nothing), the frontier leases only what
the map allows, and a handoff moves a shard's URLs, politeness state and
done URLs with nothing lost and nothing leased twice.
"""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import orjson
import pytest

from crawl.canon import host_key
from crawl.cluster import HANDOFF_DONE, ShardMap, cluster_dir, vshard
from crawl.core import CrawlDir, Spool, records, replace_file
from crawl.frontier import Politeness
from crawl.run import Crawl, RunOptions, Scope

V = 8
A_SHARDS, B_SHARDS = [0, 1, 2, 3], [4, 5, 6, 7]


def hosts_of(shards: list[int], n: int) -> list[str]:
    out, i = [], 0
    while len(out) < n:
        name = f"h{i}.test"
        if vshard(name, V) in shards:
            out.append(name)
        i += 1
    return out


def write_map(d: Path, node: str, owned: list[int], epoch: int = 1, **extra: Any) -> None:
    owner = {str(s): "a" if s in A_SHARDS else "b" for s in range(V)}
    owner.update({str(s): node for s in owned})
    data = orjson.dumps({"crawl": "t", "node": node, "epoch": epoch, "V": V, "owned": sorted(owned),
                         "owner": owner, "fenced": False, "draining": [], "ts": time.time(), **extra})
    cluster_dir(d).mkdir(parents=True, exist_ok=True)
    replace_file(cluster_dir(d) / "map.json", lambda f: f.write(data))


def open_node(d: Path) -> Crawl:
    opts = RunOptions(scope=Scope("any"), politeness=Politeness(default_delay=1.0),
                      cluster="nats://127.0.0.1:4222", cluster_crawl="t")
    c = Crawl(CrawlDir(d), opts)
    assert c.node is not None
    c.node.map.hold = 0.0  # (the hold has its own test)
    return c


def link(url: str) -> dict[str, Any]:
    return records.make("link", url=url, depth=1)


def spool(d: Path, name: str) -> Spool:
    return Spool(cluster_dir(d) / name)


def queued(sp: Spool) -> list[dict[str, Any]]:
    return [orjson.loads(x) for x in sp.peek()]


def play_bridge(src: Spool, dst: Spool, owned: list[int]) -> int:
    """What the bridges do between two nodes: every record of src for a shard dst owns
    reaches dst's inbox (then src acks). Returns how many moved."""
    n = 0
    for batch in src.drain(100):
        recs = [orjson.loads(x) for _, x in batch]
        assert all(r["vshard"] in owned for r in recs if r["kind"] != "ip")
        n += dst.put([r for r in recs if r["kind"] != "ip"])
        src.ack(k for k, _ in batch)
    return n


def lease_all(c: Crawl, now: float) -> list[dict[str, Any]]:
    """Lease and complete (clock jumping to the next due time) until nothing more is
    leased for a while; the leases taken."""
    out: list[dict[str, Any]] = []
    t, idle = now, 0
    while idle < 5:
        c.node.refresh()
        got = c.frontier.next(100, 30.0, t)
        out += got
        c.frontier.complete([{"kind": "fetch", "v": 1, "url": x["url"], "lease": x["lease"], "outcome": "ok",
                              "status": 200} for x in got], t)
        idle = 0 if got else idle + 1
        due = c.frontier.next_due(t)
        if due is None:
            break
        t = max(t + 1.0, due + 0.01)
    return out


@pytest.fixture
def two(tmp_path: Path) -> Any:
    a, b = open_node(tmp_path / "a"), open_node(tmp_path / "b")
    write_map(tmp_path / "a", "a", A_SHARDS)
    write_map(tmp_path / "b", "b", B_SHARDS)
    a.node.refresh()
    b.node.refresh()
    yield a, b
    a.close()
    b.close()


def test_links_go_to_their_owner_and_the_inbox_is_admitted_once(two: Any, tmp_path: Path) -> None:
    a, b = two
    mine, theirs = hosts_of(A_SHARDS, 10), hosts_of(B_SHARDS, 10)
    links = [link(f"http://{h}/p{j}") for h in mine + theirs for j in range(3)]
    counts = a.admit(links, time.time())
    assert counts["routed"] == 30 and counts["added"] == 30
    assert a.frontier.pending()["queued"] == 30
    out = queued(a.node.outbox)
    assert sorted(r["url"] for r in out) == sorted(x["url"] for x in links[30:])
    assert all(r["vshard"] == vshard(host_key(r["url"]), V) and r["vshard"] in B_SHARDS for r in out)
    # a's seen set holds only its own hosts' URLs: b decides about b's
    assert a.seen.contains_fps([int(r["fp"], 16) for r in out]) == [False] * 30
    inbox = spool(tmp_path / "b", "inbox")
    assert play_bridge(a.node.outbox, inbox, B_SHARDS) == 30
    again = [orjson.loads(x) for x in inbox.peek()]
    assert b.process_one_batch() == 30  # the inbox counts as work for the parse side
    assert b.frontier.pending()["queued"] == 30
    assert inbox.counts() == {"queued": 0, "claimed": 0}
    inbox.put(again)  # redelivered (a bridge that died before its ack): nothing new
    assert b.process_one_batch() == 30
    assert b.frontier.pending()["queued"] == 30 and b.node.counts["inbox/urls"] == 60
    # a late delivery of a shard b does not own is forwarded, never stranded
    inbox.put([{**link(f"http://{mine[0]}/late"), "vshard": vshard(mine[0], V)}])
    b.process_one_batch()
    assert [r["url"] for r in queued(b.node.outbox)] == [f"http://{mine[0]}/late"]
    assert {x["url"] for x in lease_all(b, time.time())} == {x["url"] for x in links[30:]}


def test_lease_filter_follows_the_map(two: Any, tmp_path: Path) -> None:
    a, _ = two
    mine, theirs = hosts_of(A_SHARDS, 8), hosts_of(B_SHARDS, 4)
    # strays: a's frontier holds hosts of b's shards (added behind the router's back)
    a.frontier.add([records.make("url", url=f"http://{h}/") for h in mine + theirs], time.time())
    leased = {x["host"] for x in a.frontier.next(100, 30.0, time.time())}
    assert leased == set(mine)
    a.frontier.complete([], time.time())
    d = tmp_path / "a"
    for extra in ({"fenced": True}, {"ts": time.time() - 60, "fence_after": 5.0}):
        write_map(d, "a", A_SHARDS, epoch=2, **extra)
        a.frontier.add([records.make("url", url=f"http://{h}/2") for h in mine], time.time())
        a.node.refresh()
        assert a.frontier.next(100, 30.0, time.time() + 100) == []  # fenced: nothing at all
    shard = vshard(mine[0], V)
    write_map(d, "a", A_SHARDS, epoch=3, draining=[shard])
    a.node.refresh()
    got = {x["host"] for x in a.frontier.next(100, 30.0, time.time() + 200)}
    assert got and all(vshard(h, V) in A_SHARDS and vshard(h, V) != shard for h in got)


def test_a_gained_shard_is_held_for_a_while(tmp_path: Path) -> None:
    d = tmp_path / "n"
    write_map(d, "a", A_SHARDS)
    m = ShardMap(d, hold=60.0)
    assert m.local == frozenset(A_SHARDS) and m.leasable == frozenset()  # at start: all held
    m0 = ShardMap(d)
    assert m0.leasable == frozenset(A_SHARDS)
    write_map(d, "a", A_SHARDS + [4], epoch=2)
    m0.hold = 60.0
    assert m0.refresh()
    assert m0.leasable == frozenset(A_SHARDS)  # the new shard waits, the others go on


def test_handoff_moves_a_shard_with_nothing_lost_or_leased_twice(two: Any, tmp_path: Path) -> None:
    a, b = two
    da, db = tmp_path / "a", tmp_path / "b"
    shard = A_SHARDS[0]
    moving = hosts_of([shard], 4)
    staying = [h for h in hosts_of(A_SHARDS, 12) if vshard(h, V) != shard][:4]
    urls = [f"http://{h}/p{j}" for h in moving + staying for j in range(4)]
    now = time.time()
    a.admit([link(u) for u in urls], now)
    first = a.frontier.next(100, 30.0, now)  # one lease per host
    by_host = {x["host"]: x for x in first}
    busy = moving[0]
    done_now = [x for h, x in by_host.items() if h != busy]
    a.frontier.complete([{"kind": "fetch", "v": 1, "url": x["url"], "lease": x["lease"], "outcome": "ok",
                          "status": 200} for x in done_now], now + 0.5)
    write_map(da, "a", A_SHARDS, epoch=2, draining=[shard])
    a.node.refresh()
    got = a.node.handoff(now + 1)
    assert got is not None and got["busy"] == [busy]  # its fetch is still in flight
    assert not (cluster_dir(da) / HANDOFF_DONE).exists()
    others = a.frontier.next(100, 30.0, now + 10)  # (the busy lease has not expired)
    assert others and not {x["host"] for x in others} & set(moving)  # draining: no new lease of it
    a.frontier.complete([{"kind": "fetch", "v": 1, "url": x["url"], "lease": x["lease"], "outcome": "ok",
                          "status": 200} for x in others], now + 10)
    first += others
    lease = by_host[busy]
    a.frontier.complete([{"kind": "fetch", "v": 1, "url": lease["url"], "lease": lease["lease"],
                          "outcome": "ok", "status": 200}], now + 2)
    got = a.node.handoff(now + 3)
    assert got is not None and got["busy"] == []
    done = orjson.loads((cluster_dir(da) / HANDOFF_DONE).read_bytes())
    out = queued(a.node.handoff_out)
    assert done["vshards"] == [shard] and done["epoch"] == 2 and done["count"] == len(out)
    assert all(r["vshard"] == shard for r in out)
    moved = {r["url"] for r in out if r["kind"] == "url"}
    assert len(moved) == 4 * 3  # each moving host: 4 URLs, one fetched here
    hosts = {r["host"]: r for r in out if r["kind"] == "host"}
    assert set(hosts) == set(moving)
    assert a.node.handoff(now + 4) is None  # this set is handed off: once
    (cluster_dir(da) / HANDOFF_DONE).unlink()  # the bridge took it, then died before moving the shard
    assert a.node.handoff(time.time() + 30) is None and queued(a.node.handoff_out) == out  # not exported again
    assert orjson.loads((cluster_dir(da) / HANDOFF_DONE).read_bytes())["vshards"] == [shard]  # but said again
    # the map moves the shard to b; b's bridge writes the slice into b's inbox
    write_map(da, "a", A_SHARDS[1:], epoch=3)
    write_map(db, "b", B_SHARDS + [shard], epoch=3)
    a.node.refresh()
    b.node.refresh()
    assert play_bridge(a.node.handoff_out, spool(db, "inbox"), B_SHARDS + [shard]) == len(out)
    while b.process_one_batch():
        pass
    assert b.frontier.pending()["queued"] == len(moved)
    fetched_at_a = {x["url"] for x in first if x["host"] in moving}
    assert b.seen.contains_fps([int(r["fps"][0], 16) for r in out if r["kind"] == "seen"]) == [True] * 4
    # a link to an already fetched page of a moved host, arriving at b, is known there
    assert b.admit([link(sorted(fetched_at_a)[0])], time.time())["added"] == 0
    # politeness state came along: b does not ask a moved host sooner than a would have
    for h in moving:
        assert b.frontier.dump(h, time.time())["next_allowed"] >= hosts[h]["next_allowed"]
    at_b = {x["url"] for x in lease_all(b, time.time() + 5)}
    at_a = {x["url"] for x in first} | {x["url"] for x in lease_all(a, time.time() + 5)}
    assert at_b == moved
    assert not at_a & at_b  # nothing leased on both nodes
    assert at_a | at_b == set(urls)  # nothing lost
    assert a.node.sweep() is not None and not queued(a.node.outbox)  # nothing stray left at a


def test_strays_are_swept_to_their_owner_and_ips_reported(two: Any, tmp_path: Path) -> None:
    a, _ = two
    theirs = hosts_of(B_SHARDS, 3)
    a.frontier.add([records.make("url", url=f"http://{h}/x") for h in theirs], time.time())
    got = a.node.sweep()
    assert got is not None and got["urls"] == 3
    out = queued(a.node.outbox)
    assert sorted(r["url"] for r in out if r["kind"] == "url") == sorted(f"http://{h}/x" for h in theirs)
    assert all(r["vshard"] in B_SHARDS for r in out)
    assert a.frontier.pending()["queued"] == 0
    assert a.node.sweep() is None  # once per epoch...
    a.frontier.add([records.make("url", url=f"http://{theirs[0]}/recrawled")], time.time())
    got = a.node.sweep(time.time() + 61)  # ...and once a minute
    assert got is not None and got["urls"] == 1
    a.node.saw([{"host": "h1.test", "ip": "127.0.1.1"}, {"host": "h1.test", "ip": "127.0.1.1"}])
    ips = [r for r in queued(a.node.outbox) if r["kind"] == "ip"]
    assert [(r["host"], r["ip"], r["vshard"]) for r in ips] == [("h1.test", "127.0.1.1", vshard("h1.test", V))]
    write_map(tmp_path / "a", "a", A_SHARDS, epoch=5, ip_share={"127.0.1.1": 2})
    a.node.refresh()
    assert a.frontier.ip_share == {"127.0.1.1": 2}


@pytest.mark.parametrize("args, says", [
    (["--cluster", "localhost:4222", "--crawl", "t"], "nats://host:port"),
    (["--cluster", "nats://127.0.0.1:4222"], "--crawl NAME"),
    (["--cluster", "nats://127.0.0.1:4222", "--crawl", "a.b"], "letters, digits"),
    (["--node", "x"], "--cluster URLS"),
])
def test_run_cluster_flags_are_checked(tmp_path: Path, args: list[str], says: str) -> None:
    res = subprocess.run([sys.executable, "-m", "crawl", "run", "--dir", str(tmp_path / "d"), *args,
                          "http://a.test/"], capture_output=True, text=True, timeout=60)
    assert res.returncode == 2 and "Traceback" not in res.stderr
    assert res.stderr.startswith("crawl: error:") and says in res.stderr
    assert not (tmp_path / "d").exists()


def test_frontier_add_cluster_routes_every_url_to_its_owner(tmp_path: Path) -> None:
    d = tmp_path / "a"
    write_map(d, "a", A_SHARDS)
    urls = [f"http://{h}/s" for h in hosts_of(A_SHARDS, 3) + hosts_of(B_SHARDS, 3)]
    res = subprocess.run([sys.executable, "-m", "crawl", "frontier", "add", "--dir", str(d), "--cluster"],
                         input="\n".join(urls + ["http://a.test:99999/"]) + "\n", capture_output=True, text=True,
                         timeout=60)
    assert res.returncode == 0, res.stderr
    assert "rejected 'http://a.test:99999/'" in res.stderr
    out = queued(spool(d, "outbox"))
    # its own shards too: the owner's run admits them through its seen set
    assert sorted(r["url"] for r in out) == sorted(urls)
    assert all(r["vshard"] == vshard(host_key(r["url"]), V) for r in out)
    assert not (d / "frontier").exists()


def test_stats_shows_the_node_in_its_cluster(tmp_path: Path) -> None:
    d = tmp_path / "a"
    write_map(d, "a", A_SHARDS, epoch=4, draining=[A_SHARDS[0]])
    status = {"ts": time.time() + 600, "published": 12,  # (fresh however slowly stats starts)
              "consumed": 7, "lag": {"1": 3, "2": 1},
              "outbox": {"queued": 2, "claimed": 0}, "inbox": {"queued": 0, "claimed": 0}, "cluster_idle": False}
    (cluster_dir(d) / "bridge-status.json").write_bytes(orjson.dumps(status))
    res = subprocess.run([sys.executable, "-m", "crawl", "stats", "--dir", str(d), "--json"],
                         capture_output=True, text=True, timeout=60)
    assert res.returncode == 0, res.stderr
    c = orjson.loads(res.stdout)["cluster"]
    assert (c["node"], c["epoch"], c["shards_owned"], c["shards"], c["shards_draining"]) == ("a", 4, 4, V, 1)
    assert (c["lag"], c["published"], c["consumed"], c["outbox"], c["bridge_running"]) == (4, 12, 7, 2, True)
    res = subprocess.run([sys.executable, "-m", "crawl", "stats", "--dir", str(d)], capture_output=True, text=True,
                         timeout=60)
    assert "shards owned" in res.stdout and "bridge running" in res.stdout
    (tmp_path / "plain").mkdir()
    res = subprocess.run([sys.executable, "-m", "crawl", "stats", "--dir", str(tmp_path / "plain"), "--json"],
                         capture_output=True, text=True, timeout=60)
    assert "cluster" not in orjson.loads(res.stdout)


def test_a_shard_that_comes_back_brings_its_queued_urls(two: Any, tmp_path: Path) -> None:
    """a owned the shard first (its seen set knows the URLs), handed it to b, and gets it
    back from b: the URLs b still had queued must be queued at a again, not dropped as seen."""
    a, b = two
    da, db = tmp_path / "a", tmp_path / "b"
    shard = A_SHARDS[1]
    urls = [f"http://{h}/q{j}" for h in hosts_of([shard], 3) for j in range(3)]
    a.admit([link(u) for u in urls], time.time())
    write_map(da, "a", A_SHARDS, epoch=2, draining=[shard])
    a.node.refresh()
    a.node.handoff()
    write_map(da, "a", [s for s in A_SHARDS if s != shard], epoch=3)
    write_map(db, "b", B_SHARDS + [shard], epoch=3)
    a.node.refresh()
    b.node.refresh()
    play_bridge(a.node.handoff_out, spool(db, "inbox"), B_SHARDS + [shard])
    while b.process_one_batch():
        pass
    assert b.frontier.pending()["queued"] == len(urls)
    write_map(db, "b", B_SHARDS + [shard], epoch=4, draining=[shard])  # and back again
    b.node.refresh()
    b.node.handoff()
    write_map(db, "b", B_SHARDS, epoch=5)
    write_map(da, "a", A_SHARDS, epoch=5)
    a.node.refresh()
    b.node.refresh()
    play_bridge(b.node.handoff_out, spool(da, "inbox"), A_SHARDS)
    while a.process_one_batch():
        pass
    assert a.frontier.pending()["queued"] == len(urls)
    assert {x["url"] for x in lease_all(a, time.time() + 5)} == set(urls)


def test_a_link_that_overtakes_the_slice_does_not_fetch_a_done_page_again(two: Any, tmp_path: Path) -> None:
    """The drain bug of issue 20: links for a draining shard wait in the stream (its old
    owner stopped reading them) and reach the new owner BEFORE the slice whose ``seen``
    record says which pages are done: the seen set there does not know them yet. The
    slice's done URLs must win whatever came first: nothing the old owner fetched is
    fetched again by the new one."""
    a, b = two
    da, db = tmp_path / "a", tmp_path / "b"
    shard = A_SHARDS[2]
    moving = hosts_of([shard], 3)
    urls = [f"http://{h}/r{j}" for h in moving for j in range(3)]
    now = time.time()
    a.admit([link(u) for u in urls], now)
    first = a.frontier.next(100, 30.0, now)  # one page of each host, fetched at a
    a.frontier.complete([{"kind": "fetch", "v": 1, "url": x["url"], "lease": x["lease"], "outcome": "ok",
                          "status": 200} for x in first], now + 0.5)
    done_at_a = {x["url"] for x in first}
    assert len(done_at_a) == len(moving)
    write_map(da, "a", A_SHARDS, epoch=2, draining=[shard])
    a.node.refresh()
    # a page of a, parsed while the shard drains, links to pages a has done: they go out
    # as links (a no longer admits the shard), ahead of the slice
    assert a.admit([link(u) for u in sorted(done_at_a)], now + 1)["routed"] == len(done_at_a)
    a.node.handoff(now + 2)
    write_map(da, "a", [s for s in A_SHARDS if s != shard], epoch=3)
    write_map(db, "b", B_SHARDS + [shard], epoch=3)
    a.node.refresh()
    b.node.refresh()
    assert play_bridge(a.node.outbox, spool(db, "inbox"), B_SHARDS + [shard]) == len(done_at_a)
    while b.process_one_batch():  # the links first, alone: b's seen set knows nothing of them
        pass
    assert b.frontier.pending()["queued"] == len(done_at_a)
    play_bridge(a.node.handoff_out, spool(db, "inbox"), B_SHARDS + [shard])
    while b.process_one_batch():
        pass
    assert b.frontier.pending()["queued"] == len(urls) - len(done_at_a)  # the done ones left b's queues
    at_b = {x["url"] for x in lease_all(b, time.time() + 5)}
    assert at_b == set(urls) - done_at_a  # nothing fetched twice, nothing lost
    assert b.admit([link(u) for u in sorted(done_at_a)], time.time())["added"] == 0  # and known for later


def test_a_host_is_held_until_placed_then_moves_whole_to_its_home(two: Any, tmp_path: Path) -> None:
    """Small per-IP groups under one owner, the node's part: a host whose address a
    fetch has just taught is leased no more until the bridge places it; placed on its
    own shard it goes on here; re-homed to a vshard of b it leaves whole (state,
    queued URLs) with the override on every record, and b, told by the records
    alone, admits, leases and routes it as its own; a routes later links to b."""
    a, b = two
    mine, stays = hosts_of(A_SHARDS, 2)
    home = B_SHARDS[1]
    now = time.time()
    a.frontier.add([records.make("url", url=f"http://{h}/{p}") for h in (mine, stays) for p in ("a", "b")], now)
    first = {x["host"]: x for x in a.frontier.next(10, 30.0, now)}
    assert set(first) == {mine, stays}
    # first contact answered: robots.txt was read, the page waits for the host's next turn
    res = [{"kind": "fetch", "v": 1, "url": x["url"], "lease": x["lease"], "outcome": "deferred",
            "host": h, "ip": "127.0.5.5"} for h, x in first.items()]
    a.node.saw(res)
    a.frontier.complete(res, now)
    assert a.node.unplaced == {mine, stays}
    assert a.frontier.next(10, 30.0, now + 5) == []  # held: no lease before the bridge answers
    ips = [r for r in queued(a.node.outbox) if r["kind"] == "ip"]
    assert sorted((r["host"], r["vshard"]) for r in ips) == sorted((h, vshard(h, V)) for h in (mine, stays))
    a.node.outbox.ack(k for k, _ in a.node.outbox.claim(100))
    a.node.placed.put([{"kind": "placed", "host": mine, "ip": "127.0.5.5", "vshard": home},  # the bridge's answer
                       {"kind": "placed", "host": stays, "ip": "127.0.5.5", "vshard": vshard(stays, V)}])
    got = a.node.place(now + 1)
    assert got["hosts"] == 1 and got["urls"] == 2 and not a.node.unplaced
    leased = a.frontier.next(10, 30.0, now + 10)  # (a held host is looked at again a little later)
    assert [x["host"] for x in leased] == [stays]  # the one that stayed goes on here
    out = queued(a.node.outbox)
    assert {r["kind"] for r in out} == {"host", "url"}
    assert all(r["vshard"] == home and r.get("home") == 1 for r in out)
    host_rec = next(r for r in out if r["kind"] == "host")
    assert host_rec["next_allowed"] >= now + 1.0 - 0.01  # its politeness state went with it
    play_bridge(a.node.outbox, b.node.inbox, B_SHARDS)
    b.process_one_batch()
    assert b.node.map.shard(mine) == home
    moved = b.frontier.next(10, 30.0, host_rec["next_allowed"] + 0.1)
    assert [x["url"] for x in moved] == [f"http://{mine}/a"]
    # later links: a sends them to b with the override; b keeps one of its own
    assert a.node.route([link(f"http://{mine}/c")]) == [False]
    assert queued(a.node.outbox)[-1]["vshard"] == home and queued(a.node.outbox)[-1]["home"] == 1
    assert b.node.route([link(f"http://{mine}/d")]) == [True]


def test_a_slice_that_arrives_before_the_map_stays_a_slice(two: Any, tmp_path: Path) -> None:
    """A slice's queued URLs for a shard this process's map does not admit yet (its bridge
    took them in by a newer map) go back out still marked as a slice; when they come back
    with the map current they are queued, though this node's seen set knows them (it had
    the host before). Routed as plain links they were dropped as seen: pages lost."""
    a, _ = two
    da = tmp_path / "a"
    shard = A_SHARDS[2]
    urls = [f"http://{h}/s{j}" for h in hosts_of([shard], 2) for j in range(2)]
    a.admit([link(u) for u in urls], time.time())
    write_map(da, "a", A_SHARDS, epoch=2, draining=[shard])
    a.node.refresh()
    a.node.handoff()  # the shard leaves a (its seen set keeps the URLs)
    write_map(da, "a", [s for s in A_SHARDS if s != shard], epoch=3)
    a.node.refresh()
    slice_ = [{"kind": "url", "v": 1, "url": u, "vshard": shard, "handoff": True} for u in urls]
    a.node.inbox.put(slice_)
    while a.process_one_batch():
        pass
    out = [r for r in queued(a.node.outbox) if r.get("url") in urls]
    assert sorted(r["url"] for r in out) == sorted(urls)
    assert all(r["handoff"] is True and r["vshard"] == shard for r in out)  # still a slice
    write_map(da, "a", A_SHARDS, epoch=4)  # the map catches up: the shard is a's again
    a.node.refresh()
    play_bridge(a.node.outbox, a.node.inbox, A_SHARDS)
    while a.process_one_batch():
        pass
    assert {x["url"] for x in lease_all(a, time.time() + 5)} >= set(urls)
