"""The crawl process's side of a shared crawl: what stays, what leaves, what comes in.

A node is an ordinary crawl directory restricted to the shards the map
gives it. This module is the glue between that crawl and the bridge
process (the only one that talks to NATS), through files and spools in
``D/cluster/`` (crawl/cluster/shards.py names them):

* **route**: a discovered or seeded URL whose shard this node admits
  (owned, not draining) goes on to the local seen set and frontier; any
  other one is put into the ``outbox`` spool with its ``vshard``, for the
  bridge to publish to the owner. Only the owner ever checks a URL against
  its seen set, so the seen set partitions with the frontier.
* **inbox**: what other nodes routed here arrives in the ``inbox`` spool
  (written and fsynced by the bridge before it acks the messages); the run
  claims a batch, admits it (links, a previous owner's host states and
  done URLs) and acks it. Admission is idempotent, so a batch delivered
  twice changes nothing the second time.
* **lease filter**: the frontier leases a host only if its shard is owned,
  not draining, and the node is not fenced (the bridge says so in the map,
  or has not renewed the map in time).
* **handoff**: a draining shard's hosts, once their leases in flight are
  done, leave the frontier whole into the ``handoff-out`` spool
  (:func:`crawl.frontier.take_hosts`); then ``handoff-done.json`` tells the
  bridge it may publish them and move the shard. Hosts the map gives to
  another node without a handoff (a rebalance while this node was away)
  are swept into the outbox the same way.
* **addresses**: the host -> IP pairs fetches learn go to the outbox as
  ``ip`` records, for the bridge's IP registry (per-IP shares, map.json
  ``ip_share``, which the frontier applies to its per-IP cap).
* **placement** (small per-IP groups under one owner): a host whose address
  this node learns for the first time (its first fetch, robots.txt as a
  rule) is not leased again until the bridge has placed it (``placed``
  spool): it stays, or it is re-homed to its address group's home vshard,
  and then leaves this frontier whole (host state, queued and done URLs, as
  in a handoff) for that vshard's owner. Its URLs carry ``home`` from then
  on, so whoever receives them knows the override before admitting them.

Everything here is blocking (LMDB); the run calls it from worker threads.
"""

from __future__ import annotations

import os
import socket
import time
import zlib
from collections.abc import Callable
from pathlib import Path
from typing import Any

import orjson

from crawl.canon import host_key
from crawl.core import Record, Spool, records, replace_file
from crawl.frontier import Frontier, host_names, merge_done, merge_host_state, take_hosts

from .shards import (
    BRIDGE_STATUS,
    HANDOFF_DONE,
    HANDOFF_OUT,
    INBOX,
    OUTBOX,
    PLACED,
    ShardMap,
    cluster_dir,
)

INBOX_BATCH = 512
NODE_STATUS = "node-status.json"  # D/cluster/: this node idle or not, for the bridge's heartbeat
STATUS_EVERY = 2.0  # seconds between rewrites of node-status.json when nothing changed
STATUS_FRESH = 5.0  # a bridge-status.json older than this says nothing about now
REDONE_AFTER = 10.0  # seconds a handoff may stay unanswered before handoff-done.json is written again
SWEEP_EVERY = 60.0  # seconds between two looks for hosts of shards another node owns
IP_MEMORY = 1 << 16  # host -> IP pairs already reported (forgotten all at once when full)

Admit = Callable[..., dict[str, int]]  # Crawl.admit(recs, now, reseed=..., judged=True)
SeenAdd = Callable[[list[int]], Any]


def node_id(crawl_dir: str | os.PathLike[str], given: str | None = None) -> str:
    """This crawl directory's node name: ``given``, else the one it had before, else
    a new one (host name and a short hash of the directory), kept in ``D/cluster/node-id``
    so a restarted node comes back as itself and resumes its own shards."""
    path = cluster_dir(crawl_dir) / "node-id"
    if given:
        name = given
    elif path.exists():
        return path.read_text().strip()
    else:
        tag = zlib.crc32(str(Path(crawl_dir).resolve()).encode()) & 0xFFFF
        name = f"{socket.gethostname()}-{tag:04x}"
    path.parent.mkdir(parents=True, exist_ok=True)
    if not path.exists() or path.read_text().strip() != name:
        data = (name + "\n").encode()
        replace_file(path, lambda f: f.write(data))
    return name


def route_records(smap: ShardMap, outbox: Spool, recs: list[Record]) -> list[bool]:
    """Put the records of shards not admitted here into ``outbox`` (one fsynced put,
    each with its ``vshard``); True for each record that stays."""
    local, away, homes = smap.local, [], smap.homes
    keep: list[bool] = []
    for rec in recs:
        try:
            key = host_key(rec["url"])
        except (KeyError, TypeError, ValueError):
            keep.append(True)  # no host: the frontier rejects it and says why
            continue
        shard = smap.shard(key)
        if shard in local:
            keep.append(True)
        else:
            keep.append(False)
            # a re-homed host's URLs say so: the receiver routes by the override at once
            away.append({**rec, "vshard": shard, "home": 1} if key in homes else {**rec, "vshard": shard})
    if away:
        outbox.put(away)
    return keep


class Node:
    """One crawl directory's membership in a shared crawl (see the module docstring)."""

    def __init__(self, crawl_dir: str | os.PathLike[str], frontier: Frontier, hold: float | None = None) -> None:
        self.dir = cluster_dir(crawl_dir)
        self.dir.mkdir(parents=True, exist_ok=True)
        # a gained shard waits out one host delay and a second (ShardMap.hold)
        self.map = ShardMap(crawl_dir, frontier.cfg.default_delay + 1.0 if hold is None else hold)
        self.outbox = Spool(self.dir / OUTBOX)
        self.inbox = Spool(self.dir / INBOX)
        self.handoff_out = Spool(self.dir / HANDOFF_OUT)
        self.placed = Spool(self.dir / PLACED)
        self.frontier = frontier
        # hosts whose address this process reported and the bridge has not placed yet
        # (replaced whole on change: the lease thread reads it without a lock)
        self.unplaced: frozenset[str] = frozenset()
        self._moving: set[str] = set()  # re-homed hosts still to take out (a lease in flight)
        self.unplaced = frozenset(self._unanswered())  # a restart keeps the holds
        frontier.lease_filter = self.may_lease
        frontier.ip_share = self.map.ip_share
        self.counts: dict[str, int] = {}
        self._ips: dict[str, str] = {}
        self._sweep_epoch: int | None = None  # the map epoch whose strays were all swept
        self._swept_at = 0.0
        self._handed: tuple[int, frozenset[int]] | None = None  # (epoch, vshards) done
        self._handoff_count = 0
        self._handed_doc: dict[str, Any] = {}
        self._handed_at = 0.0
        self._said: bool | None = None  # what node-status.json last said, and when
        self._said_at = 0.0

    def close(self) -> None:
        self.outbox.close()
        self.inbox.close()
        self.handoff_out.close()
        self.placed.close()

    def _unanswered(self) -> set[str]:
        """Hosts whose address report is still in the outbox (a run that died left it):
        held again until the bridge answers, as :meth:`saw` held them."""
        out = set()
        for data in self.outbox.peek(claimed=True):
            if b'"kind":"ip"' not in data:
                continue
            try:
                host = orjson.loads(data)["host"]
            except (orjson.JSONDecodeError, KeyError, TypeError):
                continue
            if isinstance(host, str) and host not in self.map.homes:
                out.add(host)
        return out

    def may_lease(self, key: str) -> bool:
        """The lease filter: the map allows the host's shard, and the host is placed."""
        return key not in self.unplaced and self.map.may_lease(key)

    def count(self, key: str, n: int = 1) -> None:
        if n:
            self.counts[key] = self.counts.get(key, 0) + n

    def refresh(self) -> bool:
        """Look at the map again (a stat; a read when the bridge replaced it)."""
        changed = self.map.refresh()
        if changed:
            self.frontier.ip_share = self.map.ip_share
        return changed

    # -- admission -------------------------------------------------------------

    def route(self, recs: list[Record]) -> list[bool]:
        """True for each record admitted here; the rest go to the outbox (counted as routed)."""
        self.refresh()
        keep = route_records(self.map, self.outbox, recs)
        self.count("routed", keep.count(False))
        return keep

    def pump_inbox(self, admit: Admit, seen_add: SeenAdd, batch: int = INBOX_BATCH) -> int:
        """Admit one claimed inbox batch, then ack it; how many records it held.

        Host states first (a previous owner's politeness state must be in
        place before its URLs can be leased), then done URLs into the seen
        set, then URLs through ``admit`` (which routes on what is not ours,
        so a late delivery after a map change is forwarded, not stranded).
        """
        claimed = self.inbox.claim(batch)
        if not claimed:
            return 0
        now = time.time()
        hosts: list[Record] = []
        fps: list[int] = []
        done: list[Record] = []
        urls: list[Record] = []
        for _, data in claimed:
            try:
                rec = orjson.loads(data)
            except orjson.JSONDecodeError:
                self.count("inbox/bad")
                continue
            kind = rec.get("kind") if isinstance(rec, dict) else None
            if kind is not None and rec.pop("home", None) and isinstance(rec.get("vshard"), int):
                self._learn(rec)
            if kind in records.URL_KINDS and isinstance(rec.get("url"), str):
                rec.pop("vshard", None)
                urls.append(rec)
            elif kind == "host":
                hosts.append(rec)
            elif kind == "seen":
                fps.extend(int(f, 16) for f in rec.get("fps") or () if isinstance(f, str))
                done.append(rec)
            else:
                self.count("inbox/bad")
        if hosts:
            self.count("inbox/hosts", merge_host_state(self.frontier, hosts, now))
        if fps:
            seen_add(fps)
            self.count("inbox/seen", len(fps))
            # links that overtook the slice (they waited in the stream while the old
            # owner no longer read them) may have queued pages it did: they leave
            got = merge_done(self.frontier, done, now)
            self.count("inbox/unqueued", got["unqueued"])
            self.count("inbox/done_in_flight", got["leased"])
        if urls:
            # a handoff's queued URLs pass the seen set: a node that owned the shard
            # before has them as seen, and would drop what it must fetch now
            linked: list[Record] = []
            moved: list[Record] = []
            for r in urls:
                (moved if r.pop("handoff", False) else linked).append(r)
            if moved:
                moved = self._slice_here(moved)
            if linked:
                admit(linked, now, judged=True)
            if moved:
                admit(moved, now, reseed=True, judged=True)
            self.count("inbox/urls", len(urls))
        self.inbox.ack(k for k, _ in claimed)
        return len(claimed)

    def _slice_here(self, moved: list[Record]) -> list[Record]:
        """A slice's queued URLs this node admits; the others go back to the outbox still
        marked as a slice (``handoff``), never as links.

        The bridge takes a slice in by its own map, which can be newer than the
        map.json this process read last: URLs of a shard gained a moment ago would
        be routed on by admission, and routed as links their next owner (this node
        again, once its map is current) drops them as seen when it had the host
        before (found in testing: a re-homed host's pages were never fetched)."""
        local, homes = self.map.local, self.map.homes
        keep: list[Record] = []
        away: list[Record] = []
        for r in moved:
            try:
                key = host_key(r["url"])
            except (KeyError, TypeError, ValueError):
                keep.append(r)  # admission rejects it and says why
                continue
            shard = self.map.shard(key)
            if shard in local:
                keep.append(r)
            else:
                rec = {**r, "vshard": shard, "handoff": True}
                if key in homes:
                    rec["home"] = 1
                away.append(rec)
        if away:
            self.outbox.put(away)
            self.count("inbox/slice_routed", len(away))
        return keep

    def _learn(self, rec: Record) -> None:
        try:
            key = rec["host"] if rec.get("kind") in ("host", "seen") else host_key(rec["url"])
        except (KeyError, TypeError, ValueError):
            return
        if isinstance(key, str) and rec["vshard"] != self.map.natural(key):
            self.map.learn(key, int(rec["vshard"]))

    def saw(self, results: list[Record]) -> None:
        """Report host -> IP pairs the fetches learned (new ones only) to the bridge.

        Called before the results complete their leases: a host not re-homed
        already is held (not leased again) until the bridge has placed it.
        """
        out = []
        hold = []
        for rec in results:
            host, ip = rec.get("host"), rec.get("ip")
            if not isinstance(host, str) or not isinstance(ip, str) or not ip or self._ips.get(host) == ip:
                continue
            if len(self._ips) >= IP_MEMORY:
                self._ips.clear()
            self._ips[host] = ip
            out.append(records.make("ip", host=host, ip=ip, vshard=self.map.shard(host)))
            if host not in self.map.homes:
                hold.append(host)
        if out:
            if hold:
                self.unplaced = self.unplaced | frozenset(hold)
            self.outbox.put(out)

    def place(self, now: float | None = None) -> dict[str, int]:
        """Apply the bridge's placements: release the held hosts, and move the re-homed
        ones out whole (as a handoff does) to their home vshard's owner. A host with a
        lease in flight waits for the next round."""
        now = time.time() if now is None else now
        c = self.placed.counts()
        claimed = self.placed.claim(4096) if c["queued"] or c["claimed"] else []
        released: set[str] = set()
        m = self.map
        for _, data in claimed:
            try:
                rec = orjson.loads(data)
                host, v = rec["host"], int(rec["vshard"])
            except (orjson.JSONDecodeError, KeyError, TypeError, ValueError):
                self.count("placed/bad")
                continue
            if v != m.natural(host):
                m.learn(host, v)
                self.count("placed/rehomed")
            released.add(host)
            if m.shard(host) not in m.local and m.owner_of(m.shard(host)):
                self._moving.add(host)
        got = {"hosts": 0, "urls": 0}
        if self._moving:
            names = sorted(self._moving)
            res = take_hosts(self.frontier, names, now, self._sink(self.outbox))
            self._moving = set(res["busy"])
            got = {"hosts": res["hosts"], "urls": res["urls"]}
            self.count("placed/moved_urls", res["urls"])
        if released:
            self.unplaced = self.unplaced - released
        if claimed:
            self.placed.ack(k for k, _ in claimed)
        return got

    # -- handoff and strays ------------------------------------------------------

    def handoff(self, now: float | None = None) -> dict[str, Any] | None:
        """Move the draining shards' hosts out; write handoff-done.json once all are out.

        Returns what was moved this round, or None when nothing is draining
        or this set was handed off already. A host with a lease in flight
        waits for its completion (the lease filter keeps new ones from
        starting), so it never moves mid-fetch.
        """
        m = self.map
        if not m.draining:
            return None
        key = (m.epoch, m.draining)
        now = time.time() if now is None else now
        if self._handed == key:
            # Done already. Should the bridge have taken the file and then died before
            # moving the shards, it finds it again (the export itself is not repeated).
            if now - self._handed_at > REDONE_AFTER and not (self.dir / HANDOFF_DONE).exists():
                data = orjson.dumps({**self._handed_doc, "ts": now})
                replace_file(self.dir / HANDOFF_DONE, lambda f: f.write(data))
                self._handed_at = now
            return None
        draining, shard = m.draining, m.shard
        names = [h for h in host_names(self.frontier) if shard(h) in draining]
        got = take_hosts(self.frontier, names, now, self._sink(self.handoff_out))
        self._handoff_count += got["records"]
        self.count("handoff/urls", got["urls"])
        if got["busy"]:
            return got
        done = {"vshards": sorted(draining), "epoch": m.epoch, "count": self._handoff_count,
                "node": m.node, "ts": now}
        data = orjson.dumps(done)
        replace_file(self.dir / HANDOFF_DONE, lambda f: f.write(data))
        self._handed, self._handoff_count = key, 0
        self._handed_doc, self._handed_at = {**done, "count": 0}, now
        return {**got, "done": done}

    def sweep(self, now: float | None = None) -> dict[str, Any] | None:
        """Send hosts of shards the map gives to another node to the outbox: once per
        epoch (repeated while some of them still have a lease in flight), and every
        ``SWEEP_EVERY`` seconds (a re-crawl of this node's history may queue a host that
        has moved since)."""
        m = self.map
        now = time.time() if now is None else now
        if m.epoch < 0 or (self._sweep_epoch == m.epoch and now - self._swept_at < SWEEP_EVERY):
            return None
        self._swept_at = now
        mine, shard = m.owned, m.shard
        strays = [h for h in host_names(self.frontier) if shard(h) not in mine and m.owner_of(shard(h))]
        got = take_hosts(self.frontier, strays, now, self._sink(self.outbox)) if strays else \
            {"hosts": 0, "urls": 0, "busy": [], "records": 0}
        self.count("swept/urls", got["urls"])
        if not got["busy"]:
            self._sweep_epoch = m.epoch
        return got

    def _sink(self, spool: Spool) -> Callable[[list[Record]], None]:
        shard = self.map.shard

        def put(recs: list[Record]) -> None:
            # A slice's URLs are marked: they were queued, not merely linked, so their new
            # owner queues them even if its seen set knows them (it owned them before).
            # A re-homed host's records say so (``home``): the receiver knows the override
            # before it admits them.
            out = []
            for r in recs:
                key = host_key(r["url"]) if r["kind"] == "url" else r["host"]
                rec = {**r, "vshard": shard(key), "handoff": True} if r["kind"] == "url" \
                    else {**r, "vshard": shard(key)}
                if key in self.map.homes:
                    rec["home"] = 1
                out.append(rec)
            spool.put(out)
        return put

    def spools_empty(self) -> bool:
        """Nothing waits in this node's spools (what it routed left, what came in was admitted)."""
        out, inn, pl = self.outbox.counts(), self.inbox.counts(), self.placed.counts()
        return not (out["queued"] or out["claimed"] or inn["queued"] or inn["claimed"]
                    or pl["queued"] or pl["claimed"] or self.unplaced or self._moving)

    def note_idle(self, idle: bool, now: float | None = None) -> None:
        """Tell the bridge whether this node has nothing left to do (``node-status.json``,
        rewritten on a change and every few seconds): it goes into the heartbeat, so the
        bridge can tell when the whole crawl is idle."""
        now = time.time() if now is None else now
        if self._said == idle and now - self._said_at < STATUS_EVERY:
            return
        data = orjson.dumps({"idle": idle, "ts": now, "node": self.map.node})
        replace_file(self.dir / NODE_STATUS, lambda f: f.write(data), sync=False)
        self._said, self._said_at = idle, now

    def idle(self, now: float | None = None) -> bool:
        """Whether a run may end for lack of work: this node's spools are empty and the
        bridge, recently, said the whole crawl is idle (every member idle, no message
        waiting in the streams) or, if it does not say, that none waits for this node.
        A node cannot know alone: another may still send it links."""
        if not self.spools_empty():
            return False
        now = time.time() if now is None else now
        try:
            st = orjson.loads((self.dir / BRIDGE_STATUS).read_bytes())
        except (OSError, orjson.JSONDecodeError):
            return False
        if not isinstance(st, dict) or now - float(st.get("ts") or 0) > STATUS_FRESH:
            return False
        if "cluster_idle" in st:
            return bool(st["cluster_idle"])
        m = self.map  # a bridge that does not say: at least every shard has an owner, none waits here
        if m.epoch < 1 or len(m.owner) < m.v:
            return False
        return not sum(int(n) for n in (st.get("lag") or {}).values())

    def status(self) -> dict[str, Any]:
        m = self.map
        return {"node": m.node, "epoch": m.epoch, "owned": len(m.owned), "draining": len(m.draining),
                "fenced": m.fenced or m.stale(), "outbox": self.outbox.counts()["queued"],
                "inbox": self.inbox.counts()["queued"], **self.counts}


def node_summary(crawl_dir: str | os.PathLike[str], now: float | None = None) -> dict[str, Any] | None:
    """A node's cluster state for ``crawl stats`` (read only: map.json and the bridge's
    status file), or None when the directory is not a node of a shared crawl."""
    d = cluster_dir(crawl_dir)
    m = ShardMap(crawl_dir)
    if m.epoch < 0 and not (d / BRIDGE_STATUS).exists():
        return None
    now = time.time() if now is None else now
    try:
        st = orjson.loads((d / BRIDGE_STATUS).read_bytes())
    except (OSError, orjson.JSONDecodeError):
        st = {}
    st = st if isinstance(st, dict) else {}
    lag = st.get("lag") or {}
    ts = float(st.get("ts") or 0.0)
    return {"node": m.node or st.get("node"), "crawl": m.crawl or st.get("crawl"), "epoch": m.epoch,
            "shards_owned": len(m.owned), "shards": m.v, "shards_draining": len(m.draining),
            "fenced": m.fenced, "bridge_running": bool(ts) and now - ts <= STATUS_FRESH,
            "published": st.get("published"), "consumed": st.get("consumed"),
            "routed_per_s": st.get("routed_per_s"), "lag": sum(int(n) for n in lag.values()),
            "outbox": (st.get("outbox") or {}).get("queued"), "inbox": (st.get("inbox") or {}).get("queued"),
            "cluster_idle": st.get("cluster_idle"), "bridge_said": st.get("error") or None}
