"""Has the crawl seen this URL? Asked of a seen set without opening it for writing.

:class:`crawl.seen.SeenSet` loads (or rebuilds) its Bloom filter and saves
it when closed: right for the stage that adds URLs, wrong for ``crawl why``
asking about one URL beside a running crawl or in a copy of its directory.
This looks one fingerprint up in the exact set alone (its sorted runs,
then the recent B-tree), in one read-only transaction.
"""

from __future__ import annotations

import os
from pathlib import Path

import lmdb
import numpy as np

from crawl.core import open_env

from .seenset import _FPS, _RUNS, _run_key, key_of


def seen_fp(path: str | os.PathLike[str], fp: int) -> bool | None:
    """True if fingerprint ``fp`` is in the seen set at ``path``, None if there is no set."""
    p = Path(path)
    if not (p / "data.mdb").exists():
        return None
    env = open_env(p, readonly=True)  # shared per process, so left open (see crawl.core.open_env)
    try:
        urls, runs, meta = (env.open_db(name, create=False) for name in (b"urls", b"runs", b"meta"))
    except (lmdb.NotFoundError, lmdb.ReadonlyError):
        return False  # created but never written
    with env.begin(buffers=True) as txn:
        raw = txn.get(_RUNS, db=meta)
        for run in (np.frombuffer(bytes(raw), dtype=_FPS).reshape(-1, 2)[:, 0].tolist() if raw else []):
            value = txn.get(_run_key(int(run), b"f"), db=runs)
            if value is None:
                continue
            fps = np.frombuffer(value, dtype=_FPS)
            i = int(np.searchsorted(fps, np.uint64(fp)))
            if i < len(fps) and int(fps[i]) == fp:
                return True
        return txn.get(key_of(fp), db=urls) is not None
