"""The URL-seen set: a Bloom filter in front of an exact LMDB set.

Invariant 3 of the design: canonicalise before the seen-check, seen-check
before the frontier. :meth:`SeenSet.unseen` is that check. It marks every
URL it lets through as seen *before* returning it (URL-seen first, then
frontier: a crash in between loses a URL from the frontier but never enqueues
one twice; seen-but-unfetched URLs can be reconciled from the id bitmap).

Two layers, as in the design notes:

* the :class:`~crawl.seen.bloom.BloomFilter` answers "definitely new" from memory,
  so a new URL costs no lookup;
* the exact set in LMDB (the source of truth) confirms the filter's "maybe".
  A stale or lost filter can cost speed but never correctness: the exact set
  is asked before anything is inserted.

The exact set is log-structured, in two parts of the same LMDB environment:

* *runs*: a few sorted arrays of fingerprints (little-endian uint64, each one
  LMDB value, with a parallel uint32 array of ids). A batch is checked
  against a run in a few numpy passes over the value as LMDB maps it (no
  copy; :meth:`SeenSet._locate`): 0.1-0.2 us per URL, where a B-tree lookup
  through py-lmdb costs 1.5-2.5 us in a 1M-10M-key tree.
* *recent*: a B-tree of the fingerprints added since the last flush (key
  8-byte big-endian fingerprint, value the id), at most ``delta_max`` of
  them, so it stays small and hot. Inserts go here with
  ``put(overwrite=False)``; the filter's "maybe"s that no run holds are looked
  up here one by one.

When the recent tree is full it becomes a new run in the same write
transaction, and the newest run is merged into the one before it while it is
at least a quarter of its size: a handful of runs, each fingerprint rewritten
a few times (8 + 4 bytes each time) instead of a 4 KiB page copy per insert.
Every batch is one write transaction (lookups, inserts, any flush), so
concurrent writers are serialised by LMDB and each sees a consistent set.

Each URL also gets a dense 32-bit id. Ids are what make
pyroaring useful here: a set of URL *fingerprints* is random 64-bit numbers,
which roaring cannot compress, but the set of *ids* fetched in one crawl cycle
is a run-heavy subset of 0..N, which a roaring bitmap holds in about a bit per
URL, and "seen but never fetched this cycle" is one bitmap difference.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

import lmdb
import numpy as np
from pyroaring import BitMap

from crawl.canon import CANON_VERSION, canonicalize
from crawl.core import CrawlError, NoSpace, Record, close_env, open_env, records

from .bloom import BloomFilter, _best_load, as_fps

BLOOM_FILE = "bloom.bin"
_NEXT_ID = b"next_id"
_NEXT_RUN = b"next_run"
_RUNS = b"runs"  # meta: (run id, size) pairs as uint64, oldest run first
_FETCHED = b"fetched:"
_FPS = np.dtype("<u8")
_IDS = np.dtype("<u4")
_MERGE_RATIO = 4  # merge the newest run into the previous while >= 1/4 of it
_BLOCK = 512  # keys per step of a run's in-memory index (4 KiB of the run)
_FEW = 256  # below this many keys a run is searched without its index


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
    fp = rec.get("fp")
    if type(fp) is not int or not 0 <= fp < 1 << 64:  # crawl parse's own int, checked at once
        fp = _fp_of(fp)
    if rec.get("canon_v") == CANON_VERSION and fp is not None:
        return rec, fp
    c = canonicalize(rec["url"])
    return records.derive(rec, rec["kind"], url=c.url, fp=c.fp_hex, surt=c.surt,
                          host=c.host, canon_v=CANON_VERSION), c.fp


def key_of(fp: int) -> bytes:
    """The recent B-tree's key: big-endian, so LMDB order is numeric order."""
    return fp.to_bytes(8, "big")


def _run_key(run: int, part: bytes) -> bytes:
    return run.to_bytes(8, "big") + part


def _keys(fps: np.ndarray) -> list[bytes]:
    """Recent-tree keys for a uint64 array."""
    raw = fps.astype(">u8").tobytes()
    return [raw[j:j + 8] for j in range(0, len(raw), 8)]


def _must(value: bytes | memoryview | None) -> bytes | memoryview:
    """A value the set's own listing says is there."""
    if value is None:
        raise lmdb.CorruptedError("seen: a run listed in meta is missing")
    return value


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
        delta_max: fingerprints the recent B-tree holds before it is flushed
            into a sorted run (module docstring).
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        expected: int = 1_000_000,
        fp_rate: float = 0.01,
        sync: bool = True,
        save_every: int = 2_000_000,
        delta_max: int = 1 << 12,
    ) -> None:
        self.path = Path(path)
        self.env = open_env(self.path, sync=sync)
        self.urls = self.env.open_db(b"urls")  # the recent B-tree
        self.runs = self.env.open_db(b"runs")
        self.meta = self.env.open_db(b"meta")
        self.fp_rate = fp_rate
        self.expected = max(int(expected), 1)
        self.save_every = save_every
        self.delta_max = max(int(delta_max), 1)
        self.counts: dict[str, int] = {}
        self._sparse: dict[tuple[int, int], np.ndarray] = {}  # (run, size) -> every _BLOCK-th key
        self.bloom = self._load_or_rebuild()
        self._unsaved = 0

    # -- the filter's life cycle --------------------------------------------

    @property
    def bloom_path(self) -> Path:
        return self.path / BLOOM_FILE

    def __len__(self) -> int:
        with self.env.begin(buffers=True) as txn:
            return self._size(txn)

    def _size(self, txn: lmdb.Transaction) -> int:
        recent: int = txn.stat(self.urls)["entries"]
        return recent + sum(size for _, size in self._run_list(txn))

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
        with self.env.begin(buffers=True) as txn:
            for _, fps, _ids in self._run_arrays(txn):
                bf.add_many(fps)
            bf.add_many(self._recent(txn)[0])
            bf.covers = self._size(txn)
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
        """Save the filter and close. A filter that cannot be saved (a full disk) is
        not an error here: the file on disk still says what it covers, so the next
        open sees it is stale and rebuilds it from the exact set."""
        if self.env is not None:
            try:
                self.save()
            except NoSpace:
                self._count("bloom_unsaved")
            finally:
                close_env(self.env)
                self.env = None  # type: ignore[assignment]

    def __enter__(self) -> SeenSet:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _count(self, key: str, n: int = 1) -> None:
        if n:
            self.counts[key] = self.counts.get(key, 0) + n

    # -- the exact set: runs and the recent B-tree --------------------------
    #
    # Transactions are opened with buffers=True: run arrays are numpy views
    # of LMDB's map, valid only inside the transaction and only until its
    # next write, so every helper finishes with them before anything is put.

    def _run_list(self, txn: lmdb.Transaction) -> list[tuple[int, int]]:
        raw = txn.get(_RUNS, db=self.meta)
        if not raw:
            return []
        pairs = np.frombuffer(raw, dtype=_FPS).reshape(-1, 2).tolist()
        return [(int(r), int(n)) for r, n in pairs]

    def _run_arrays(self, txn: lmdb.Transaction) -> list[tuple[int, np.ndarray, np.ndarray]]:
        """(run id, fingerprints, ids) per run, oldest first: views, not copies."""
        out = []
        runs = self._run_list(txn)
        if len(self._sparse) > len(runs):  # runs merged away: forget their indexes
            for key in set(self._sparse).difference(runs):
                del self._sparse[key]
        for run, _ in runs:
            fps = np.frombuffer(_must(txn.get(_run_key(run, b"f"), db=self.runs)), dtype=_FPS)
            ids = np.frombuffer(_must(txn.get(_run_key(run, b"i"), db=self.runs)), dtype=_IDS)
            out.append((run, fps, ids))
        return out

    def _locate(self, run: int, fps: np.ndarray, q: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(found, position) of each of ``q`` in the sorted run ``fps``.

        A plain searchsorted over a run of 10M keys costs about 0.35 us per
        key, mostly cache and TLB misses across 80 MB. So every run keeps a
        small index in memory (its every 512th key, 16 bytes per 1,000 URLs;
        runs never change, so it is cached by run id) and the search within
        the one 4 KiB stretch it points to is a vectorised bisection: 9 steps
        over the whole batch at once, about 0.1 us per key.
        """
        n = len(fps)
        if len(q) < _FEW:
            # a few keys: one plain search beats the 27 numpy calls below
            pos = np.searchsorted(fps, q)
            np.minimum(pos, n - 1, out=pos)
            return fps[pos] == q, pos
        sparse = self._sparse.get((run, n))
        if sparse is None:
            sparse = self._sparse[run, n] = fps[::_BLOCK].copy()
        lo = np.searchsorted(sparse, q, side="right").astype(np.int64)
        lo -= 1
        np.maximum(lo, 0, out=lo)
        lo *= _BLOCK
        step = _BLOCK // 2
        while step:
            mid = np.minimum(lo + step, n - 1)
            lo = np.where(fps[mid] <= q, mid, lo)
            step //= 2
        return fps[lo] == q, lo

    def _recent(self, txn: lmdb.Transaction) -> tuple[np.ndarray, np.ndarray]:
        """The recent B-tree as sorted (fingerprints, ids) copies."""
        cur = txn.cursor(db=self.urls)
        keys = b"".join(map(bytes, cur.iternext(keys=True, values=False)))
        vals = b"".join(map(bytes, cur.iternext(keys=False, values=True)))
        return (np.frombuffer(keys, dtype=">u8").astype(_FPS),
                np.frombuffer(vals, dtype=">u4").astype(_IDS))

    def _find(self, txn: lmdb.Transaction, q: np.ndarray, ask: np.ndarray | None = None,
              *, recent: bool = True) -> tuple[np.ndarray, np.ndarray]:
        """(found in a run, found in the recent tree) for sorted unique ``q``.

        Only the fingerprints ``ask`` selects (default: all) are looked up:
        in each run with one vectorised search, then one by one in the recent
        tree for those no run holds.
        """
        in_runs = np.zeros(len(q), dtype=bool)
        where = np.arange(len(q)) if ask is None else np.flatnonzero(ask)
        sub = q[where]
        if len(sub):
            for run, fps, _ in self._run_arrays(txn):
                in_runs[where[self._locate(run, fps, sub)[0]]] = True
        in_recent = np.zeros(len(q), dtype=bool)
        where = where[~in_runs[where]]
        if recent and len(where) and txn.stat(self.urls)["entries"]:
            keys = _keys(q[where])
            got = np.fromiter((v is not None for v in map(txn.get, keys)), dtype=np.bool_,
                              count=len(where))
            in_recent[where[got]] = True
        return in_runs, in_recent

    def _insert(self, txn: lmdb.Transaction, fresh: np.ndarray) -> np.ndarray:
        """Insert-if-absent (sorted ``fresh``, none of them in a run); a mask of the new."""
        raw = txn.get(_NEXT_ID, db=self.meta)
        next_id = int.from_bytes(raw, "big") if raw else 0
        if next_id + len(fresh) > 1 << 32:  # ids are 32-bit: wrapping would merge URLs
            raise CrawlError(f"the seen set in {self.path} holds 2**32 URLs, its limit; "
                             "start a new crawl directory")
        ids = np.arange(next_id, next_id + len(fresh), dtype=np.uint64).astype(_IDS)
        recent = txn.stat(self.urls)["entries"]
        if recent + len(fresh) >= self.delta_max:
            # flush: the recent tree plus this batch become one new run
            old_f, old_i = self._recent(txn)
            added = ~np.isin(fresh, old_f, assume_unique=True)
            f, i = fresh[added], ids[added]
            pos = np.searchsorted(old_f, f)
            self._push_run(txn, np.insert(old_f, pos, f), np.insert(old_i, pos, i))
            txn.drop(self.urls, delete=False)
            self._count("recent_flushed")
        else:
            keys = _keys(fresh)
            vals = ids.astype(">u4").tobytes()
            items = zip(keys, (vals[j:j + 4] for j in range(0, len(vals), 4)), strict=True)
            _, n = txn.cursor(db=self.urls).putmulti(items, dupdata=False, overwrite=False)
            added = np.ones(len(fresh), dtype=bool)
            if n < len(fresh):
                # already there although nobody here said so: another
                # process added them. The exact set decides.
                added = np.fromiter(
                    (bytes(_must(txn.get(k))) == vals[j * 4:j * 4 + 4]
                     for j, k in enumerate(keys)),
                    dtype=np.bool_, count=len(keys))
        txn.put(_NEXT_ID, (next_id + len(fresh)).to_bytes(8, "big"), db=self.meta)
        return added

    def _push_run(self, txn: lmdb.Transaction, fps: np.ndarray, ids: np.ndarray) -> None:
        """Add a sorted run, then merge while the newest is >= 1/4 of the one before."""
        runs = self._run_list(txn)
        # views: merged into new arrays before any write
        arrays = [(f, i) for _, f, i in self._run_arrays(txn)]
        raw = txn.get(_NEXT_RUN, db=self.meta)
        next_run = int.from_bytes(raw, "big") if raw else 0
        while arrays and len(fps) * _MERGE_RATIO >= len(arrays[-1][0]):
            old_f, old_i = arrays.pop()
            pos = np.searchsorted(old_f, fps)
            fps, ids = np.insert(old_f, pos, fps), np.insert(old_i, pos, ids)
            self._count("runs_merged")
        kept = len(arrays)
        del arrays  # the merged arrays are copies; the views left are not used again
        for run, _ in runs[kept:]:
            txn.delete(_run_key(run, b"f"), db=self.runs)
            txn.delete(_run_key(run, b"i"), db=self.runs)
        txn.put(_run_key(next_run, b"f"), np.ascontiguousarray(fps, dtype=_FPS).data,
                db=self.runs)
        txn.put(_run_key(next_run, b"i"), np.ascontiguousarray(ids, dtype=_IDS).data,
                db=self.runs)
        listing = [*runs[:kept], (next_run, len(fps))]
        txn.put(_RUNS, np.array(listing, dtype=_FPS).tobytes(), db=self.meta)
        txn.put(_NEXT_RUN, (next_run + 1).to_bytes(8, "big"), db=self.meta)

    # -- the check -----------------------------------------------------------

    def add_fps(self, fps: Sequence[int] | np.ndarray) -> list[bool]:
        """Mark fingerprints seen; True for each one that was new.

        Order is kept and the first occurrence within the batch wins. One
        write transaction per batch: the batch is durable when this returns.
        Every step is a numpy pass over the whole batch; only the filter's
        "maybe"s that no run holds cost a B-tree lookup each.
        """
        a = as_fps(fps)
        if not len(a):
            return []
        q, first = np.unique(a, return_index=True)  # sorted: runs and B-tree like that
        maybe = self.bloom.maybe_array(q)
        with self.env.begin(write=True, buffers=True, db=self.urls) as txn:
            # The filter answers "definitely new" only while it has absorbed
            # every key of the set; if another writer added some since, the
            # runs are searched for the whole batch (the recent tree's
            # put(overwrite=False) catches the rest).
            trusted = self._size(txn) == self.bloom.covers
            in_runs, in_recent = self._find(txn, q, ask=maybe)
            if not trusted:
                self._count("bloom_untrusted_batches")
                in_runs2, _ = self._find(txn, q, ask=~maybe, recent=False)
                in_runs |= in_runs2
            known = in_runs | in_recent
            fresh = q[~known]
            added = self._insert(txn, fresh) if len(fresh) else np.zeros(0, dtype=bool)
        new = fresh[added]
        out = np.zeros(len(a), dtype=bool)
        out[first[~known][added]] = True
        self.bloom.add_many(fresh)  # what another writer added too: learn it
        self.bloom.covers += len(new)
        n_maybe = int(maybe.sum())
        stale = int((in_runs & ~maybe).sum()) + len(fresh) - len(new)
        self._count("checked", len(a))
        self._count("bloom_maybe", n_maybe)
        self._count("bloom_false_positive", n_maybe - int((maybe & known).sum()))
        self._count("bloom_stale", stale)  # present although the filter said new
        self._count("new", len(new))
        self._unsaved += len(new)
        if self.bloom.added > self._capacity_n:
            self.rebuild(2 * self.bloom.added)
            self._count("bloom_grown")
            self.save()
        elif self._unsaved >= self.save_every:
            self.save()
        result: list[bool] = out.tolist()
        return result

    def contains_fps(self, fps: Iterable[int] | np.ndarray) -> list[bool]:
        """Read-only exact membership (no marking)."""
        a = as_fps(fps)
        if not len(a):
            return []
        q, inverse = np.unique(a, return_inverse=True)
        with self.env.begin(buffers=True, db=self.urls) as txn:
            in_runs, in_recent = self._find(txn, q)
        result: list[bool] = (in_runs | in_recent)[inverse].tolist()
        return result

    # -- records -------------------------------------------------------------

    def unseen(self, recs: Sequence[Record]) -> list[Record]:
        """The records whose canonical URL was never seen, now marked seen.

        URL records come out with the canonical ``url``, ``fp``, ``surt``,
        ``host`` and ``canon_v``; URLs that cannot be canonicalised become
        ``reject`` records (they are not silently dropped). Other kinds pass
        through untouched.
        """
        from crawl.canon import CanonError

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

    def _ids(self, txn: lmdb.Transaction, fps: Iterable[int]) -> list[int | None]:
        """Each fingerprint's id, or None where it is not in the set."""
        a = as_fps(fps)
        out = np.full(len(a), -1, dtype=np.int64)
        for run, run_fps, run_ids in self._run_arrays(txn):
            hit, pos = self._locate(run, run_fps, a)
            out[hit] = run_ids[pos[hit]]
        ids: list[int | None] = [None if i < 0 else i for i in out.tolist()]
        for j in np.flatnonzero(out < 0).tolist():
            v = txn.get(key_of(int(a[j])), db=self.urls)
            ids[j] = None if v is None else int.from_bytes(v, "big")
        return ids

    def ids_of(self, fps: Iterable[int]) -> list[int | None]:
        with self.env.begin(buffers=True) as txn:
            return self._ids(txn, fps)

    def mark_fetched(self, fps: Iterable[int], cycle: str) -> list[bool]:
        """Add URLs to ``cycle``'s fetched bitmap; True where it was not there yet.

        A False means this URL was already fetched in the same cycle, which
        the design forbids ("do not fetch the same URL twice in one cycle").
        """
        key = _FETCHED + cycle.encode()
        with self.env.begin(write=True, buffers=True) as txn:
            ids = self._ids(txn, fps)
            raw = txn.get(key, db=self.meta)
            bm = BitMap.deserialize(bytes(raw)) if raw else BitMap()
            out = []
            for i in ids:
                if i is None:
                    out.append(True)  # fetched without passing seen (a seed): not ours to judge
                    continue
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
        with self.env.begin(buffers=True) as txn:
            runs = [size for _, size in self._run_list(txn)]
            n = self._size(txn)
        bf = self.bloom
        out: dict[str, Any] = {
            "urls": n,
            "exact_runs": runs,
            "exact_recent": n - sum(runs),
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
