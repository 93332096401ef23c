"""Per-URL fetch history: what the last successful fetch of a URL said.

Why: a conditional re-fetch (RFC 9110 section 13.1: If-None-Match,
If-Modified-Since) lets an unchanged page answer 304 and cost almost
nothing, and a 304 is archived as a WARC revisit record that must name the
capture it refers to (its URI, date and payload digest). Both need what the
previous fetch saw, keyed by URL, which is this table.

Stored in the ``history`` table of the crawl's fetch-state LMDB
(``DIR/fetchstate``), one small JSON value per URL keyed by the 128-bit xxh3
of the URL (LMDB keys are at most 511 bytes; URLs are not).
"""

from __future__ import annotations

import re
import time
from typing import Any

import lmdb
import orjson
import xxhash

FIELDS = ("etag", "last_modified", "digest", "fetched_at", "warc_date", "status", "warc")
# update_later's bounds: URLs held in memory, and seconds the oldest of them waits
FLUSH_URLS = 64
FLUSH_SECONDS = 2.0


def url_key(url: str) -> bytes:
    return xxhash.xxh3_128_digest(url.encode("utf-8", "surrogatepass"))


_UNSENDABLE = re.compile(r"[\x00-\x08\x0a-\x1f\x7f]")


class History:
    """Read and update fetch history; writes are batched, one transaction each."""

    def __init__(self, env: lmdb.Environment) -> None:
        self.env = env
        self.db = env.open_db(b"history")
        # update_later's merged entries not written yet (url -> entry). One writer thread
        # (the fetch stage's output) replaces values, never changes one in place, so a
        # reader in another thread sees an entry whole, pending or written.
        self._pending: dict[str, dict[str, Any]] = {}
        self._since = 0.0  # monotonic time of the oldest pending entry; 0: none
        self.commits = 0  # write transactions, for the growth test

    def get(self, url: str) -> dict[str, Any] | None:
        pending = self._pending.get(url)
        if pending is not None:
            return dict(pending)
        with self.env.begin(db=self.db) as txn:
            raw = txn.get(url_key(url))
        if raw is None:
            return None
        val: dict[str, Any] = orjson.loads(raw)
        return val if val.get("url") == url else None  # a 128-bit collision: ignore

    def update(self, entries: list[tuple[str, dict[str, Any]]]) -> None:
        """Merge ``{field: value}`` into each URL's entry (None removes a field), now."""
        if not entries:
            return
        self.flush()  # what update_later holds is older: written first
        self.commits += 1
        with self.env.begin(write=True, db=self.db) as txn:
            for url, fields in entries:
                key = url_key(url)
                raw = txn.get(key)
                cur: dict[str, Any] = orjson.loads(raw) if raw else {}
                txn.put(key, orjson.dumps(_merged(cur, url, fields)))

    def update_later(self, entries: list[tuple[str, dict[str, Any]]], now: float | None = None) -> None:
        """:meth:`update`, written with the next :meth:`flush`: at the latest once
        FLUSH_URLS URLs wait or the oldest has waited FLUSH_SECONDS (checked here),
        and when the fetcher closes. :meth:`get` sees them at once.

        Why: the fetch stage wrote one fsynced transaction per stored group (one
        or two pages on a single host: ~500 commits of a 1,000-page crawl, issue
        19's CPU per page) for what is advice to the next fetch of a URL, not
        part of any result's durability; a crash loses at most these entries, and
        the next fetch of such a URL is unconditional.
        """
        if not entries:
            return
        now = time.monotonic() if now is None else now
        pending = self._pending
        with self.env.begin(db=self.db) as txn:
            for url, fields in entries:
                cur = pending.get(url)
                if cur is None:
                    raw = txn.get(url_key(url))
                    cur = orjson.loads(raw) if raw else {}
                pending[url] = _merged(cur, url, fields)
        if not self._since:
            self._since = now
        if len(pending) >= FLUSH_URLS or now - self._since >= FLUSH_SECONDS:
            self.flush()

    def flush(self) -> None:
        """Write what :meth:`update_later` holds, in one transaction."""
        if not self._pending:
            return
        items = list(self._pending.items())
        self.commits += 1
        with self.env.begin(write=True, db=self.db) as txn:
            for url, cur in items:
                txn.put(url_key(url), orjson.dumps(cur))
        for url, cur in items:
            if self._pending.get(url) is cur:
                del self._pending[url]
        self._since = 0.0

    def conditional_headers(self, url: str, lease: dict[str, Any] | None = None,
                            entry: dict[str, Any] | None = None) -> list[tuple[str, str]]:
        """If-None-Match / If-Modified-Since from the lease (recrawl) or the history.

        ``entry`` is the URL's history if the caller has already read it.
        """
        src: dict[str, Any] = {}
        if lease and (lease.get("etag") or lease.get("last_modified")):
            src = lease
        else:
            src = entry if entry is not None else (self.get(url) or {})
        out = []
        for name, key in (("If-None-Match", "etag"), ("If-Modified-Since", "last_modified")):
            value = src.get(key)
            # a validator with control characters (a lenient read of a sloppy server)
            # cannot be sent back; without it the fetch is plain, not refused
            if value and not _UNSENDABLE.search(str(value)):
                out.append((name, str(value)))
        return out


def _merged(cur: dict[str, Any], url: str, fields: dict[str, Any]) -> dict[str, Any]:
    """A new entry: ``cur`` with its URL and ``fields`` (None removes a field)."""
    out = {**cur, "url": url}
    for k, v in fields.items():
        if v is None:
            out.pop(k, None)
        else:
            out[k] = v
    return out
