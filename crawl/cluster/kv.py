"""The cluster's shared state in JetStream: streams, the shard map, membership, the IP registry.

Asyncio (nats-py): imported only by the bridge process and the ``crawl
cluster`` commands, never by the trio crawl process.

* **Streams.** Links for vshard ``v`` go to subject ``crawl.<crawl>.links.<v>``.
  The vshards are split by range over a few streams so that their leaders
  (each takes every publish of its range) spread over the servers; file
  storage, work-queue retention (a message is gone once acknowledged),
  a two-minute duplicate window for ``Nats-Msg-Id``, R3 (R1 on one server).
* **Map** (bucket ``crawl-<crawl>``, key ``map``): ``{"epoch", "V", "owner":
  {vshard: node}, "moving": {vshard: node}}``, changed only by
  compare-and-set on the key's revision: of two writers who read the same
  revision exactly one wins (the other gets a wrong-last-sequence error,
  re-reads and re-plans). Every bridge plans; whoever wins the CAS was the
  coordinator for that epoch.
* **Membership** (bucket ``crawl-<crawl>-members``, key per node): a
  heartbeat every ``ttl/3`` into a bucket whose ``max_age`` is the TTL, so
  a silent node's key vanishes by itself. A vanished owner keeps its shards
  for a further ``grace`` (a restarted node resumes its own LMDB); after
  that its shards are reassigned directly. A live owner gives a shard up
  only through a handoff (``moving``), never by a map flip.
* **Assignment** is rendezvous hashing over the eligible nodes (alive, not
  draining): a node joining or leaving moves about 1/N of the shards.
* **IP registry** (bucket ``crawl-<crawl>-ip``, a key ``ip.<addr>.<vshard>``
  per vshard whose hosts resolved to that address). ``ip_share`` counts, from
  the registry and the map, how many nodes hold hosts on each IP.
* **Homes** (same bucket): ``home.<addr>`` names the vshard of the first host
  placed on an address (created once, first writer wins), and
  ``o.<addr>.<home>.<host>`` re-homes one host of a small group to it (created
  once per host, never changed). A host's shard is then its home's, wherever
  the map puts that vshard: the group has one owner, and a handoff of the home
  vshard carries its re-homed hosts along.
"""

from __future__ import annotations

import asyncio
import hashlib
import re
import time
from dataclasses import dataclass
from typing import Any

import orjson

from crawl.core import UsageError

NAME_RE = re.compile(r"^[A-Za-z0-9_-]{1,64}$")
MAP_KEY = "map"
CONFIG_KEY = "config"
DRAIN_PREFIX = "drain."


def check_name(what: str, name: str) -> str:
    """Crawl and node names become subject tokens and bucket names: letters, digits, - and _."""
    if not NAME_RE.match(name or ""):
        raise UsageError(f"{what} name {name!r} is not usable: use 1-64 letters, digits, '-' or '_'")
    return name


def subject(crawl: str, v: int) -> str:
    return f"crawl.{crawl}.links.{v}"


def stream_name(crawl: str, k: int) -> str:
    return f"CRAWL_{crawl}_L{k}"


def map_bucket(crawl: str) -> str:
    return f"crawl-{crawl}"


def members_bucket(crawl: str) -> str:
    return f"crawl-{crawl}-members"


def ip_bucket(crawl: str) -> str:
    return f"crawl-{crawl}-ip"


def ip_key(ip: str) -> str:
    """KV keys allow [-/_=.A-Za-z0-9]: an IPv6 address's colons become underscores."""
    return "ip." + re.sub(r"[^A-Za-z0-9.-]", "_", ip)


def addr_token(ip: str) -> str:
    """An address as ONE key token (its dots and colons become underscores)."""
    return re.sub(r"[^A-Za-z0-9-]", "_", ip)


HOST_TOKEN = re.compile(r"^[a-z0-9_-]+(\.[a-z0-9_-]+)*(:[0-9]{1,5})?$")


def host_token(host: str) -> str | None:
    """A host key (``host[:port]``) as the tail of a KV key (``:`` becomes ``=``), or
    None for one a key cannot carry (such a host is never re-homed)."""
    return host.replace(":", "=") if HOST_TOKEN.match(host) else None


def override_key(ip: str, home: int, host: str) -> str | None:
    tok = host_token(host)
    return None if tok is None else f"o.{addr_token(ip)}.{home}.{tok}"


def parse_override(key: str) -> tuple[str, int, str] | None:
    """``o.<addr>.<home>.<host>`` -> (addr token, home vshard, host key)."""
    parts = key.split(".", 3)
    if len(parts) != 4 or parts[0] != "o" or not parts[2].isdigit():
        return None
    return parts[1], int(parts[2]), parts[3].replace("=", ":")


def stream_ranges(v: int, streams: int) -> list[range]:
    """The vshards of each stream: ``streams`` contiguous ranges covering 0..v-1."""
    streams = max(1, min(streams, v))
    cuts = [v * k // streams for k in range(streams + 1)]
    return [range(cuts[k], cuts[k + 1]) for k in range(streams)]


def stream_of(v: int, ranges: list[range]) -> int:
    for k, r in enumerate(ranges):
        if v in r:
            return k
    raise ValueError(f"vshard {v} outside 0..{ranges[-1].stop - 1}")


def rendezvous(v: int, nodes: list[str]) -> str:
    """The owner of vshard ``v`` among ``nodes``: highest hash of (node, v) wins.

    Removing a node moves only its own shards; adding one takes about 1/N
    from each of the others, and every planner computes the same answer.
    """
    return max(nodes, key=lambda n: hashlib.blake2b(f"{n}\0{v}".encode(), digest_size=8).digest())


@dataclass
class ClusterConfig:
    """What ``crawl cluster init`` fixed: V, streams, replicas, TTL and grace."""

    crawl: str
    v: int = 1024
    streams: int = 3
    replicas: int = 3
    ttl: float = 10.0
    grace: float = 60.0
    ack_wait: float = 60.0
    expect: int = 0  # members the first map waits for (up to the grace), 0: whoever is there
    # Hosts sharing an address are re-homed to one vshard (one owner, the whole --per-ip
    # cap) while the group has at most this many; larger groups are split by count.
    # 0 or 1: never re-home.
    ip_group: int = 16

    def ranges(self) -> list[range]:
        return stream_ranges(self.v, self.streams)

    def as_json(self) -> bytes:
        return orjson.dumps(self.__dict__)

    @classmethod
    def from_json(cls, raw: bytes) -> ClusterConfig:
        data = orjson.loads(raw)
        return cls(**{k: data[k] for k in cls.__dataclass_fields__ if k in data})


# -- the map: pure planning ------------------------------------------------------------

def empty_map(v: int) -> dict[str, Any]:
    return {"epoch": 0, "V": v, "owner": {}, "moving": {}}


def plan(cur: dict[str, Any], alive: set[str], leaving: set[str], absent_since: dict[str, float],
         now: float, grace: float) -> dict[str, Any] | None:
    """The next map, or None when ``cur`` is already right.

    ``alive``: nodes whose heartbeat is in KV; ``leaving``: alive nodes being
    drained; ``absent_since``: when this planner first saw an owner missing.
    A shard whose owner is gone past the grace (or that has no owner) goes
    straight to its rendezvous node; a shard whose owner is alive but is no
    longer its rendezvous node is marked ``moving`` (the owner hands it over
    and completes the move itself); an absent owner within its grace keeps
    its shards.
    """
    eligible = sorted(alive - leaving)
    if not eligible:
        return None
    v_count = int(cur["V"])
    owner = {int(k): n for k, n in cur.get("owner", {}).items()}
    moving = {int(k): n for k, n in cur.get("moving", {}).items()}
    graced = {n for n in set(owner.values()) - alive if now - absent_since.get(n, now) < grace}
    new_owner, new_moving = dict(owner), dict(moving)
    for v in range(v_count):
        o = owner.get(v)
        want = rendezvous(v, eligible)
        if o == want:
            new_moving.pop(v, None)
        elif o is None or (o not in alive and o not in graced):
            new_owner[v] = want
            new_moving.pop(v, None)
        elif o in graced:
            new_moving.pop(v, None)  # a move to or from a node that is away waits for it
        else:
            new_moving[v] = want
    if new_owner == owner and new_moving == moving:
        return None
    return {"epoch": int(cur["epoch"]) + 1, "V": v_count,
            "owner": {str(k): n for k, n in sorted(new_owner.items())},
            "moving": {str(k): n for k, n in sorted(new_moving.items())}}


def complete_moves(cur: dict[str, Any], node: str, vshards: set[int]) -> dict[str, Any] | None:
    """The map after ``node`` handed ``vshards`` over to their ``moving`` targets."""
    owner = dict(cur.get("owner", {}))
    moving = dict(cur.get("moving", {}))
    done = False
    for v in vshards:
        k = str(v)
        if owner.get(k) == node and k in moving:
            owner[k] = moving.pop(k)
            done = True
    if not done:
        return None
    return {"epoch": int(cur["epoch"]) + 1, "V": cur["V"], "owner": owner, "moving": moving}


def ip_share(registry: dict[str, list[int]], owner: dict[str, str]) -> dict[str, int]:
    """For each IP whose hosts' shards are held by more than one node, how many nodes."""
    out = {}
    for ip, vshards in registry.items():
        k = len({owner.get(str(v)) for v in vshards} - {None})
        if k > 1:
            out[ip] = k
    return out


# -- the engine -----------------------------------------------------------------------

async def connect(servers: str | list[str], *, name: str = "crawl", timeout: float = 5.0,
                  reconnect: bool = True) -> Any:
    """A nats-py connection to any of ``servers`` (comma list of nats:// URLs)."""
    import nats

    urls = [u.strip() for u in servers.split(",")] if isinstance(servers, str) else list(servers)
    urls = [u if "://" in u else f"nats://{u}" for u in urls if u]
    if not urls:
        raise UsageError("no servers given: --servers nats://HOST:PORT[,...]")

    async def quiet(exc: Exception) -> None:  # the client logs every failed reconnect otherwise
        return None

    # Without reconnects nats-py still cycles through the servers until each was
    # tried max_reconnect_attempts times (0 means for ever): 1, and a deadline.
    opts = dict(servers=urls, name=name, connect_timeout=timeout, allow_reconnect=reconnect,
                max_reconnect_attempts=-1 if reconnect else 1, reconnect_time_wait=0.5,
                error_cb=quiet, ping_interval=5, max_outstanding_pings=3)
    try:
        if reconnect:
            return await nats.connect(**opts)
        return await asyncio.wait_for(nats.connect(**opts), timeout * (len(urls) + 1) + 1)
    except Exception as exc:  # nats raises several kinds; all mean the same to the operator
        raise UsageError(f"cannot reach the cluster at {','.join(urls)} ({exc or type(exc).__name__}): "
                         "is it running? (crawl cluster dev, or check --servers)") from None


async def _keys(js: Any, bucket: str) -> list[str]:
    """The keys a bucket holds now, from one stream-info call.

    ``KeyValue.keys()`` creates a consumer per call; called every half second by
    every bridge, those pile up until the server refuses more (error 10026).
    Deleted keys may still be listed (their tombstone): the reader skips them.
    """
    pre = f"$KV.{bucket}."
    info = await js.stream_info(f"KV_{bucket}", subjects_filter=pre + ">")
    return [s[len(pre):] for s in (info.state.subjects or {})]


class Cluster:
    """Handles on one crawl's streams and buckets (after ``crawl cluster init``)."""

    def __init__(self, nc: Any, crawl: str, timeout: float = 10.0) -> None:
        self.nc = nc
        self.js = nc.jetstream(timeout=timeout)  # every API and KV call's, publishes too
        self.crawl = check_name("crawl", crawl)
        self.config: ClusterConfig | None = None
        self.kv_map: Any = None
        self.kv_members: Any = None
        self.kv_ip: Any = None

    # -- creation -------------------------------------------------------------------
    async def init_patiently(self, config: ClusterConfig, *, v_given: bool = True, attempts: int = 120) -> bool:
        """:meth:`init`, asked again while the servers cannot answer yet.

        Just after a cluster starts (or a server restarts) a stream or bucket made a
        moment ago may have no server answering for it yet ("no response from
        stream", or no answer at all), and a restarted server answers its health
        check a little before the meta group counts it again ("no suitable peers for
        placement, peer offline", error 10005); init only creates what is missing,
        so asking again is safe."""
        from nats.errors import TimeoutError as NatsTimeout
        from nats.js.errors import BadRequestError, NoStreamResponseError

        for attempt in range(attempts):
            try:
                return await self.init(config, v_given=v_given)
            except (NoStreamResponseError, NatsTimeout, BadRequestError) as e:
                if attempt == attempts - 1 or (isinstance(e, BadRequestError)
                                               and getattr(e, "err_code", None) != 10005):
                    raise
                await asyncio.sleep(0.25)
        raise AssertionError("unreachable")  # the last attempt returned or raised

    async def init(self, config: ClusterConfig, *, v_given: bool = True) -> bool:
        """Create streams, buckets and the empty map; False when the crawl existed already
        (with the same V: then nothing changes; another V is refused)."""
        from nats.js import api
        from nats.js.errors import KeyWrongLastSequenceError

        if not (getattr(self.nc, "_server_info", None) or {}).get("cluster"):
            config.replicas = 1  # a lone server (no cluster routes) can only hold R1
        self.kv_map = await self.js.create_key_value(
            bucket=map_bucket(self.crawl), history=8, replicas=config.replicas,
            storage=api.StorageType.FILE)
        try:
            await self.kv_map.create(CONFIG_KEY, config.as_json())
            created = True
        except KeyWrongLastSequenceError:
            old = ClusterConfig.from_json((await self.kv_map.get(CONFIG_KEY)).value)
            if old.v != config.v and v_given:
                raise UsageError(f"crawl {self.crawl!r} exists with {old.v} vshards, not {config.v}: "
                                 "a crawl's vshard count is fixed when it is created") from None
            config, created = old, False
        self.config = config
        for k, r in enumerate(config.ranges()):
            cfg = api.StreamConfig(
                name=stream_name(self.crawl, k), subjects=[subject(self.crawl, v) for v in r],
                retention=api.RetentionPolicy.WORK_QUEUE, storage=api.StorageType.FILE,
                num_replicas=config.replicas, duplicate_window=120.0,
                description=f"crawl {self.crawl}: links for vshards {r.start}..{r.stop - 1}")
            await self.js.add_stream(cfg)
        self.kv_members = await self.js.create_key_value(
            bucket=members_bucket(self.crawl), history=1, ttl=config.ttl,
            replicas=config.replicas, storage=api.StorageType.FILE)
        self.kv_ip = await self.js.create_key_value(
            bucket=ip_bucket(self.crawl), history=1, replicas=config.replicas,
            storage=api.StorageType.FILE)
        try:
            await self.kv_map.create(MAP_KEY, orjson.dumps(empty_map(config.v)))
        except KeyWrongLastSequenceError:
            pass
        return created

    async def open(self) -> ClusterConfig:
        """Bind to an initialised crawl (a one-line error when it is not)."""
        from nats.js.errors import BucketNotFoundError, KeyNotFoundError

        try:
            self.kv_map = await self.js.key_value(map_bucket(self.crawl))
            self.config = ClusterConfig.from_json((await self.kv_map.get(CONFIG_KEY)).value)
            self.kv_members = await self.js.key_value(members_bucket(self.crawl))
            self.kv_ip = await self.js.key_value(ip_bucket(self.crawl))
        except (BucketNotFoundError, KeyNotFoundError):
            raise UsageError(f"crawl {self.crawl!r} is not set up on this cluster: "
                             f"run crawl cluster init --crawl {self.crawl} first") from None
        return self.config

    # -- the map ----------------------------------------------------------------------
    async def read_map(self) -> tuple[dict[str, Any], int]:
        """(map, revision) as stored now."""
        entry = await self.kv_map.get(MAP_KEY)
        return orjson.loads(entry.value), entry.revision

    async def cas_map(self, new: dict[str, Any], revision: int) -> bool:
        """Write ``new`` only if the map is still at ``revision``; True if this writer won."""
        from nats.js.errors import KeyWrongLastSequenceError, NoStreamResponseError

        for attempt in range(30):
            try:
                await self.kv_map.update(MAP_KEY, orjson.dumps(new), last=revision)
            except KeyWrongLastSequenceError:
                return False
            except NoStreamResponseError:
                # no server took it (the stream's interest not yet known where this
                # client is connected, just after creation or a restart): nothing was
                # written, so trying again keeps the CAS exact
                if attempt == 29:
                    raise
                await asyncio.sleep(0.1)
                continue
            return True
        return False

    async def leaving(self) -> set[str]:
        """Nodes an operator asked to drain (``crawl cluster drain``)."""
        from nats.js.errors import KeyNotFoundError

        out = set()
        for k in await _keys(self.js, map_bucket(self.crawl)):
            if not k.startswith(DRAIN_PREFIX):
                continue
            try:
                entry = await self.kv_map.get(k)
            except KeyNotFoundError:  # deleted (a tombstone) or gone since the listing
                continue
            if entry.value:
                out.add(k[len(DRAIN_PREFIX):])
        return out

    async def set_drain(self, node: str, on: bool = True) -> None:
        key = DRAIN_PREFIX + check_name("node", node)
        if on:
            await self.kv_map.put(key, orjson.dumps({"ts": time.time()}))
        else:
            from nats.js.errors import KeyNotFoundError
            try:
                await self.kv_map.delete(key)
            except KeyNotFoundError:
                pass

    # -- membership -------------------------------------------------------------------
    async def heartbeat(self, node: str, info: dict[str, Any]) -> None:
        await self.kv_members.put(node, orjson.dumps({"node": node, "ts": time.time(), **info}))

    async def members(self) -> dict[str, dict[str, Any]]:
        """Every node whose heartbeat has not expired: node -> its last heartbeat."""
        from nats.js.errors import KeyNotFoundError

        out = {}
        for k in await _keys(self.js, members_bucket(self.crawl)):
            try:
                entry = await self.kv_members.get(k)
            except KeyNotFoundError:  # expired between the listing and the read
                continue
            if entry.value:
                out[k] = orjson.loads(entry.value)
        return out

    async def forget(self, node: str) -> None:
        """Take a node's heartbeat away at once (a clean stop: no TTL to wait out)."""
        from nats.js.errors import KeyNotFoundError

        try:
            await self.kv_members.delete(node)
        except KeyNotFoundError:
            pass

    # -- IP registry ------------------------------------------------------------------
    async def register_ips(self, pairs: dict[str, set[int]]) -> int:
        """Record that hosts of these vshards resolved to these addresses; how many pairs.

        One key per (address, vshard), ``ip.<addr>.<vshard>``, written with a plain
        put, all at once: idempotent, so no read and no CAS (a read-modify-write per
        address cost a get and a replicated CAS each, most of the engine's CPU in
        bench_cluster), and the whole registry is read back with one stream-info call.
        """
        keys = [f"{ip_key(ip)}.{v}" for ip, vs in pairs.items() for v in sorted(vs)]
        await asyncio.gather(*(self.kv_ip.put(k, b"") for k in keys))
        return len(keys)

    async def home_of(self, ip: str, v: int) -> int:
        """The home vshard of an address: ``v`` if this call is the first to place a host
        on it (``home.<addr>`` created), else the one stored (first writer wins)."""
        from nats.js.errors import KeyWrongLastSequenceError

        key = f"home.{addr_token(ip)}"
        try:
            await self.kv_ip.create(key, str(v).encode())
            return v
        except KeyWrongLastSequenceError:
            entry = await self.kv_ip.get(key)
            return int(entry.value or v)

    async def group_size(self, ip: str) -> int:
        """Hosts re-homed on ``ip`` so far (one stream-info call over its override keys)."""
        pre = f"$KV.{ip_bucket(self.crawl)}.o.{addr_token(ip)}."
        info = await self.js.stream_info(f"KV_{ip_bucket(self.crawl)}", subjects_filter=pre + ">")
        return len(info.state.subjects or {})

    async def rehome(self, ip: str, home: int, host: str) -> bool:
        """Write the override re-homing ``host`` to vshard ``home``; False if it cannot be
        keyed. Idempotent (the key names everything; its value is empty)."""
        key = override_key(ip, home, host)
        if key is None:
            return False
        await self.kv_ip.put(key, b"")
        return True

    async def keys_ip(self) -> list[str]:
        """The IP bucket's keys (one stream-info call), for :meth:`homes` and :meth:`ip_registry`."""
        return await _keys(self.js, ip_bucket(self.crawl))

    async def homes(self, keys: list[str] | None = None) -> dict[str, int]:
        """Every re-homed host -> its home vshard (the lowest, should a host have two
        overrides: learnt under two addresses), from one stream-info call."""
        out: dict[str, int] = {}
        for k in await self.keys_ip() if keys is None else keys:
            if not k.startswith("o."):
                continue
            got = parse_override(k)
            if got is not None:
                _, home, host = got
                out[host] = min(home, out.get(host, home))
        return out

    async def ip_registry(self, keys: list[str] | None = None) -> dict[str, list[int]]:
        """Address -> the sorted vshards whose hosts resolved to it."""
        out: dict[str, set[int]] = {}
        for k in await self.keys_ip() if keys is None else keys:
            if not k.startswith("ip."):
                continue
            addr, _, v = k[len("ip."):].rpartition(".")
            if not addr or not v.isdigit():
                continue
            out.setdefault(addr.replace("_", ":"), set()).add(int(v))
        return {ip: sorted(vs) for ip, vs in out.items()}


class Planner:
    """One node's view of who is absent since when, and the CAS loop around :func:`plan`."""

    def __init__(self, cluster: Cluster, settle: float | None = None) -> None:
        self.cluster = cluster
        self.absent_since: dict[str, float] = {}
        # A new crawl's first map waits until the members stopped changing for a
        # moment: nodes started together then get their shards directly instead
        # of the first one taking all and handing most of them over.
        self.settle = settle
        self._seen: tuple[frozenset[str], float] | None = None
        self._first: float | None = None
        self.members: dict[str, dict[str, Any]] = {}

    async def step(self, now: float | None = None) -> tuple[dict[str, Any], int, bool]:
        """Read members and map, plan, CAS if needed: (map, revision, whether this node wrote it)."""
        assert self.cluster.config is not None
        now = time.time() if now is None else now
        self.members = await self.cluster.members()
        alive = set(self.members)
        leaving = await self.cluster.leaving()
        cur, rev = await self.cluster.read_map()
        owners = set(cur.get("owner", {}).values())
        for n in owners - alive:
            self.absent_since.setdefault(n, now)
        for n in list(self.absent_since):
            if n in alive or n not in owners:
                del self.absent_since[n]
        settle = self.cluster.config.ttl / 3 if self.settle is None else self.settle
        if self._seen is None or self._seen[0] != frozenset(alive):
            self._seen = (frozenset(alive), now)
        if not cur.get("owner"):
            if now - self._seen[1] < settle:
                return cur, rev, False
            if self._first is None and alive:
                self._first = now
            waited = now - (self._first or now)
            if len(alive) < self.cluster.config.expect and waited < self.cluster.config.grace:
                return cur, rev, False
        new = plan(cur, alive, leaving & alive, self.absent_since, now, self.cluster.config.grace)
        if new is None:
            return cur, rev, False
        if await self.cluster.cas_map(new, rev):
            cur, rev = await self.cluster.read_map()
            return cur, rev, True
        cur, rev = await self.cluster.read_map()
        return cur, rev, False


# -- what the commands run ----------------------------------------------------------------

async def init_cluster(servers: str, config: ClusterConfig,
                       v_given: bool = True) -> tuple[bool, ClusterConfig]:
    """``crawl cluster init``: (whether it was created now, the crawl's config)."""
    nc = await connect(servers, reconnect=False)
    try:
        cl = Cluster(nc, config.crawl)
        created = await cl.init_patiently(config, v_given=v_given)
        assert cl.config is not None
        return created, cl.config
    finally:
        await nc.close()


async def drain_node(servers: str, crawl: str, node: str, *, undo: bool = False, wait: bool = True,
                     timeout: float = 600.0, progress: Any = None) -> int:
    """``crawl cluster drain``: mark ``node`` leaving; with ``wait``, until it owns nothing.

    Returns how many shards it still owns.
    """
    nc = await connect(servers, reconnect=False)
    try:
        cl = Cluster(nc, crawl)
        await cl.open()
        if node not in await cl.members() and not undo:
            cur, _ = await cl.read_map()
            if node not in set(cur.get("owner", {}).values()):
                raise UsageError(f"node {node!r} is not a member of crawl {crawl!r} and owns no shard "
                                 "(see crawl cluster status)")
        await cl.set_drain(node, not undo)
        deadline = time.monotonic() + timeout
        last = -1
        while True:
            cur, _ = await cl.read_map()
            left = sum(1 for n in cur.get("owner", {}).values() if n == node)
            if not wait or left == 0 or time.monotonic() > deadline:
                return left
            if left != last and progress is not None:
                progress(left)
            last = left
            await asyncio.sleep(0.5)
    finally:
        await nc.close()
