"""The fetch stage: leases in, archived responses and fetch results out.

Shape (STYLE.md "Async shape"): a reader task turns source batches into work
items, N worker tasks each run one :meth:`crawl.fetch.fetcher.Fetcher.fetch` at a
time, and ONE writer task appends a group's captures to the WARC store,
fsyncs, and only then emits the group's results and acknowledges the input
batches they complete, in the same worker-thread call. Every channel is
bounded, so a slow disk or a slow consumer slows the fetchers down instead
of piling pages up in memory.

Politeness (one request per host, delays) is the frontier's job: fetch
trusts its leases. Plain URL records are accepted too, for one-off use.
What happens to one lease is in :mod:`crawl.fetch.fetcher`; its names are
re-exported here, so ``from crawl.fetch import FetchConfig`` keeps working.
"""

from __future__ import annotations

import itertools
import resource
import signal
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any

import trio

from crawl.core import (
    Batch,
    CrawlDir,
    CrawlError,
    Record,
    Report,
    Sink,
    Source,
    check_file_name,
    is_no_space,
    no_space,
    open_env,
)
from crawl.net import AddressPolicy, Resolver, make_transport
from crawl.recrawl import History
from crawl.robots import RobotsCache, RobotsFetcher
from crawl.store import WarcWriter

from .fetcher import (
    ACCEPTS,
    AGENT_TOKEN,
    DEFAULT_TYPES,
    DEFAULT_USER_AGENT,
    FetchConfig,
    Fetched,
    Fetcher,
    retry_after,
    type_wanted,
)

__all__ = [
    "ACCEPTS", "AGENT_TOKEN", "DEFAULT_TYPES", "DEFAULT_USER_AGENT", "FetchConfig", "Fetched",
    "Fetcher", "StoreOptions", "fetch_all", "fetch_batch", "open_fetcher", "retry_after",
    "run_fetch", "store_group", "type_wanted",
]


# How long the writer waits for more results before storing a group. Each group
# costs a WARC fsync and two LMDB commits (the spool's put, the frontier's
# release), each a thread hand-off and a few disk flushes. On one host at delay 0
# a result comes every ~2 ms and the writer, quicker than that, stored them one
# by one; a few milliseconds more before a result is released (its URL marked
# done, its page handed to parsing) let it store two or three at a time (issue
# 19: one realistic host of 2,300 pages, 3 interleaved rounds: 6.97-6.99 ->
# 6.21-6.77 CPU-s at 3 ms, 6.26-6.43 at 10 ms; context switches 47k -> 26-32k).
# The writer waits only while a worker is on a lease (fetching, or on a URL the
# hand-off gave it at an answer's end), so a result comes to join the group; with
# none under way (`crawl fetch`, a shared crawl's node, an answer the hand-off does
# not release) the next lease waits on this release, and the group is stored at
# once. A lease that waits on a release while other hosts are being fetched waits
# at most this long more: under 1 % of a 0.5 s delay, the shortest without a hand-off.
STORE_WINDOW = 0.005


def store_group(writer: WarcWriter, history: History | None, items: list[Fetched]) -> list[Record]:
    """Archive a group, fsync once (and update ``history`` if given); returns the records to release.

    Runs in a worker thread (blocking file I/O). Only after ``writer.sync()``
    does any record of the group leave this function (DESIGN invariant 1).
    """
    try:
        for it in items:
            for cap in it.captures:
                ptr = writer.write(cap)
                if cap is it.page and ptr is not None:
                    it.record["warc"] = ptr
        writer.sync()
        if history is not None:
            remember(history, items)
    except OSError as exc:
        # No result of the group was released: cut its records off again, so the
        # file ends with whole records and nothing points past its end.
        file = writer.dir / writer.name if writer.name else writer.dir
        writer.discard()
        if is_no_space(exc):
            raise no_space(file, "no result of the group being stored was released; their "
                                 "leases return to the frontier when they expire") from exc
        raise CrawlError(
            f"cannot write to the WARC store {file}: {exc.strerror or exc}. No result was "
            "emitted for this group; its leases return to the frontier when they expire.") from exc
    finally:
        for it in items:
            for cap in it.captures:
                cap.close()
    return [it.record for it in items]


def remember(history: History, items: list[Fetched]) -> None:
    """The fetch history (validators, last WARC record) of a stored group.

    Advice for the next fetch of each URL (a conditional request) and for the
    freshness model, not part of any result's durability: ``fetch_all`` does
    it after the group's results are released, off the path from one
    response to the next request to its host (issue 19), and written with
    later groups' (History.update_later: at most 64 URLs or 2 s held, then
    one commit, and at close). A crash loses those fetches' validators; the
    next fetch of such a URL is unconditional.
    """
    updates = []
    for it in items:
        if it.history is not None:
            if "warc" in it.record and it.record["outcome"] == "ok":
                it.history["warc"] = it.record["warc"]
            updates.append((it.record["url"], it.history))
    if updates:
        history.update_later(updates)  # written with a later group's, or when the fetcher closes


async def fetch_batch(fetcher: Fetcher, writer: WarcWriter, leases: list[Record]) -> list[Record]:
    """Fetch a batch concurrently, store it durably, return the results in input order.

    The entry point for callers that already run trio (``crawl run``).
    """
    results: list[Fetched | None] = [None] * len(leases)
    limiter = trio.CapacityLimiter(max(1, fetcher.cfg.concurrency))

    async def one(i: int, lease: Record) -> None:
        async with limiter:
            results[i] = await fetcher.fetch(lease)

    async with trio.open_nursery() as nursery:
        for i, lease in enumerate(leases):
            nursery.start_soon(one, i, lease)
    done = [r for r in results if r is not None]
    return await trio.to_thread.run_sync(store_group, writer, fetcher.history, done)


async def fetch_all(source: Source, sink: Sink, fetcher: Fetcher, writer: WarcWriter,
                    report: Report, *, batch: int = 500, group: int = 256,
                    window: float = STORE_WINDOW) -> None:
    """Stream leases from ``source`` to results in ``sink`` (see module docstring).

    Input batches are acknowledged (spools) only once all their results are written.
    A group is what the writer finds waiting, plus what arrives within ``window``
    seconds of its first result (at most ``group``): see :data:`STORE_WINDOW`.
    """
    handoff = getattr(source, "handoff", None)
    work_send, work_recv = trio.open_memory_channel[tuple[Any, Record]](0)
    store_send, store_recv = trio.open_memory_channel[Fetched](fetcher.cfg.concurrency)
    pending: dict[int, list[Any]] = {}  # batch id -> [results outstanding, batch, all read]
    bids = itertools.count()
    busy = 0  # workers on a lease (and the leases handed to them): while none is, nothing can join a group
    waiting: trio.CancelScope | None = None  # the writer's window, ended when the last worker idles

    async def reader() -> None:
        it: Iterator[Batch] = source.batches(batch)
        async with work_send:
            for bid in bids:
                b = await trio.to_thread.run_sync(next, it, None, abandon_on_cancel=True)
                if b is None:
                    return
                report.add("in", len(b.records))
                if not b.records:  # nothing valid in it: done already
                    await trio.to_thread.run_sync(b.ack)
                    continue
                pending[bid] = [len(b.records), b]
                for rec in b.records:
                    await work_send.send((bid, rec))

    async def handed(f: Fetched) -> tuple[int, Record | None]:
        """The source's next lease for the host of an answer just in, if it has
        one (``crawl run``: crawl/frontier/handoff.py): fetched by this worker
        at once, while the answer before it is being stored."""
        if handoff is None or f.record.get("kind") != "fetch":
            return 0, None
        # Called here, on trio's thread: one short frontier transaction, on the path from
        # an answer to the next request to its host either way. In a worker thread it
        # cost a thread wake-up and the GIL passed back and forth at each of its blocking
        # calls (issue 19: one realistic host, fetch process 1.70-1.79 -> 1.44-1.47
        # CPU-s; 2,000 realistic hosts fetched more in 30 s, not fewer). The source's
        # handoff may block on its lock or on LMDB's writer (both let go of the GIL).
        nxt = handoff(f.record)
        if nxt is None:
            return 0, None
        bid = next(bids)
        pending[bid] = [1, Batch([nxt])]
        report.add("in")
        return bid, nxt

    async def worker(recv: Any, send: Any) -> None:
        nonlocal busy
        async with send:
            async for bid, lease in recv:
                busy += 1
                try:
                    while lease is not None:
                        f = await fetcher.fetch(lease)
                        f.token = bid
                        await send.send(f)
                        bid, lease = await handed(f)
                finally:
                    busy -= 1
                    if not busy and waiting is not None:
                        waiting.cancel()

    async def store_task() -> None:
        async for first in store_recv:
            items = [first]
            try:
                await gather(items)
            finally:
                # Stored even when the run is cancelled meanwhile (the grace after a
                # signal is over, a second Ctrl-C): these pages were fetched already.
                whole = settled(items)
                with trio.CancelScope(shield=True):
                    # One worker-thread call a group: archived and fsynced, then released.
                    # A separate release call let a group's release overlap the next
                    # group's store, but each busy worker thread is one more taking the GIL
                    # from the others at every blocking call (issue 19: ~290 futex calls a
                    # page on one host); merged, one host's CPU per page fell ~13 %.
                    await trio.to_thread.run_sync(store_and_release, items, whole)
                for it in items:
                    report.add("out")
                    report.add(f"outcome/{it.record['outcome']}")

    async def gather(items: list[Fetched]) -> None:
        """Add to a group what is waiting, then what arrives within the window while
        a worker is on a lease (see STORE_WINDOW); no wait when none is, since then
        nothing can arrive until a release (``crawl fetch``, a shared crawl's node,
        an answer the hand-off does not release) leases more."""
        nonlocal waiting
        deadline = trio.current_time() + window
        while len(items) < group:
            try:
                items.append(store_recv.receive_nowait())
                continue
            except trio.WouldBlock:
                pass
            except trio.EndOfChannel:
                return
            if not busy or trio.current_time() >= deadline:
                return
            with trio.move_on_at(deadline) as scope:  # ended early when the last worker idles
                waiting = scope
                try:
                    items.append(await store_recv.receive())
                except trio.EndOfChannel:
                    return
                finally:
                    waiting = None

    def settled(items: list[Fetched]) -> list[Batch]:
        """The input batches these results complete (acknowledged once they are written)."""
        whole = []
        for it in items:
            entry = pending[it.token]
            entry[0] -= 1
            if entry[0] == 0:
                del pending[it.token]
                whole.append(entry[1])
        return whole

    def store_and_release(items: list[Fetched], whole: list[Batch]) -> None:
        store_group(writer, None, items)  # durable before any result leaves (DESIGN invariant 1)
        sink.write([it.record for it in items])
        for b in whole:  # every result of these input batches is written now
            b.ack()
        if fetcher.history is not None:
            remember(fetcher.history, items)  # after the results: off the next request's path

    async with trio.open_nursery() as nursery:
        nursery.start_soon(reader)
        async with store_send, work_recv:
            for _ in range(max(1, fetcher.cfg.concurrency)):
                nursery.start_soon(worker, work_recv.clone(), store_send.clone())
        nursery.start_soon(store_task)


@dataclass
class StoreOptions:
    compression: str = "gzip"
    max_size: int = 1 << 30
    prefix: str = "crawl"

    def __post_init__(self) -> None:
        # checked when the options are made (flags and config alike), before a run touches anything
        check_file_name(self.prefix, "--warc-prefix")


def _origin_budget(concurrency: int) -> int:
    """Idle per-origin pools to keep: one per active host (a polite crawl comes
    back to each host about once a second), up to 8,192, within the open-file
    limit (each keeps one socket; the workers, WARC files and LMDB need theirs)."""
    soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
    room = soft - concurrency * 2 - 64 if soft != resource.RLIM_INFINITY else 1 << 20
    return max(16, min(8192, room))


@asynccontextmanager
async def open_fetcher(
    crawl_dir: CrawlDir,
    cfg: FetchConfig,
    *,
    overrides: dict[str, list[str]] | None = None,
    fallback: bool = True,
    policy: AddressPolicy | None = None,
    store: StoreOptions | None = None,
) -> AsyncIterator[tuple[Fetcher, WarcWriter]]:
    """Everything a fetch needs, opened on one crawl directory and closed after.

    Usage (inside trio)::

        async with open_fetcher(CrawlDir(d), FetchConfig(), overrides=hosts) as (f, w):
            results = await fetch_batch(f, w, leases)
    """
    env = open_env(crawl_dir.fetchstate)
    policy = policy or AddressPolicy()
    store = store or StoreOptions()
    resolver = Resolver(overrides or {}, fallback=fallback, env=env)
    transport = make_transport(resolver, policy, max_origins=_origin_budget(cfg.concurrency))
    writer = WarcWriter(crawl_dir.warc, prefix=store.prefix, max_size=store.max_size,
                        compression=store.compression,
                        info={"operator-agent": cfg.user_agent, "robots": "obey" if cfg.robots else "ignore"})
    robots = RobotsFetcher(transport, RobotsCache(env), user_agent=cfg.user_agent, limits=cfg.limits,
                           hop_delay=cfg.host_delay, recheck=cfg.robots_retry)
    fetcher = Fetcher(cfg, transport, resolver, policy, history=History(env), robots=robots)
    try:
        yield fetcher, writer
    finally:
        with trio.CancelScope(shield=True):
            await transport.aclose()
        writer.close()
        fetcher.history.flush()  # the validators of the last groups (remember)


def run_fetch(source: Source, sink: Sink, report: Report, crawl_dir: CrawlDir, cfg: FetchConfig,
              **opts: Any) -> None:
    """Blocking entry point for ``crawl fetch``: one trio run over the whole input.

    SIGINT/SIGTERM cancel the run; a WARC group being written is finished
    (its thread is not abandoned) and KeyboardInterrupt is raised afterwards,
    which the command boundary turns into exit status 130.
    """
    interrupted = False

    async def main() -> None:
        nonlocal interrupted
        async with open_fetcher(crawl_dir, cfg, **opts) as (fetcher, writer):
            async with trio.open_nursery() as nursery:

                async def watch() -> None:
                    nonlocal interrupted
                    with trio.open_signal_receiver(signal.SIGINT, signal.SIGTERM) as sigs:
                        async for _ in sigs:
                            interrupted = True
                            nursery.cancel_scope.cancel()
                            return

                nursery.start_soon(watch)
                await fetch_all(source, sink, fetcher, writer, report)
                nursery.cancel_scope.cancel()

    try:
        trio.run(main)
    except BaseExceptionGroup as group:
        # trio groups task failures; one failure (a closed stdout, a full disk)
        # is re-raised alone so the command boundary can word it properly.
        leaves = _leaves(group)
        if len(leaves) == 1:
            raise leaves[0] from None
        raise
    if interrupted:
        raise KeyboardInterrupt


def _leaves(group: BaseExceptionGroup) -> list[BaseException]:
    out: list[BaseException] = []
    for exc in group.exceptions:
        out.extend(_leaves(exc) if isinstance(exc, BaseExceptionGroup) else [exc])
    return out
