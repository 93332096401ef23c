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
from typing import Any

import lmdb
import orjson
import xxhash

FIELDS = ("etag", "last_modified", "digest", "fetched_at", "warc_date", "status", "warc")


def url_key(url: str) -> bytes:
    return xxhash.xxh3_128_digest(url.encode("utf-8", "surrogatepass"))


_UNSENDABLE = re.compile(r"[\x00-\x08\x0a-\x1f\x7f]")


class History:
    """Read and update fetch history; writes are batched, one transaction each."""

    def __init__(self, env: lmdb.Environment) -> None:
        self.env = env
        self.db = env.open_db(b"history")

    def get(self, url: str) -> dict[str, Any] | None:
        with self.env.begin(db=self.db) as txn:
            raw = txn.get(url_key(url))
        if raw is None:
            return None
        val: dict[str, Any] = orjson.loads(raw)
        return val if val.get("url") == url else None  # a 128-bit collision: ignore

    def update(self, entries: list[tuple[str, dict[str, Any]]]) -> None:
        """Merge ``{field: value}`` into each URL's entry (None removes a field)."""
        if not entries:
            return
        with self.env.begin(write=True, db=self.db) as txn:
            for url, fields in entries:
                key = url_key(url)
                raw = txn.get(key)
                cur: dict[str, Any] = orjson.loads(raw) if raw else {}
                cur["url"] = url
                for k, v in fields.items():
                    if v is None:
                        cur.pop(k, None)
                    else:
                        cur[k] = v
                txn.put(key, orjson.dumps(cur))

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
