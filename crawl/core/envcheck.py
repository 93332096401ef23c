"""Is an LMDB data file safe to map? Read with plain file reads, never the map.

LMDB maps ``data.mdb`` into memory and trusts it. A file cut short (a bad
copy, a restore onto a full disk, a truncate by mistake) turns the first read
past its end into SIGBUS: the process dies without a word, whatever the
command. So before an environment is mapped, :func:`problem` reads its two
meta pages and compares the file's size with what the newest commit needs,
``(mm_last_pg + 1)`` pages. LMDB may leave pages at the end unwritten when
they were freed in the transaction that allocated them, so a short tail is
accepted when every missing page is in the free list. :func:`verify_env` is the
whole check (``crawl check``): py-lmdb's offline verifier, which walks every
page with seek and read and so reports damage instead of crashing on it.

The layout read here is LMDB 0.9's on 64-bit builds (what py-lmdb bundles):
a 16-byte page header (pgno u64, pad u16, flags u16, lower u16, upper u16),
then the meta (magic u32, version u32, address u64, mapsize u64, two 48-byte
MDB_db records, free DB then main DB, then last_pg u64 and txnid u64); the
page size is the free DB record's ``md_pad``. What an LMDB error means to the
operator is :mod:`.guard`'s business.
"""

from __future__ import annotations

import os
import struct
from dataclasses import dataclass
from pathlib import Path
from typing import Any

DATA_FILE = "data.mdb"
_HEAD = 16  # page header
_P_BRANCH, _P_LEAF, _P_META = 0x01, 0x02, 0x08
_F_BIGDATA = 0x01
_MAGIC = 0xBEEFC0DE
_VERSION = 1
_META = struct.Struct("<IIQQ")  # magic, version, address, mapsize
_DB = struct.Struct("<IHHQQQQQ")  # pad (psize in the free DB), flags, depth, branch, leaf, overflow, entries, root
_META_SIZE = _META.size + 2 * _DB.size + 16  # ... then last_pg, txnid
_NODE = struct.Struct("<HHHH")  # lo, hi, flags, key size
_FREE_WALK_PAGES = 1 << 16  # a free list larger than this is checked by crawl check, not here


@dataclass(frozen=True)
class Meta:
    txnid: int
    last_pg: int
    psize: int
    free_root: int  # root page of the free list, or the all-ones "none"


class _Bad(Exception):
    """Why a data file cannot be trusted (the text of a finding)."""


def _read_meta(fh: Any, pgno: int, psize: int) -> Meta:
    fh.seek(pgno * psize)
    raw = fh.read(_HEAD + _META_SIZE)
    if len(raw) < _HEAD + _META_SIZE:
        raise _Bad(f"meta page {pgno} is cut short")
    flags = struct.unpack_from("<H", raw, 10)[0]
    magic, version, _addr, _mapsize = _META.unpack_from(raw, _HEAD)
    if not flags & _P_META or magic != _MAGIC:
        raise _Bad(f"meta page {pgno} is overwritten (not an LMDB meta page)")
    if version != _VERSION:
        raise _Bad(f"meta page {pgno} says data format {version}, this LMDB reads {_VERSION}")
    free = _DB.unpack_from(raw, _HEAD + _META.size)
    last_pg, txnid = struct.unpack_from("<QQ", raw, _HEAD + _META.size + 2 * _DB.size)
    return Meta(txnid=txnid, last_pg=last_pg, psize=free[0], free_root=free[7])


def read_metas(path: Path) -> tuple[Meta, int] | None:
    """(the newest meta, the file's size), or None for a missing or empty file
    (a new environment: LMDB writes the meta pages itself). Raises _Bad."""
    try:
        fh = open(path, "rb")  # noqa: SIM115 - closed below
    except FileNotFoundError:
        return None
    with fh:
        # The metas first, the size after: LMDB writes a commit's pages before
        # its meta and never shrinks the file, so a meta read first is always
        # covered by the size read after it, even while another process commits.
        if not fh.read(1):
            return None
        m0 = _read_meta(fh, 0, 1)
        if m0.psize < 512 or m0.psize > 1 << 16 or m0.psize & (m0.psize - 1):
            raise _Bad(f"meta page 0 gives an impossible page size {m0.psize}")
        m1 = _read_meta(fh, 1, m0.psize)
        size = os.fstat(fh.fileno()).st_size
    return (m1 if m1.txnid > m0.txnid else m0), size


def problem(env_dir: Path) -> str | None:
    """Why LMDB cannot map this environment's data file safely, or None."""
    path = env_dir / DATA_FILE
    try:
        got = read_metas(path)
    except _Bad as exc:
        return str(exc)
    except OSError:
        return None  # unreadable: LMDB's own open says why (permissions, a directory...)
    if got is None:
        return None
    meta, size = got
    need = (meta.last_pg + 1) * meta.psize
    if size >= need:
        return None
    first_missing = size // meta.psize  # a partial last page counts as missing
    try:
        free = _free_pages(path, meta, size, limit=_FREE_WALK_PAGES)
    except _Bad:
        free = None
    if free is not None and all(p in free for p in range(first_missing, meta.last_pg + 1)):
        return None  # only pages LMDB freed before it ever wrote them
    return (f"it is {size:,} bytes but its last commit needs {need:,} (pages "
            f"{first_missing:,}-{meta.last_pg:,} are missing): the file was cut short")


def _free_pages(path: Path, meta: Meta, size: int, *, limit: int) -> set[int]:
    """Every page number in the free list (the free DB: txnid -> list of pages)."""
    psize = meta.psize
    out: set[int] = set()
    if meta.free_root == (1 << 64) - 1:
        return out
    with open(path, "rb") as fh:

        def page(pgno: int, n: int = 1) -> bytes:
            if (pgno + n) * psize > size:
                raise _Bad(f"page {pgno} of the free list is missing")
            fh.seek(pgno * psize)
            return fh.read(n * psize)

        todo, walked = [meta.free_root], 0
        while todo:
            pgno = todo.pop()
            walked += 1
            if walked > limit:
                raise _Bad("free list too long to check here")
            buf = page(pgno)
            flags, lower = struct.unpack_from("<HH", buf, 10)
            if lower < _HEAD or lower > psize:
                raise _Bad(f"page {pgno} of the free list is overwritten")
            for i in range((lower - _HEAD) // 2):
                at = struct.unpack_from("<H", buf, _HEAD + 2 * i)[0]
                if at + _NODE.size > psize:
                    raise _Bad(f"page {pgno} of the free list is overwritten")
                lo, hi, nflags, ksize = _NODE.unpack_from(buf, at)
                if flags & _P_BRANCH:
                    todo.append(lo | hi << 16 | nflags << 32)
                    continue
                if not flags & _P_LEAF:
                    raise _Bad(f"page {pgno} of the free list is overwritten")
                start, dsize = at + _NODE.size + ksize, lo | hi << 16
                if nflags & _F_BIGDATA:
                    over = struct.unpack_from("<Q", buf, start)[0]
                    npages = (_HEAD + dsize + psize - 1) // psize
                    data = page(over, npages)[_HEAD:_HEAD + dsize]
                else:
                    data = buf[start:start + dsize]
                if len(data) < 8:
                    raise _Bad(f"page {pgno} of the free list is overwritten")
                n = struct.unpack_from("<Q", data, 0)[0]
                if 8 + 8 * n > len(data):
                    raise _Bad(f"page {pgno} of the free list is overwritten")
                out.update(struct.unpack_from(f"<{n}Q", data, 8))
    return out


def verify_env(env_dir: Path) -> list[str]:
    """Every problem in an environment's data file (empty: sound), read without LMDB.

    py-lmdb's offline verifier (``lmdb.verify``) walks every page reachable
    from the newest commit with seek and read, never the memory map, so a
    truncated or overwritten file gives findings, not a crash: about 10,000
    pages (40 MB) a second.
    """
    from lmdb import verify as lmdb_verify

    first = problem(env_dir)
    if first is not None:
        return [first]
    path = env_dir / DATA_FILE
    if not path.exists() or path.stat().st_size == 0:
        return []
    try:
        return list(lmdb_verify.verify(str(path), subdir=False))
    except lmdb_verify.VerifyError as exc:
        return [str(exc)]
