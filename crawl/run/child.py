"""One parse process of ``crawl run --parse-procs N``: dedupe, parse, seen and admission.

The parent (crawl/run/spawn.py) starts it as
``python -c "from crawl.run.child import main; main()" LINE NEWS`` first
thing, so that its imports run beside the parent's; its work order, the
crawl directory and the run's options, follows pickled on stdin once the
directory is the run's; LINE and NEWS are the descriptors of its two pipes
(see :func:`serve`).

Why not multiprocessing: a spawned process imports the module of its
target, here the whole run loop (trio, the fetcher, the network stack,
about 8 MB of RSS the parse side never uses), and multiprocessing's spawn
starts a resource tracker beside it, a third process of 13 MB that has
nothing to track (the lifelines carry done/stop: no semaphores). Issue 19
wants all of the crawler's processes under 100 MB; this module imports
only what a parse process runs.
"""

from __future__ import annotations

import pickle
import signal
import sys
import threading
import time
from dataclasses import replace
from multiprocessing.connection import Connection
from typing import Any

from crawl.core import ORPHANED, CrawlDir, CrawlError, ExitStatus, hold_lifeline, limit_arenas

from .crawl import Crawl, RunOptions
from .spawn import LINKS, MORE, READY, STOP

COALESCE = 0.02  # seconds a woken parse process gathers results before claiming them


def work_order(root: str, opts: RunOptions) -> bytes:
    """What the parent writes on the child's stdin: the crawl directory and the
    options a parse process reads. The fetch side's (fetcher, address policy,
    store, host overrides) stay behind: unpickling them would load the fetcher."""
    lean = replace(opts, fetch=None, address_policy=None, store=None, overrides={})
    return pickle.dumps((root, lean), protocol=pickle.HIGHEST_PROTOCOL)


def main() -> None:
    """Entry point: the two descriptors from argv, the work order from stdin."""
    line = Connection(int(sys.argv[1]), writable=False)
    news = Connection(int(sys.argv[2]), readable=False)
    try:  # the parent starts this process before it knows the run will happen (crawl/run/spawn.py)
        root, opts = pickle.load(sys.stdin.buffer)
    except EOFError:
        sys.exit(ORPHANED)  # no order came: the parent stopped before its loop, or is gone
    sys.stdin.close()
    limit_arenas()
    serve(root, opts, line, news)


def serve(root: str, opts: RunOptions, line: Any, news: Any = None) -> None:
    """Claim and process spool batches until the parent says ``done`` (and the
    spool is empty) or ``stop``; ignores Ctrl-C (the parent decides).

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
        if message != MORE:
            (stop if message == STOP else done).set()
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
        crawl.on_links = lambda: say(LINKS)
        say(READY)
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
                    time.sleep(COALESCE)
                more.clear()
        finally:
            crawl.close()
    except CrawlError as exc:  # one line, as the parent's boundary writes its own (a full disk...)
        sys.stderr.write(f"crawl: error: {exc}\n")
        sys.stderr.flush()
        sys.exit(ExitStatus.ERROR)
