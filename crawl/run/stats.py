"""What a crawl directory holds, gathered for ``crawl stats`` and ``crawl run``.

Every part is optional (a directory used only by ``crawl seen`` has no
frontier); each is read from its own LMDB snapshot or files, so this works
while a crawl is running without slowing it down.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import orjson

from crawl.core import CrawlDir, open_env

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
    status = cd.root / RUN_STATUS
    if status.exists():
        try:
            out["run"] = orjson.loads(status.read_bytes())
        except orjson.JSONDecodeError:
            pass
    return out


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
