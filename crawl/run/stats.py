"""What a crawl directory holds, gathered for ``crawl stats`` and ``crawl run``.

Every part is optional (a directory used only by ``crawl seen`` has no
frontier); each is read from its own LMDB snapshot or files, so this works
while a crawl is running without slowing it down.
"""

from __future__ import annotations

import socket
import time
from pathlib import Path
from typing import Any

import orjson

from crawl.core import LOCK_NAME, CrawlDir, describe_holder, holder, iso_utc, open_env, pid_alive

RUN_STATUS = "run-status.json"


def warc_files(warc_dir: Path) -> list[Path]:
    """The WARC files proper (the store's own list): not their ``.cdxj`` sidecars,
    which a glob of ``*.warc*`` counted as WARC files too."""
    from crawl.store import cdxj

    return cdxj.warc_files(warc_dir) if warc_dir.is_dir() else []


def _dir_bytes(path: Path, pattern: str) -> tuple[int, int]:
    files = [p for p in path.glob(pattern) if p.is_file()] if path.exists() else []
    return len(files), sum(p.stat().st_size for p in files)


def gather(root: str | Path, now: float | None = None) -> dict[str, Any]:
    now = time.time() if now is None else now
    cd = CrawlDir(root)
    out: dict[str, Any] = {"kind": "stats", "v": 1, "dir": str(cd.root)}
    if (cd.frontier / "data.mdb").exists():
        from crawl.frontier import Frontier

        fr = Frontier(cd.frontier)
        out["frontier"] = fr.stats(now)
        # hosts whose URLs wait on an unreachable robots.txt, and when each is checked again
        out["robots_waiting"] = fr.robots_waiting(now, limit=20)
    if (cd.seen / "data.mdb").exists():
        env = open_env(cd.seen)
        with env.begin() as txn:
            urls = env.open_db(b"urls", txn=txn, create=False) if _has_db(env, b"urls") else None
            out["seen"] = {"urls": txn.stat(urls)["entries"] if urls is not None else 0}
    if (cd.sub("recrawl") / "data.mdb").exists():
        from crawl.recrawl import Recrawler

        # not closed: the environment is shared per process (a running crawl may hold it)
        out["recrawl"] = Recrawler(cd).stats(now)  # backlog: re-crawls due but not yet emitted
    warcs = warc_files(cd.warc)
    out["warc"] = {"files": len(warcs), "bytes": sum(p.stat().st_size for p in warcs), "dir": str(cd.warc)}
    n, size = _dir_bytes(cd.log, "*.zst")
    out["log"] = {"files": n, "bytes": size}
    if cd.sub("cluster").is_dir():  # a node of a shared crawl (crawl run --cluster) has D/cluster
        from crawl.cluster import node_summary  # here: the cluster client loads only for a node

        node = node_summary(cd.root, now)
        if node is not None:
            out["cluster"] = node
    status = cd.root / RUN_STATUS
    if status.exists():
        try:
            run = orjson.loads(status.read_bytes())
        except orjson.JSONDecodeError:
            run = None
        if isinstance(run, dict):
            out["run"] = {**run, **liveness(run, cd.root, now)}
    return out


def liveness(run: dict[str, Any], root: Path, now: float) -> dict[str, Any]:
    """Is the run that wrote ``run`` (its ``run-status.json``) alive? ``alive``,
    ``state`` (running, finished, stopped) and ``state_text`` for people.

    On this host the kernel knows: a live run holds the directory lock
    (crawl/core/dirlock.py), a killed one has dropped it. A status without the
    lock (an older run, or the lock file removed) is alive while its pid is
    and its heartbeat (``ts``, written every ``heartbeat`` seconds) is fresh;
    a run on another host (a shared file system) only by its heartbeat.
    """
    held = holder(root)
    pid, host, ts = run.get("pid"), run.get("host"), run.get("ts")
    every = run.get("heartbeat") if isinstance(run.get("heartbeat"), int | float) else 10.0
    fresh = isinstance(ts, int | float) and now - ts <= 3 * every + 10.0
    beat = f"last heartbeat at {iso_utc(ts)}" if isinstance(ts, int | float) else "no heartbeat"
    if held is not None and held.get("what") == "crawl run" and held.get("pid") != pid:
        return {"alive": True, "state": "running", "state_text": f"running: {describe_holder(held)}, "
                "starting (no figures written yet; the ones below are the run before)"}
    if run.get("ended"):
        return {"alive": False, "state": "finished",
                "state_text": f"finished at {iso_utc(run['ended'])} ({run.get('stopping') or 'done'})"}
    here = host == socket.gethostname()
    if held is not None and held.get("pid") == pid:
        alive, why = True, f"pid {pid} holds the crawl directory, {beat}"
    elif here or not host:
        # a run that locks (every run now) and does not hold the lock is gone
        alive = not (root / LOCK_NAME).exists() and isinstance(pid, int) and pid_alive(pid) and fresh
        why = f"pid {pid}, {beat}"
    else:
        alive, why = fresh, f"pid {pid} on {host}, {beat} (another host: judged by the heartbeat)"
    if alive:
        return {"alive": True, "state": "running", "state_text": f"running ({why})"}
    who = f"pid {pid} on {host}; " if pid else ""
    return {"alive": False, "state": "stopped", "state_text": f"stopped ({who}{beat}; the process is gone)"}


def _has_db(env: Any, name: bytes) -> bool:
    with env.begin() as txn:
        return txn.get(name) is not None


def outcome_counts(root: str | Path) -> dict[str, int]:
    """Fetch outcomes over the whole crawl log (reads it; for audits and tests)."""
    from .crawllog import read_log

    counts: dict[str, int] = {}
    for ev in read_log(CrawlDir(root).log):
        if ev.get("event") == "fetch":
            key = str(ev.get("outcome"))
            counts[key] = counts.get(key, 0) + 1
    return counts
