"""The async side of ``crawl run``: tasks, signals and parse processes.

:mod:`crawl.run` owns what happens to records (admission, results, parsing);
this module owns when it happens: one trio nursery holding the fetch stage
(fed by frontier leases), the parse side (a task, or child processes on the
same spool), the progress display, and the signal watcher that turns
Ctrl-C/SIGTERM into "no new leases, finish in-flight work, commit".
"""

from __future__ import annotations

import math
import signal
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import trio

from crawl.core import (
    Batch,
    CrawlError,
    ExitStatus,
    Record,
    Report,
)
from crawl.fetch import fetch_all, open_fetcher

from . import spawn
from .cluster import cluster_tasks
from .crawl import Crawl
from .spawn import Children


async def run_crawl(crawl: Crawl, display: Any, report: Report, children: Children | None = None) -> Record:
    """The loop; returns the final status record. Ctrl-C / SIGTERM stop it gently.

    ``children``: parse processes the command started before its imports
    (crawl/run/spawn.py); without them, and with ``--parse-procs`` N, they start here."""

    async def watch_signals(cancel: trio.CancelScope) -> None:
        with trio.open_signal_receiver(signal.SIGINT, signal.SIGTERM) as sigs:
            async for signum in sigs:
                if crawl.stopping and crawl.stopping.startswith("signal"):
                    cancel.cancel()  # second signal: stop now
                    return
                crawl.stopping = f"signal {signal.Signals(signum).name}"
                crawl.wake.set()  # the lease loop sees it now, not after its wait
                report.warn(f"{signal.Signals(signum).name}: no new leases; finishing in-flight "
                            f"fetches (up to {crawl.opts.grace:.0f} s; again to stop now)")
                cancel.deadline = min(cancel.deadline, trio.current_time() + crawl.opts.grace)

    async def show() -> None:
        while True:
            now = time.time()
            st = await trio.to_thread.run_sync(crawl.status, now)
            await trio.to_thread.run_sync(crawl.write_status, st)
            display.update(st)
            await trio.sleep(display.interval)

    class LeaseSource:
        def batches(self, size: int) -> Iterator[Batch]:
            return crawl.lease_batches(size)

        def handoff(self, rec: Record) -> Record | None:
            return crawl.handoff(rec)

    class ResultSink:
        def write(self, recs: list[Record]) -> None:
            crawl.write_results(recs)

    opts = crawl.opts
    async with open_fetcher(crawl.cdir, opts.fetch, overrides=opts.overrides,
                            fallback=opts.resolve_fallback, policy=opts.address_policy,
                            store=opts.store) as (fetcher, writer):
        async with trio.open_nursery() as outer:
            outer.start_soon(show)
            fetch_scope = trio.CancelScope()
            if crawl.deadline != math.inf:
                # --duration: leasing stops at the deadline, and fetches still in
                # flight get the grace a signal gives them, not the fetch timeout
                # (a 20 s run waited 30 s for a slow host's last fetch)
                left = max(0.0, crawl.deadline - time.time())
                fetch_scope.deadline = trio.current_time() + left + opts.grace
            outer.start_soon(watch_signals, fetch_scope)
            if crawl.node is not None:  # a shared crawl: the bridge child, handoffs
                outer.start_soon(cluster_tasks, crawl, report)
            async with trio.open_nursery() as inner:
                if opts.parse_procs:
                    inner.start_soon(_process_children, crawl, children)
                else:
                    inner.start_soon(crawl.processor)
                with fetch_scope:
                    await fetch_all(LeaseSource(), ResultSink(), fetcher, writer, report,
                                    batch=opts.batch, group=64)
                if fetch_scope.cancelled_caught:
                    report.warn("in-flight fetches cancelled; the next run returns their leases to the queue at once")
                crawl.fetch_done = True
            outer.cancel_scope.cancel()
    final = crawl.status(time.time())
    crawl.write_status(final)
    return final


# -- dedupe/parse/seen in child processes ------------------------------------
#
# The fetch side (sockets, TLS, gzip, WARC) and the parse side (lxml, simhash,
# LMDB admission) each want a core, and one Python process gives them one
# between them. With --parse-procs N the parse side runs in N processes that
# share the crawl directory: they claim batches from the same `fetched`
# spool, so crash safety is unchanged (a dead child's claims return to the
# spool) and `finished()` still sees their work through the spool counts.
# Each child is crawl/run/child.py in a new interpreter, told its work on stdin.


def _listen(crawl: Crawl, news: list[Any], ready: threading.Event) -> None:
    """The parent's ear (a thread): children's ``ready`` and ``links`` until all hang up."""
    from multiprocessing.connection import wait

    open_ = list(news)
    try:
        while open_:
            for conn in wait(open_):
                try:
                    message = conn.recv_bytes()
                except (EOFError, OSError):
                    open_.remove(conn)
                    continue
                if message == spawn.READY:
                    ready.set()
                elif message == spawn.LINKS:
                    crawl.wake.set()
    except (OSError, ValueError):
        return  # closed under us at the end of the run


async def _parse_until_ready(crawl: Crawl, ready: threading.Event) -> None:
    """Parse in this process while no child can: a spawned child takes about a
    second to import and open the crawl directory, and the seed's links should
    not wait for it (issue 19: links in the frontier within 50 ms of the response)."""
    while not ready.is_set() and not crawl.fetch_done and not crawl.stopping.startswith("signal"):
        if not await trio.to_thread.run_sync(crawl.process_one_batch):
            await crawl.wait_fed(0.05)


async def _process_children(crawl: Crawl, children: Children | None) -> None:
    # New processes, not forks of a threaded, LMDB-holding one (crawl/run/child.py).
    if children is None or len(children.procs) != crawl.opts.parse_procs:
        if children is not None:
            children.close()
        children = Children(crawl.opts.parse_procs)
    lines, news, procs = children.lines, children.news, children.procs
    told: set[bytes] = set()
    ready = threading.Event()
    ear: threading.Thread | None = None

    said_more = [0.0]

    def more() -> None:
        """From write_results: results are in the spool. At most one word per
        poll interval of the children (they look by themselves that often),
        so the pipe cannot fill up behind a busy child."""
        now = time.monotonic()
        if now - said_more[0] >= 0.05:
            said_more[0] = now
            for line in lines:
                line.send(spawn.MORE)

    def tell(message: bytes) -> None:
        if message not in told:
            told.add(message)
            for line in lines:
                line.send(message)

    try:
        from .child import work_order  # the parent has the run's modules loaded already

        order = work_order(str(crawl.cdir.root), crawl.opts)
        await trio.to_thread.run_sync(children.send_order, order)
        crawl.on_results = more
        ear = threading.Thread(target=_listen, args=(crawl, [r for r, _ in news], ready),
                               name="crawl-parse-news", daemon=True)
        ear.start()
        async with trio.open_nursery() as bridge:
            bridge.start_soon(_parse_until_ready, crawl, ready)
            await _watch_children(crawl, procs, tell)
        tell(spawn.DONE)
        if crawl.stopping.startswith("signal"):
            tell(spawn.STOP)
        for p in procs:
            await trio.to_thread.run_sync(p.join)
    finally:
        crawl.on_results = None
        tell(spawn.STOP)
        for p in procs:
            p.join(5)
            if p.is_alive():
                p.kill()
                p.join()
        for line in lines:
            line.close()
        if ear is not None:
            ear.join(1)  # the children are gone: it has read their end of file
        children.close()


async def _watch_children(crawl: Crawl, procs: list[Any], tell: Callable[[bytes], None]) -> None:
    """Until fetching is done: pass a stop on, and end the crawl if a child died."""
    while not crawl.fetch_done:
        if crawl.stopping.startswith("signal"):
            tell(spawn.STOP)  # the rest waits in the spool for the next run
        for p in procs:
            if not p.is_alive() and p.exitcode not in (0, None):
                said = " on the error above" if p.exitcode == ExitStatus.ERROR else ""
                raise CrawlError(f"parse process {p.name} stopped{said} (exit {p.exitcode}); "
                                 "the crawl stopped, its work is safe in the spool: run again")
        await trio.sleep(0.2)
