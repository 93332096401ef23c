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
from collections.abc import Iterator
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
                    report.warn("in-flight fetches cancelled; their leases return after expiry")
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


def _child_main(root: str, opts: RunOptions, line: Any) -> None:
    """Entry point of one parse process (spawned; ignores Ctrl-C: the parent decides).

    ``line`` is the child's end of its :class:`~crawl.core.Lifeline`: the
    parent says ``done`` (finish what is queued) or ``stop`` (leave the rest
    in the spool) through it, and the child exits when the parent is gone.
    """
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    done, stop = threading.Event(), threading.Event()

    def heard(message: bytes) -> None:
        (stop if message == _STOP else done).set()

    hold_lifeline(line, heard)
    try:
        crawl = Crawl(CrawlDir(root), opts, child=True)  # under the parent's dir lock
        try:
            while not stop.is_set():
                finishing = done.is_set()
                if crawl.process_one_batch():
                    continue
                if finishing:
                    return
                time.sleep(0.05)
        finally:
            crawl.close()
    except CrawlError as exc:  # one line, as the parent's boundary writes its own (a full disk...)
        sys.stderr.write(f"crawl: error: {exc}\n")
        sys.stderr.flush()
        sys.exit(ExitStatus.ERROR)


_DONE, _STOP = b"done", b"stop"


async def _process_children(crawl: Crawl) -> None:
    import multiprocessing

    # spawn: no fork of a threaded, LMDB-holding process. It starts
    # multiprocessing's resource tracker; nothing here registers anything with
    # it (no semaphores: the lifelines carry done/stop), and it exits once the
    # children, which die with this process, are gone.
    ctx = multiprocessing.get_context("spawn")
    lines = [Lifeline() for _ in range(crawl.opts.parse_procs)]
    procs = [ctx.Process(target=_child_main, args=(str(crawl.cdir.root), crawl.opts, line.reader),
                         name=f"crawl-parse-{i}", daemon=True)
             for i, line in enumerate(lines)]
    told: set[bytes] = set()

    def tell(message: bytes) -> None:
        if message not in told:
            told.add(message)
            for line in lines:
                line.send(message)

    try:
        for p, line in zip(procs, lines, strict=True):
            p.start()
            line.drop_reader()
        while not crawl.fetch_done:
            if crawl.stopping.startswith("signal"):
                tell(_STOP)  # the rest waits in the spool for the next run
            for p in procs:
                if not p.is_alive() and p.exitcode not in (0, None):
                    said = " on the error above" if p.exitcode == ExitStatus.ERROR else ""
                    raise CrawlError(f"parse process {p.name} stopped{said} (exit {p.exitcode}); "
                                     "the crawl stopped, its work is safe in the spool: run again")
            await trio.sleep(0.2)
        tell(_DONE)
        if crawl.stopping.startswith("signal"):
            tell(_STOP)
        for p in procs:
            await trio.to_thread.run_sync(p.join)
    finally:
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
