"""64-bit simhash and the permuted-block index that finds near-duplicates.

Charikar's simhash, as used for web crawling by Manku, Jain and Das Sarma,
"Detecting near-duplicates for web crawling" (WWW 2007): every feature (a
4-word shingle) is hashed to 64 bits; bit i of the fingerprint is 1 when more
features have bit i set than not. Similar documents differ in few bits, and
pages within Hamming distance 3 count as near-duplicates.

The arithmetic runs in numpy over the whole text at once, so no word or
shingle ever becomes a Python object (a 600-word page is about 30 numpy
calls, not thousands of Python ones):

* a word's hash is a polynomial over its bytes, ``sum(B[b_k] * P**k)`` mod
  2**64 with a random byte table ``B`` and an odd base ``P``, finished with
  murmur3's 64-bit mixer. One prefix sum over the text gives every word's
  sum as a difference of two prefix values, shifted back to its start by
  ``P**-start`` (``P`` is odd, so it has an inverse mod 2**64);
* a shingle's hash is ``h(w0) ^ rotl(h(w1), 8) ^ rotl(h(w2), 16) ^ ...``
  (a Buzhash-style combination of the word hashes);
* the bit vote counts, for each of the 8 bytes of the shingle hashes, how
  often each byte value occurs (one ``bincount``), then turns the 8 x 256
  counts into 64 bit counts with one small matrix product.

The ``*_slow`` functions are the same definitions as textbook loops; the
property tests hold the fast versions to them. The constants come from
xxh3, not from a random generator, so a fingerprint stored today means the
same after any library upgrade.

Finding every stored fingerprint within distance k without a scan uses the
paper's pigeonhole trick: cut the 64 bits into k+1 blocks; two fingerprints
that differ in at most k bits agree *exactly* on at least one block. Table i
is keyed by block i first (a permutation of the fingerprint that puts block
i in front), so a lookup is k+1 exact prefix range queries plus a Hamming
check on the few candidates each returns.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator

import lmdb
import numpy as np
import xxhash

BITS = 64
_M64 = (1 << 64) - 1
SHINGLE = 4  # words per shingle

# White space, as str.split() sees it in ASCII (non-ASCII spaces are folded to
# " " before hashing: see crawl.text.fold). Bytes >= 0x80 are parts of words.
WHITESPACE = b"\t\n\x0b\x0c\r\x1c\x1d\x1e\x1f "
_WS = np.zeros(256, dtype=bool)
_WS[list(WHITESPACE)] = True
_SPLIT_RE = re.compile(b"[" + re.escape(WHITESPACE) + b"]+")

_BYTE_INTS = [xxhash.xxh3_64_intdigest(b"crawl simhash byte %d" % i) for i in range(256)]
_BYTE = np.array(_BYTE_INTS, dtype=np.uint64)
_P = xxhash.xxh3_64_intdigest(b"crawl simhash base") | 1  # odd: invertible mod 2**64
_P_INV = pow(_P, -1, 1 << 64)
_C1, _C2 = 0xFF51AFD7ED558CCD, 0xC4CEB9FE1A85EC53  # murmur3 fmix64
_U_C1, _U_C2, _U33 = np.uint64(_C1), np.uint64(_C2), np.uint64(33)

_CACHE_MAX = 1 << 18  # keep P**i and P**-i for texts up to 256 KB (4 MB); longer ones get their own
_pw = _ipw = np.ones(0, dtype=np.uint64)


def _powers(base: int, n: int) -> np.ndarray:
    """``base**i`` mod 2**64 for i in range(n), by doubling (log n numpy calls)."""
    out = np.empty(max(n, 1), dtype=np.uint64)
    out[0] = 1
    k = 1
    while k < n:
        step = min(k, n - k)
        np.multiply(out[:step], np.uint64(pow(base, k, 1 << 64)), out=out[k:k + step])
        k += step
    return out[:n]


def _pows(n: int) -> tuple[np.ndarray, np.ndarray]:
    """(P**i, P**-i) for i < n at least."""
    global _pw, _ipw
    if n > _CACHE_MAX:
        return _powers(_P, n), _powers(_P_INV, n)
    if _pw.size < n:
        size = min(_CACHE_MAX, max(n, 8192, 2 * _pw.size))
        _pw, _ipw = _powers(_P, size), _powers(_P_INV, size)
    return _pw, _ipw


def _mix(x: np.ndarray) -> np.ndarray:
    """murmur3's fmix64 on every element, in place."""
    t = x >> _U33
    x ^= t
    x *= _U_C1
    np.right_shift(x, _U33, out=t)
    x ^= t
    x *= _U_C2
    np.right_shift(x, _U33, out=t)
    x ^= t
    return x


def word_hashes(text: bytes) -> tuple[np.ndarray, list[int]]:
    """The 64-bit hash of every white-space separated word of ``text``, and its blocks.

    Returns ``(hashes, cuts)``: ``hashes`` in text order (uint64), and the
    word indices where blocks begin and end: a newline ends a block, and
    block i is ``hashes[cuts[i]:cuts[i + 1]]``, never empty.
    """
    a = np.frombuffer(b" " + text + b" ", dtype=np.uint8)
    ws = _WS.take(a)
    before, after = ws[:-1], ws[1:]
    first = np.flatnonzero(before > after)  # a[i] is space, a[i + 1] starts a word
    last = np.flatnonzero(before < after)  # a[i] ends a word
    n = a.size
    pw, ipw = _pows(n)
    vals = _BYTE.take(a)
    vals *= pw[:n]
    np.cumsum(vals, out=vals)
    h = vals.take(last)
    h -= vals.take(first)
    h *= ipw[1:].take(first)  # word k starts at first[k] + 1: shift its sum back by P**-(start)
    _mix(h)
    if not h.size:
        cuts = [0]
    elif b"\n" in text:
        cut = np.searchsorted(first, np.flatnonzero(a == 10))
        cuts = sorted({0, h.size, *cut.tolist()})
    else:
        cuts = [0, h.size]
    return h, cuts


def shingle_hashes(words: np.ndarray, n: int = SHINGLE) -> np.ndarray:
    """The hash of every ``n``-word shingle, from the words' hashes.

    ``h(w0) ^ rotl(h(w1), 8) ^ rotl(h(w2), 16) ^ ...``, each term computed
    for all shingles at once over shifted views of the word hashes. A text
    of fewer than ``n`` words is one shingle of all of them; no words, no
    shingles.
    """
    count = words.size
    if count == 0:
        return words[:0].copy()
    n = min(n, count)
    m = count - n + 1
    acc = words[:m].copy()
    t = np.empty_like(acc)
    for j in range(1, n):
        w = words[j:j + m]
        np.left_shift(w, np.uint64(8 * j), out=t)
        acc ^= t
        np.right_shift(w, np.uint64(64 - 8 * j), out=t)
        acc ^= t
    return acc


_BITS_OF = np.unpackbits(np.arange(256, dtype=np.uint8)[:, None], axis=1,
                         bitorder="little").astype(np.float64)  # [byte value, bit]
_COLUMNS = (np.arange(8, dtype=np.uint16) * 256)


def simhash_of_hashes(feats: np.ndarray) -> int:
    """The simhash of 64-bit feature hashes: bit i is set when most features have it set."""
    m = feats.size
    if not m:
        return 0
    cols = feats.astype("<u8", copy=False).view(np.uint8).reshape(m, 8) + _COLUMNS
    counts = np.bincount(cols.ravel(), minlength=2048).reshape(8, 256)
    ones = counts @ _BITS_OF  # [byte column c, bit b]: how many features have bit 8c + b
    won = ones.ravel() * 2 > m
    return int.from_bytes(np.packbits(won, bitorder="little").tobytes(), "little")


def simhash_text(text: bytes, n: int = SHINGLE) -> int:
    """The simhash of ``n``-word shingles of ``text`` (already lower-cased: see crawl.text.fold)."""
    return simhash_of_hashes(shingle_hashes(word_hashes(text)[0], n))


def simhash_tokens(tokens: list[bytes], n: int = SHINGLE) -> int:
    """:func:`simhash_text` of the words ``tokens`` (which must hold no white space)."""
    return simhash_text(b" ".join(tokens), n)


def simhash(features: Iterable[bytes]) -> int:
    """The 64-bit simhash of ``features`` (each hashed with xxh3, weighted by count)."""
    return simhash_of_hashes(np.fromiter(map(xxhash.xxh3_64_intdigest, features), dtype=np.uint64))


# -- the same definitions as plain loops: what the tests compare against -------


def _mix_slow(x: int) -> int:
    x ^= x >> 33
    x = x * _C1 & _M64
    x ^= x >> 33
    x = x * _C2 & _M64
    return x ^ x >> 33


def word_hash_slow(word: bytes) -> int:
    """One word's hash, the textbook way: ``mix(sum(B[b] * P**k))`` mod 2**64."""
    return _mix_slow(sum(_BYTE_INTS[b] * pow(_P, k, 1 << 64) for k, b in enumerate(word)) & _M64)


def _rotl(h: int, bits: int) -> int:
    return (h << bits | h >> (64 - bits)) & _M64 if bits else h


def simhash_text_slow(text: bytes, n: int = SHINGLE) -> int:
    """The reference for :func:`simhash_text`: a loop per shingle and per bit."""
    hs = [word_hash_slow(w) for w in _SPLIT_RE.split(text) if w]
    n = min(n, len(hs))
    feats = []
    for i in range(len(hs) - n + 1 if hs else 0):
        f = 0
        for j in range(n):
            f ^= _rotl(hs[i + j], 8 * j)
        feats.append(f)
    weights = [0] * BITS
    for h in feats:
        for bit in range(BITS):
            weights[bit] += 1 if h >> bit & 1 else -1
    return sum(1 << bit for bit in range(BITS) if weights[bit] > 0)


def simhash_tokens_slow(tokens: list[bytes], n: int = SHINGLE) -> int:
    return simhash_text_slow(b" ".join(tokens), n)


def simhash_slow(features: Iterable[bytes]) -> int:
    """The textbook loop, kept as the reference the fast version is tested against."""
    weights = [0] * BITS
    for f in features:
        h = xxhash.xxh3_64_intdigest(f)
        for bit in range(BITS):
            weights[bit] += 1 if h >> bit & 1 else -1
    return sum(1 << bit for bit in range(BITS) if weights[bit] > 0)


def hamming(a: int, b: int) -> int:
    return (a ^ b).bit_count()


def blocks_for(k: int) -> tuple[tuple[int, int], ...]:
    """(shift, width) of the k+1 blocks that cut 64 bits as evenly as possible."""
    if not 0 <= k <= 15:
        raise ValueError(f"max distance must be between 0 and 15, got {k}")
    n = k + 1
    out = []
    top = BITS
    for i in range(n):
        width = BITS // n + (1 if i < BITS % n else 0)
        top -= width
        out.append((top, width))
    return tuple(out)


class SimhashIndex:
    """Fingerprints in k+1 permuted tables inside one LMDB database.

    Key = table number (1 byte) + that table's block (4 bytes) + the full
    fingerprint (8) + the document key (8). Storing the whole fingerprint
    after the block is the permutation: within a table, entries sort by
    their block first. The value is empty; the document key says who it is.
    """

    def __init__(self, env: lmdb.Environment, db: lmdb._Database, k: int = 3) -> None:
        self.env = env
        self.db = db
        self.k = k
        self.blocks = blocks_for(k)

    def _prefixes(self, h: int) -> Iterator[bytes]:
        for t, (shift, width) in enumerate(self.blocks):
            yield bytes([t]) + (h >> shift & ((1 << width) - 1)).to_bytes(4, "big")

    def add(self, txn: lmdb.Transaction, h: int, doc: bytes) -> None:
        tail = h.to_bytes(8, "big") + doc
        txn.cursor(db=self.db).putmulti([(p + tail, b"") for p in self._prefixes(h)])

    def query(self, txn: lmdb.Transaction, h: int, k: int | None = None) -> list[tuple[bytes, int, int]]:
        """Every (doc, fingerprint, distance) within ``k`` bits of ``h``, nearest first."""
        k = self.k if k is None else k
        if k > self.k:
            raise ValueError(f"this index answers up to distance {self.k}, not {k}")
        found: dict[tuple[bytes, int], int] = {}
        cur = txn.cursor(db=self.db)
        for p in self._prefixes(h):
            if not cur.set_range(p):
                continue
            for key in cur.iternext(keys=True, values=False):
                if key[:5] != p:
                    break
                other = int.from_bytes(key[5:13], "big")
                d = (h ^ other).bit_count()
                if d <= k:
                    found[key[13:], other] = d
        return sorted(((doc, o, d) for (doc, o), d in found.items()), key=lambda x: (x[2], x[0], x[1]))

    def count(self, txn: lmdb.Transaction) -> int:
        n: int = txn.stat(self.db)["entries"]
        return n // len(self.blocks)


def brute_force(stored: Iterable[tuple[bytes, int]], h: int, k: int) -> list[tuple[bytes, int, int]]:
    """The scan the index exists to avoid; the property tests compare against it."""
    found = {(doc, o): (h ^ o).bit_count() for doc, o in stored}
    return sorted(((doc, o, d) for (doc, o), d in found.items() if d <= k),
                  key=lambda x: (x[2], x[0], x[1]))


__all__ = ["SHINGLE", "WHITESPACE", "SimhashIndex", "blocks_for", "brute_force", "hamming",
           "shingle_hashes", "simhash", "simhash_of_hashes", "simhash_slow", "simhash_text",
           "simhash_text_slow", "simhash_tokens", "simhash_tokens_slow", "word_hash_slow",
           "word_hashes"]
