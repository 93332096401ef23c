"""Per-host boilerplate blocks learned in rounds (crawl/dedupe/boilerplate.py), on real LMDB files.

Every test holds the learner to a plain model of the rules (count a round's
pages, freeze what reached the threshold, start again after so many
originals) while batches commit, fail, reload from disk or alternate with
another writer.
"""

from __future__ import annotations

import random
from pathlib import Path

import lmdb
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from crawl.core import close_env, open_env
from crawl.dedupe import Deduper
from crawl.dedupe.boilerplate import Boilerplate, HostBlocks, _cost


class Model:
    """The rules, written the obvious way: one host's rounds over its original pages."""

    def __init__(self, threshold: int, round_pages: int, every: int) -> None:
        self.threshold, self.round, self.every = threshold, round_pages, every
        self.hosts: dict[bytes, dict] = {}

    def _host(self, keys: list[bytes]) -> dict:
        return self.hosts.setdefault(keys[0][:8], {"boiler": set(), "counts": {}, "learned": 0, "since": 0})

    def kept(self, keys: list[bytes]) -> list[bool]:
        h = self._host(keys)
        return [k not in h["boiler"] and h["counts"].get(k, 0) < self.threshold for k in keys]

    def learn(self, keys: list[bytes]) -> None:
        h = self._host(keys)
        if h["learned"] == self.round:
            h["since"] += 1
            if h["since"] == self.every:
                h["learned"], h["since"] = 0, 0
            return
        for k in set(keys):
            h["counts"][k] = h["counts"].get(k, 0) + 1
        h["learned"] += 1
        if h["learned"] == self.round:
            h["boiler"] = {k for k, c in h["counts"].items() if c >= self.threshold}
            h["counts"] = {}


def key(host: int, block: int) -> bytes:
    # block keys ending in zero bytes on purpose: the stored form must keep them
    return host.to_bytes(8, "big") + (block << 8).to_bytes(8, "big")


def pages(rng: random.Random, n: int, hosts: int = 3) -> list[list[bytes]]:
    """Pages of a few hosts: a handful of template blocks, each on a share of
    the pages (some change half-way), plus blocks of their own."""
    out = []
    for i in range(n):
        h = rng.randrange(hosts)
        ks = [key(h, 1000 + t + (100 if i > n // 2 and t % 2 else 0))
              for t in range(6) if rng.random() < 0.3 + 0.1 * t]
        ks += [key(h, rng.randrange(1 << 20)) for _ in range(rng.randrange(0, 6))]
        out.append(ks or [key(h, 7)])
    return out


def run_batches(bp: Boilerplate, env: lmdb.Environment, batches: list[list[list[bytes]]]) -> list[list[bool]]:
    out = []
    for batch in batches:
        with env.begin(write=True) as txn:
            bp.begin(txn)
            for keys in batch:
                keep = bp.kept(keys)
                out.append([True] * len(keys) if keep is None else keep)
                bp.learn(keys)
            bp.flush()
        bp.committed()
    return out


def model_answers(m: Model, batches: list[list[list[bytes]]]) -> list[list[bool]]:
    out = []
    for batch in batches:
        for keys in batch:
            out.append(m.kept(keys))
            m.learn(keys)
    return out


def chunk(xs: list, rng: random.Random) -> list[list]:
    out, i = [], 0
    while i < len(xs):
        n = rng.randrange(1, 40)
        out.append(xs[i:i + n])
        i += n
    return out


@settings(max_examples=25, deadline=None)
@given(seed=st.integers(0, 2**32), threshold=st.integers(2, 5), round_pages=st.integers(5, 20),
       every=st.integers(1, 30), cache=st.sampled_from([1 << 19, 40, 1]))
def test_rounds_match_the_model_across_batches_reloads_and_evictions(
        tmp_path_factory: pytest.TempPathFactory, seed: int, threshold: int, round_pages: int,
        every: int, cache: int) -> None:
    rng = random.Random(seed)
    batches = chunk(pages(rng, 300), rng)
    env = open_env(tmp_path_factory.mktemp("bp"), sync=False)
    try:
        bp = Boilerplate(env, threshold=threshold, round_pages=round_pages, relearn_every=every,
                         cache_entries=cache)
        got = run_batches(bp, env, batches)
    finally:
        close_env(env)
    assert got == model_answers(Model(threshold, round_pages, every), batches)
    # the cache's running size is its true size, and within the bound
    assert bp._entries == sum(_cost(h) for h in bp.hosts.values()) <= max(cache, 0)
    assert any(not all(k) for k in got)  # something was learned and dropped


def test_two_writers_in_turn_each_see_the_others_pages(tmp_path: Path) -> None:
    """Two learners on one environment (two processes would be the same):
    the mark each batch leaves tells the other that its cache is stale, even
    after a batch of pages that taught nothing (a transaction that writes
    nothing does not use up an LMDB transaction id, so ids cannot tell)."""
    rng = random.Random(7)
    batches = chunk(pages(rng, 400), rng)
    env = open_env(tmp_path / "bp", sync=False)
    try:
        a, b = (Boilerplate(env, threshold=3, round_pages=12, relearn_every=10) for _ in range(2))
        got = []
        for i, batch in enumerate(batches):
            if i % 3 == 2:
                run_batches(a, env, [[]])  # nothing to learn, then the other writer's turn
            got += run_batches(a if i % 3 else b, env, [batch])
    finally:
        close_env(env)
    assert got == model_answers(Model(3, 12, 10), batches)


def test_a_damaged_state_is_learned_again_not_a_dead_end(tmp_path: Path) -> None:
    env = open_env(tmp_path / "bp", sync=False)
    try:
        counts: dict[str, int] = {}
        bp = Boilerplate(env, threshold=2, round_pages=4, counts=counts)
        run_batches(bp, env, [[[key(1, 1), key(1, 2)]] * 4])
        with env.begin(write=True) as txn:
            txn.put(key(1, 0)[:8], b"\x01\x04garbage", db=bp.db)
        fresh = Boilerplate(env, threshold=2, round_pages=4, counts=counts)
        got = run_batches(fresh, env, [[[key(1, 1), key(1, 2)]] * 3])
    finally:
        close_env(env)
    assert got == [[True, True], [True, True], [False, False]]
    assert counts == {"boilerplate_state_reset": 1}


def test_a_failed_batch_leaves_memory_and_disk_at_the_last_commit(tmp_path: Path) -> None:
    rng = random.Random(11)
    batches = chunk(pages(rng, 300), rng)
    env = open_env(tmp_path / "bp", sync=False)
    try:
        bp = Boilerplate(env, threshold=3, round_pages=10, relearn_every=8)
        got = []
        for i, batch in enumerate(batches):
            if i % 4 == 1:  # this batch fails half-way: nothing of it may count
                with pytest.raises(RuntimeError), env.begin(write=True) as txn:
                    try:
                        bp.begin(txn)
                        for keys in batch[: len(batch) // 2 + 1]:
                            bp.kept(keys)
                            bp.learn(keys)
                        raise RuntimeError("disk full")
                    except BaseException:
                        bp.forget()
                        raise
            got += run_batches(bp, env, [batch])
    finally:
        close_env(env)
    assert got == model_answers(Model(3, 10, 8), batches)


def test_state_survives_reopening(tmp_path: Path) -> None:
    """A round half-learned by one process is finished by the next."""
    shared = [key(1, b) for b in (1, 2)]
    env = open_env(tmp_path / "bp")
    try:
        bp = Boilerplate(env, threshold=3, round_pages=6)
        run_batches(bp, env, [[shared + [key(1, 100 + i)] for i in range(4)]])
    finally:
        close_env(env)
    env = open_env(tmp_path / "bp")
    try:
        bp = Boilerplate(env, threshold=3, round_pages=6)
        got = run_batches(bp, env, [[shared + [key(1, 200 + i)] for i in range(4)]])
        with env.begin() as txn:
            raw = txn.get(key(1, 0)[:8], db=bp.db)
    finally:
        close_env(env)
    assert got[0] == [False, False, True]  # on 4 earlier pages, counted by the first process
    st_ = HostBlocks.decode(raw, 3)
    assert st_.boiler == set(shared) and st_.learned == 6 and st_.counts == {} and st_.since == 2


def test_encoded_state_round_trips() -> None:
    st_ = HostBlocks()
    st_.boiler = {key(3, 0), key(3, 1)}
    st_.counts = {key(3, 5): 1, key(3, 6): 4, bytes(16): 7}
    st_.learned, st_.since = 7, 9
    back = HostBlocks.decode(st_.encode(64), threshold=4)
    assert back.boiler == st_.boiler and back.learned == 7 and back.since == 9
    assert back.counts == st_.counts
    assert back.hot == {key(3, 6), bytes(16)}
    with pytest.raises(ValueError, match="format"):
        HostBlocks.decode(b"\x09" + st_.encode(64)[1:], threshold=4)


def test_threshold_must_fit_in_a_round(tmp_path: Path) -> None:
    env = open_env(tmp_path / "bp", sync=False)
    try:
        with pytest.raises(ValueError, match="between 2 and"):
            Boilerplate(env, threshold=70, round_pages=64)
        with pytest.raises(ValueError, match="2 to 255"):
            Boilerplate(env, threshold=5, round_pages=256)
    finally:
        close_env(env)


def test_deduper_drops_the_old_per_block_table(tmp_path: Path) -> None:
    """Crawl directories from before the rounds have a table of every block ever seen."""
    env = open_env(tmp_path / "d")
    db = env.open_db(b"blocks")
    with env.begin(write=True) as txn:
        txn.cursor(db=db).putmulti([(i.to_bytes(16, "big"), b"\0\0\0\1") for i in range(5000)])
    close_env(env)
    with Deduper(tmp_path / "d") as dd, pytest.raises(lmdb.NotFoundError):
        dd.env.open_db(b"blocks", create=False)


def _dict_round(pages: list[list[bytes]], threshold: int) -> tuple[dict[bytes, int], set[bytes]]:
    """The counting the arrays replaced (a dict of keys), as the definition."""
    counts: dict[bytes, int] = {}
    hot: set[bytes] = set()
    for keys in pages:
        for k in dict.fromkeys(keys):
            counts[k] = counts.get(k, 0) + 1
            if counts[k] == threshold:
                hot.add(k)
    return counts, hot


@settings(max_examples=60, deadline=None)
@given(st.lists(st.lists(st.sampled_from([b"\x00" * 16, b"\x00" * 15 + b"\x01", b"\x01" + b"\x00" * 15,
                                          b"\xff" * 16, b"a" * 15 + b"\x00", b"b" * 16, b"a" * 16]),
                         max_size=12), max_size=20),
       st.integers(2, 6))
def test_array_counts_match_the_dict_counts(pages: list[list[bytes]], threshold: int) -> None:
    """Keys with trailing NUL bytes (which numpy's S16 drops on tolist()) and repeats on a page
    count exactly as the dict did, and survive the encoding."""
    hb = HostBlocks()
    for keys in pages:
        hb.count_page(keys, threshold)
    counts, hot = _dict_round(pages, threshold)
    assert hb.counts == counts and hb.hot == hot and len(hb) == len(counts)
    back = HostBlocks.decode(hb.encode(64), threshold)
    assert back.counts == counts and back.hot == hot
