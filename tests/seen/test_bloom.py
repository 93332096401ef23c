"""The blocked Bloom filter: no false negatives, a false-positive rate that
matches its sizing formula, and a file that survives a round trip."""

from __future__ import annotations

import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from crawl.seen import bloom
from crawl.seen.bloom import BloomFilter

fps = st.integers(min_value=0, max_value=(1 << 64) - 1)


@given(st.lists(fps, max_size=300), st.integers(1, 200))
@settings(max_examples=60, deadline=None)
def test_never_a_false_negative(keys: list[int], blocks: int) -> None:
    bf = BloomFilter(blocks, 5)
    bf.add_many(keys)
    assert all(bf.maybe_many(keys))
    assert all(k in bf for k in keys)


def test_patterns_have_exactly_k_distinct_bits_and_are_stable() -> None:
    for k in (1, 5, 9):
        pats = bloom.patterns(k)
        assert len(pats) == bloom.PATTERNS
        assert {p.bit_count() for p in pats} == {k}
        if k >= 5:
            assert len(set(pats)) > bloom.PATTERNS * 0.9
    # the table is part of the file format: check it against a plain rewrite
    for p in (0, 1, 777, bloom.PATTERNS - 1):
        assert bloom.patterns(5)[p] == _pattern_reference(p, 5)
        # 32 bits need several hashes of ten draws each: the draws' counter is in the format too
        assert bloom.patterns(32)[p] == _pattern_reference(p, 32)


@pytest.mark.parametrize("k", [1, 5, 7, 16])
def test_the_vectorised_table_is_the_loop_per_mask(k: int) -> None:
    """Every mask of the table built at once (the start-up path) equals the loop's."""
    assert bloom.patterns(k) == tuple(_pattern_reference(p, k) for p in range(bloom.PATTERNS))


def test_the_default_rates_loads_are_the_bisections() -> None:
    """The stored sizing of the default 1% rate is the bisection's result, bit for bit;
    another rate is searched."""
    for target, loads in bloom._KNOWN_LOADS.items():
        assert loads == tuple(bloom._search_load(k, target) for k in range(1, len(loads) + 1))
    assert bloom._best_load(5, 0.02) == bloom._search_load(5, 0.02) != bloom._best_load(5, 0.01)


def _pattern_reference(p: int, k: int) -> int:
    import xxhash

    mask, r, left, j = 0, 0, 0, 0
    while mask.bit_count() < k:
        if not left:
            r = xxhash.xxh3_64_intdigest(p.to_bytes(4, "big") + j.to_bytes(2, "big"))
            j, left = j + 1, 10
        mask |= 1 << (r & 63)
        r, left = r >> 6, left - 1
    return mask


@pytest.mark.parametrize("target", [0.05, 0.01, 0.002])
def test_measured_false_positive_rate_matches_sizing(target: float) -> None:
    n = 20_000
    bf = BloomFilter.for_capacity(n, target)
    rng = random.Random(int(target * 1e6))
    bf.add_many(rng.getrandbits(64) for _ in range(n))
    probes = 300_000
    hits = sum(bf.maybe_many([rng.getrandbits(64) for _ in range(probes)]))
    measured = hits / probes
    predicted = bf.expected_fp_rate()
    assert predicted <= target * 1.001  # sized to meet the target
    # binomial noise: allow 5 standard deviations around the prediction
    sd = (predicted * (1 - predicted) / probes) ** 0.5
    assert abs(measured - predicted) < 5 * sd + 1e-5, (measured, predicted)


def test_formula_agrees_with_an_overloaded_filter() -> None:
    bf = BloomFilter(500, 4)  # 32,000 bits
    rng = random.Random(7)
    bf.add_many(rng.getrandbits(64) for _ in range(8_000))  # 4 bits per key
    probes = 100_000
    measured = sum(bf.maybe_many([rng.getrandbits(64) for _ in range(probes)])) / probes
    predicted = bf.expected_fp_rate()
    assert 0.1 < predicted < 0.5
    assert abs(measured - predicted) / predicted < 0.05


def test_sizing_memory_is_near_the_textbook_figure() -> None:
    blocks, k = bloom.size_for(1_000_000, 0.01)
    bits_per_key = blocks * 64 / 1_000_000
    # a classic filter needs 9.6 bits/key at 1%; blocking costs a little more
    assert 9.6 < bits_per_key < 13.5
    assert 3 <= k <= 8
    with pytest.raises(ValueError):
        bloom.size_for(10, 0.0)


def test_save_and_load_round_trip(tmp_path) -> None:
    bf = BloomFilter.for_capacity(1000)
    bf.add_many(range(0, 1 << 60, 1 << 50))
    bf.covers = 1024
    path = tmp_path / "bloom.bin"
    bf.save(path)
    back = BloomFilter.load(path)
    assert back is not None
    assert (back.blocks, back.k, back.added, back.covers) == (bf.blocks, bf.k, bf.added, 1024)
    assert (back.words == bf.words).all()


@pytest.mark.parametrize("damage", ["missing", "empty", "magic", "short", "long"])
def test_a_damaged_file_loads_as_none(tmp_path, damage: str) -> None:
    path = tmp_path / "bloom.bin"
    bf = BloomFilter(16, 3)
    bf.save(path)
    data = path.read_bytes()
    if damage == "missing":
        path.unlink()
    elif damage == "empty":
        path.write_bytes(b"")
    elif damage == "magic":
        path.write_bytes(b"XXXXXXXX" + data[8:])
    elif damage == "short":
        path.write_bytes(data[:-5])
    else:
        path.write_bytes(data + b"\0")
    assert BloomFilter.load(path) is None


@pytest.mark.parametrize("rate", [0.6, 0.4, 0.3, 0.1, 0.01, 0.001])
def test_sizing_picks_the_least_memory_then_the_fewest_bits(rate: float) -> None:
    """Against every k tried one by one (no early stop): least blocks, and of equal
    memory the smallest k (fewer bits to set and test per key)."""
    import math

    n = 1000
    options = [(max(1, math.ceil(n / load)), k) for k in range(1, 17)
               if (load := bloom._best_load(k, rate)) > 0]
    assert bloom.size_for(n, rate) == min(options)


def test_sizing_refuses_what_no_blocked_filter_can_meet() -> None:
    with pytest.raises(ValueError, match="too low"):
        bloom.size_for(1000, 1e-12)
    for k in (0, 33):
        with pytest.raises(ValueError, match="between 1 and 32"):
            bloom.patterns(k)
