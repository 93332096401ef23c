"""What a ``crawl run`` finds of the run before it, and gives back at once.

A killed run leaves leases (URLs it was fetching) and fetch results not yet
parsed (in the ``fetched`` spool). The results are parsed first, as ever.
The leases used to sit until they expired (2 x --timeout + --connect-timeout
+ 30 s: about 100 s), shown as ``in flight`` and holding their hosts,
without a word. A run holds the crawl directory exclusively
(:mod:`crawl.core.dirlock`), so no other run is alive, and ``crawl frontier
next`` cannot lease beside it either; a lease can still belong to a live
pipeline, leased before this run started and still being fetched. So every
``crawl frontier next`` records when it leased
(:func:`crawl.core.note_stage_leases`, the latest time), and a lease taken *after* that is a run's lease:
dead, since this run holds the lock. Those are returned to their queues at
once; the others expire as before, and the start says when.
"""

from __future__ import annotations

import time
from typing import Any

import orjson

from crawl.core import CrawlDir, iso_utc, stage_leased

from .stats import RUN_STATUS


def previous_run(cdir: CrawlDir) -> dict[str, Any] | None:
    """The status the last run wrote (before this one overwrites it)."""
    try:
        st = orjson.loads((cdir.root / RUN_STATUS).read_bytes())
    except (OSError, orjson.JSONDecodeError):
        return None
    return st if isinstance(st, dict) else None


def how_it_ended(prev: dict[str, Any] | None) -> str:
    if not prev:
        return "previous run"
    who = f"pid {prev['pid']}, " if prev.get("pid") else ""
    if prev.get("ended"):
        return f"previous run ({who}stopped {iso_utc(prev['ended'])})"
    seen = f"last heartbeat {iso_utc(prev['ts'])}" if prev.get("ts") else "no heartbeat"
    return f"previous run ({who}killed; {seen})"


def resume(frontier: Any, fetched_backlog: int, cdir: CrawlDir, now: float | None = None) -> list[str]:
    """Release the dead runs' leases; say what was recovered and what still waits.

    ``frontier`` is the run's :class:`~crawl.frontier.Frontier`, ``fetched_backlog``
    the results waiting in the ``fetched`` spool. Returns lines for stderr
    (none when there was nothing to resume).
    """
    now = time.time() if now is None else now
    if not frontier.pending()["in_flight"] and not fetched_backlog:
        return []
    got = frontier.release_leases(now, stage_leased(cdir.root))
    prev = previous_run(cdir)
    parts = []
    if got["released"] or got["dropped"]:
        n = got["released"]
        parts.append(f"{n} lease{'s' if n != 1 else ''} of the {how_it_ended(prev)} returned to the queue"
                     + (f" ({got['dropped']} more dropped: out of lease attempts, --max-leases)"
                        if got["dropped"] else ""))
    if fetched_backlog:
        parts.append(f"{fetched_backlog:,} result{'s' if fetched_backlog != 1 else ''} recovered from the "
                     "spool (parsed first)")
    lines = ["resumed: " + "; ".join(parts)] if parts else []
    if got["kept"]:
        wait = max(0.0, (got["kept_until"] or now) - now)
        lines.append(f"{got['kept']} lease{'s' if got['kept'] != 1 else ''} taken by crawl frontier next "
                     f"(a pipeline may still be fetching them) held until they expire, by "
                     f"{iso_utc(got['kept_until'])} (in {wait:.0f} s); their hosts wait until then")
    return lines
