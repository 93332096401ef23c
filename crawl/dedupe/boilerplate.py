"""Text blocks a host repeats on many pages, learned in rounds.

A disclaimer, a "related stories" list or a cookie notice sits on most
pages of a site; hashed with each article it would make unrelated pages of
the host look alike. :mod:`crawl.dedupe` therefore drops a block once it
was on ``threshold`` original pages of the host (within a learning round).

Counting every block of every page in LMDB costs as much as the rest of
dedupe together: 70 random 16-byte keys read and written per long
article, and an fsynced commit that rewrites nearly every leaf of the
table. Almost all of those blocks are on one page only. So a host's
blocks are counted in memory over a *round* of its first ``round_pages``
original pages; at the end of the round the blocks on ``threshold`` or
more of them become the host's boilerplate set and the counts are
forgotten. After every ``relearn_every`` further originals a new round
starts (the old set stays in force until it ends), so a changed template is
learned again.

Durable state is one LMDB value per host (``boilerplate`` table, key: the
8-byte host hash that starts every block key), written once per batch for
the hosts the batch touched: a frozen host's value is its set, a learning
host's also holds the round's counts (at most ``round_pages`` x blocks per
page entries). States are cached between batches while this process is
the only writer: every batch also writes a mark (this learner's random
token and batch number), and a learner that finds another mark at the start
of a batch drops its cache. (LMDB transaction ids cannot tell: a
transaction that wrote nothing does not use up its id.) The cache is
bounded by entries, the least recently used hosts evicted first.
"""

from __future__ import annotations

import os
import struct
from collections import OrderedDict

import lmdb
import numpy as np

ROUND_PAGES = 64  # originals per learning round
RELEARN_EVERY = 1024  # originals between the end of a round and the start of the next
# format 1, pages in this round (== round_pages: frozen), originals since the round, set size;
# then the set's keys (16 bytes each), the round's keys and their counts (a byte each: a round
# is at most 255 pages)
_HEAD = struct.Struct("<BBII")
_FORMAT = 1
_KEY = np.dtype("V16")
# Block keys kept in memory across batches (17 bytes each in a round's arrays: ~9 MB), beyond
# which the least recently used hosts are evicted; a host costs _HOST_COST.
_CACHE_ENTRIES, _HOST_COST = 1 << 19, 8
_MARK = b"\xff" * 9  # the last batch's writer (9 bytes: never a host key, and last in key order)


class HostBlocks:
    """One host's learning state: its boilerplate set and, while learning, the round's counts.

    The round's counts are two numpy arrays, the block keys sorted (``S16``)
    and a count byte each, not a dict of 16-byte ``bytes``: a learning host
    holds up to ``round_pages`` x blocks per page of them (realistic pages
    have hundreds of blocks: every item of a navigation list), and as Python
    objects they cost ~100 bytes each, as arrays 17. With 2,000 hosts
    learning, that dict was most of a parse process's memory (issue 19).
    """

    __slots__ = ("_counts", "_keys", "boiler", "hot", "learned", "since")

    def __init__(self) -> None:
        self.boiler: set[bytes] = set()  # block keys dropped as boilerplate
        self._keys = _NO_KEYS  # block keys of this round, sorted
        self._counts = _NO_COUNTS  # pages of this round each was on
        self.hot: set[bytes] = set()  # counts at or over the threshold: dropped already
        self.learned = 0  # pages counted in this round
        self.since = 0  # originals since the last round ended

    @property
    def counts(self) -> dict[bytes, int]:
        """The round's counts as a dict (block key -> pages), for inspection and tests."""
        raw = self._keys.tobytes()  # not tolist(): S16 drops trailing NUL bytes
        return {raw[16 * i:16 * i + 16]: int(c) for i, c in enumerate(self._counts)}

    @counts.setter
    def counts(self, counts: dict[bytes, int]) -> None:
        keys = np.frombuffer(b"".join(counts), dtype=_SKEY)
        order = np.argsort(keys, kind="stable")
        self._keys = keys[order]
        self._counts = np.fromiter(counts.values(), dtype=np.uint8, count=len(counts))[order]

    def __len__(self) -> int:
        """Entries held (round counts and set), what the cache bound counts."""
        return int(self._keys.size) + len(self.boiler)

    def count_page(self, keys: list[bytes], threshold: int) -> None:
        """One more page of this round with these block keys (repeats on the page count once)."""
        page = list(dict.fromkeys(keys))
        arr = np.frombuffer(b"".join(page), dtype=_SKEY)
        have = self._keys
        at = np.searchsorted(have, arr)
        found = at < have.size
        found[found] = have[at[found]] == arr[found]
        counts = self._counts
        if found.any():
            hit = at[found]
            counts = counts.copy() if counts is _NO_COUNTS else counts
            counts[hit] += 1
            pos = np.flatnonzero(found)
            self.hot.update(page[i] for i in pos[counts[hit] == threshold].tolist())
        new = ~found
        if new.any():
            fresh = np.sort(arr[new])
            where = np.searchsorted(have, fresh)
            self._keys = np.insert(have, where, fresh)
            counts = np.insert(counts, where, np.uint8(1))
            if threshold <= 1:  # (Boilerplate refuses it; kept exact all the same)
                self.hot.update(k for k, n in zip(page, new.tolist(), strict=True) if n)
        self._counts = counts

    def end_round(self) -> None:
        """What the round found repeated becomes the set; its counts are forgotten."""
        self.boiler, self.hot, self.since = self.hot, set(), 0
        self._keys, self._counts = _NO_KEYS, _NO_COUNTS

    def encode(self, round_pages: int) -> bytes:
        learning = self.learned < round_pages
        return b"".join((_HEAD.pack(_FORMAT, self.learned, self.since, len(self.boiler)),
                         b"".join(self.boiler),
                         self._keys.tobytes() if learning else b"",
                         self._counts.tobytes() if learning else b""))

    @classmethod
    def decode(cls, raw: bytes | memoryview, threshold: int) -> HostBlocks:
        fmt, learned, since, n = _HEAD.unpack_from(raw)
        if fmt != _FORMAT:
            raise ValueError(f"boilerplate state of format {fmt}, expected {_FORMAT}")
        st = cls()
        st.learned, st.since = learned, since
        at = _HEAD.size
        st.boiler = set(split_keys(raw[at:at + 16 * n]))
        at += 16 * n
        m = (len(raw) - at) // 17
        if 16 * n + 17 * m != len(raw) - _HEAD.size:
            raise ValueError("boilerplate state of the wrong length")
        if m:
            keys = np.frombuffer(raw, dtype=_SKEY, count=m, offset=at)
            counts = np.frombuffer(raw, dtype=np.uint8, count=m, offset=at + 16 * m)
            order = np.argsort(keys, kind="stable")  # values written before 2026-12 are in page order
            st._keys, st._counts = keys[order], counts[order]
            rawkeys = bytes(raw[at:at + 16 * m])
            st.hot = {rawkeys[16 * i:16 * i + 16] for i in np.flatnonzero(counts >= threshold).tolist()}
        return st


_SKEY = np.dtype("S16")  # compares as 16 raw bytes (memcmp); convert out with tobytes(), never tolist()
_NO_KEYS = np.zeros(0, dtype=_SKEY)
_NO_COUNTS = np.zeros(0, dtype=np.uint8)


def split_keys(raw: bytes | memoryview) -> list[bytes]:
    """16-byte block keys stored end to end, one bytes object each."""
    return np.frombuffer(raw, dtype=_KEY).tolist() if raw else []


def _cost(st: HostBlocks) -> int:
    return len(st) + _HOST_COST


class Boilerplate:
    """Per-host boilerplate blocks for one dedupe environment.

    Use within one write transaction: :meth:`begin`, then per page
    :meth:`kept` (which blocks to hash) and, for a first-time original,
    :meth:`learn`; then :meth:`flush` before the commit and
    :meth:`committed` after it (or :meth:`forget` if it failed).
    """

    def __init__(self, env: lmdb.Environment, *, threshold: int, round_pages: int = ROUND_PAGES,
                 relearn_every: int = RELEARN_EVERY, cache_entries: int = _CACHE_ENTRIES,
                 counts: dict[str, int] | None = None) -> None:
        if not 2 <= round_pages <= 255:
            raise ValueError(f"a learning round must be 2 to 255 pages, not {round_pages}")
        if not 2 <= threshold <= round_pages:
            raise ValueError(f"repeated-block pages must be between 2 and the round's {round_pages} pages,"
                             f" not {threshold}")
        self.db = env.open_db(b"boilerplate")
        self.threshold, self.round, self.every = threshold, round_pages, relearn_every
        self.cache_entries = cache_entries
        self.hosts: OrderedDict[bytes, HostBlocks] = OrderedDict()  # least recently used first
        self.dirty: set[bytes] = set()
        self.counts = {} if counts is None else counts  # summary counters (the caller's)
        self._entries = 0  # the cache's size, in _cost units
        self._txn: lmdb.Transaction | None = None
        self._token = os.urandom(8)
        self._batch = 0
        self._mark: bytes | None = None  # the mark of this learner's last committed batch
        self._pending = b""  # the mark flush() wrote, in force once committed

    def begin(self, txn: lmdb.Transaction) -> None:
        """Start a batch in write transaction ``txn``; cached states stay only if nobody wrote since."""
        self._txn = txn
        if self._mark is None or txn.get(_MARK, db=self.db) != self._mark:
            self._drop_cache()
        self.dirty.clear()

    def _drop_cache(self) -> None:
        self.hosts.clear()
        self._entries = 0

    def _state(self, host: bytes) -> HostBlocks:
        st = self.hosts.get(host)
        if st is None:
            assert self._txn is not None, "Boilerplate.begin() first"
            raw = self._txn.get(host, db=self.db)
            st = HostBlocks()
            if raw is not None:
                try:
                    st = HostBlocks.decode(raw, self.threshold)
                except (ValueError, struct.error):  # a damaged value: learn the host again
                    self.counts["boilerplate_state_reset"] = self.counts.get("boilerplate_state_reset", 0) + 1
            self.hosts[host] = st
            self._entries += _cost(st)
        else:
            self.hosts.move_to_end(host)
        return st

    def kept(self, keys: list[bytes]) -> list[bool] | None:
        """Which of a page's block keys to keep; None when all are (the usual answer)."""
        if not keys:
            return None
        st = self._state(keys[0][:8])
        if st.boiler.isdisjoint(keys) and st.hot.isdisjoint(keys):
            return None
        drop = st.boiler | st.hot
        return [k not in drop for k in keys]

    def learn(self, keys: list[bytes]) -> None:
        """Count one more original page of the host with these blocks."""
        if not keys:
            return
        host = keys[0][:8]
        st = self._state(host)
        self.dirty.add(host)
        if st.learned >= self.round:  # frozen: count towards the next round
            st.since += 1
            if st.since >= self.every:
                st.learned, st.since = 0, 0
            return
        before = _cost(st)
        st.count_page(keys, self.threshold)
        st.learned += 1
        if st.learned == self.round:  # the round ends: what it found repeated is the set
            st.end_round()
        self._entries += _cost(st) - before

    def flush(self) -> None:
        """Write the states this batch changed (one put per host, in key order), and the mark."""
        assert self._txn is not None
        self._batch += 1
        mark = self._token + self._batch.to_bytes(8, "big")
        self._txn.cursor(db=self.db).putmulti(
            [(h, self.hosts[h].encode(self.round)) for h in sorted(self.dirty)] + [(_MARK, mark)])
        self._pending = mark
        self._txn = None

    def committed(self) -> None:
        """The batch's transaction committed: keep the states, within the memory bound."""
        self._mark = self._pending
        self.dirty.clear()
        while self._entries > self.cache_entries and self.hosts:
            self._entries -= _cost(self.hosts.popitem(last=False)[1])

    def forget(self) -> None:
        """The batch failed: what memory holds may be ahead of LMDB, so drop it."""
        self._drop_cache()
        self.dirty.clear()
        self._txn = None
        self._mark = None
