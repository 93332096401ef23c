"""``crawl run --cluster``: the bridge process beside the run, and the handoff rounds.

The run itself stays a trio process that never imports the NATS client:
``crawl cluster bridge`` (asyncio, crawl/cluster) runs as a child and
talks to it only through ``D/cluster/`` (outbox, inbox, map.json). The
child holds the read end of a :class:`~crawl.core.Lifeline`, so it dies
with the run however the run ends; if it exits on its own the run says so
(its last line of ``D/cluster/bridge.log``) and starts it again, and in the
meantime leases nothing once the map goes stale (crawl/cluster/shards.py).

Inbox batches are admitted by the parse side (``Crawl.process_one_batch``,
in this process or the parse children), so admission stays one caller at
a time per process; this task only runs the handoff of draining shards and
the sweep of hosts the map gave away (:class:`crawl.cluster.Node`).
"""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import trio

from crawl.core import Lifeline, Report

from .crawl import Crawl

HANDOFF_EVERY = 0.25  # seconds between handoff/sweep rounds
RESTART_MAX = 10.0  # longest wait before starting a bridge that exited again
NO_MAP_WARN = 15.0  # seconds without a shard map before the run says so


def bridge_argv(crawl: Crawl, fd: int) -> list[str]:
    from crawl.cluster import node_id  # here: a crawl of one machine never loads the cluster client

    o = crawl.opts
    return [sys.executable, "-m", "crawl", "cluster", "bridge", "--servers", o.cluster,
            "--crawl", o.cluster_crawl, "--node", node_id(crawl.cdir.root, o.node or None),
            "--lifeline-fd", str(fd), str(crawl.cdir.root)]


class Bridge:
    """The bridge child: started with a lifeline, restarted when it exits."""

    def __init__(self, crawl: Crawl) -> None:
        self.crawl = crawl
        self.log = Path(crawl.node.dir if crawl.node else crawl.cdir.root) / "bridge.log"
        self.proc: subprocess.Popen[bytes] | None = None
        self.line: Lifeline | None = None
        self.starts = 0

    def start(self) -> None:
        self.line = Lifeline()
        fd = self.line.reader.fileno()
        with self.log.open("ab") as out:
            self.proc = subprocess.Popen(bridge_argv(self.crawl, fd), stdin=subprocess.DEVNULL,
                                         stdout=out, stderr=out, pass_fds=(fd,))
        self.line.drop_reader()
        self.starts += 1

    def exited(self) -> int | None:
        return None if self.proc is None else self.proc.poll()

    def last_line(self) -> str:
        try:
            lines = [x for x in self.log.read_text(errors="replace").splitlines() if x.strip()]
        except OSError:
            return ""
        return lines[-1][:300] if lines else ""

    def stop(self) -> None:
        if self.line is not None:
            self.line.close()  # the bridge sees end of file and leaves
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(5)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


async def cluster_tasks(crawl: Crawl, report: Report) -> None:
    """Keep the bridge running and hand shards over until the run is cancelled."""
    node = crawl.node
    assert node is not None
    bridge = Bridge(crawl)
    bridge.start()
    wait, restart_at, started = 1.0, 0.0, time.time()
    first, warned = started, False
    try:
        while True:
            code, now = bridge.exited(), time.time()
            if code is not None and not restart_at:
                report.warn(f"cluster bridge exited (status {code}): {bridge.last_line() or 'no message'}; "
                            f"starting it again in {wait:.0f} s (its log: {bridge.log})")
                restart_at = now + wait
                wait = wait * 2 if now - started < 60 else 1.0  # back off only when it keeps failing
            elif code is not None and now >= restart_at:
                bridge.start()
                restart_at, started = 0.0, now
                wait = min(wait, RESTART_MAX)
            if not warned and node.map.epoch < 0 and now - first > NO_MAP_WARN:
                warned = True
                report.warn(f"no shard map from the cluster after {NO_MAP_WARN:.0f} s: nothing is leased "
                            f"until one comes; can the bridge reach {crawl.opts.cluster}, and was "
                            f"`crawl cluster init --crawl {crawl.opts.cluster_crawl}` run? (its log: {bridge.log})")
            await trio.to_thread.run_sync(_handoff_round, crawl)
            await trio.sleep(HANDOFF_EVERY)
    finally:
        with trio.CancelScope(shield=True):
            await trio.to_thread.run_sync(bridge.stop)


def _handoff_round(crawl: Crawl) -> dict[str, Any] | None:
    node = crawl.node
    assert node is not None
    node.refresh()
    node.place()  # hosts the bridge placed: held ones released, re-homed ones moved out
    done = node.handoff()
    node.sweep()
    p = crawl.frontier.pending()
    node.note_idle(not p["queued"] and not p["in_flight"] and not crawl.backlog() and node.spools_empty())
    return done
