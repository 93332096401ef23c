"""64-bit simhash and the permuted-block index that finds near-duplicates.

Charikar's simhash, as used for web crawling by Manku, Jain and Das Sarma,
"Detecting near-duplicates for web crawling" (WWW 2007): every feature (a
4-word shingle) is hashed to 64 bits; bit i of the fingerprint is 1 when more
features have bit i set than not. Similar documents differ in few bits, and
pages within Hamming distance 3 count as near-duplicates.

Where the install built crawl/text/_compiled.c (see crawl.text.compiled), one compiled
pass computes what follows; the numpy version below is the definition it is
tested against and the fallback. The numpy arithmetic runs over the whole
text at once, so no word or shingle ever becomes a Python object (a 600-word
page is about 30 numpy calls, not thousands of Python ones):

* a word's hash is its 8-byte chunks weighted by fixed odd constants,
  ``sum(chunk_k * K_k)`` mod 2**64, read with one 8-byte load per chunk at
  each word's start (xxh3 for the rare word of more than 32 bytes);
* a shingle's hash is Horner's rule over its word hashes with an odd base
  ``Q``, then a multiply-xorshift;
* a block's hash (for the per-host repeated-block counts) is a polynomial
  over its word hashes with an odd base ``P``: one prefix sum over all the
  words gives every block as a difference of two prefix values, shifted
  back to its start by ``P**-start`` (``P`` is odd, so it has an inverse
  mod 2**64);
* the bit vote counts bits in byte lanes: ``(h >> s) & 0x0101...01`` puts
  8 of a hash's bits in 8 byte counters, so one uint64 sum over up to 255
  hashes counts them all (see :func:`_votes`).

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
from bisect import bisect_left, bisect_right
from collections.abc import Iterable, Sequence

import lmdb
import numpy as np
import xxhash

from crawl.text import compiled

BITS = 64
_M64 = (1 << 64) - 1
SHINGLE = 4  # words per shingle

# Words are separated by white space and the other ASCII control characters:
# every byte up to 0x20 (one comparison per byte in numpy). Non-ASCII spaces
# are folded to " " before hashing (crawl.text.fold); bytes >= 0x80 are parts
# of words.
SEPARATORS = bytes(range(0x21))
_SPLIT_RE = re.compile(b"[\\x00-\\x20]+")

_P = xxhash.xxh3_64_intdigest(b"crawl simhash base") | 1  # odd: invertible mod 2**64
_P_INV = pow(_P, -1, 1 << 64)
_Q = xxhash.xxh3_64_intdigest(b"crawl simhash shingle base") | 1
_U_Q = np.uint64(_Q)
_C = 0x9E3779B97F4A7C15  # the final mix: multiply by an odd constant, fold the top half down
_U_C, _U32 = np.uint64(_C), np.uint64(32)
# a word of up to 32 bytes is four 8-byte chunks; chunk k is weighted by _K[k]
_K = [xxhash.xxh3_64_intdigest(b"crawl simhash chunk %d" % k) | 1 for k in range(4)]
_U_K = [np.uint64(k) for k in _K]
_LONG = 8 * len(_K)  # longer words (URLs, digests: a few a page) are hashed one by one with xxh3
_U64 = np.uint64(64)
_KEEP = np.array([(1 << 8 * i) - 1 for i in range(8)] + [_M64], dtype=np.uint64)  # [i]: the low i bytes

if compiled.built is not None:  # the same numbers in one pass (crawl/text/_compiled.c)
    compiled.built.configure_simhash(*_K, _Q, _C, _P, xxhash.xxh3_64_intdigest)

_CACHE_MAX = 1 << 18  # keep P**i and P**-i for up to 256 K words (4 MB); more get their own
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


def word_hashes_many(texts: Sequence[bytes]) -> tuple[np.ndarray, list[list[int]]]:
    """The 64-bit hash of every word of every text, and each text's blocks, in one pass.

    Words are separated by any byte up to 0x20 (see SEPARATORS). Returns
    ``(hashes, cuts)``: the hashes of all words, text after text (uint64),
    and for each text the word indices (into ``hashes``) where its blocks
    begin and end: a newline ends a block, block i of a text is
    ``hashes[cuts[i]:cuts[i + 1]]`` and never empty, and the text's words
    are ``hashes[cuts[0]:cuts[-1]]``.

    A word of up to 32 bytes is read as four little-endian 8-byte chunks
    (zero past its end), and its hash is ``sum(chunk_k * K_k)`` mod 2**64
    (see :func:`word_hash_slow`): one 8-byte load per chunk at each word's
    start, so the work after finding the words is per word, not per byte
    (a text has six or seven bytes a word; the polynomial over every byte
    this replaced took a multiply and a prefix sum per byte), and the
    chunks past 8 bytes are read only for the words that long. A word cannot hold a zero byte, so the chunks
    say where it ends. Longer words take xxh3, one call each. The hashes
    are only ever combined further (into shingles, or into block keys).
    """
    # every text ends a block; zero bytes after the last newline pad the text to whole 8-byte words
    n = 1 + sum(len(t) + 1 for t in texts)
    joined = b"\n".join([b"", *texts, bytes(8 + -n % 8)])
    a = np.frombuffer(joined, dtype=np.uint8, count=n)
    ws = a <= 32
    # the bytes begin and end with a newline, so the edges alternate: a[i]
    # is the separator before a word, a[i] is the last byte of that word...
    edges = np.flatnonzero(ws[:-1] != ws[1:])
    first = edges[0::2] + 1  # where each word starts
    size = edges[1::2] - edges[0::2]
    aligned = np.frombuffer(joined, dtype="<u8")
    h = _load8(aligned, first)
    h &= _KEEP.take(size, mode="clip")  # 8 bytes or more: all of them
    h *= _U_K[0]
    idx = np.flatnonzero(size > 8)
    for k in range(1, len(_K)):
        if not idx.size:
            break
        chunk = _load8(aligned, first.take(idx) + 8 * k)
        rest = size.take(idx) - 8 * k
        chunk &= _KEEP.take(rest, mode="clip")
        chunk *= _U_K[k]
        h[idx] += chunk
        idx = idx[rest > 8]
    for i in idx.tolist():  # longer than 32 bytes
        start = int(first[i])
        h[i] = xxhash.xxh3_64_intdigest(joined[start:start + int(size[i])])
    # word index of the first word after each newline (once per run of them), and where each text starts
    after = np.searchsorted(first, np.flatnonzero(a == 10))
    cuts = [int(after[0]), *after[1:][after[1:] != after[:-1]].tolist()]  # newlines start and end every text
    offsets = [0]  # the newline before each text
    for t in texts[:-1]:
        offsets.append(offsets[-1] + len(t) + 1)
    starts = np.searchsorted(first, offsets).tolist() + [h.size]
    out = []
    for d in range(len(texts)):
        s, e = starts[d], starts[d + 1]
        if s == e:
            out.append([s])
            continue
        out.append([s, *cuts[bisect_right(cuts, s):bisect_left(cuts, e)], e])
    return h, out


def hash_texts(texts: Sequence[bytes], prefixes: Sequence[int], n: int = SHINGLE
               ) -> tuple[np.ndarray, list[list[int]], list[list[bytes]], list[int]]:
    """All that dedupe hashes from a group of texts, in one pass when compiled.

    Returns ``(hashes, cuts, keys, wholes)``: :func:`word_hashes_many`'s
    word hashes and cuts; for each text, the key of each of its blocks (16
    bytes: ``prefixes[i]`` and :func:`block_hashes`' hash of the block, both
    big-endian; dedupe's prefix is the host, so blocks are counted per
    host); and the simhash of each whole text (:func:`simhashes`; 0 when it
    has no words).
    """
    if compiled.active is not None:
        raw, cuts, keys, wholes = compiled.active.hash_texts(texts, prefixes, n)
        return np.frombuffer(raw, dtype=np.uint64), cuts, keys, wholes
    hashes, cuts = word_hashes_many(texts)
    bounds = [cuts[0][0]] if cuts else []  # a text's blocks end where the next text's begin
    for c in cuts:
        bounds += c[1:]
    table = np.empty((len(bounds) - 1 if bounds else 0, 2), dtype=">u8")
    table[:, 0] = np.repeat(np.array(prefixes, dtype=np.uint64), [len(c) - 1 for c in cuts])
    table[:, 1] = block_hashes(hashes, bounds)
    raw = table.tobytes()
    keys, b = [], 0
    for c in cuts:
        keys.append([raw[i:i + 16] for i in range(16 * b, 16 * (b + len(c) - 1), 16)])
        b += len(c) - 1
    return hashes, cuts, keys, simhashes(hashes, [(c[0], c[-1]) for c in cuts], n)


def _load8(words: np.ndarray, at: np.ndarray) -> np.ndarray:
    """The 8 bytes from each byte offset ``at`` as little-endian integers.

    Two aligned loads and shifts: a gather from an unaligned view would
    first copy the whole text to 8 bytes per byte offset.
    """
    shift = ((at & 7) << 3).astype(np.uint64)
    q = at >> 3
    lo = words.take(q, mode="clip")  # (always inside: "clip" skips the bounds check)
    hi = words.take(q + 1, mode="clip")
    lo >>= shift
    hi <<= _U64 - shift  # by 64 when aligned: numpy makes that 0
    lo |= hi
    return lo


def word_hashes(text: bytes) -> tuple[np.ndarray, list[int]]:
    """:func:`word_hashes_many` of one text: its word hashes, and the cuts between its blocks."""
    h, cuts = word_hashes_many([text])
    return h, cuts[0]


def block_hashes(words: np.ndarray, bounds: Sequence[int]) -> np.ndarray:
    """The hash of each block ``words[bounds[i]:bounds[i + 1]]`` (word hashes; bounds ascending).

    ``mix(sum(h_k * P**k) + length)`` over the block's words, k from 0 at the
    block's start (see :func:`block_hash_slow`): one prefix sum over all the
    words gives every block as a difference of two prefix values, shifted
    back by ``P**-start``.
    """
    b = np.asarray(bounds, dtype=np.intp)
    if b.size < 2:
        return words[:0].copy()
    pw, ipw = _pows(int(b[-1]) + 1)
    sums = np.zeros(int(b[-1]) + 1, dtype=np.uint64)
    np.multiply(words[:b[-1]], pw[:b[-1]], out=sums[1:])
    np.cumsum(sums, out=sums)
    ends = sums.take(b)
    x = ends[1:] - ends[:-1]
    x *= ipw.take(b[:-1])
    x += (b[1:] - b[:-1]).astype(np.uint64)
    x *= _U_C
    x ^= x >> _U32
    return x


def shingle_hashes(words: np.ndarray, n: int = SHINGLE) -> np.ndarray:
    """The hash of every ``n``-word shingle, from the words' hashes.

    ``mix(h(w0) + h(w1) * Q + h(w2) * Q**2 + ...)`` mod 2**64 (Horner's
    rule over shifted views of the word hashes, all shingles at once), with
    ``mix(x) = y ^ y >> 32`` for ``y = x * C``. A text of fewer than ``n``
    words is one shingle of all of them; no words, no shingles.
    """
    count = words.size
    if count == 0:
        return words[:0].copy()
    n = min(n, count)
    m = count - n + 1
    acc = words[n - 1:].copy()
    for j in range(n - 2, -1, -1):
        acc *= _U_Q
        acc += words[j:j + m]
    acc *= _U_C
    acc ^= acc >> _U32
    return acc


_LOW_BITS = np.uint64(0x0101010101010101)
_SHIFTS = np.arange(8, dtype=np.uint64)[:, None]
_GROUP = 255  # hashes per byte-lane sum (a byte counts to 255)


def _votes(feats: np.ndarray, spans: Sequence[tuple[int, int]]) -> list[int]:
    """The simhash of each span of ``feats`` (non-empty, sorted, disjoint), all at once.

    Counted in byte lanes: ``(h >> s) & 0x0101...01`` puts bit ``8j + s``
    of a hash in byte j, so one uint64 sum over up to 255 hashes counts 8
    bits at once. The 8 shifts are one broadcast; ``add.reduceat`` sums
    every group of 255 hashes of every span in one call; the lanes are read
    back as bytes. Hashes outside the spans fall in groups that are dropped.
    """
    idx: list[int] = []
    wanted: list[bool] = []
    per_span: list[int] = []
    top = feats.size
    for d, (s, e) in enumerate(spans):
        groups = range(s, e, _GROUP)
        idx.extend(groups)
        wanted.extend([True] * len(groups))
        per_span.append(len(groups))
        if e < top and (d + 1 == len(spans) or spans[d + 1][0] != e):
            idx.append(e)  # a group of hashes no span wants
            wanted.append(False)
    lanes = feats >> _SHIFTS  # [shift s, hash]
    lanes &= _LOW_BITS
    sums = np.add.reduceat(lanes, idx, axis=1)  # [s, group]: 8 byte counters per uint64
    if not all(wanted):
        sums = sums[:, np.array(wanted)]
    ones = np.ascontiguousarray(sums, dtype="<u8").view(np.uint8).reshape(8, -1, 8)  # [s, group, j]
    if len(per_span) != ones.shape[1]:  # a span of more than 255 hashes: add up its groups
        firsts = np.cumsum([0, *per_span[:-1]])
        ones = np.add.reduceat(ones.astype(np.uint32), firsts, axis=1)
    counts = ones.transpose(1, 2, 0).reshape(len(spans), 64)  # [span, bit 8j + s]
    half = np.array([(e - s) / 2 for s, e in spans])[:, None]
    packed = np.packbits(counts > half, axis=1, bitorder="little")
    return packed.view("<u8").ravel().tolist()


def simhash_of_hashes(feats: np.ndarray) -> int:
    """The simhash of 64-bit feature hashes: bit i is set when most features have it set."""
    return _votes(feats, [(0, feats.size)])[0] if feats.size else 0


def simhashes(words: np.ndarray, spans: Sequence[tuple[int, int]], n: int = SHINGLE) -> list[int]:
    """The simhash of the ``n``-word shingles of each span of ``words`` (word hashes).

    Spans are sorted, disjoint word ranges (one per text). The shingles of
    all of them are hashed and voted in one pass; those that straddle two
    spans are left out.
    """
    if compiled.active is not None:
        return compiled.active.simhashes(words, spans, n)  # type: ignore[no-any-return]
    if not spans:
        return []
    short = [e - s < n for s, e in spans]
    if any(short):  # fewer than n words: one shingle of them all
        return [simhash_of_hashes(shingle_hashes(words[s:e], n)) for s, e in spans]
    feats = shingle_hashes(words[spans[0][0]:spans[-1][1]], n)
    base = spans[0][0]
    return _votes(feats, [(s - base, e - base - n + 1) for s, e in spans])


def simhash_text(text: bytes, n: int = SHINGLE) -> int:
    """The simhash of ``n``-word shingles of ``text`` (already lower-cased: see crawl.text.fold)."""
    h = word_hashes(text)[0]
    return simhashes(h, [(0, h.size)], n)[0] if h.size else 0


def simhash_tokens(tokens: list[bytes], n: int = SHINGLE) -> int:
    """:func:`simhash_text` of the words ``tokens`` (which must hold no white space)."""
    return simhash_text(b" ".join(tokens), n)


def simhash(features: Iterable[bytes]) -> int:
    """The 64-bit simhash of ``features`` (each hashed with xxh3, weighted by count)."""
    return simhash_of_hashes(np.fromiter(map(xxhash.xxh3_64_intdigest, features), dtype=np.uint64))


# -- the same definitions as plain loops: what the tests compare against -------


def word_hash_slow(word: bytes) -> int:
    """One word's hash, the textbook way: ``sum(chunk_k * K_k)`` over its 8-byte chunks; xxh3 past 32 bytes."""
    if len(word) > _LONG:
        return xxhash.xxh3_64_intdigest(word)
    return sum(int.from_bytes(word[8 * k:8 * k + 8], "little") * _K[k] for k in range(len(_K))) & _M64


def block_hash_slow(words: list[int]) -> int:
    """The reference for :func:`block_hashes`: one block's word hashes, a loop."""
    x = (sum(h * pow(_P, k, 1 << 64) for k, h in enumerate(words)) + len(words)) * _C & _M64
    return x ^ x >> 32


def simhash_text_slow(text: bytes, n: int = SHINGLE) -> int:
    """The reference for :func:`simhash_text`: a loop per shingle and per bit."""
    hs = [word_hash_slow(w) for w in _SPLIT_RE.split(text) if w]
    n = min(n, len(hs))
    feats = []
    for i in range(len(hs) - n + 1 if hs else 0):
        x = sum(hs[i + j] * pow(_Q, j, 1 << 64) for j in range(n)) * _C & _M64
        feats.append(x ^ x >> 32)
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

    The database is ``dupsort`` with fixed-size values: key = table number
    (1 byte) + that table's block of the fingerprint (4 bytes); its values
    = the full fingerprint (8) + the document key (8), sorted. Keying each
    table by its own block is the permutation. A lookup is then one
    ``getmulti`` over the k+1 keys (one C call that returns every
    candidate), and an insert one ``putmulti``.
    """

    VALUE = 16  # fingerprint + document key

    def __init__(self, env: lmdb.Environment, db: lmdb._Database, k: int = 3) -> None:
        self.env = env
        self.db = db
        self.k = k
        self.blocks = blocks_for(k)
        self._parts = [(t << 32, shift, (1 << width) - 1) for t, (shift, width) in enumerate(self.blocks)]
        self._last: tuple[int, list[bytes]] = (-1, [])

    @classmethod
    def open(cls, env: lmdb.Environment, name: bytes, k: int = 3) -> SimhashIndex:
        """The index in database ``name`` of ``env`` (created dupsort/dupfixed if new)."""
        try:
            db = env.open_db(name, dupsort=True, dupfixed=True)
        except lmdb.IncompatibleError as exc:
            from crawl.core import CrawlError

            raise CrawlError(
                f"the near-duplicate index in {env.path()} has an older layout than this version "
                "of crawl reads; delete that directory (it is rebuilt from the pages fetched "
                "from now on) or use a new crawl directory") from exc
        return cls(env, db, k)

    def prefixes(self, h: int) -> list[bytes]:
        """The k+1 keys of ``h``: table number and that table's block."""
        if self._last[0] != h:  # a check asks for the same fingerprint twice (query, then add)
            self._last = (h, [(tp | h >> shift & mask).to_bytes(5, "big") for tp, shift, mask in self._parts])
        return self._last[1]

    def add(self, txn: lmdb.Transaction, h: int, doc: bytes) -> None:
        if len(doc) != 8:
            raise ValueError(f"a document key is 8 bytes, not {len(doc)}")
        value = h.to_bytes(8, "big") + doc
        txn.cursor(db=self.db).putmulti([(p, value) for p in self.prefixes(h)], dupdata=True)

    def add_many(self, txn: lmdb.Transaction, items: Iterable[tuple[int, bytes]]) -> None:
        """Bulk insert of (fingerprint, document key) pairs into an *empty* index, in key order."""
        values = [h.to_bytes(8, "big") + doc for h, doc in items]
        cur = txn.cursor(db=self.db)
        for tp, shift, mask in self._parts:  # tables are in key order: table number first
            rows = sorted((tp | int.from_bytes(v[:8], "big") >> shift & mask).to_bytes(5, "big") + v
                          for v in values)
            cur.putmulti(((r[:5], r[5:]) for r in rows), dupdata=True, append=True)

    def query(self, txn: lmdb.Transaction, h: int, k: int | None = None) -> list[tuple[bytes, int, int]]:
        """Every (doc, fingerprint, distance) within ``k`` bits of ``h``, nearest first."""
        k = self.k if k is None else k
        if k > self.k:
            raise ValueError(f"this index answers up to distance {self.k}, not {k}")
        rows = txn.cursor(db=self.db).getmulti(self.prefixes(h), dupdata=True, dupfixed_bytes=self.VALUE)
        if not rows:
            return []
        found: dict[tuple[bytes, int], int] = {}
        for _key, v in rows:
            other = int.from_bytes(v[:8], "big")
            d = (h ^ other).bit_count()
            if d <= k:
                found[v[8:], other] = d
        return sorted(((doc, o, d) for (doc, o), d in found.items()), key=lambda x: (x[2], x[0], x[1]))

    def count(self, txn: lmdb.Transaction) -> int:
        n: int = txn.stat(self.db)["entries"]
        return n // len(self.blocks)


def brute_force(stored: Iterable[tuple[bytes, int]], h: int, k: int) -> list[tuple[bytes, int, int]]:
    """The scan the index exists to avoid; the property tests compare against it."""
    found = {(doc, o): (h ^ o).bit_count() for doc, o in stored}
    return sorted(((doc, o, d) for (doc, o), d in found.items() if d <= k),
                  key=lambda x: (x[2], x[0], x[1]))


__all__ = ["SEPARATORS", "SHINGLE", "SimhashIndex", "blocks_for", "brute_force", "hamming",
           "shingle_hashes", "simhash", "simhash_of_hashes", "simhash_slow", "simhash_text",
           "simhash_text_slow", "simhash_tokens", "simhash_tokens_slow", "simhashes",
           "block_hash_slow", "block_hashes", "word_hash_slow", "word_hashes", "word_hashes_many"]
