"""simhash maths and the permuted-block index, against brute force."""

from __future__ import annotations

import random
import tempfile

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from crawl.core import close_env, open_env
from crawl.dedupe.simhash import (
    SEPARATORS,
    SimhashIndex,
    block_hash_slow,
    block_hashes,
    blocks_for,
    brute_force,
    hamming,
    simhash,
    simhash_slow,
    simhash_text,
    simhash_text_slow,
    simhash_tokens,
    simhash_tokens_slow,
    simhashes,
    word_hash_slow,
    word_hashes,
    word_hashes_many,
)
from crawl.text import fold

u64 = st.integers(min_value=0, max_value=(1 << 64) - 1)


@given(st.lists(st.binary(max_size=12), max_size=80))
@settings(max_examples=150, deadline=None)
def test_fast_simhash_equals_the_textbook_loop(features: list[bytes]) -> None:
    assert simhash(features) == simhash_slow(features)


@given(st.lists(st.sampled_from([b"a", b"b", b"cc", b"\xc3\xa9", b"d"]), max_size=60),
       st.integers(1, 6))
@settings(max_examples=150, deadline=None)
def test_rolling_shingle_simhash_equals_the_per_shingle_loop(tokens: list[bytes], n: int) -> None:
    # repeated words on purpose: the rotations must keep (a, a, b, b) and
    # (b, b, a, a) apart exactly as the reference does
    assert simhash_tokens(tokens, n) == simhash_tokens_slow(tokens, n)


_TEXT_BYTES = st.sampled_from([b"a", b"b", b"\xc3", b"\xa9", b"\x80", b"z", b"!", b"9"]
                              + [bytes([c]) for c in SEPARATORS])


@given(st.lists(_TEXT_BYTES, max_size=400).map(b"".join))
@settings(max_examples=200, deadline=None)
def test_numpy_word_hashes_and_blocks_equal_the_loops(text: bytes) -> None:
    # any bytes, runs of every kind of separator, words long enough that
    # the polynomial's powers wrap around 64 bits
    hashes, cuts = word_hashes(text)
    spaced = text.translate(bytes.maketrans(SEPARATORS.replace(b"\n", b""), b" " * 32))
    lines = [line.split() for line in spaced.split(b"\n")]
    assert hashes.tolist() == [word_hash_slow(w) for line in lines for w in line]
    sizes = [len(line) for line in lines if line]
    assert cuts == [sum(sizes[:i]) for i in range(len(sizes) + 1)]
    assert simhash_text(text) == simhash_text_slow(text)


@given(st.lists(st.lists(_TEXT_BYTES, max_size=300).map(b"".join), max_size=6),
       st.integers(1, 5))
@settings(max_examples=100, deadline=None)
def test_many_texts_at_once_equal_one_at_a_time(texts: list[bytes], n: int) -> None:
    # what the deduper does with a batch: all words hashed in one pass, all
    # simhashes voted in one pass, and nothing leaks from one text to the next
    hashes, cuts = word_hashes_many(texts)
    spans = []
    for text, c in zip(texts, cuts, strict=True):
        alone, alone_cuts = word_hashes(text)
        assert hashes[c[0]:c[-1]].tolist() == alone.tolist()
        assert [x - c[0] for x in c] == alone_cuts
        if c[-1] - c[0] >= n:
            spans.append((c[0], c[-1]))
    got = simhashes(hashes, spans, n)
    assert got == [simhash_text_slow(hashes_text(texts, cuts, s), n) for s in spans]


def hashes_text(texts: list[bytes], cuts: list[list[int]], span: tuple[int, int]) -> bytes:
    return next(t for t, c in zip(texts, cuts, strict=True) if (c[0], c[-1]) == span)


def test_many_long_texts_vote_in_groups_of_255() -> None:
    rng = random.Random(7)
    texts = [b" ".join(b"w%d" % rng.randrange(400) for _ in range(size))
             for size in (300, 4, 700, 0, 255, 259, 1000)]
    hashes, cuts = word_hashes_many(texts)
    spans = [(c[0], c[-1]) for c in cuts if c[-1] - c[0] >= 4]
    assert simhashes(hashes, spans) == [simhash_text_slow(hashes_text(texts, cuts, s)) for s in spans]


def test_long_texts_use_their_own_powers() -> None:
    # past the cached powers of P (256 KB of text) the same hashes come out
    text = b" ".join(b"w%dx" % (i % 977) for i in range(70_000))
    assert len(text) > 1 << 18
    hashes, cuts = word_hashes(text)
    assert cuts == [0, 70_000]
    assert hashes[-3:].tolist() == [word_hash_slow(w) for w in text.split()[-3:]]
    assert simhash_text(text) == simhash_text_slow(text)


@given(st.lists(st.lists(u64, max_size=40), max_size=8))
@settings(max_examples=150, deadline=None)
def test_block_hashes_equal_the_loop(blocks: list[list[int]]) -> None:
    words = np.array([h for b in blocks for h in b], dtype=np.uint64)
    bounds = [0]
    for b in blocks:
        if b:
            bounds.append(bounds[-1] + len(b))
    assert block_hashes(words, bounds).tolist() == [block_hash_slow(b) for b in blocks if b]


def test_fold_lowercases_and_makes_every_space_ascii() -> None:
    assert fold(b"Hello  WORLD") == b"hello  world"
    assert fold("Caf\u00c9\u00a0Bar\u2003baz\u3000Q".encode()).split() == \
        ["caf\u00e9".encode(), b"bar", b"baz", b"q"]
    assert fold(b"bad \xff byte").split() == [b"bad", "\ufffd".encode(), b"byte"]


@given(u64, u64)
def test_hamming_is_a_metric(a: int, b: int) -> None:
    assert hamming(a, b) == hamming(b, a)
    assert hamming(a, a) == 0
    assert 0 <= hamming(a, b) <= 64


def test_similar_texts_are_close_and_different_texts_are_far() -> None:
    # one edit moves 8 of ~800 shingle votes, so a bit near its majority can
    # flip: any good hash lands a few texts in ten at 4+ bits. Many texts,
    # so the test holds the distribution, not one lucky draw
    near, far = [], []
    vocab = [f"w{i}" for i in range(3000)]
    for seed in range(40):
        rng = random.Random(seed)
        base = [rng.choice(vocab) for _ in range(800)]
        edited = list(base)
        edited[400] = "changed"  # one word in 800
        other = [rng.choice(vocab) for _ in range(800)]
        h = simhash_text(" ".join(base).encode())
        near.append(hamming(h, simhash_text(" ".join(edited).encode())))
        far.append(hamming(h, simhash_text(" ".join(other).encode())))
    assert sum(d <= 3 for d in near) >= 0.8 * len(near) and max(near) <= 8
    assert min(far) > 10
    rng = random.Random(5)
    base = [rng.choice(vocab) for _ in range(800)]
    edited = list(base)
    edited[400] = "changed"
    shingles = [" ".join(base[i:i + 4]).encode() for i in range(len(base) - 3)]
    edited_shingles = [" ".join(edited[i:i + 4]).encode() for i in range(len(edited) - 3)]
    assert hamming(simhash(shingles), simhash(edited_shingles)) <= 3


@pytest.mark.parametrize("k", [0, 1, 3, 6, 15])
def test_blocks_cover_64_bits_exactly(k: int) -> None:
    blocks = blocks_for(k)
    assert len(blocks) == k + 1
    mask = 0
    for shift, width in blocks:
        m = ((1 << width) - 1) << shift
        assert mask & m == 0
        mask |= m
    assert mask == (1 << 64) - 1


def _near(rng: random.Random, h: int, flips: int) -> int:
    for bit in rng.sample(range(64), flips):
        h ^= 1 << bit
    return h


@given(st.integers(0, 2**32), st.sampled_from([1, 3, 5]), st.integers(5, 60))
@settings(max_examples=40, deadline=None)
def test_permuted_tables_return_exactly_what_a_scan_returns(seed: int, k: int, n: int) -> None:
    # clusters of fingerprints a few bits apart, so every distance 0..k+2 occurs
    rng = random.Random(seed)
    centres = [rng.getrandbits(64) for _ in range(4)]
    stored = []
    for i in range(n):
        h = _near(rng, rng.choice(centres), rng.randrange(0, k + 3))
        stored.append((i.to_bytes(8, "big"), h))
    queries = [_near(rng, rng.choice(centres), rng.randrange(0, k + 3)) for _ in range(10)]
    queries += [h for _, h in stored[:3]] + [rng.getrandbits(64)]
    with tempfile.TemporaryDirectory() as d:
        env = open_env(d, sync=False)
        try:
            idx = SimhashIndex.open(env, b"simhash", k)
            bulk = SimhashIndex.open(env, b"bulk", k)  # the bench's loader gives the same index
            with env.begin(write=True) as txn:
                for doc, h in stored:
                    idx.add(txn, h, doc)
                bulk.add_many(txn, ((h, doc) for doc, h in stored))
            with env.begin() as txn:
                assert idx.count(txn) == bulk.count(txn) == len({(doc, h) for doc, h in stored})
                for q in queries:
                    for kk in range(k + 1):
                        assert idx.query(txn, q, kk) == bulk.query(txn, q, kk) == brute_force(stored, q, kk)
        finally:
            close_env(env)


def test_an_index_refuses_a_distance_it_cannot_guarantee(tmp_path) -> None:
    env = open_env(tmp_path / "e", sync=False)
    try:
        idx = SimhashIndex.open(env, b"s", 3)
        with env.begin() as txn, pytest.raises(ValueError):
            idx.query(txn, 0, 4)
    finally:
        close_env(env)
