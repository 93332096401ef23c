"""Exact and near-duplicate pages: the fetch result learns what it copies.

For each fetched page (``fetch`` record, outcome ok):

1. exact: the payload digest (the record's ``digest`` from the WARC writer,
   else sha1 of the body) is looked up in a digest -> original table;
2. near: a 64-bit simhash of 4-word shingles of the visible text (see
   :mod:`crawl.text`: nav, header, footer, aside, script, style... removed,
   and blocks repeated on many pages of the same host dropped too) is looked
   up in the permuted-block index (:class:`crawl.dedupe.simhash.SimhashIndex`):
   a few exact prefix queries, never a scan. Which blocks a host repeats is
   learned in rounds of its pages (:mod:`crawl.dedupe.boilerplate`).

The record comes out with ``simhash`` (16 hex digits) and, for a copy,
``duplicate_of`` (the original's URL), ``distance`` (bits) and ``dup_kind``
("exact" or "near"). The original is the page seen first, unless a page
declares another with ``<link rel=canonical>``: then the declared URL is the
original, and that URL's own fetch is never flagged as a copy of its
variants. ``crawl parse`` lowers the priority of a duplicate's outlinks.

Only originals enter the index and the boilerplate rounds, so a page with
five copies does not teach the host that its own article is boilerplate.
"""

from __future__ import annotations

import hashlib
import os
from array import array
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import lmdb
import numpy as np
import xxhash

from crawl.core import CrawlError, Record, close_env, open_env, records
from crawl.store import sha1_text
from crawl.text import Doc, analyse, fold, header_charset

from .boilerplate import Boilerplate, split_keys
from .simhash import SimhashIndex, hamming, hash_texts, shingle_hashes, simhashes

MAX_DISTANCE = 3
MIN_WORDS = 8  # fewer words than this is not enough text to call anything a near-copy
REPEATED_BLOCK_PAGES = 5  # a block on this many original pages of a host's learning round is boilerplate
_TEXT_TYPES = ("text/html", "application/xhtml+xml", "text/plain", "")
# pages hashed together: on the numpy path its per-call cost is shared (8 long articles, 32 short pages)
_HASH_GROUP, _HASH_BYTES = 32, 256 << 10

# body reader: record -> (body, content_type), or raises CrawlError
Bodies = Callable[[Record], tuple[bytes, str]]


def payload_digest(body: bytes) -> str:
    """The digest WARC writers use (WARC 1.1 section 5.9): sha1 in base32."""
    return sha1_text(hashlib.sha1(body).digest())


def url_key(url: str) -> bytes:
    return xxhash.xxh3_64_digest(url.encode())


class Fingerprint:
    """What one document boils down to (also what ``--explain`` prints).

    Built in two steps so that a batch shares its numpy passes: the
    constructor parses the page (``hashed=False`` stops there), then
    :func:`hash_all` hashes the words of many fingerprints at once and
    votes each one's simhash with every block kept, and :meth:`keep` settles
    the simhash once the caller knows which blocks are boilerplate
    (recomputed only when a block is dropped).
    """

    def __init__(self, url: str, body: bytes, content_type: str, *,
                 digest: str | None = None, hashed: bool = True) -> None:
        self.url = url
        self.digest = digest or payload_digest(body)
        self.doc = Doc()
        self.text = b""  # the folded visible text that gets hashed
        self.hashes = _NO_WORDS  # one per word
        self.cuts = [0]  # word indices where blocks begin and end
        # one per block: xxh3 of the host (8 bytes) + the block's hash (8, crawl.dedupe.simhash.block_hashes)
        self.block_keys: list[bytes] = []
        self.whole: int | None = None  # the simhash with every block kept
        self.words = 0  # words hashed, after boilerplate blocks were dropped
        self.simhash: int | None = None
        self.note: str | None = None
        self._kept = self.hashes
        ctype = content_type.split(";")[0].strip().lower()
        if ctype not in _TEXT_TYPES:
            self.note = f"not text ({ctype}): exact duplicates only"
        else:
            if ctype == "text/plain":
                text = body.decode("utf-8", "replace")
                self.doc = Doc(raw="\n".join(text.splitlines()).encode("utf-8", "replace"))
                self.text = fold(self.doc.raw)
            else:  # the text comes folded: no second pass over it
                charset = header_charset(content_type) if ";" in content_type else None
                self.doc = analyse(body, charset, url, folded=True)
                self.text = self.doc.raw
                if self.doc.error:
                    self.note = self.doc.error
        if hashed:
            hash_all([self])
            self.keep(None)

    def __reduce__(self) -> tuple[Any, tuple[Any, ...]]:
        """What a ``crawl dedupe --jobs`` worker sends back, as :func:`fingerprint_pages`
        leaves it (hashed, not yet kept): the word hashes, cuts and block keys as
        three strings, not thousands of small objects to pickle one by one."""
        return (_unpickle, (self.url, self.digest, self.doc.canonical, self.doc.error, self.note,
                            self.hashes.tobytes(), array("q", self.cuts).tobytes(),
                            b"".join(self.block_keys), self.whole))

    @property
    def features(self) -> np.ndarray:
        """The shingle hashes of the kept words (for ``--explain``)."""
        return shingle_hashes(self._kept) if self.simhash is not None else _NO_WORDS

    def keep(self, keep: list[bool] | None) -> None:
        """Settle the simhash with only the blocks marked True (None: all of them)."""
        hashes = self.hashes
        if keep is not None and not all(keep):
            hashes = _kept_blocks(hashes, self.cuts, keep)
        self._kept = hashes
        self.words = hashes.size
        if self.words < MIN_WORDS:
            self.note = self.note or f"only {self.words} words of text: exact duplicates only"
            self.simhash = None
        elif hashes is self.hashes and self.whole is not None:
            self.simhash = self.whole
        else:
            self.simhash = simhashes(hashes, [(0, hashes.size)])[0]


_NO_WORDS = np.zeros(0, dtype=np.uint64)


def _kept_blocks(hashes: np.ndarray, cuts: list[int], keep: list[bool]) -> np.ndarray:
    """The words of the blocks marked True, in order: ``hashes[cuts[b]:cuts[b + 1]]``
    for each kept block b, concatenated. One mask over the words, not a slice per
    block: a page of a few hundred blocks (navigation lists) made as many arrays."""
    n = min(len(cuts) - 1, len(keep))
    if n <= 0:
        return hashes[:0]
    bounds = np.asarray(cuts[:n + 1], dtype=np.int64)
    lengths = np.diff(bounds)
    if bounds[0] < 0 or bounds[n] > hashes.size or (lengths < 0).any():
        kept = [hashes[i:j] for i, j, k in zip(cuts, cuts[1:], keep, strict=False) if k]
        return np.concatenate(kept) if kept else hashes[:0]
    return hashes[bounds[0]:bounds[n]][np.repeat(np.asarray(keep[:n], dtype=bool), lengths)]


def _unpickle(url: str, digest: str, canonical: str | None, error: str | None, note: str | None,
              hashes: bytes, cuts: bytes, keys: bytes, whole: int | None) -> Fingerprint:
    fp = Fingerprint.__new__(Fingerprint)
    fp.url, fp.digest, fp.note, fp.whole = url, digest, note, whole
    fp.doc = Doc(canonical=canonical, error=error)
    fp.text, fp.words, fp.simhash = b"", 0, None
    fp.hashes = fp._kept = np.frombuffer(hashes, dtype=np.uint64)
    fp.cuts = array("q", cuts).tolist()
    fp.block_keys = split_keys(keys)
    return fp


def hash_all(fps: Sequence[Fingerprint]) -> None:
    """Hash the words of every fingerprint and vote every whole-text simhash, in one pass when compiled.

    Sets ``hashes``, ``cuts``, ``block_keys`` and ``whole`` (None below
    MIN_WORDS words) of each.
    """
    if not fps:
        return
    hashes, cuts, keys, wholes = hash_texts(
        [fp.text for fp in fps], [xxhash.xxh3_64_intdigest(_host(fp.url).encode()) for fp in fps])
    for fp, c, k, whole in zip(fps, cuts, keys, wholes, strict=True):
        base = c[0]
        fp.hashes = hashes[base:c[-1]]
        fp.cuts = [x - base for x in c]
        fp.block_keys = k
        fp.whole = whole if fp.hashes.size >= MIN_WORDS else None


def _hash_group(group: list[Fingerprint]) -> None:
    """``hash_all``, then drop each page's text: a batch keeps only the word hashes
    it still needs, not every page's text (memory stays bounded per batch)."""
    hash_all(group)
    for fp in group:
        fp.text = b""
        fp.doc.raw = b""


# (index in the batch, its fingerprint or why its body could not be read)
Prints = list[tuple[int, Fingerprint | str]]


def fingerprint_pages(recs: Sequence[Record], bodies: Bodies) -> Prints:
    """Parse and hash every stored page of a batch: the half of a check that
    needs no tables, so any process can do it.

    Pages are hashed in groups sharing one call (on the numpy path its
    per-call cost is shared), each group while its text is still in cache.
    """
    out: Prints = []
    group: list[Fingerprint] = []  # parsed, not hashed yet
    size = 0
    for i, rec in enumerate(recs):
        if rec.get("kind") != "fetch" or rec.get("outcome") != "ok":
            continue
        try:
            body, ctype = bodies(rec)
        except CrawlError as exc:
            out.append((i, str(exc)))
            continue
        given = rec.get("digest")
        fp = Fingerprint(rec["url"], body, ctype, hashed=False,
                         digest=given if isinstance(given, str) and given else None)
        out.append((i, fp))
        group.append(fp)
        size += len(fp.text)
        if size >= _HASH_BYTES or len(group) >= _HASH_GROUP:
            _hash_group(group)
            group, size = [], 0
    _hash_group(group)
    return out


class Deduper:
    """The duplicate tables inside ``CrawlDir(dir).dedupe``.

    Args:
        path: the LMDB environment directory.
        max_distance: Hamming distance that still counts as a near-duplicate.
        repeated_block_pages: a text block found on this many original pages
            of one host's learning round is dropped as boilerplate before
            hashing (see :mod:`crawl.dedupe.boilerplate`).
    """

    def __init__(self, path: str | os.PathLike[str], *, max_distance: int = MAX_DISTANCE,
                 repeated_block_pages: int = REPEATED_BLOCK_PAGES, sync: bool = True) -> None:
        self.path = Path(path)
        self.env = open_env(self.path, sync=sync)
        self.digests = self.env.open_db(b"digests")  # digest -> original url
        self.docs = self.env.open_db(b"docs")  # url key -> simhash(8) + original url
        _drop_old_block_counts(self.env)
        self.counts: dict[str, int] = {}
        self.boiler = Boilerplate(self.env, threshold=repeated_block_pages, counts=self.counts)
        self.index = SimhashIndex.open(self.env, b"simhash", max_distance)
        self.max_distance = max_distance

    def close(self) -> None:
        if self.env is not None:
            close_env(self.env)
            self.env = None  # type: ignore[assignment]

    def __enter__(self) -> Deduper:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _count(self, key: str, n: int = 1) -> None:
        self.counts[key] = self.counts.get(key, 0) + n

    # -- the check -----------------------------------------------------------

    def check(self, recs: Sequence[Record], bodies: Bodies) -> list[Record]:
        """Annotate fetch records of stored pages; everything else passes through.

        :func:`fingerprint_pages`, then :meth:`record` (``crawl dedupe
        --jobs`` runs the first half in worker processes).
        """
        return self.record(recs, fingerprint_pages(recs, bodies))

    def record(self, recs: Sequence[Record], prints: Prints) -> list[Record]:
        """Look up and record the fingerprinted pages of ``recs`` in one write transaction.

        It is committed before the records are returned. A page whose body
        could not be read gets ``dedupe_error``.
        """
        out: list[Record] = list(recs)
        todo: list[tuple[int, Fingerprint]] = []
        for i, fp in prints:
            if isinstance(fp, str):
                self._count("unreadable")
                out[i] = records.derive(recs[i], "fetch", dedupe_error=fp)
            else:
                todo.append((i, fp))
        if not todo:
            return out
        try:
            with self.env.begin(write=True) as txn:
                self.boiler.begin(txn)
                for i, fp in todo:
                    out[i] = self._record(txn, recs[i], fp)
                self.boiler.flush()
            self.boiler.committed()
        except BaseException:
            self.boiler.forget()
            raise
        return out

    def _record(self, txn: lmdb.Transaction, rec: Record, fp: Fingerprint) -> Record:
        url: str = rec["url"]
        keep = self.boiler.kept(fp.block_keys)
        if keep is not None:
            self._count("boilerplate_blocks", len(keep) - sum(keep))
        fp.keep(keep)
        digest = fp.digest
        declared = _declared(fp.doc.canonical, url)
        me = declared or url
        extra: dict[str, Any] = {}
        if fp.simhash is not None:
            extra["simhash"] = f"{fp.simhash:016x}"
        if fp.note:
            extra["dedupe_note"] = fp.note
        self._count("pages")
        raw = txn.get(digest.encode(), db=self.digests)
        original = None if raw is None else raw.decode()
        if original is not None and original != url:
            self._count("exact")
            extra.update(duplicate_of=declared or original, distance=0, dup_kind="exact")
        elif original is None and fp.simhash is not None:
            for doc, _other, d in self.index.query(txn, fp.simhash):
                owner = self._owner(txn, doc)
                if owner is None or owner == url:  # an earlier fetch of this very page
                    continue
                self._count("near")
                extra.update(duplicate_of=declared or owner, distance=d, dup_kind="near")
                break
        if declared:
            extra["canonical"] = declared
        is_copy = "duplicate_of" in extra
        if original is None and not is_copy:
            txn.put(digest.encode(), me.encode(), db=self.digests)
        if fp.simhash is not None:
            key = url_key(url)
            first_time = txn.replace(key, fp.simhash.to_bytes(8, "big") + me.encode(), db=self.docs) is None
            if not is_copy:
                self.index.add(txn, fp.simhash, key)
                if first_time:  # a re-fetch must not make a page's own text boilerplate
                    self.boiler.learn(fp.block_keys)
        return records.derive(rec, "fetch", **extra)

    def _owner(self, txn: lmdb.Transaction, doc: bytes) -> str | None:
        v = txn.get(doc, db=self.docs)
        return None if v is None else v[8:].decode()

    # -- explain ---------------------------------------------------------------

    def stored(self, url: str) -> tuple[int, str] | None:
        """(simhash, original) recorded for ``url`` by an earlier check, if any."""
        with self.env.begin(db=self.docs) as txn:
            v = txn.get(url_key(url))
        return None if v is None else (int.from_bytes(v[:8], "big"), v[8:].decode())


def _drop_old_block_counts(env: lmdb.Environment) -> None:
    """Versions before learning rounds counted every block of every page in a
    ``blocks`` table; it is not read any more, so its space goes back to the map."""
    try:
        old = env.open_db(b"blocks", create=False)
    except lmdb.NotFoundError:
        return
    with env.begin(write=True) as txn:
        txn.drop(old, delete=True)


def _host(url: str) -> str:
    rest = url.split("://", 1)[-1]
    return rest.split("/", 1)[0].split("?", 1)[0].lower()


def _declared(canonical: str | None, url: str) -> str | None:
    """The page's rel=canonical when it names another http(s) URL, canonicalised."""
    if not canonical or not canonical.startswith(("http://", "https://")):
        return None
    try:
        from crawl.canon import canonicalize

        c = canonicalize(canonical).url
    except ValueError:
        return None
    return None if c == url else c


def explain(a: Fingerprint, b: Fingerprint, max_distance: int = MAX_DISTANCE) -> dict[str, Any]:
    """Both fingerprints, their distance and the verdict, for ``crawl dedupe --explain``."""
    out: dict[str, Any] = {}
    for name, f in (("a", a), ("b", b)):
        out[name] = {"url": f.url, "digest": f.digest,
                     "simhash": None if f.simhash is None else f"{f.simhash:016x}",
                     "words": f.words, "note": f.note}
    if a.simhash is not None and b.simhash is not None:
        d = hamming(a.simhash, b.simhash)
        out["distance"] = d
        out["differing_bits"] = [i for i in range(64) if (a.simhash ^ b.simhash) >> i & 1]
        sa, sb = set(a.features.tolist()), set(b.features.tolist())
        out["shingle_jaccard"] = round(len(sa & sb) / len(sa | sb), 4) if sa | sb else None
    else:
        d = None
        out["distance"] = None
    if a.digest == b.digest:
        out["verdict"] = "exact duplicates (same payload digest)"
    elif d is not None and d <= max_distance:
        out["verdict"] = f"near-duplicates (distance {d} <= {max_distance})"
    else:
        out["verdict"] = "distinct"
    return out
