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
import sys
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import trio

from crawl.core import (
    Batch,
    CrawlDir,
    CrawlError,
    ExitStatus,
    Lifeline,
    Record,
    Report,
    hold_lifeline,
)
from crawl.fetch import fetch_all, open_fetcher

from .cluster import cluster_tasks
from .crawl import Crawl, RunOptions


async def run_crawl(crawl: Crawl, display: Any, report: Report) -> Record:
    """The loop; returns the final status record. Ctrl-C / SIGTERM stop it gently."""

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
                    inner.start_soon(_process_children, crawl)
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


def _child_main(root: str, opts: RunOptions, line: Any, news: Any = None) -> None:
    """Entry point of one parse process (spawned; ignores Ctrl-C: the parent decides).

    ``line`` is the child's end of its :class:`~crawl.core.Lifeline`: the
    parent says ``done`` (finish what is queued), ``stop`` (leave the rest
    in the spool) or ``more`` (results are in the spool) through it, and the
    child exits when the parent is gone. ``news`` goes the other way: the
    child says ``ready`` once its crawl directory is open (until then the
    parent parses itself) and ``links`` when it put URLs in the frontier
    (the parent's lease loop wakes instead of polling).
    """
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    done, stop, more = threading.Event(), threading.Event(), threading.Event()

    def heard(message: bytes) -> None:
        if message != _MORE:
            (stop if message == _STOP else done).set()
        more.set()  # stop waiting: there is work, or an order

    def say(message: bytes) -> None:
        try:
            if news is not None:
                news.send_bytes(message)
        except OSError:
            pass  # the parent is gone: the lifeline ends this process

    hold_lifeline(line, heard)
    try:
        crawl = Crawl(CrawlDir(root), opts, child=True)  # under the parent's dir lock
        crawl.on_links = lambda: say(_LINKS)
        say(_READY)
        try:
            while not stop.is_set():
                finishing = done.is_set()
                if crawl.process_one_batch():
                    continue
                if finishing:
                    return
                if more.wait(0.05):
                    # Woken by the first results: let a few more groups arrive, so one
                    # batch (a handful of LMDB commits) serves several of them.
                    time.sleep(_COALESCE)
                more.clear()
        finally:
            crawl.close()
    except CrawlError as exc:  # one line, as the parent's boundary writes its own (a full disk...)
        sys.stderr.write(f"crawl: error: {exc}\n")
        sys.stderr.flush()
        sys.exit(ExitStatus.ERROR)


_DONE, _STOP, _MORE = b"done", b"stop", b"more"  # parent -> child (lifeline)
_READY, _LINKS = b"ready", b"links"  # child -> parent (news)
_COALESCE = 0.02  # seconds a woken parse process gathers results before claiming them


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
                if message == _READY:
                    ready.set()
                elif message == _LINKS:
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


async def _process_children(crawl: Crawl) -> None:
    import multiprocessing

    # spawn: no fork of a threaded, LMDB-holding process. It starts
    # multiprocessing's resource tracker; nothing here registers anything with
    # it (no semaphores: the lifelines carry done/stop), and it exits once the
    # children, which die with this process, are gone.
    ctx = multiprocessing.get_context("spawn")
    lines = [Lifeline() for _ in range(crawl.opts.parse_procs)]
    news = [ctx.Pipe(duplex=False) for _ in lines]  # (parent's read end, child's write end)
    procs = [ctx.Process(target=_child_main, args=(str(crawl.cdir.root), crawl.opts, line.reader, w),
                         name=f"crawl-parse-{i}", daemon=True)
             for i, (line, (_, w)) in enumerate(zip(lines, news, strict=True))]
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
                line.send(_MORE)

    def tell(message: bytes) -> None:
        if message not in told:
            told.add(message)
            for line in lines:
                line.send(message)

    try:
        for p, line, (_, w) in zip(procs, lines, news, strict=True):
            p.start()
            line.drop_reader()
            w.close()  # the child has its own: end of file once every child is gone
        crawl.on_results = more
        ear = threading.Thread(target=_listen, args=(crawl, [r for r, _ in news], ready),
                               name="crawl-parse-news", daemon=True)
        ear.start()
        async with trio.open_nursery() as bridge:
            bridge.start_soon(_parse_until_ready, crawl, ready)
            await _watch_children(crawl, procs, tell)
        tell(_DONE)
        if crawl.stopping.startswith("signal"):
            tell(_STOP)
        for p in procs:
            await trio.to_thread.run_sync(p.join)
    finally:
        crawl.on_results = None
        tell(_STOP)
        for p in procs:
            if p.pid is None:
                continue  # never started
            p.join(5)
            if p.is_alive():
                p.kill()
                p.join()
        for line in lines:
            line.close()
        if ear is not None:
            ear.join(1)  # the children are gone: it has read their end of file
        for r, _ in news:
            r.close()


async def _watch_children(crawl: Crawl, procs: list[Any], tell: Callable[[bytes], None]) -> None:
    """Until fetching is done: pass a stop on, and end the crawl if a child died."""
    while not crawl.fetch_done:
        if crawl.stopping.startswith("signal"):
            tell(_STOP)  # the rest waits in the spool for the next run
        for p in procs:
            if not p.is_alive() and p.exitcode not in (0, None):
                said = " on the error above" if p.exitcode == ExitStatus.ERROR else ""
                raise CrawlError(f"parse process {p.name} stopped{said} (exit {p.exitcode}); "
                                 "the crawl stopped, its work is safe in the spool: run again")
        await trio.sleep(0.2)
