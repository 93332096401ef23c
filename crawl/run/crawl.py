"""``crawl run``: the whole loop in one process, built from the stage functions.

::

    frontier.next ──leases──▶ fetch_all ──results──▶ [spool: fetched] ──▶ frontier.complete
         ▲                                               │                 + crawl log
         └── frontier.add ◀── seen ◀── scope ◀── parse ◀─┘ (dedupe first)

The same library functions as the separate commands, wired with trio tasks
and one durable spool. Why this is crash-safe (DESIGN invariant 1):

* a fetch result is put in the ``fetched`` spool (fsynced) *before* the
  frontier completes its lease; a crash in between only lets the lease
  expire and the URL be fetched again (at-least-once);
* a spool batch is acknowledged only after its links are in the frontier,
  and links are marked seen only *after* the frontier has them, so a crash
  re-processes the batch and the frontier's own "already known" check makes
  the repeat a no-op: no link is ever lost between seen and frontier;
* the frontier, seen set, spool and WARC files are LMDB or fsynced files,
  so SIGKILL at any moment leaves a state the next run resumes from.

Everything blocking (LMDB, parsing, WARC writes) runs in worker threads so
the event loop keeps the sockets busy; the tasks themselves, signals and
the optional parse processes live in :mod:`crawl.run.loop`.
"""

from __future__ import annotations

import math
import sys
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import orjson

from crawl.canon import CanonError
from crawl.core import (
    Batch,
    CrawlDir,
    CrawlError,
    Record,
    Spool,
    hold_dir,
    open_env,
    records,
    replace_file,
)
from crawl.dedupe import Deduper
from crawl.frontier import Frontier, Politeness, enqueue_due, wait_notice
from crawl.parse import LinkGraph, ParseConfig
from crawl.recrawl import Recrawler, split_budget
from crawl.seen import SeenSet, canonical
from crawl.store import read_response

from .crawllog import CrawlLog, event_of
from .options import CYCLE_MODES as CYCLE_MODES
from .options import describe
from .scope import Scope
from .stats import RUN_STATUS

if TYPE_CHECKING:
    from crawl.cluster import Node
    from crawl.fetch import FetchConfig, StoreOptions
    from crawl.net import AddressPolicy

FAILURES = frozenset({"timeout", "connect-error", "dns-error", "protocol-error", "http-error"})
# Longest wait of the lease loop with nothing to lease: completions and new
# links wake it at once; this bounds what nobody announces (another process's
# frontier add, an expired lease, a stop).
LEASE_POLL = 0.1
_DUE_CHUNK = 10_000  # URLs the freshness model hands over per transaction at a cycle's start


@dataclass
class Budgets:
    """When a run stops by itself. 0 / None means no limit.

    Budgets are per run: ``max_pages`` counts the pages *this* run fetched and
    ``duration`` runs from its start, so the same cron line crawls again every
    night however much the crawl directory holds. ``max_per_host`` is not a
    run's budget but a bound on the crawl directory (traps, huge sites): the
    distinct URLs of a host ever admitted; a new cycle's re-visits of them
    do not count again.
    """

    max_pages: int = 0  # pages this run fetched (outcome ok or not-modified); leasing stops there
    max_per_host: int = 0  # distinct URLs admitted per host, over the crawl directory's life
    duration: float = 0.0  # seconds of wall time for this run
    idle_exit: float = 60.0  # end when nothing is due for this long (work stays queued)


def _fetch_config() -> FetchConfig:
    # the fetch side's options load the fetcher (trio, the network stack): only a
    # process that fetches builds them, not a parse process (crawl/run/child.py)
    from crawl.fetch import FetchConfig

    return FetchConfig()


def _address_policy() -> AddressPolicy:
    from crawl.net import AddressPolicy

    return AddressPolicy()


def _store_options() -> StoreOptions:
    from crawl.fetch import StoreOptions

    return StoreOptions()


@dataclass
class RunOptions:
    budgets: Budgets = field(default_factory=Budgets)
    scope: Scope = field(default_factory=Scope)
    politeness: Politeness = field(default_factory=Politeness)
    fetch: FetchConfig = field(default_factory=_fetch_config)
    parse: ParseConfig = field(default_factory=ParseConfig)
    overrides: dict[str, list[str]] = field(default_factory=dict)
    resolve_fallback: bool = True
    address_policy: AddressPolicy = field(default_factory=_address_policy)
    store: StoreOptions = field(default_factory=_store_options)
    lease_seconds: float = 0.0  # 0: derived from the fetch timeouts
    batch: int = 256
    grace: float = 5.0  # seconds in-flight fetches get after Ctrl-C / SIGTERM
    parse_procs: int = 0  # 0: dedupe/parse/seen in this process; N: in N child processes
    recrawl: bool = False  # run continuously, re-admitting pages the freshness model says are due
    recrawl_share: float = 0.5  # fraction of lease capacity reserved for re-crawl when both wait
    recrawl_budget: float = 0.0  # re-crawl fetches per second (0: share x --batch per second)
    # "auto": a run given seeds starts a new cycle once the previous one has
    # finished (nothing queued, leased or unparsed); "new": always; "continue": never
    cycle: str = "auto"
    # Fetched pages waiting for the parse side before leasing pauses. Without
    # a bound, a fetch side faster than parsing piles up work: links reach the
    # frontier late, and a --duration run overran by the whole pile (measured:
    # 100 s for a 60 s budget). About five seconds of parsing at ~200 pages/s.
    max_backlog: int = 1000
    # A crawl shared by several nodes (crawl/cluster): the NATS servers (comma list),
    # the crawl's name in the cluster, this node's name. "" when not shared.
    cluster: str = ""
    cluster_crawl: str = ""
    node: str = ""


class Progress:
    """Counters the loop updates and the progress display reads."""

    def __init__(self, pages_before: int = 0) -> None:
        self.started = time.time()
        self.counts: dict[str, int] = {}
        self.pages = 0  # pages this run fetched: what --max-pages counts
        self.pages_before = pages_before  # the crawl directory's earlier runs (from the run state)
        self.bytes = 0
        self.window: list[tuple[float, int]] = [(self.started, 0)]
        self.results = 0
        self.backpressure = 0.0  # seconds leasing waited for the parse side

    def add(self, key: str, n: int = 1) -> None:
        self.counts[key] = self.counts.get(key, 0) + n

    def rate(self, now: float) -> float:
        self.window.append((now, self.results))
        while len(self.window) > 2 and now - self.window[0][0] > 10.0:
            self.window.pop(0)
        t0, n0 = self.window[0]
        return (self.results - n0) / (now - t0) if now > t0 else 0.0


class Crawl:
    """One crawl directory opened for ``crawl run``."""

    def __init__(self, cdir: CrawlDir, opts: RunOptions, *, child: bool = False) -> None:
        # One run per directory (crawl/core/dirlock.py), taken before anything is
        # opened. A parse process (child) works under its parent's hold.
        self.dir_lock = None if child else hold_dir(cdir.root)
        self.cdir = cdir
        self.opts = opts
        if not opts.lease_seconds:
            lim = opts.fetch.limits
            # robots.txt and the page can each take the whole timeout; a lease
            # must outlive both, or a slow host could be leased twice at once.
            opts.lease_seconds = 2 * lim.total + lim.connect + 30.0
        self.frontier = Frontier(cdir.frontier, opts.politeness)
        # shared crawl: lease only this node's shards, route other hosts' links away
        self.node: Node | None = None
        if opts.cluster:  # here: a crawl of one machine never loads the cluster client
            from crawl.cluster import Node

            self.node = Node(cdir.root, self.frontier)
        self.seen = SeenSet(cdir.seen)
        self.dedupe = Deduper(cdir.dedupe)
        # History for the freshness model is kept on every crawl, so a later
        # `crawl recrawl` (or `crawl run --recrawl`) has something to learn from.
        self.recrawler = Recrawler(cdir)
        self.next_recrawl = 0.0
        self.fetched = Spool(cdir.spools / "fetched")
        self.log = CrawlLog(cdir.log)
        self.graph = LinkGraph(cdir.graph)  # each page's out-links, for report and why
        self.state = open_env(cdir.sub("runstate"), max_dbs=4)
        self.hostcap = self.state.open_db(b"host-admitted")
        self.meta = self.state.open_db(b"meta")
        self.progress = Progress(self._meta_int(b"pages"))
        raw = self._meta(b"warc-files")
        self.last_warc_files: list[str] = orjson.loads(raw) if raw else []  # the previous run's
        self.warc_files: set[str] = set()  # this run's
        self.stopping = ""  # why leasing stopped ("" while running)
        # leases this run handed out whose results have not come back: --max-pages
        # leases no more than the budget left after them (exact, never overshot)
        self.outstanding = 0
        self._outstanding_lock = threading.Lock()
        # held while the budget is checked and leases are taken: the lease loop and
        # the hand-offs at answers' ends (handoff) lease from different threads
        self._lease_lock = threading.Lock()
        self.fetch_done = False
        self.deadline = time.time() + opts.budgets.duration if opts.budgets.duration else math.inf
        self.last_lease = time.time()
        # news for the operator (a host starts or stops waiting on its robots.txt)
        self.notify: Callable[[str], None] = _say
        self.heartbeat = 10.0  # seconds between status writes (the display's interval)
        # Wake-ups, not polling: the lease loop waits on `wake` (set when results
        # complete leases, links reach the frontier or a signal stops leasing),
        # so a host is leased again as soon as its last fetch completes; the
        # parse task waits on `fed` (set when results reach the spool). loop.py
        # sets the two hooks to reach parse processes: results for them
        # (on_results), and their links for the parent (on_links).
        self.wake = threading.Event()
        self.fed = threading.Event()
        self.on_results: Callable[[], None] | None = None
        self.on_links: Callable[[], None] | None = None
        self.next_poll = 0.0  # the lease loop's next write transaction with no host due

    def close(self) -> None:
        self.recrawler.close()
        self.dedupe.close()
        self.seen.close()
        if self.node is not None:
            self.node.close()
        self.frontier.close()
        self.graph.close()
        self.fetched.close()
        if self.dir_lock is not None:
            self.dir_lock.release()

    # -- admission: scope, per-host cap, seen, frontier ---------------------

    def _meta(self, key: bytes) -> bytes | None:
        with self.state.begin() as txn:
            raw = txn.get(key, db=self.meta)
        return bytes(raw) if raw is not None else None

    def _meta_int(self, key: bytes) -> int:
        raw = self._meta(key)
        return int(raw) if raw else 0

    def check_last_files(self) -> list[str]:
        """On resume: do the WARC files the last run wrote still hold every record
        their index names? What is found is returned as lines for stderr, and the
        pages whose records are gone are queued again (crawl/run/check.py)."""
        from .check import check_tails

        return check_tails(self.cdir, self.frontier, self.last_warc_files, time.time())

    def admit(self, recs: list[Record], now: float, reseed: bool = False, *, judged: bool = False) -> dict[str, int]:
        """Put new, in-scope URLs into the frontier; then mark them seen.

        ``reseed``: the seeds of a new cycle. They pass even when seen (the
        seen set is the crawl's memory of every URL, and would keep a seed
        out of every cycle after the first); the frontier, in its new cycle,
        takes them again, and the host cap counts only URLs never seen.
        """
        counts = {"in": len(recs), "out_of_scope": 0, "host_cap": 0, "seen": 0, "added": 0, "rejected": 0}
        fresh: list[Record] = []
        fps: list[int] = []
        batch_fps: set[int] = set()
        # A parse batch links to the same few hundred URLs thousands of times (navigation,
        # footers): the URL rules of the scope judge each fingerprint once. The depth rule
        # is per link, and first, so every link is counted as reason_out would count it.
        scope = self.opts.scope
        out_fps: set[int] = set()  # judged out of scope by their URL in this call
        for rec in recs:
            if rec.get("kind") not in records.URL_KINDS:
                continue
            try:
                rec, fp = canonical(rec)
            except CanonError:
                counts["rejected"] += 1
                continue
            if not judged and (fp in out_fps or scope.too_deep(int(rec.get("depth") or 0))):
                counts["out_of_scope"] += 1
                continue
            if fp in batch_fps:
                counts["seen"] += 1
                continue
            if not judged and scope.url_reason_out(rec["url"]):
                out_fps.add(fp)
                counts["out_of_scope"] += 1
                continue
            batch_fps.add(fp)
            fresh.append(rec)
            fps.append(fp)
        if self.node is not None and fresh:  # judged: another node routed them here, in its scope
            keep = self.node.route(fresh)  # other nodes' hosts go to the outbox
            counts["routed"] = keep.count(False)
            fresh = [r for r, k in zip(fresh, keep, strict=True) if k]
            fps = [f for f, k in zip(fps, keep, strict=True) if k]
        known = self.seen.contains_fps(fps) if fps else []
        new = [(r, fp) for r, fp, k in zip(fresh, fps, known, strict=True) if not k]
        counts["seen"] += len(fresh) - len(new)
        cap = self.opts.budgets.max_per_host
        if cap and new:
            new = self._host_cap(new, counts)
        if reseed:
            again = [(r, fp) for r, fp, k in zip(fresh, fps, known, strict=True) if k]
            counts["seen"] -= len(again)
            counts["again"] = len(again)
            new += again
        if new:
            got = self.frontier.add([r for r, _ in new], now)
            counts["added"] += got.get("added", 0)
            # seen after frontier: a crash in between repeats, never loses
            self.seen.add_fps([fp for _, fp in new])
        return counts

    def _host_cap(self, new: list[tuple[Record, int]], counts: dict[str, int]) -> list[tuple[Record, int]]:
        cap = self.opts.budgets.max_per_host
        kept = []
        with self.state.begin(write=True) as txn:
            local: dict[bytes, int] = {}
            for rec, fp in new:
                host = str(rec.get("host") or "").encode() or b"?"
                n = local.get(host)
                if n is None:
                    raw = txn.get(host, db=self.hostcap)
                    n = int(raw) if raw else 0
                if n >= cap:
                    counts["host_cap"] += 1
                    continue
                local[host] = n + 1
                kept.append((rec, fp))
            for host, n in local.items():
                txn.put(host, str(n).encode(), db=self.hostcap)
        return kept

    def seed(self, urls: list[str], reseed: bool = False) -> dict[str, int]:
        recs = [records.make("url", url=u, depth=0, priority=0, reason="seed") for u in urls]
        self.opts.scope.add_seeds(urls)
        return self.admit(recs, time.time(), reseed=reseed)

    # -- cycles: crawling again tomorrow --------------------------------------

    def wants_new_cycle(self, have_seeds: bool) -> bool:
        """Whether this run starts a new cycle (``RunOptions.cycle``).

        ``auto`` starts one when seeds are given and the previous cycle has
        finished: nothing queued, nothing leased (a killed run's leases
        too: that run is resumed, not restarted) and nothing fetched left
        unparsed; and there was a previous cycle (the seen set holds URLs).
        """
        mode = self.opts.cycle
        if mode == "new":
            return True
        if mode == "continue" or not have_seeds or self.node is not None:
            # (a node of a shared crawl: its part being done says nothing of the others')
            return False
        return len(self.seen) > 0 and self.cycle_finished(time.time())

    def cycle_finished(self, now: float) -> bool:
        """Nothing queued, leased or unparsed, but for the URLs of hosts whose
        robots.txt cannot be read: those stay queued into the next cycle (a
        host whose robots.txt is down for good must not hold every later
        cycle back)."""
        p = self.frontier.pending()
        if p["in_flight"] or self.backlog():
            return False
        return not p["queued"] or p["queued"] <= self.frontier.robots_waiting(now, limit=0)["urls"]

    def start_cycle(self, now: float) -> dict[str, int]:
        """A new cycle: URLs done in earlier cycles may be queued again, and what
        the freshness model says is due (pings, sitemap hints, the model's own
        schedule) is queued now, with its validators, so an unchanged page
        costs a 304. The caller then admits the seeds with ``reseed``."""
        cycle = self.frontier.new_cycle()
        due = 0
        while True:  # every due URL, a chunk per transaction
            got = enqueue_due(self.recrawler, self.frontier, now, _DUE_CHUNK)
            due += got.get("added", 0)
            if got.get("emitted", 0) < _DUE_CHUNK:
                break
        self.progress.add("cycle/due_enqueued", due)
        return {"cycle": cycle, "due": due}

    # -- the fetch side: leases in, results out ------------------------------

    def lease_batches(self, size: int) -> Iterator[Batch]:
        """Leases as hosts become due (runs in a worker thread of fetch_all)."""
        b = self.opts.budgets
        while not self.stopping:
            now = time.time()
            if self.node is not None:
                self.node.refresh()  # the map, once per round
            n = size
            if b.max_pages:
                # Exact: lease no more than the pages still missing once every
                # outstanding lease comes back a page. A lease that ends in no
                # page (an error, a redirect, a deferral) frees its share again.
                left = b.max_pages - self.progress.pages - self.outstanding
                if self.progress.pages >= b.max_pages:
                    self.stopping = "max-pages"
                    break
                if left <= 0:
                    self._pause(LEASE_POLL)  # the budget is all in flight: wait for results
                    continue
                n = min(size, left)
            if now >= self.deadline:
                self.stopping = "duration"
                break
            if self.backlog() >= self.opts.max_backlog:
                self.progress.backpressure += 0.02
                time.sleep(0.02)  # the parse side is behind: let it catch up before fetching more
                continue
            if self.opts.recrawl and now >= self.next_recrawl:
                self._enqueue_recrawl(now, size)
            # A read first: a write transaction (and its fsync) only when a host is
            # due, or once a second for what next_due cannot see (expired leases).
            due = self.frontier.next_due(now)
            if (due is not None and due <= now) or now >= self.next_poll:
                self.next_poll = now + 1.0
                self.progress.add("lease/next")
                with self._lease_lock:  # a hand-off leases too: budget check and leases in one step
                    if b.max_pages:
                        n = min(n, b.max_pages - self.progress.pages - self.outstanding)
                    leases = self.frontier.next(n, self.opts.lease_seconds, now) if n > 0 else []
                    if leases:
                        with self._outstanding_lock:
                            self.outstanding += len(leases)
                if leases:
                    self.last_lease = now
                    yield Batch(leases)
                    continue
            if self.finished() and not self.opts.recrawl and self.node is None:  # (shared: idle only)
                self.stopping = "done"
                break
            if now - self.last_lease > b.idle_exit and (due is None or due - now > b.idle_exit) \
                    and not self.opts.recrawl and not self.frontier.pending()["in_flight"] \
                    and not self.backlog() and (self.node is None or self.node.idle()):
                # Leases in flight (ours, or a killed run's until they expire)
                # and fetched pages not parsed yet still bring work back: only
                # an empty pipeline is idle.
                self.stopping = "idle"
                break
            # Due but not leased (its address is busy) or nothing due: only a
            # completion or new links change that, and they wake the loop.
            wait = LEASE_POLL if due is None or due <= now else min(due - now, LEASE_POLL)
            self._pause(min(wait, max(self.deadline - now, 0.0)))

    def handoff(self, rec: Record) -> Record | None:
        """At the end of an answer, before its result is durable (on trio's thread,
        from fetch_all; the lease loop's thread may lease at the same time, hence the
        lock): free its host, and lease the host's next URL now if the
        run would lease it at all, so the next request to the host waits one
        commit, not the WARC, spool, log and completion commits before it
        (crawl/frontier/handoff.py). Not in a shared crawl: a host handed to
        another node must have no lease left (crawl/frontier/slices.py)."""
        if self.node is not None:
            return None
        now = time.time()
        with self._lease_lock:  # (see lease_batches)
            seconds = self.opts.lease_seconds if self._may_lease(now) else 0.0
            released, nxt = self.frontier.handoff(rec, now, seconds)
            if nxt is not None:
                with self._outstanding_lock:
                    self.outstanding += 1
        if nxt is not None:
            self.progress.add("lease/handoff")
            self.last_lease = now
        elif released:
            self.progress.add("lease/released")
            self.wake.set()  # the host is on the schedule again: the lease loop sees when
        return nxt

    def _may_lease(self, now: float) -> bool:
        """Whether the lease loop would lease one more URL now (its stops and budgets)."""
        b = self.opts.budgets
        if self.stopping or now >= self.deadline or self.backlog() >= self.opts.max_backlog:
            return False
        # the answer just in is still outstanding: exact, as in lease_batches
        return not b.max_pages or b.max_pages - self.progress.pages - self.outstanding > 0

    def _pause(self, seconds: float) -> None:
        """Wait until something may be leasable: a wake-up, or ``seconds`` (a due time).

        Counted, so tests can tell a loop that waits for completions from one
        that polls (``lease/waits``, ``lease/woken`` in the status counts).
        """
        self.progress.add("lease/waits")
        if self.wake.wait(seconds):
            self.progress.add("lease/woken")
        self.wake.clear()  # whatever set it is seen by the next round

    def _enqueue_recrawl(self, now: float, size: int) -> None:
        """Once a second: re-admit what the freshness model says is due, within
        the re-crawl share of capacity (discovery keeps the rest: neither starves)."""
        self.next_recrawl = now + 1.0
        o = self.opts
        if o.recrawl_budget:
            limit = self.recrawler.allowance(now, o.recrawl_budget)
        else:
            p = self.frontier.pending()
            limit, _ = split_budget(size, self.recrawler.backlog(now), p["queued"], o.recrawl_share)
        if limit > 0:
            got = enqueue_due(self.recrawler, self.frontier, now, limit)
            self.progress.add("recrawl/enqueued", got.get("added", 0))

    def backlog(self) -> int:
        """Fetch results not yet through dedupe, parse and admission."""
        c = self.fetched.counts()
        return c["queued"] + c["claimed"]

    def finished(self) -> bool:
        p = self.frontier.pending()
        if p["queued"] or p["in_flight"]:
            return False
        return not self.backlog()

    def write_results(self, recs: list[Record]) -> None:
        """Sink of fetch_all: spool and crawl log first, then complete the leases."""
        if not recs:
            return
        now = time.time()
        # Durable outputs first, the lease last: a crash in between repeats
        # the fetch (at-least-once), it never completes a URL whose result or
        # log event is missing.
        self.fetched.put(recs)
        if self.node is not None:
            self.node.saw(recs)  # host -> IP pairs, for the per-IP shares
        self.log.write(event_of(r, now) for r in recs)
        self.fed.set()
        if self.on_results is not None:
            self.on_results()
        for ev in self.frontier.complete(recs, now):
            if "robots_wait" in ev or "robots_resumed" in ev:
                text = wait_notice(ev, now)
                if text:
                    self.notify(text)
        self.wake.set()  # the hosts are free again: lease now, not at the next poll
        pages = 0
        for r in recs:
            outcome = r.get("outcome", "?")
            self.progress.add(f"outcome/{outcome}")
            self.progress.bytes += int(r.get("bytes") or 0)
            pages += outcome in ("ok", "not-modified")
            if outcome == "ok":  # what "pages stored" holds, for the summary
                html = str(r.get("content_type") or "").startswith(("text/html", "application/xhtml"))
                self.progress.add("stored/html" if html else "stored/other")
        self.progress.results += len(recs)
        self.progress.pages += pages
        with self._outstanding_lock:
            self.outstanding = max(0, self.outstanding - len(recs))
        files = {r["warc"].get("file") for r in recs if isinstance(r.get("warc"), dict)}
        new = {f for f in files if isinstance(f, str)} - self.warc_files
        with self.state.begin(write=True) as txn:
            # the crawl directory's lifetime total (crawl stats: pages in this crawl dir)
            txn.put(b"pages", str(self.progress.pages_before + self.progress.pages).encode(), db=self.meta)
            if new:  # what the next run checks when it resumes
                self.warc_files |= new
                txn.put(b"warc-files", orjson.dumps(sorted(self.warc_files)), db=self.meta)

    # -- the parse side: fetched spool -> links -> frontier ------------------

    def process_one_batch(self, size: int = 64) -> int:
        """Dedupe, parse and admit one claimed batch of fetch results, then ack it."""
        # a shared crawl's inbox (links other nodes routed here) is admitted here too:
        # one admitting caller per process (crawl/cluster/node.py)
        inbox = self.node.pump_inbox(self.admit, self.seen.add_fps) if self.node is not None else 0
        claimed = self.fetched.claim(size)
        if not claimed:
            return inbox
        # here: lxml loads with the first page, not before the first request
        from crawl.parse import parse_fetch

        now = time.time()
        recs: list[Record] = []
        for _, data in claimed:
            try:
                recs.append(orjson.loads(data))
            except orjson.JSONDecodeError:
                self.progress.add("bad_spool_records")
        bodies: dict[str, Any] = {}  # one WARC read per page, shared by dedupe and parse

        def read(rec: Record) -> Any:
            key = rec["url"]
            if key not in bodies:
                try:
                    bodies[key] = read_response(self.cdir.warc, rec["warc"])
                except Exception as exc:  # noqa: BLE001 - a damaged record is one page's problem
                    raise CrawlError(f"cannot read {key} from the WARC store: {exc}") from exc
            return bodies[key]

        def body_of(rec: Record) -> tuple[bytes, str]:
            resp = read(rec)
            return resp.body, resp.content_type or ""

        links: list[Record] = []
        events: list[Record] = []
        graph: list[tuple[str, list[Record]]] = []
        checked = self.dedupe.check(recs, body_of)
        self.recrawler.observe(checked, now)
        for rec in checked:
            if rec.get("duplicate_of"):
                self.progress.add(f"dedupe/{rec.get('dup_kind', 'near')}")
                events.append(records.make("event", ts=now, event="duplicate", url=rec["url"],
                                           duplicate_of=rec["duplicate_of"],
                                           distance=rec.get("distance"), dup_kind=rec.get("dup_kind")))
            res = parse_fetch(rec, read, self.opts.parse, now)
            links.extend(res.links)
            if res.page is not None or res.links:
                graph.append((rec["url"], res.links))
            for k, v in res.counts.items():
                self.progress.add(f"parse/{k}", v)
        self.recrawler.observe_links(links, now)
        # the batch touched random pages of five maps (recrawl's is the largest):
        # give them back before admitting, not only inside the frontier's transactions
        trim = self.frontier.trimmer.maybe_trim
        trim()
        counts = self.admit(links, now)
        for k, v in counts.items():
            self.progress.add(f"links/{k}", v)
        if counts.get("added"):
            self.wake.set()
            if self.on_links is not None:
                self.on_links()
        if events:
            self.log.write(events)
        if graph:
            self.graph.record(graph)  # before the ack: a crash re-parses the batch, never loses it
        self.fetched.ack(k for k, _ in claimed)
        trim()
        return len(claimed)

    async def processor(self) -> None:
        import trio  # here: a parse process (crawl/run/child.py) never loads it

        while True:
            done = self.fetch_done  # read before claiming: no result can slip past
            n = await trio.to_thread.run_sync(self.process_one_batch)
            if self.stopping.startswith("signal"):
                return  # the rest waits in the spool for the next run
            if n:
                continue
            if done:
                return
            await self.wait_fed(0.05)

    async def wait_fed(self, seconds: float) -> None:
        """Until results reach the spool (write_results), at most ``seconds``."""
        import trio

        if not self.fed.is_set():
            await trio.to_thread.run_sync(self.fed.wait, seconds, abandon_on_cancel=True)
        self.fed.clear()

    # -- status --------------------------------------------------------------

    def status(self, now: float) -> Record:
        fr = self.frontier.stats(now)
        waiting = self.frontier.robots_waiting(now, limit=10)
        p = self.progress
        elapsed = now - p.started
        total = sum(v for k, v in p.counts.items() if k.startswith("outcome/"))
        failed = sum(v for k, v in p.counts.items() if k.startswith("outcome/") and k[8:] in FAILURES)
        left = None
        if self.deadline != math.inf:
            left = max(0.0, self.deadline - now)
        return records.make(
            "stats", command="run", ts=now, elapsed=round(elapsed, 1), rate=round(p.rate(now), 1),
            avg_rate=round(p.results / elapsed, 1) if elapsed > 0 else 0.0,
            fetched=p.results, pages=p.pages, pages_total=p.pages_before + p.pages, cycle=fr.get("cycle"),
            queued=fr["queued"], hosts=fr["hosts"],
            hosts_ready=fr["hosts_ready"], in_flight=fr["in_flight"], backlog=fr["backlog"],
            unparsed=self.backlog(), parse_wait=round(p.backpressure, 1),
            error_rate=round(failed / total, 4) if total else 0.0, bytes=p.bytes,
            time_left=None if left is None else round(left, 1),
            pages_left=(self.opts.budgets.max_pages - p.pages) if self.opts.budgets.max_pages else None,
            stopping=self.stopping or None, counts=dict(sorted(p.counts.items())),
            hosts_waiting_robots=waiting["hosts"], urls_waiting_robots=waiting["urls"],
            robots_waiting=waiting["list"],
            options=describe(self.opts),  # what crawl why names its rules from
        )

    def resume(self) -> list[str]:
        """On start: the dead runs' leases back to the queue at once, and lines saying
        what was recovered (crawl/run/resume.py)."""
        from .resume import resume

        return resume(self.frontier, self.backlog(), self.cdir)

    def write_status(self, st: Record) -> None:
        """``D/run-status.json``: the figures, who writes them (pid, host, start,
        command) and the heartbeat (``ts``, every ``heartbeat`` seconds), so
        ``crawl stats`` can tell a live run from a killed one."""
        if self.dir_lock is not None and self.dir_lock.info:
            st = {**st, **{k: v for k, v in self.dir_lock.info.items() if k != "what"},
                  "heartbeat": self.heartbeat}
        data = orjson.dumps(st)
        replace_file(self.cdir.root / RUN_STATUS, lambda f: f.write(data), sync=False)


def _say(text: str) -> None:
    sys.stderr.write(f"crawl run: {text}\n")
    sys.stderr.flush()
