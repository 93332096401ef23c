"""64-bit simhash and the permuted-block index that finds near-duplicates.

Charikar's simhash, as used for web crawling by Manku, Jain and Das Sarma,
"Detecting near-duplicates for web crawling" (WWW 2007): every feature (a
4-word shingle) is hashed to 64 bits; bit i of the fingerprint is 1 when more
features have bit i set than not. Similar documents differ in few bits, and
pages within Hamming distance 3 count as near-duplicates.

Finding every stored fingerprint within distance k without a scan uses the
paper's pigeonhole trick: cut the 64 bits into k+1 blocks; two fingerprints
that differ in at most k bits agree *exactly* on at least one block. Table i
is keyed by block i first (a permutation of the fingerprint that puts block
i in front), so a lookup is k+1 exact prefix range queries plus a Hamming
check on the few candidates each returns.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator

import lmdb
import xxhash

BITS = 64


def simhash(features: Iterable[bytes]) -> int:
    """The 64-bit simhash of ``features`` (each hashed with xxh3, weighted by count)."""
    return simhash_of_hashes(b"".join(map(xxhash.xxh3_64_digest, features)))


def simhash_of_hashes(data: bytes) -> int:
    """The simhash of 64-bit feature hashes given as concatenated big-endian bytes.

    Written for speed without numpy: each of the 8 byte columns is sliced
    out in C, and every bit's count is a ``bit_count()`` of that column
    masked to one bit: 64 big-int operations per document instead of 64
    additions per feature.
    """
    n = len(data) // 8
    if not n:
        return 0
    out = 0
    half = n / 2
    masks = [int.from_bytes(bytes([1 << b]) * n, "big") for b in range(8)]
    for col in range(8):  # digest byte col holds bits 63-8*col .. 56-8*col
        column = int.from_bytes(data[col::8], "big")
        for b, mask in enumerate(masks):
            if (column & mask).bit_count() > half:
                out |= 1 << (56 - 8 * col + b)
    return out


def shingle_hashes(tokens: list[bytes], n: int = 4) -> bytes:
    """8-byte hashes of every ``n``-word shingle of ``tokens``, concatenated.

    A shingle's hash is ``h(w0) ^ rotl(h(w1), 8) ^ rotl(h(w2), 16) ^ ...``
    with ``h`` = xxh3-64 of each word (a Buzhash-style combination of
    independent word hashes). Each word is hashed once, and the rotations
    and XORs run over the whole document at once as byte slices and big
    integers, so no shingle string is ever built: 3x faster than hashing
    joined shingles. A text shorter than ``n`` words is one shingle.
    """
    if len(tokens) < n:
        return xxhash.xxh3_64_digest(b" ".join(tokens)) if tokens else b""
    words = b"".join(map(xxhash.xxh3_64_digest, tokens))
    lanes = len(tokens)
    m = lanes - n + 1
    x = int.from_bytes(words, "big")  # lane 0 (the first word) is the most significant
    keep = (1 << 64 * m) - 1
    acc = x >> 64 * (n - 1) & keep
    for j in range(1, n):
        hi = int.from_bytes((b"\xff" * (8 - j) + b"\0" * j) * lanes, "big")
        # every 64-bit lane rotated left by j bytes, in a few big-int operations
        rot = (x << 8 * j & hi) | (x >> (64 - 8 * j) & (hi ^ ((1 << 64 * lanes) - 1)))
        acc ^= rot >> 64 * (n - 1 - j) & keep
    return acc.to_bytes(8 * m, "big")


def simhash_tokens(tokens: list[bytes], n: int = 4) -> int:
    """The document fingerprint ``crawl dedupe`` uses: simhash of n-word shingles."""
    return simhash_of_hashes(shingle_hashes(tokens, n))


def _rotl(h: int, bits: int) -> int:
    return (h << bits | h >> (64 - bits)) & 0xFFFFFFFFFFFFFFFF if bits else h


def simhash_tokens_slow(tokens: list[bytes], n: int = 4) -> int:
    """The textbook loop over the same features: the reference for the tests."""
    if len(tokens) < n:
        feats = [xxhash.xxh3_64_intdigest(b" ".join(tokens))] if tokens else []
    else:
        hs = [xxhash.xxh3_64_intdigest(t) for t in tokens]
        feats = []
        for i in range(len(tokens) - n + 1):
            f = 0
            for j in range(n):
                f ^= _rotl(hs[i + j], 8 * j)
            feats.append(f)
    weights = [0] * BITS
    for h in feats:
        for bit in range(BITS):
            weights[bit] += 1 if h >> bit & 1 else -1
    return sum(1 << bit for bit in range(BITS) if weights[bit] > 0)


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
        for p in self._prefixes(h):
            txn.put(p + tail, b"", db=self.db)

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


__all__ = ["SimhashIndex", "blocks_for", "brute_force", "hamming", "shingle_hashes", "simhash",
           "simhash_of_hashes", "simhash_slow", "simhash_tokens", "simhash_tokens_slow"]
