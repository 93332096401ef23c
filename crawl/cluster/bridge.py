"""The bridge: one asyncio process between a node's local spools and JetStream.

``crawl cluster bridge DIR`` (spawned by ``crawl run --cluster``, with a
lifeline so it dies with the run) keeps nats-py out of the trio crawl
process. It moves records, never decides what to crawl:

* **out**: every ``OUT_TICK`` claim what ``D/cluster/outbox`` holds; hold
  it (claimed) until the oldest record has waited ``OUT_WINDOW`` (or
  ``out_batch`` are held), group it by destination (records of shards
  whose owner is settled: one group per owner node, on the subject of its
  lowest vshard in the batch; shards being moved: one per vshard, see
  :meth:`Bridge._group`), publish one message per group to
  ``crawl.<crawl>.links.<v>`` with ``Nats-Msg-Id = node:batch:group:part:hash`` (a
  republish after a lost PubAck is dropped by the stream's duplicate
  window), wait for every PubAck, then ack the batch. ``ip`` records are
  not held: they go to the KV IP registry at once, and each is answered in ``D/cluster/placed``:
  the host stays on its own vshard, or (the first host placed on an address
  gave the address its home vshard, and the group is still small) it is
  re-homed there, an override every bridge learns (``homes.json``). Nothing
  leaves before the map has owners.
* **in**: one durable pull consumer per stream, filtered to the vshards
  this node owns and is not handing over; fetch up to 512 messages, write
  their lines into ``D/cluster/inbox`` in one fsynced transaction, then
  ack them. A crash in between redelivers (at-least-once; admission is
  idempotent). ``ack_wait`` is far above one batch's write time, and
  ``max_deliver`` is unlimited; a message whose lines are not JSON objects
  (a poison batch) goes to ``D/cluster/dead`` and is counted, never
  retried for ever and never dropped silently.
* **map**: heartbeat into KV, plan the map (CAS; see :mod:`.kv`), rewrite
  ``D/cluster/map.json`` on every heartbeat (``ts`` and ``fence_after``
  let the crawl process fence itself if the bridge dies) and set
  ``fenced`` when no heartbeat could be written for TTL/2, before anyone
  may take the node's shards (TTL + grace).
* **handoff**: a shard marked ``moving`` away from this node is dropped from
  the consumer filter first, then listed in ``draining``; when the crawl
  process has exported it (``handoff-out`` spool, ``handoff-done.json``),
  the slice is published to the shard's subject like links and the map is
  CASed to the new owner, whose consumer then reads the slice and every
  link that waited in the stream meanwhile.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import sys
import time
from collections import Counter, deque
from pathlib import Path
from typing import Any

import orjson
import xxhash

from crawl.canon import host_key
from crawl.core import Spool, records, replace_file

from .kv import (
    Cluster,
    ClusterConfig,
    Planner,
    connect,
    ip_share,
    override_key,
    stream_name,
    subject,
)
from .shards import (
    BRIDGE_STATUS,
    HANDOFF_DONE,
    HANDOFF_OUT,
    HOMES,
    INBOX,
    MAP,
    OUTBOX,
    PLACED,
    cluster_dir,
    vshard,
    vshard_of_url,
)

DEAD = "dead"
NODE_STATUS = "node-status.json"  # written by the crawl process: {"idle": bool, "ts": t}
MAX_PAYLOAD = 512 * 1024  # one message's NDJSON (the server's limit is 1 MiB)
RATE_WINDOW = 10.0  # seconds of history behind routed/s
# Links gather in the outbox this long before a publish (unless a claim comes back full):
# a message costs the engine a replicated write, a delivery and a replicated ack whatever
# it carries, and a crawl's links trickle in (bench_cluster: ~1 record a message without).
OUT_WINDOW = 2.0
# How often the outbox is looked at: ``ip`` records (a new host's address, held by its
# node until placed) are answered at this pace, not the window's.
OUT_TICK = 0.5
FETCH_WAIT = 10.0  # seconds a pull lingers when nothing comes (it returns on the first message)
PLAN_QUIET = 3.0  # seconds between map rounds while nothing moves (plan_every otherwise)
CONNECT_SAY = 10.0  # seconds without a server before the log says so
STOP_FLUSH = 5.0  # seconds a stopping bridge may spend publishing what its outbox holds


def _is_ip(raw: bytes) -> bool:
    """Whether an outbox record is an ``ip`` report (answered at once, not held)."""
    if b'"ip"' not in raw:
        return False
    try:
        rec = orjson.loads(raw)
    except orjson.JSONDecodeError:
        return False
    return isinstance(rec, dict) and rec.get("kind") == "ip"


def _is_slice(rec: dict[str, Any]) -> bool:
    """A record of a host's slice (state, done URLs, queued URLs): only its shard's owner
    may take it in (a link may reach anyone: its node forwards what it does not own)."""
    kind = rec.get("kind")
    return kind in ("host", "seen") or (kind in records.URL_KINDS and bool(rec.get("handoff")))


def _jdump(path: Path, data: dict[str, Any]) -> None:
    replace_file(path, lambda fh: fh.write(orjson.dumps(data, option=orjson.OPT_INDENT_2)), sync=False)


class Bridge:
    """One node's bridge. ``await run()`` until ``stop`` is set."""

    def __init__(self, servers: str, crawl: str, node: str, crawl_dir: str | os.PathLike[str], *,
                 out_batch: int = 4096, fetch_batch: int = 512, plan_every: float = 1.0,
                 out_window: float = OUT_WINDOW, log: Any = None) -> None:
        self.servers = servers
        self.crawl = crawl
        self.node = node
        self.dir = cluster_dir(crawl_dir)
        self.out_batch = out_batch
        self.fetch_batch = fetch_batch
        self.plan_every = plan_every
        self.out_window = out_window
        self.log = log or sys.stderr
        self.stop = asyncio.Event()
        self.cl: Cluster | None = None
        self.cfg: ClusterConfig | None = None
        self.map: dict[str, Any] = {}
        self.rev = 0
        self.owned: set[int] = set()
        self.draining: set[int] = set()
        self.consuming: dict[int, set[int]] = {}  # stream -> vshards in its consumer filter
        self.fetchers: dict[int, asyncio.Task[None]] = {}
        self.fenced = False
        self.last_beat = 0.0
        self.last_beat_wall = 0.0
        self.ip_share: dict[str, int] = {}
        self.counts: Counter[str] = Counter()
        self.out_events: deque[tuple[float, int, int]] = deque()  # (t, vshard, records)
        self.lag: dict[str, int] = {}
        self.error = ""
        self.members: list[str] = []
        self._ip_next = 0.0
        self._ip_mark: tuple[Any, Any] | None = None
        self._ips_sent: dict[str, set[int]] = {}
        self._idle_sig: dict[str, tuple[Any, Any]] | None = None
        self._idle_since = 0.0
        self.cluster_idle = False
        self.queued = -1
        self._map_bytes = b""
        self._plan_sig: tuple[Any, ...] | None = None
        self.homes: dict[str, int] = {}  # re-homed host -> home vshard (every node's, from KV)
        self._home_ip: dict[str, int] = {}  # address -> its home vshard, as read or created
        self._homes_written: dict[str, int] | None = None

    # -- lifecycle --------------------------------------------------------------------
    async def run(self) -> None:
        self.dir.mkdir(parents=True, exist_ok=True)
        nc = await self._connect()
        if nc is None:
            return  # stopped before any server answered
        self.cl = Cluster(nc, self.crawl)
        self.cfg = await self.cl.open()
        self.outbox = Spool(self.dir / OUTBOX, claim_timeout=max(60.0, self.cfg.ack_wait))
        self.inbox = Spool(self.dir / INBOX)
        self.handoff = Spool(self.dir / HANDOFF_OUT)
        self.dead = Spool(self.dir / DEAD)
        self.placed = Spool(self.dir / PLACED)
        self.planner = Planner(self.cl)
        with contextlib.suppress(Exception):  # (read again every few seconds: _refresh_ip_share)
            self.homes.update(await self.cl.homes())
            self._write_homes()
        await self._beat()
        tasks = [asyncio.create_task(c) for c in
                 (self._beat_loop(), self._plan_loop(), self._out_loop(), self._status_loop())]
        try:
            await self.stop.wait()
            # a clean stop publishes what the outbox holds (the window's links) first
            with contextlib.suppress(Exception):
                await asyncio.wait_for(asyncio.shield(tasks[2]), STOP_FLUSH)
        finally:
            for t in [*tasks, *self.fetchers.values()]:
                t.cancel()
            await asyncio.gather(*tasks, *self.fetchers.values(), return_exceptions=True)
            with contextlib.suppress(Exception):
                await asyncio.wait_for(self.cl.forget(self.node), 2)
            self._write_status()
            for sp in (self.outbox, self.handoff):
                with contextlib.suppress(Exception):
                    sp.release()
            with contextlib.suppress(Exception):
                await asyncio.wait_for(nc.close(), 3)

    async def _connect(self) -> Any:
        """Connect (the client retries for ever: the servers may come up later), but
        say so after a while, and give up at once on SIGTERM or Ctrl-C (a bridge given
        a wrong address ignored both, silently)."""
        connecting = asyncio.create_task(connect(self.servers, name=f"crawl-bridge-{self.node}"))
        stopping = asyncio.create_task(self.stop.wait())
        try:
            done, _ = await asyncio.wait({connecting, stopping}, timeout=CONNECT_SAY,
                                         return_when=asyncio.FIRST_COMPLETED)
            if not done:
                self._note(f"no server at {self.servers} answers yet: still trying (Ctrl-C to stop)")
                done, _ = await asyncio.wait({connecting, stopping}, return_when=asyncio.FIRST_COMPLETED)
            if connecting in done:
                return connecting.result()
            return None
        finally:
            stopping.cancel()
            # Cancelled again until it ends: the client's connect attempt is an
            # asyncio.wait_for, which on Python 3.11 drops a cancellation that comes as
            # the attempt fails (a refused port fails at once), and the client then
            # tries again for ever; a SIGTERM left 2 bridges of 25 running (under load).
            # The next cancellation lands in its back-off sleep.
            while not connecting.done():
                connecting.cancel()
                await asyncio.wait({connecting}, timeout=0.1)
            await asyncio.gather(connecting, stopping, return_exceptions=True)

    def _note(self, what: str, exc: BaseException | None = None) -> None:
        msg = f"{what}: {exc or ''}".rstrip(": ") if exc is not None else what
        if msg != self.error:
            print(f"crawl cluster bridge {self.node}: {msg}", file=self.log, flush=True)
        self.error = msg

    # -- heartbeat and fencing --------------------------------------------------------
    def _info(self) -> dict[str, Any]:
        now = time.time()
        while self.out_events and self.out_events[0][0] < now - RATE_WINDOW:
            self.out_events.popleft()
        per: Counter[int] = Counter()
        for _, v, n in self.out_events:
            per[v] += n
        return {"epoch": self.map.get("epoch", -1), "published": self.counts["published"],
                "idle": self._node_idle(),
                "consumed": self.counts["consumed"], "dead": self.counts["dead"],
                "routed_per_s": round(sum(per.values()) / RATE_WINDOW, 1),
                "out_rate": {str(v): round(n / RATE_WINDOW, 1) for v, n in per.items()},
                "owned": len(self.owned), "fenced": self.fenced, "pid": os.getpid()}

    def _node_idle(self) -> bool:
        """Whether the crawl process says it has nothing left to do (and said so lately)."""
        try:
            st = orjson.loads((self.dir / NODE_STATUS).read_bytes())
        except (OSError, orjson.JSONDecodeError):
            return False
        return bool(st.get("idle")) and time.time() - float(st.get("ts", 0)) < 10.0

    def _judge_idle(self, members: dict[str, dict[str, Any]], queued: int) -> bool:
        """The whole crawl is over: every member idle, no message in any stream, every
        shard owned and none moving, and all of that unchanged for a quiet period.

        A heartbeat can say idle while its node has just consumed a link (the
        flag is seconds old), so one look is not enough: the members'
        published and consumed totals must also stand still for longer than a
        heartbeat and a node-status rewrite take.

        A member that leaves meanwhile does not start the wait again: the first
        node to judge the crawl over exits, its key expires a TTL later, and a
        node whose judgement lagged by more than that never finished (its wait
        restarted, the grace ran out, it took over the leaver's shards and was
        busy again: a 3-node test's last node had to be stopped with SIGTERM).
        A member that joins, or whose totals moved, does start it again.
        """
        assert self.cfg is not None
        now = time.monotonic()
        sig = {n: (m.get("published"), m.get("consumed")) for n, m in members.items()}
        cond = (bool(members) and all(m.get("idle") for m in members.values()) and queued == 0
                and len(self.map.get("owner", {})) == self.cfg.v and not self.map.get("moving"))
        prev = self._idle_sig
        stood = prev is not None and all(n in prev and prev[n] == s for n, s in sig.items())
        if not cond or not stood:
            self._idle_sig, self._idle_since = (sig if cond else None), now
            return False
        self._idle_sig = sig  # (members that left are forgotten; the wait goes on)
        # (the members come from the last map round: up to PLAN_QUIET old)
        return now - self._idle_since >= max(5.0, self.cfg.ttl) + PLAN_QUIET

    async def _beat(self) -> None:
        assert self.cl is not None and self.cfg is not None
        await asyncio.wait_for(self.cl.heartbeat(self.node, self._info()), self.cfg.ttl / 3)
        self.last_beat = time.monotonic()
        self.last_beat_wall = time.time()

    async def _beat_loop(self) -> None:
        """Heartbeat every TTL/5 (a slow write still leaves TTL/2 - TTL/5 of margin before
        the node fences), in a task of its own so that a hanging write does not stop the
        map file; rewrite map.json twice a second with ``ts`` = the last heartbeat written."""
        assert self.cfg is not None
        every = min(self.cfg.ttl / 5, 2.0)
        beat: asyncio.Task[None] | None = None
        next_beat = 0.0
        try:
            while True:
                now = time.monotonic()
                if beat is not None and beat.done():
                    exc = beat.exception()
                    if exc is None:
                        if self.fenced:
                            self._note("heartbeat written again: leasing may resume")
                        self.fenced = False
                    else:
                        self._note("heartbeat failed", exc)
                    beat = None
                if beat is None and now >= next_beat:
                    beat = asyncio.create_task(self._beat())
                    next_beat = now + every
                if time.monotonic() - self.last_beat > self.cfg.ttl / 2 and not self.fenced:
                    self.fenced = True
                    self._note(f"no heartbeat for {self.cfg.ttl / 2:g} s: fenced (no leasing)")
                self._write_map()
                await asyncio.sleep(min(0.5, every))
        finally:
            if beat is not None:
                beat.cancel()

    # -- the map --------------------------------------------------------------------
    async def _plan_loop(self) -> None:
        while True:
            try:
                cur, rev, _ = await self.planner.step()
                self.members = sorted(self.planner.members)
                await self._apply(cur, rev)
                await self._handoff()
                await self._refresh_ip_share()
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                self._note("map round failed", exc)
                self._plan_sig = None
            await asyncio.sleep(self._plan_wait())

    def _plan_wait(self) -> float:
        """``plan_every`` while the map or the members change, a shard moves or waits for
        an owner, or this node drains; ``PLAN_QUIET`` once two rounds in a row saw the
        same settled map and members (each round reads members, drain marks and the map:
        most of an idle bridge's requests). A member's heartbeat expiring is seen at most
        PLAN_QUIET later, well inside the grace its shards wait anyway."""
        assert self.cfg is not None
        m = self.map
        sig = (self.rev, tuple(self.members))
        settled = (bool(m.get("owner")) and len(m["owner"]) == self.cfg.v and not m.get("moving")
                   and not self.draining and sig == self._plan_sig)
        self._plan_sig = sig
        return max(self.plan_every, PLAN_QUIET) if settled else self.plan_every

    async def _apply(self, cur: dict[str, Any], rev: int) -> None:
        """Make the consumers and map.json follow the map: drop before draining is announced."""
        assert self.cfg is not None
        owner = cur.get("owner", {})
        moving = cur.get("moving", {})
        owned = {int(v) for v, n in owner.items() if n == self.node}
        draining = {v for v in owned if str(v) in moving}
        want = owned - draining
        changed = rev != self.rev
        self.map, self.rev = cur, rev
        for k, r in enumerate(self.cfg.ranges()):
            mine = {v for v in r if v in want}
            if mine != self.consuming.get(k, set()):
                await self._set_consumer(k, mine)
        if changed or owned != self.owned or draining != self.draining:
            self.owned, self.draining = owned, draining
            self._write_map()

    def _durable(self, k: int) -> str:
        return f"{self.node}_L{k}"

    async def _set_consumer(self, k: int, vshards: set[int]) -> None:
        """Point this node's consumer on stream ``k`` at ``vshards`` (delete it when none)."""
        from nats.js import api
        from nats.js.errors import APIError, NotFoundError

        assert self.cl is not None and self.cfg is not None
        js, stream = self.cl.js, stream_name(self.crawl, k)
        if not vshards:
            task = self.fetchers.pop(k, None)
            if task:
                task.cancel()
            with contextlib.suppress(NotFoundError):
                await js.delete_consumer(stream, self._durable(k))
            self.consuming[k] = set()
            return
        cfg = api.ConsumerConfig(
            durable_name=self._durable(k), filter_subjects=[subject(self.crawl, v) for v in sorted(vshards)],
            ack_policy=api.AckPolicy.EXPLICIT, ack_wait=self.cfg.ack_wait, max_deliver=-1,
            max_ack_pending=20000, deliver_policy=api.DeliverPolicy.ALL)
        gained = vshards - self.consuming.get(k, set())
        if gained:
            # the server does not always refuse an update whose filters overlap
            # another consumer's (error 10100 comes on create): look first
            await self._clear_overlaps(stream, gained)
            if self.consuming.get(k):
                # A consumer whose filter widens does not go back for messages
                # older than its position (the slice of a handoff, the links that
                # waited for a dead owner): make it anew, from the stream's start.
                # Its unacknowledged messages return to the stream (redelivered:
                # at-least-once).
                task = self.fetchers.pop(k, None)
                if task:
                    task.cancel()
                with contextlib.suppress(NotFoundError):
                    await js.delete_consumer(stream, self._durable(k))
        try:
            await js.add_consumer(stream, cfg)
        except APIError as exc:
            if exc.err_code != 10100:  # filters overlap another consumer's
                raise
            await self._clear_overlaps(stream, vshards)
            await js.add_consumer(stream, cfg)
        self.consuming[k] = set(vshards)
        if k not in self.fetchers or self.fetchers[k].done():
            self.fetchers[k] = asyncio.create_task(self._fetch_loop(k))

    async def _clear_overlaps(self, stream: str, vshards: set[int]) -> None:
        """Delete consumers of nodes without a heartbeat that still filter on shards now ours.

        A node that vanished past its grace left its durable consumer behind;
        a work-queue stream refuses a second consumer on the same subjects.
        Deleting it hands its unacknowledged messages to the new consumer.
        A live node's consumer is never touched (it drops its own filters
        before its shards are reassigned).
        """
        assert self.cl is not None
        mine = {subject(self.crawl, v) for v in vshards}
        alive = set(await self.cl.members())
        infos = await self.cl.js.consumers_info(stream)
        for info in infos:
            name = info.name
            filt = set(info.config.filter_subjects or ([info.config.filter_subject]
                                                        if info.config.filter_subject else []))
            node = name.rsplit("_L", 1)[0]
            if node == self.node or not filt & mine:
                continue
            if node in alive:
                raise RuntimeError(f"shards still read by live node {node} (consumer {name}); "
                                   "waiting for it to let go")
            await self.cl.js.delete_consumer(stream, name)
            self._note(f"took over from {node}: deleted its consumer {name}")

    def _write_map(self) -> None:
        if not self.map or self.cfg is None:
            return
        data = {"crawl": self.crawl, "node": self.node, "epoch": self.map.get("epoch", 0),
                "V": self.cfg.v, "owned": sorted(self.owned), "owner": self.map.get("owner", {}),
                "draining": sorted(self.draining), "fenced": self.fenced, "ip_share": self.ip_share,
                "ts": self.last_beat_wall, "fence_after": self.cfg.ttl / 2, "members": self.members}
        raw = orjson.dumps(data)
        if raw == self._map_bytes:
            return  # the same map and the same heartbeat: the crawl process would re-read it for nothing
        try:
            replace_file(self.dir / MAP, lambda fh: fh.write(raw), sync=False)
        except OSError as exc:
            self._note("cannot write map.json", exc)
        else:
            self._map_bytes = raw

    # -- out: outbox -> streams ------------------------------------------------------
    async def _publish(self, groups: dict[str, tuple[int, list[bytes]]], tag: str) -> int:
        """Publish each group's lines (chunked) to its vshard's subject with stable ids
        (``node:batch:group:part:hash``); retry until every PubAck is in."""
        js = self.cl.js  # type: ignore[union-attr]
        pending: list[tuple[str, bytes, str, int, int]] = []
        for key, (v, lines) in groups.items():
            chunk: list[bytes] = []
            size = 0
            part = 0
            for line in lines:
                if chunk and size + len(line) + 1 > MAX_PAYLOAD:
                    pending.append(self._message(v, chunk, f"{tag}:{key}:{part}"))
                    chunk, size, part = [], 0, part + 1
                chunk.append(line)
                size += len(line) + 1
            if chunk:
                pending.append(self._message(v, chunk, f"{tag}:{key}:{part}"))
        sent = 0
        pause = 0.2
        while pending:
            futs = []
            for subj, data, mid, _, _ in pending:
                futs.append(js.publish(subj, data, timeout=5, headers={"Nats-Msg-Id": mid}))
            results = await asyncio.gather(*futs, return_exceptions=True)
            again = []
            for item, res in zip(pending, results, strict=True):
                if isinstance(res, BaseException):
                    again.append(item)
                    err = res
                else:
                    if not getattr(res, "duplicate", False):
                        self.out_events.append((time.time(), item[3], item[4]))
                        self.counts["messages"] += 1
                    sent += item[4]
            if again:
                self.counts["republished"] += sum(i[4] for i in again)
                self._note(f"{len(again)} publishes unacknowledged; retrying", err)
                await asyncio.sleep(pause)
                pause = min(2.0, pause * 2)
            pending = again
        return sent

    def _message(self, v: int, lines: list[bytes], where: str) -> tuple[str, bytes, str, int, int]:
        """(subject, data, Nats-Msg-Id, vshard, records). The id ends with a hash of the
        data: a batch claimed again after a crash may start with the same record yet hold
        more (or be grouped under another map), and an id naming only its place would
        make the stream drop the bigger message as a duplicate of the first, losing the
        records it added. The same lines published again still have the same id."""
        data = b"\n".join(lines)
        return (subject(self.crawl, v), data, f"{self.node}:{where}:{xxhash.xxh3_64_hexdigest(data)}", v,
                len(lines))

    def _group(self, batch: list[tuple[bytes, bytes]], by_owner: bool = False,
               ) -> tuple[dict[str, tuple[int, list[bytes]]], list[tuple[str, str, int]], list[bytes]]:
        """Group a claimed batch into messages: ``{id part: (vshard of the subject, lines)}``.

        Each vshard's records make one message on its subject, except, with
        ``by_owner`` (the outbox), the records of shards whose owner is settled
        (not moving): those make ONE message per owner, on the subject of the
        lowest of its vshards in the batch (its carrier). With a thousand
        vshards a batch's links would otherwise go one or two a message. The
        carrier's owner reads them; should the map have changed meanwhile, its
        node forwards the links it does not own (admission routes before it
        judges), as it does for any late delivery, and its bridge forwards
        the slice records (host state, done URLs, queued URLs of a re-homed
        host or a sweep) of shards it does not own before the node sees them
        (:meth:`_take`): only the owner may take those in. The handoff spool's
        slices always go on their own vshard's subject (their shard is moving).
        """
        assert self.cfg is not None
        groups: dict[str, tuple[int, list[bytes]]] = {}
        owned: dict[str, tuple[list[int], list[bytes]]] = {}
        ips: list[tuple[str, str, int]] = []  # (host, address, vshard the node gave it)
        bad: list[bytes] = []
        owner = self.map.get("owner", {}) if by_owner else {}
        moving = self.map.get("moving", {}) if by_owner else {}
        for _, raw in batch:
            try:
                rec = orjson.loads(raw)
                v = rec.get("vshard")
                if rec.get("kind") == "ip":
                    v = v if isinstance(v, int) else vshard_of_url(f"http://{rec['host']}/", self.cfg.v)
                    ips.append((str(rec["host"]), str(rec["ip"]), int(v)))
                    continue
                if not isinstance(v, int) or not 0 <= v < self.cfg.v:
                    v = vshard_of_url(rec["url"], self.cfg.v)
            except (orjson.JSONDecodeError, AttributeError, KeyError, TypeError, ValueError):
                bad.append(raw)
                continue
            node = owner.get(str(v))
            if node and str(v) not in moving and (rec.get("kind") in records.URL_KINDS or _is_slice(rec)):
                vs, lines = owned.setdefault(node, ([], []))
                vs.append(v)
                lines.append(raw)
                continue
            groups.setdefault(str(v), (v, []))[1].append(raw)
        for vs, lines in owned.values():
            carrier = min(vs)
            groups[f"o{carrier}"] = (carrier, lines)
        return groups, ips, bad

    async def _send_spool(self, sp: Spool, tag: str, batch: list[tuple[bytes, bytes]]) -> int:
        groups, places, bad = self._group(batch, by_owner=sp is self.outbox)
        n = await self._publish(groups, f"{tag}{batch[0][0].hex()}")
        if places:
            placed = await self._place(places)
            ips: dict[str, set[int]] = {}
            for _, ip, v in placed:
                ips.setdefault(ip, set()).add(v)
            # each (address, vshard) goes to KV once per bridge: a crawl learns the same
            # pairs again and again, and every KV write is a replicated, fsynced write
            new = {ip: vs - self._ips_sent.get(ip, set()) for ip, vs in ips.items()}
            new = {ip: vs for ip, vs in new.items() if vs}
            if new:
                await self.cl.register_ips(new)  # type: ignore[union-attr]
                for ip, vs in new.items():
                    self._ips_sent.setdefault(ip, set()).update(vs)
            # the answers last: the node leases a held host again once it reads one
            await asyncio.to_thread(self.placed.put, [
                orjson.dumps({"kind": "placed", "host": h, "ip": ip, "vshard": v}) for h, ip, v in placed])
        if bad:
            await self._dead(bad, f"unroutable {tag or 'outbox'} record")
        await asyncio.to_thread(sp.ack, [k for k, _ in batch])
        self.counts["published"] += n
        return n

    async def _place(self, places: list[tuple[str, str, int]]) -> list[tuple[str, str, int]]:
        """Where each newly addressed host lives: (host, address, vshard).

        A host re-homed already keeps its home. Otherwise the address's home
        is the vshard of the first host placed on it (KV ``home.<addr>``,
        first writer wins); a host elsewhere joins it (KV override) while its
        group has fewer than ``ip_group`` hosts, and stays on its own vshard
        once the group is large (split by count: ``ip_share``). Overrides
        never change, so deciding again after a crash gives the same answer.

        A batch is placed in a few rounds of concurrent requests, not one
        request after another per host: the homes of its new addresses, one
        group count per address (then counted here as the batch's hosts join),
        then the overrides (the servers write concurrent requests in one
        replicated, fsynced append where they can; host by host, placing the
        first hosts of a crawl was most of the engine's CPU in bench_cluster).
        """
        assert self.cfg is not None and self.cl is not None
        eff: dict[str, int | None] = {}
        wrote = False
        todo: dict[str, tuple[str, int]] = {}  # host -> (address, natural vshard), first report wins
        for host, ip, v in places:
            nat = vshard(host, self.cfg.v)
            e = self.homes.get(host)
            if e is None and v != nat:
                e = v  # its node routes it by an override this bridge has not read yet
                self.homes[host] = v
                wrote = True
            eff[host] = e
            if e is None and self.cfg.ip_group > 1:
                todo.setdefault(host, (ip, nat))
        if todo:
            first: dict[str, int] = {}
            for ip, nat in todo.values():
                if ip not in self._home_ip:
                    first.setdefault(ip, nat)
            got = await asyncio.gather(*(self.cl.home_of(ip, nat) for ip, nat in first.items()))
            self._home_ip.update(zip(first, got, strict=True))
            grow = sorted({ip for ip, nat in todo.values() if self._home_ip[ip] != nat})
            sizes = dict(zip(grow, await asyncio.gather(*(self.cl.group_size(ip) for ip in grow)), strict=True))
            join: list[tuple[str, str, int]] = []
            for host, (ip, nat) in todo.items():
                home = self._home_ip[ip]
                if home != nat and sizes[ip] + 2 <= self.cfg.ip_group and override_key(ip, home, host):
                    join.append((host, ip, home))
                    sizes[ip] += 1
            done = await asyncio.gather(*(self.cl.rehome(ip, home, host) for host, ip, home in join))
            for (host, _, home), ok in zip(join, done, strict=True):
                if ok:
                    eff[host] = self.homes[host] = home
                    wrote = True
                    self.counts["rehomed"] += 1
        out = []
        for host, ip, _ in places:
            e = eff.get(host)
            out.append((host, ip, vshard(host, self.cfg.v) if e is None else e))
        if wrote:
            self._write_homes()
        return out

    def _write_homes(self) -> None:
        """``D/cluster/homes.json``: every re-homed host the bridge knows (only on change)."""
        if self.homes == self._homes_written:
            return
        data = orjson.dumps({"homes": self.homes})
        try:
            replace_file(self.dir / HOMES, lambda fh: fh.write(data), sync=False)
        except OSError as exc:
            self._note("cannot write homes.json", exc)
        else:
            self._homes_written = dict(self.homes)

    async def _out_loop(self) -> None:
        """Publish the outbox. Every ``OUT_TICK`` claim what came; ``ip`` records are
        placed and answered at once (a new host waits for its answer before its second
        request), everything else is held, claimed, until the oldest held record has
        waited ``out_window`` (or ``out_batch`` are held, or a stop was asked), then
        published as few messages as it can (one per owner node). Records stay in the
        spool until their PubAcks are in (then acked; a crash returns the claims), so
        the window changes when they leave, never whether. Returns once a stop was
        asked and the outbox is empty (the run's last links leave with it)."""
        held: list[tuple[bytes, bytes]] = []  # claimed, waiting for the window
        since = 0.0  # when the oldest held record was claimed
        ips: list[tuple[bytes, bytes]] = []  # claimed ip records not answered yet (a failed round)
        while True:
            try:
                if not self.map.get("owner") and not self.stop.is_set():
                    # No shard has an owner yet (a new crawl's first map waits for its
                    # nodes): what the node routed meanwhile (its seeds, all of them, as
                    # it has no map either) waits here to go one message per owner, not
                    # one per vshard. Nothing can be crawled before the map anyway.
                    with contextlib.suppress(TimeoutError):
                        await asyncio.wait_for(self.stop.wait(), min(OUT_TICK, self.out_window))
                    continue
                room = self.out_batch - len(held)
                batch = await asyncio.to_thread(self.outbox.claim, room) if room > 0 else []
                if batch and not held:
                    since = time.monotonic()
                for item in batch:
                    (ips if _is_ip(item[1]) else held).append(item)
                if ips:
                    await self._send_spool(self.outbox, "", ips)
                    ips = []
                stopping = self.stop.is_set()
                if held and (stopping or len(held) >= self.out_batch
                             or time.monotonic() - since >= self.out_window):
                    await self._send_spool(self.outbox, "", held)
                    held = []
                if stopping:
                    if not batch and not held:
                        return
                    continue
                if held and len(held) >= self.out_batch:
                    continue
                wait = min(OUT_TICK, self.out_window)
                if held:
                    wait = max(0.0, min(wait, since + self.out_window - time.monotonic()))
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self.stop.wait(), wait)
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                self._note("outbox round failed", exc)
                await asyncio.sleep(0.5)

    # -- in: streams -> inbox ----------------------------------------------------------
    async def _fetch_loop(self, k: int) -> None:
        from nats.errors import TimeoutError as NatsTimeout

        js, stream = self.cl.js, stream_name(self.crawl, k)  # type: ignore[union-attr]
        psub = None
        while True:
            try:
                if psub is None:
                    psub = await js.pull_subscribe_bind(self._durable(k), stream)
                try:
                    # a lingering pull: it returns as soon as messages come, so a long
                    # expiry costs no latency, only fewer requests while idle
                    msgs = await psub.fetch(self.fetch_batch, timeout=FETCH_WAIT)
                except (TimeoutError, NatsTimeout):
                    continue
                await self._take(msgs)
            except asyncio.CancelledError:
                if psub is not None:
                    with contextlib.suppress(Exception):
                        await psub.unsubscribe()
                raise
            except Exception as exc:
                self._note(f"fetch from {stream} failed", exc)
                if psub is not None:
                    with contextlib.suppress(Exception):
                        await psub.unsubscribe()
                psub = None
                await asyncio.sleep(0.5)

    async def _take(self, msgs: list[Any]) -> None:
        """Write a fetched batch into the inbox (one fsynced transaction), then ack it.

        Slice records that came on another vshard's subject (an owner's carrier)
        for a shard this node does not own now (the map changed after they were
        published) go back into the outbox, fsynced before the ack like the
        inbox, and from there to their shard's owner."""
        lines: list[bytes] = []
        poison: list[bytes] = []
        away: list[bytes] = []
        redelivered = 0
        learnt = False
        owner = self.map.get("owner", {})
        moving = self.map.get("moving", {})
        for m in msgs:
            body = m.data.split(b"\n") if m.data else []
            keep: list[bytes] = []
            gone: list[bytes] = []
            try:
                carrier = int(m.subject.rsplit(".", 1)[1])
            except (ValueError, IndexError):
                carrier = -1
            try:
                for line in body:
                    rec = orjson.loads(line)
                    if not isinstance(rec, dict):
                        raise ValueError("not an object")
                    if "home" in rec:  # a re-homed host: known here before its URLs are admitted
                        learnt = self._learn(rec) or learnt
                    v = rec.get("vshard")
                    if v != carrier and isinstance(v, int) and _is_slice(rec) and (
                            owner.get(str(v)) != self.node or str(v) in moving):
                        gone.append(line)
                    else:
                        keep.append(line)
            except (orjson.JSONDecodeError, ValueError):
                poison.append(orjson.dumps({"kind": "dead", "subject": m.subject,
                                            "data": m.data.decode("utf-8", "replace")}))
                continue
            lines += keep
            away += gone
            with contextlib.suppress(Exception):
                if m.metadata.num_delivered > 1:
                    redelivered += len(body)
        if learnt:
            self._write_homes()
        if lines:
            await asyncio.to_thread(self.inbox.put, lines)
        if away:
            await asyncio.to_thread(self.outbox.put, away)
            self.counts["forwarded"] += len(away)
        if poison:
            await self._dead(poison, "poison message (lines that are not JSON objects)", raw=True)
        for m in msgs:
            await m.ack()
        self.counts["consumed"] += len(lines)
        self.counts["redelivered"] += redelivered

    def _learn(self, rec: dict[str, Any]) -> bool:
        try:
            key = rec["host"] if rec.get("kind") in ("host", "seen") else host_key(rec["url"])
            v = int(rec["vshard"])
        except (KeyError, TypeError, ValueError):
            return False
        if not isinstance(key, str) or self.homes.get(key) == v or v == vshard(key, self.cfg.v):  # type: ignore[union-attr]
            return False
        self.homes[key] = v
        return True

    async def _dead(self, items: list[bytes], why: str, raw: bool = False) -> None:
        recs = items if raw else [orjson.dumps({"kind": "dead", "data": i.decode("utf-8", "replace")})
                                  for i in items]
        await asyncio.to_thread(self.dead.put, recs)
        self.counts["dead"] += len(items)
        print(f"crawl cluster bridge {self.node}: {len(items)} {why} set aside in "
              f"{self.dir / DEAD} ({self.counts['dead']} so far)", file=self.log, flush=True)

    # -- handoff ------------------------------------------------------------------------
    async def _handoff(self) -> None:
        """Finish the move of draining shards the crawl process has exported."""
        if not self.draining:
            return
        done_path = self.dir / HANDOFF_DONE
        try:
            done = orjson.loads(done_path.read_bytes())
        except (FileNotFoundError, orjson.JSONDecodeError):
            return
        vs = done.get("vshards")
        vs = set(vs if isinstance(vs, list) else [done["vshard"]] if "vshard" in done else [])
        vs &= self.draining
        if not vs:
            return
        while True:  # the whole exported slice, in spool order
            batch = await asyncio.to_thread(self.handoff.claim, self.out_batch)
            if not batch:
                break
            await self._send_spool(self.handoff, "h", batch)
            self.counts["handed_over"] += len(batch)
        from .kv import complete_moves

        for _ in range(50):
            cur, rev = await self.cl.read_map()  # type: ignore[union-attr]
            new = complete_moves(cur, self.node, vs)
            if new is None or await self.cl.cas_map(new, rev):  # type: ignore[union-attr]
                break
        with contextlib.suppress(FileNotFoundError):
            done_path.unlink()
        cur, rev = await self.cl.read_map()  # type: ignore[union-attr]
        await self._apply(cur, rev)
        self._note(f"handed over {len(vs)} shard(s)")

    async def _refresh_ip_share(self) -> None:
        if time.monotonic() < self._ip_next:
            return
        self._ip_next = time.monotonic() + 5.0
        # reading the registry is one get per address: only when it or the map changed
        from .kv import ip_bucket

        info = await self.cl.js.stream_info(f"KV_{ip_bucket(self.crawl)}")  # type: ignore[union-attr]
        mark = (info.state.last_seq, self.map.get("epoch"))
        if mark == self._ip_mark:
            return
        self._ip_mark = mark
        keys = await self.cl.keys_ip()  # type: ignore[union-attr]
        reg = await self.cl.ip_registry(keys)  # type: ignore[union-attr]
        homes = await self.cl.homes(keys)  # type: ignore[union-attr]
        if any(self.homes.get(h) != v for h, v in homes.items()):
            self.homes.update(homes)
            self._write_homes()
        share = ip_share(reg, self.map.get("owner", {}))
        if share != self.ip_share:
            self.ip_share = share
            self._write_map()

    # -- status -------------------------------------------------------------------------
    async def _status_loop(self) -> None:
        while True:
            try:
                assert self.cfg is not None and self.cl is not None
                lag: dict[str, int] = {}
                queued = 0
                for k in range(len(self.cfg.ranges())):
                    name = stream_name(self.crawl, k)
                    info = await self.cl.js.stream_info(name)
                    queued += info.state.messages
                    if not info.state.messages or not self.consuming.get(k):
                        continue  # per-subject counts only where something waits
                    info = await self.cl.js.stream_info(
                        name, subjects_filter=f"crawl.{self.crawl}.links.*")
                    for subj, n in (info.state.subjects or {}).items():
                        v = int(subj.rsplit(".", 1)[1])
                        if v in self.owned:
                            lag[str(v)] = n
                self.lag, self.queued = lag, queued
                # the members the last map round read (at most PLAN_QUIET old): the idle
                # judgement waits for them to stand still longer than that anyway
                self.cluster_idle = self._judge_idle(self.planner.members, queued)
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                self._note("status round failed", exc)
            self._write_status()
            await asyncio.sleep(2.0)

    def _write_status(self) -> None:
        info = self._info()
        info.update({"node": self.node, "crawl": self.crawl, "ts": time.time(),
                     "heartbeat_ok": not self.fenced and self.last_beat > 0,
                     "redelivered": self.counts["redelivered"],
                     "republished": self.counts["republished"],
                     "messages": self.counts["messages"],
                     "handed_over": self.counts["handed_over"],
                     "forwarded": self.counts["forwarded"],
                     "rehomed": self.counts["rehomed"], "homes": len(self.homes),
                     "lag": self.lag, "queued_in_streams": self.queued,
                     "cluster_idle": self.cluster_idle,
                     "draining": sorted(self.draining), "error": self.error,
                     "outbox": self.outbox.counts(), "inbox": self.inbox.counts()})
        with contextlib.suppress(OSError):
            _jdump(self.dir / BRIDGE_STATUS, info)


def run_bridge(servers: str, crawl: str, node: str, crawl_dir: str | os.PathLike[str],
               **opts: Any) -> int:
    """Run a bridge until SIGTERM/SIGINT (the ``crawl cluster bridge`` command)."""
    bridge = Bridge(servers, crawl, node, crawl_dir, **opts)

    async def main() -> None:
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, bridge.stop.set)
        await bridge.run()

    asyncio.run(main())
    return 0
