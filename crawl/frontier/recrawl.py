"""Re-admitting finished URLs to the frontier for a re-crawl.

Why a separate module: ``Frontier.add`` treats a URL completed in the
current cycle as known (that is what keeps discovery from fetching a page
twice in one cycle), so the re-crawl scheduler needs a way to say "fetch
this again, at this time" without starting a new cycle for everyone. This
works on the frontier's own LMDB through its transaction helper
(crawl/frontier/tx.py), so queueing, politeness and counters stay the
frontier's.
"""

from __future__ import annotations

from collections.abc import Iterable

from crawl.core import Record
from crawl.recrawl import Recrawler

from .db import Frontier
from .tx import Tx


def readd(frontier: Frontier, recs: Iterable[Record], now: float,
          rejects: list[Record] | None = None) -> dict[str, int]:
    """Queue URL records even if they are done (or dropped) in this cycle.

    A URL still queued or leased is left alone (counted ``known``): it will
    be fetched anyway. Anything else is added as ``Frontier.add`` would,
    honouring the record's ``due`` time and priority. One write transaction.

    Returns:
        counts: added, known, dropped_host_cap, rejected.
    """
    counts = {"added": 0, "known": 0, "dropped_host_cap": 0, "rejected": 0}
    recs = list(recs)
    with frontier.env.begin(write=True) as txn:
        t = Tx(frontier, txn, now)
        t.add_many(recs, rejects, counts, readd=True)
        t.count("readded", counts["added"])
        t.flush()
    frontier.trimmer.maybe_trim()
    return counts


def enqueue_due(rc: Recrawler, frontier: Frontier, now: float, limit: int) -> dict[str, int]:
    """One step of a continuous crawl: take up to ``limit`` due URLs from the
    freshness model and re-admit them to the frontier (``crawl run --recrawl``,
    ``crawl recrawl --enqueue``). The model marks them emitted first; if the
    process dies before the frontier commits, they are emitted again after
    ``reemit`` seconds, so nothing is lost."""
    due = rc.due(now, limit)
    counts = readd(frontier, due, now) if due else {"added": 0, "known": 0}
    counts["emitted"] = len(due)
    return counts
