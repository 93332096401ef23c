"""A register-blocked Bloom filter over 64-bit URL fingerprints.

Why blocked: a classic Bloom filter probes k scattered bits per key, which in
Python means k interpreted steps per URL. Here every key lives in one 64-bit
word (its *block*) and sets a *pattern* of exactly k distinct bits inside it,
taken from a table of 16,384 precomputed patterns. A check is one multiply,
one table lookup and one AND, done for a whole batch at once with numpy
(about 20 ns per URL), so the filter is never what limits ``crawl seen``. The price is a slightly higher false-positive rate for the same
memory (the load per block varies), so the filter is sized with the exact
formula for this layout (:func:`false_positive_rate`), not the textbook one.

The input is already a uniform hash (xxh3 of the canonical URL), so the block
comes from the high 32 bits and the pattern from the low 14 bits: no extra
hashing. Sizing follows Putze, Sanders and Singler, "Cache-, hash- and
space-efficient Bloom filters" (2007), section 3.

The layout suits rates down to about 0.1% (24 bits per key). Below that the
finite pattern table sets a floor: two keys in the same block that drew the
same pattern always collide, so 0.01% already costs 58 bits per key.
"""

from __future__ import annotations

import math
import struct
from collections.abc import Iterable, Sequence
from functools import lru_cache
from pathlib import Path
from typing import BinaryIO

import numpy as np
import xxhash

from crawl.core import replace_file

WORD_BITS = 64
PATTERNS = 1 << 14  # 16,384 masks: 55 ms to build, costs 1% more memory than 65,536
_PMASK = PATTERNS - 1
_MAGIC = b"CRWLBLM1"
_HEADER = struct.Struct(">8sIIQQQ")  # magic, version, k, blocks, added, covers
_VERSION = 1
_M64 = (1 << 64) - 1
_WORD = np.dtype("<u8")  # the file's word layout, whatever the machine


def as_fps(fps: Iterable[int] | np.ndarray) -> np.ndarray:
    """Fingerprints as a uint64 array (a no-op for one already)."""
    if isinstance(fps, np.ndarray) and fps.dtype == np.uint64:
        return fps
    if not isinstance(fps, Sequence | np.ndarray):
        fps = list(fps)
    return np.asarray(fps, dtype=np.uint64)


@lru_cache(maxsize=4)
def patterns(k: int) -> tuple[int, ...]:
    """The 16,384 masks of ``k`` distinct bits, identical on every machine.

    Derived from xxh3 (not ``random``) so a filter saved by one Python
    version reads back correctly under another.
    """
    return tuple(_pattern_array(k).tolist())


@lru_cache(maxsize=4)
def _pattern_array(k: int) -> np.ndarray:
    """:func:`patterns` as an array, built for all masks at once: each mask takes
    6-bit draws from xxh3 of (its index, hash counter), ten per hash, keeping a
    draw whose bit is not set yet, until it has ``k`` bits (55 ms a process as
    a loop per mask; about 10 here: issue 19, start-up)."""
    if not 1 <= k <= 32:
        raise ValueError(f"k must be between 1 and 32, got {k}")
    h = xxhash.xxh3_64_intdigest
    mask = np.zeros(PATTERNS, dtype=np.uint64)
    bits = np.zeros(PATTERNS, dtype=np.int64)
    todo = np.arange(PATTERNS)
    j = 0
    one, six, low = np.uint64(1), np.uint64(6), np.uint64(63)
    while todo.size:
        tail = j.to_bytes(2, "big")
        r = np.array([h(p.to_bytes(4, "big") + tail) for p in todo.tolist()], dtype=np.uint64)
        m, c = mask[todo], bits[todo]
        for _ in range(10):
            bit = one << (r & low)
            r >>= six
            take = (c < k) & ((m & bit) == 0)
            m |= np.where(take, bit, np.uint64(0))
            c += take
        mask[todo], bits[todo] = m, c
        todo = todo[c < k]
        j += 1
    return mask


def _block_fp(k: int, load: float) -> float:
    """False-positive rate of one block holding Poisson(``load``) keys."""
    total = math.comb(WORD_BITS, k)
    # P(i given bits all unset after one key) = C(64-i, k) / C(64, k)
    q = [math.comb(WORD_BITS - i, k) / total for i in range(k + 1)]
    signs = [(-1) ** i * math.comb(k, i) for i in range(k + 1)]
    top = int(load + 12 * math.sqrt(load) + 30)
    fp = 0.0
    pois = math.exp(-load)  # P(j = 0)
    powers = [1.0] * (k + 1)  # q_i ** j, kept incrementally
    miss = 1.0 - 1.0 / PATTERNS
    miss_j = 1.0
    for j in range(top + 1):
        if j:
            pois *= load / j
            powers = [a * b for a, b in zip(powers, q, strict=True)]
            miss_j *= miss
        # inclusion-exclusion: P(all k query bits set | j keys in the block)
        covered = sum(s * a for s, a in zip(signs, powers, strict=True))
        # two keys that drew the very same pattern always collide
        covered += (1.0 - covered) * (1.0 - miss_j)
        fp += pois * covered
    return fp


def false_positive_rate(n: int, blocks: int, k: int) -> float:
    """Expected false-positive rate with ``n`` keys in ``blocks`` 64-bit words."""
    if n <= 0:
        return 0.0
    return _block_fp(k, n / blocks)


# _best_load(k, 0.01) for k = 1..16, as _search_load computes them (bit for bit:
# tests/seen/test_bloom.py): the default rate's sizing is ~0.1 s of pure Python,
# paid by every process that opens a seen set before its first request (issue 19).
_KNOWN_LOADS = {0.01: (
    0.6407576375165953, 3.103722896860912, 4.5696547240195775, 5.180395879508928,
    5.3495523599712165, 5.299288141745142, 5.140717353800312, 4.930662755501456,
    4.699047953418457, 4.461947341069579, 4.228033004049211, 4.001897038706577,
    3.785831827645189, 3.580815571725368, 3.3870734502580016, 3.204403648222797,
)}


@lru_cache(maxsize=64)
def _best_load(k: int, target: float) -> float:
    """The highest keys-per-block load for which pattern size ``k`` meets ``target``."""
    known = _KNOWN_LOADS.get(target)
    if known is not None and 1 <= k <= len(known):
        return known[k - 1]
    return _search_load(k, target)


def _search_load(k: int, target: float) -> float:
    """:func:`_best_load` by bisection on the exact rate formula."""
    lo, hi = 1e-3, 32.0
    if _block_fp(k, lo) > target:
        return 0.0
    for _ in range(30):
        mid = (lo + hi) / 2
        if _block_fp(k, mid) <= target:
            lo = mid
        else:
            hi = mid
    return lo


def size_for(n: int, fp_rate: float) -> tuple[int, int]:
    """(blocks, k) using the least memory for ``n`` keys at ``fp_rate``."""
    if not 0 < fp_rate < 1:
        raise ValueError(f"false-positive rate must be between 0 and 1, got {fp_rate}")
    n = max(int(n), 1)
    best: tuple[int, int] | None = None
    for k in range(1, 17):
        load = _best_load(k, fp_rate)
        if load <= 0:
            continue
        blocks = max(1, math.ceil(n / load))
        if best is not None and blocks > best[0]:
            break  # memory is unimodal in k: past the optimum it only grows
        if best is None or blocks < best[0]:
            best = (blocks, k)
    if best is None:
        raise ValueError(f"false-positive rate {fp_rate} is too low for a blocked filter")
    return best


class BloomFilter:
    """Answers "definitely new" or "maybe seen" for 64-bit fingerprints.

    ``covers`` is bookkeeping for the owner: how many entries of the exact
    set this filter was built from, so a stale file can be detected.
    """

    def __init__(self, blocks: int, k: int, *, words: np.ndarray | None = None) -> None:
        if not 1 <= blocks < 1 << 32:
            raise ValueError("a Bloom filter needs between 1 and 2**32 - 1 blocks")
        self.blocks = blocks
        self.k = k
        self.words = words if words is not None else np.zeros(blocks, dtype=_WORD)
        self.patterns = patterns(k)
        self._pats = _pattern_array(k)
        self.added = 0
        self.covers = 0

    @classmethod
    def for_capacity(cls, n: int, fp_rate: float = 0.01) -> BloomFilter:
        blocks, k = size_for(n, fp_rate)
        return cls(blocks, k)

    @property
    def nbytes(self) -> int:
        return self.blocks * 8

    def expected_fp_rate(self, n: int | None = None) -> float:
        """The sizing formula evaluated at ``n`` keys (default: as many as added)."""
        return false_positive_rate(self.added if n is None else n, self.blocks, self.k)

    def _slots(self, fps: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(word index, pattern) per fingerprint: block from the high 32 bits.

        ``(fp >> 32) * blocks`` stays below 2**64 because blocks < 2**32.
        """
        idx = ((fps >> np.uint64(32)) * np.uint64(self.blocks)) >> np.uint64(32)
        return idx, self._pats[fps & np.uint64(_PMASK)]

    def add_many(self, fps: Iterable[int] | np.ndarray) -> None:
        a = as_fps(fps)
        idx, pats = self._slots(a)
        np.bitwise_or.at(self.words, idx, pats)
        self.added += len(a)

    def maybe_array(self, fps: Iterable[int] | np.ndarray) -> np.ndarray:
        """A bool array: False means definitely never added."""
        idx, pats = self._slots(as_fps(fps))
        result: np.ndarray = self.words[idx] & pats == pats
        return result

    def maybe_many(self, fps: Iterable[int] | np.ndarray) -> list[bool]:
        """For each fingerprint: False means definitely never added."""
        result: list[bool] = self.maybe_array(fps).tolist()
        return result

    def __contains__(self, fp: int) -> bool:
        m = self.patterns[fp & _PMASK]
        return int(self.words[(fp >> 32) * self.blocks >> 32]) & m == m

    # -- persistence ---------------------------------------------------------

    def save(self, path: Path) -> None:
        """Write atomically (temp file + rename): a crash leaves the old file or none,
        and a failure (a full disk: NoSpace) leaves no temp file behind."""

        def write(f: BinaryIO) -> None:
            f.write(_HEADER.pack(_MAGIC, _VERSION, self.k, self.blocks, self.added, self.covers))
            f.write(self.words.data)

        replace_file(path, write)

    @classmethod
    def load(cls, path: Path) -> BloomFilter | None:
        """The saved filter, or None when the file is missing or damaged (rebuild it)."""
        try:
            with open(path, "rb") as f:
                head = f.read(_HEADER.size)
                if len(head) != _HEADER.size:
                    return None
                magic, version, k, blocks, added, covers = _HEADER.unpack(head)
                if magic != _MAGIC or version != _VERSION or not 1 <= k <= 32 or blocks < 1:
                    return None
                buf = bytearray(8 * blocks)
                if f.readinto(buf) != len(buf) or f.read(1):
                    return None
                words = np.frombuffer(buf, dtype=_WORD)
        except (OSError, EOFError, ValueError):
            return None
        bf = cls(blocks, k, words=words)
        bf.added, bf.covers = added, covers
        return bf
