"""The URL-seen set: a Bloom filter in front of an exact LMDB set.

Invariant 3 of the design: canonicalise before the seen-check, seen-check
before the frontier. :meth:`SeenSet.unseen` is that check. It marks every
URL it lets through as seen *before* returning it (URL-seen first, then
frontier: a crash in between loses a URL from the frontier but never enqueues
one twice; seen-but-unfetched URLs can be reconciled from the id bitmap).

Two layers, as in the design notes:

* the :class:`~crawl.bloom.BloomFilter` answers "definitely new" from memory,
  so a new URL costs no lookup;
* the exact set (LMDB, key = 8-byte big-endian fingerprint) confirms the
  filter's "maybe". It is the source of truth: every insert is
  ``put(overwrite=False)``, which reports a key that was already there, so a
  stale or lost filter can cost speed but never correctness.

Each URL also gets a dense 32-bit id (the LMDB value). Ids are what make
pyroaring useful here: a set of URL *fingerprints* is random 64-bit numbers,
which roaring cannot compress, but the set of *ids* fetched in one crawl cycle
is a run-heavy subset of 0..N, which a roaring bitmap holds in about a bit per
URL, and "seen but never fetched this cycle" is one bitmap difference.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Sequence
from itertools import compress, repeat
from pathlib import Path
from typing import Any

import lmdb
from pyroaring import BitMap

from . import records
from .bloom import BloomFilter, _best_load
from .records import Record
from .state import close_env, open_env

BLOOM_FILE = "bloom.bin"
_NEXT_ID = b"next_id"
_FETCHED = b"fetched:"


def _fp_of(value: object) -> int | None:
    """A record's ``fp``: an int (``crawl parse``) or 16 hex digits (``crawl canon``)."""
    if isinstance(value, int) and not isinstance(value, bool) and 0 <= value < 1 << 64:
        return value
    if isinstance(value, str) and len(value) == 16:
        try:
            return int(value, 16)
        except ValueError:
            return None
    return None


def canonical(rec: Record) -> tuple[Record, int]:
    """A URL record in canonical form and its fingerprint.

    A record that already carries a valid ``fp`` from the same canon rule
    version is trusted as is; anything else is canonicalised again (with
    ``url``, ``fp``, ``surt``, ``host``, ``canon_v`` set). Raises CanonError.
    """
    from .canon import CANON_VERSION, canonicalize

    fp = _fp_of(rec.get("fp"))
    if rec.get("canon_v") == CANON_VERSION and fp is not None:
        return rec, fp
    c = canonicalize(rec["url"])
    return records.derive(rec, rec["kind"], url=c.url, fp=c.fp_hex, surt=c.surt,
                          host=c.host, canon_v=CANON_VERSION), c.fp


def key_of(fp: int) -> bytes:
    """The exact set's key: big-endian, so LMDB order is numeric order."""
    return fp.to_bytes(8, "big")


class SeenSet:
    """The two-layer seen set inside ``CrawlDir(dir).seen``.

    Args:
        path: the LMDB environment directory (``CrawlDir.seen``).
        expected: URLs the filter is sized for; it is rebuilt 2x larger from
            the exact set when the crawl outgrows it.
        fp_rate: the filter's target false-positive rate at ``expected``.
        sync: fsync every batch commit (off only for benchmarks and caches).
        save_every: also persist the filter after this many new URLs, so a
            crash rarely forces a full rebuild.
        hot_size: fingerprints kept in a small in-memory set of recently
            checked URLs (two generations, so at most 2x this many). Links
            repeat heavily (navigation, footers), and a set hit costs 50 ns
            where an LMDB lookup costs over a microsecond.
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        expected: int = 1_000_000,
        fp_rate: float = 0.01,
        sync: bool = True,
        save_every: int = 2_000_000,
        hot_size: int = 1 << 18,
    ) -> None:
        self.path = Path(path)
        self.env = open_env(self.path, sync=sync)
        self.urls = self.env.open_db(b"urls")
        self.meta = self.env.open_db(b"meta")
        self.fp_rate = fp_rate
        self.expected = max(int(expected), 1)
        self.save_every = save_every
        self.hot_size = hot_size
        self._hot: tuple[set[int], set[int]] = (set(), set())
        self._maybe_share = 0.0  # recent share of "maybe" answers (an EMA)
        self._skips = 0
        self.counts: dict[str, int] = {}
        self.bloom = self._load_or_rebuild()
        self._unsaved = 0

    # -- the filter's life cycle --------------------------------------------

    @property
    def bloom_path(self) -> Path:
        return self.path / BLOOM_FILE

    def __len__(self) -> int:
        with self.env.begin(db=self.urls) as txn:
            n: int = txn.stat(self.urls)["entries"]
        return n

    def _load_or_rebuild(self) -> BloomFilter:
        entries = len(self)
        bf = BloomFilter.load(self.bloom_path)
        if bf is not None and bf.covers == entries:
            self._capacity_n = self._capacity(bf)
            if bf.added <= self._capacity_n:
                return bf
        if entries or bf is not None:
            self._count("bloom_rebuilds")
        return self.rebuild(max(self.expected, entries + entries // 4))

    def _capacity(self, bf: BloomFilter) -> int:
        """The number of URLs at which ``bf`` reaches the target rate."""
        return int(_best_load(bf.k, self.fp_rate) * bf.blocks)

    def rebuild(self, capacity: int) -> BloomFilter:
        """A fresh filter filled from the exact set (the set is the truth)."""
        bf = BloomFilter.for_capacity(capacity, self.fp_rate)
        with self.env.begin(db=self.urls) as txn:
            cur = txn.cursor()
            bf.add_many(map(int.from_bytes, cur.iternext(keys=True, values=False), repeat("big")))
            bf.covers = txn.stat(self.urls)["entries"]
        self.bloom = bf
        self._capacity_n = self._capacity(bf)
        return bf

    def save(self) -> None:
        """Persist the filter with the entry count it covers (staleness check).

        ``covers`` counts only what this filter absorbed (the set's size when
        it was loaded or rebuilt, plus this process's inserts), so if another
        process wrote to the set meanwhile the next open sees a mismatch and
        rebuilds instead of trusting a filter that misses keys.
        """
        self.bloom.save(self.bloom_path)
        self._unsaved = 0

    def close(self) -> None:
        if self.env is not None:
            self.save()
            close_env(self.env)
            self.env = None  # type: ignore[assignment]

    def __enter__(self) -> SeenSet:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _count(self, key: str, n: int = 1) -> None:
        if n:
            self.counts[key] = self.counts.get(key, 0) + n

    # -- the check -----------------------------------------------------------

    def add_fps(self, fps: Sequence[int]) -> list[bool]:
        """Mark fingerprints seen; True for each one that was new.

        Order is kept and the first occurrence within the batch wins. One
        write transaction per batch: the batch is durable when this returns.
        Every step is a C-level pass over the batch (dict, map, compress):
        per-URL Python code is what would cap the rate.
        """
        # fp -> index of its first occurrence (later pairs win, so reverse)
        first = dict(zip(reversed(fps), range(len(fps) - 1, -1, -1), strict=True))
        hot_new, hot_old = self._hot
        cand = [f for f in first if f not in hot_new and f not in hot_old]
        if self._maybe_share < 0.5:
            asked = list(compress(cand, self.bloom.maybe_many(cand)))
            self._maybe_share = len(asked) / len(cand) if len(cand) >= 100 else 0.0
            self._count("bloom_maybe", len(asked))
            probe_all = False
        else:
            # Mostly known URLs lately: the filter would say "maybe" to nearly
            # all of them and save nothing, so ask the exact set directly and
            # sample the filter again every 16th batch.
            asked = cand
            probe_all = True
            self._skips += 1
            if self._skips % 16 == 0:
                self._maybe_share = 0.0
        new: list[int] = []
        with self.env.begin(write=True, db=self.urls) as txn:
            got = map(txn.get, map(int.to_bytes, asked, repeat(8), repeat("big")))
            found = {f for f, v in zip(asked, got, strict=True) if v is not None}
            fresh = [f for f in cand if f not in found] if found else cand
            if fresh:
                new = self._insert(txn, fresh)
        out = [False] * len(fps)
        for f in new:
            out[first[f]] = True
        self.bloom.add_many(new)
        self.bloom.covers += len(new)
        if len(new) < len(fresh):  # keys another writer added: learn them too
            self.bloom.add_many(set(fresh).difference(new))
        hot_new.update(found)
        hot_new.update(fresh)
        if len(hot_new) > self.hot_size:
            self._hot = (set(), hot_new)
        self._count("checked", len(fps))
        self._count("hot_hits", len(first) - len(cand))
        if probe_all:
            self._count("bloom_skipped", len(cand))
        else:
            self._count("bloom_false_positive", len(asked) - len(found))
        self._count("new", len(new))
        self._unsaved += len(new)
        if self.bloom.added > self._capacity_n:
            self.rebuild(2 * self.bloom.added)
            self._count("bloom_grown")
            self.save()
        elif self._unsaved >= self.save_every:
            self.save()
        return out

    def _insert(self, txn: lmdb.Transaction, fresh: list[int]) -> list[int]:
        """Insert-if-absent; the fingerprints that really were absent."""
        raw = txn.get(_NEXT_ID, db=self.meta)
        next_id = int.from_bytes(raw, "big") if raw else 0
        fresh = sorted(fresh)  # sorted inserts touch each B-tree page once
        keys = map(int.to_bytes, fresh, repeat(8), repeat("big"))
        ids = map(int.to_bytes, range(next_id, next_id + len(fresh)), repeat(4), repeat("big"))
        added = list(map(txn.put, keys, ids, repeat(True), repeat(False)))
        txn.put(_NEXT_ID, (next_id + len(fresh)).to_bytes(8, "big"), db=self.meta)
        if all(added):
            return fresh
        # present although the filter said "definitely new": the file was
        # stale or another process added them. The exact set decides.
        self._count("bloom_stale", added.count(False))
        return list(compress(fresh, added))

    def contains_fps(self, fps: Iterable[int]) -> list[bool]:
        """Read-only exact membership (no marking)."""
        with self.env.begin(db=self.urls) as txn:
            return [txn.get(key_of(fp)) is not None for fp in fps]

    # -- records -------------------------------------------------------------

    def unseen(self, recs: Sequence[Record]) -> list[Record]:
        """The records whose canonical URL was never seen, now marked seen.

        URL records come out with the canonical ``url``, ``fp``, ``surt``,
        ``host`` and ``canon_v``; URLs that cannot be canonicalised become
        ``reject`` records (they are not silently dropped). Other kinds pass
        through untouched.
        """
        from .canon import CanonError

        staged: list[Record] = []
        fps: list[int] = []
        slots: list[int] = []
        for rec in recs:
            if rec.get("kind") not in records.URL_KINDS:
                staged.append(rec)
                continue
            try:
                out, fp = canonical(rec)
            except CanonError as exc:
                self._count("rejected")
                staged.append(records.make(
                    "reject", input=rec["url"], error=getattr(exc, "reason", "invalid-url"),
                    detail=str(exc), stage="seen"))
                continue
            slots.append(len(staged))
            staged.append(out)
            fps.append(fp)
        flags = self.add_fps(fps)
        drop = {slot for slot, new in zip(slots, flags, strict=True) if not new}
        self._count("already_seen", len(drop))
        return [r for i, r in enumerate(staged) if i not in drop]

    # -- fetched ids per cycle (pyroaring) -----------------------------------

    def ids_of(self, fps: Iterable[int]) -> list[int | None]:
        with self.env.begin(db=self.urls) as txn:
            out = []
            for fp in fps:
                v = txn.get(key_of(fp))
                out.append(None if v is None else int.from_bytes(v, "big"))
            return out

    def mark_fetched(self, fps: Iterable[int], cycle: str) -> list[bool]:
        """Add URLs to ``cycle``'s fetched bitmap; True where it was not there yet.

        A False means this URL was already fetched in the same cycle, which
        the design forbids ("do not fetch the same URL twice in one cycle").
        """
        key = _FETCHED + cycle.encode()
        with self.env.begin(write=True) as txn:
            raw = txn.get(key, db=self.meta)
            bm = BitMap.deserialize(raw) if raw else BitMap()
            out = []
            for fp in fps:
                v = txn.get(key_of(fp), db=self.urls)
                if v is None:
                    out.append(True)  # fetched without passing seen (a seed): not ours to judge
                    continue
                i = int.from_bytes(v, "big")
                out.append(i not in bm)
                bm.add(i)
            bm.run_optimize()
            txn.put(key, bm.serialize(), db=self.meta)
        return out

    def fetched(self, cycle: str) -> BitMap:
        with self.env.begin(db=self.meta) as txn:
            raw = txn.get(_FETCHED + cycle.encode())
        return BitMap.deserialize(raw) if raw else BitMap()

    def stats(self, cycle: str | None = None) -> dict[str, Any]:
        n = len(self)
        bf = self.bloom
        out: dict[str, Any] = {
            "urls": n,
            "bloom_bytes": bf.nbytes,
            "bloom_k": bf.k,
            "bloom_capacity": self._capacity_n,
            "bloom_bits_per_url_at_capacity": round(bf.nbytes * 8 / max(self._capacity_n, 1), 2),
            "bloom_target_fp_rate": self.fp_rate,
            "bloom_expected_fp_rate": round(bf.expected_fp_rate(n), 6),
        }
        if cycle is not None:
            done = self.fetched(cycle)
            out.update(cycle=cycle, fetched=len(done), unfetched=n - len(done),
                       fetched_bitmap_bytes=len(done.serialize()))
        return out
