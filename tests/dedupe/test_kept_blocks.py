"""crawl/dedupe/deduper.py _kept_blocks: one mask over the words gives what a slice
per kept block concatenated gave (issue 19), for any cuts and keep lists."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from crawl.dedupe.deduper import _kept_blocks


def per_block(hashes: np.ndarray, cuts: list[int], keep: list[bool]) -> np.ndarray:
    kept = [hashes[i:j] for i, j, k in zip(cuts, cuts[1:], keep, strict=False) if k]
    return np.concatenate(kept) if kept else hashes[:0]


@settings(max_examples=500, deadline=None)
@given(st.integers(0, 120), st.lists(st.integers(-5, 130), max_size=30), st.lists(st.booleans(), max_size=32),
       st.booleans())
def test_kept_blocks_is_the_per_block_concatenation(size: int, cuts: list[int], keep: list[bool],
                                                     ordered: bool) -> None:
    hashes = np.arange(size, dtype=np.uint64) * np.uint64(0x9E3779B97F4A7C15)
    if ordered:  # what hash_texts makes: from 0, non-decreasing, ending at the words' count
        cuts = [0, *sorted(min(max(c, 0), size) for c in cuts), size]
    got, want = _kept_blocks(hashes, cuts, keep), per_block(hashes, cuts, keep)
    assert got.dtype == want.dtype and got.tolist() == want.tolist()
