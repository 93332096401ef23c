"""crawl/recrawl/recrawler.py: history in LMDB, the schedule, pings, hints, budget; the CLI;
simulated-clock runs against the test web's change process; a real end-to-end
run against the test web with its clock advanced between rounds."""

from __future__ import annotations

import bisect
import random
import statistics
import subprocess
import sys
from pathlib import Path

import orjson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from crawl.core import CrawlDir, records
from crawl.frontier import Frontier, readd
from crawl.recrawl import Recrawler
from crawl.recrawl.freshness import DAY
from crawl.recrawl.recrawler import RecrawlConfig
from crawl.recrawl.sim import simulate, web_truth

HOUR = 3600.0
T0 = 1_780_000_000.0
ROOT = Path(__file__).resolve().parents[2]


def fetch(url: str, t: float, *, digest: str = "d", simhash: str | None = None,
          outcome: str = "ok", status: int = 200, **kw: object) -> dict:
    rec = records.make("fetch", url=url, outcome=outcome, status=status, digest=digest, fetched_at=t, **kw)
    if simhash is not None:
        rec["simhash"] = simhash
    return rec


@pytest.fixture
def rc(tmp_path: Path):
    with Recrawler(CrawlDir(tmp_path), RecrawlConfig(), sync=False) as r:
        yield r


# ---- observing fetch results -------------------------------------------------


def test_simhash_decides_change_digest_is_the_fallback_and_304_is_unchanged(rc: Recrawler) -> None:
    u = "http://a.test/p"
    # the payload digest changed (an advert rotated) but the boilerplate-free simhash did not
    got = [rc.observe([fetch(u, T0, digest="x1", simhash="00ff")], T0),
           rc.observe([fetch(u, T0 + HOUR, digest="x2", simhash="00ff")], T0 + HOUR),
           rc.observe([fetch(u, T0 + 2 * HOUR, digest="x3", simhash="0f0f")], T0 + 2 * HOUR),
           rc.observe([fetch(u, T0 + 3 * HOUR, outcome="not-modified", status=304, digest="x3")], T0 + 3 * HOUR)]
    assert [g["first"] for g in got] == [1, 0, 0, 0]
    assert [g["changed"] for g in got] == [0, 0, 1, 0]
    assert [g["unchanged"] for g in got] == [0, 1, 0, 1]
    page = rc.get(u)
    assert page["obs"] == [[HOUR, 0], [HOUR, 1], [HOUR, 0]]
    # no simhash on either side: the digest decides
    v = "http://a.test/q"
    rc.observe([fetch(v, T0, digest="a")], T0)
    rc.observe([fetch(v, T0 + HOUR, digest="b")], T0 + HOUR)
    assert rc.get(v)["obs"] == [[HOUR, 1]]


def test_a_repeated_result_changes_nothing(rc: Recrawler) -> None:
    u = "http://a.test/p"
    rc.observe([fetch(u, T0, digest="a"), fetch(u, T0 + DAY, digest="b")], T0 + DAY)
    before = rc.get(u)
    got = rc.observe([fetch(u, T0 + DAY, digest="b"), fetch(u, T0, digest="a")], T0 + DAY)
    assert got["repeat"] == 2 and got["observed"] == 0
    assert rc.get(u) == before


def test_next_fetch_follows_the_rate_within_the_clamps(tmp_path: Path) -> None:
    cfg = RecrawlConfig(policy="proportional", c=0.5, min_interval=HOUR, max_interval=30 * DAY)
    with Recrawler(CrawlDir(tmp_path), cfg, sync=False) as r:
        fast, slow = "http://a.test/fast", "http://a.test/slow"
        t = T0
        for i in range(20):
            r.observe([fetch(fast, t, digest=str(i)), fetch(slow, t, digest="same")], t)
            t += 6 * HOUR
        f, s = r.get(fast), r.get(slow)
        assert f["rate"] > 10 * s["rate"]
        assert f["next"] - f["last"] == pytest.approx(max(HOUR, 0.5 / (f["rate"] * f["imp"])), rel=1e-6)
        assert s["next"] - s["last"] == pytest.approx(min(30 * DAY, 0.5 / (s["rate"] * s["imp"])), rel=1e-6)
        assert HOUR <= f["next"] - f["last"] < s["next"] - s["last"] <= 30 * DAY


def test_history_beyond_the_window_is_folded_not_forgotten(tmp_path: Path) -> None:
    with Recrawler(CrawlDir(tmp_path), RecrawlConfig(window=8), sync=False) as r:
        u, t, rates = "http://a.test/static", T0, []
        for _ in range(40):
            r.observe([fetch(u, t, digest="same")], t)
            rates.append(r.get(u)["rate"])
            t += DAY
        page = r.get(u)
        assert len(page["obs"]) == 8
        assert page["old"][0] > 25 * DAY and page["old"][1] == 0  # 31 quiet days, decayed a little
        assert rates[-1] < rates[9] / 3  # confidence keeps growing past the window


def test_gone_pages_are_parked_at_the_longest_interval(rc: Recrawler) -> None:
    u = "http://a.test/gone"
    rc.observe([fetch(u, T0)], T0)
    rc.observe([fetch(u, T0 + DAY, outcome="http-error", status=404)], T0 + DAY)
    assert rc.get(u)["next"] == pytest.approx(T0 + DAY + rc.cfg.max_interval)
    # a timeout leaves the schedule to the frontier's retries
    before = rc.get(u)["next"]
    rc.observe([fetch(u, T0 + 2 * DAY, outcome="timeout", status=None)], T0 + 2 * DAY)
    assert rc.get(u)["next"] == before


def test_new_pages_start_from_their_host_average(rc: Recrawler) -> None:
    t = T0
    busy = [f"http://busy.test/{k}" for k in range(4)]
    for i in range(12):
        rc.observe([fetch(u, t, digest=f"{i}") for u in busy], t)  # changes every visit
        t += 2 * HOUR
    newbie = "http://busy.test/new"
    other = "http://quiet.test/new"
    rc.observe([fetch(newbie, t), fetch(other, t)], t)
    avg = statistics.mean(rc.get(u)["rate"] for u in busy)
    assert rc.get(newbie)["rate"] == pytest.approx(avg, rel=0.01)
    assert rc.get(other)["rate"] == pytest.approx(rc.cfg.default_rate, rel=0.01)


# ---- importance, hints, pings, due ----------------------------------------------


def test_links_raise_importance_and_shorten_the_interval(rc: Recrawler) -> None:
    a, b = "http://a.test/a", "http://a.test/b"
    rc.observe([fetch(a, T0), fetch(b, T0)], T0)
    links = [records.make("link", url=a, parent=f"http://a.test/p{k}", depth=2, source="a") for k in range(15)]
    links.append(records.make("link", url=a, parent="http://a.test/", depth=1, source="a"))
    links += links  # the same links again (a re-crawl of the parents) count once
    got = rc.observe_links(links, T0)
    assert got["links"] == 32
    pa = rc.get(a)
    assert len(pa["in"]) == 16 and pa["home"] and pa["depth"] == 1
    assert pa["imp"] > 2 * rc.get(b)["imp"]
    rc.observe([fetch(a, T0 + DAY), fetch(b, T0 + DAY)], T0 + DAY)
    assert rc.get(a)["next"] - T0 - DAY < rc.get(b)["next"] - T0 - DAY


def test_a_link_to_an_unknown_page_is_remembered_even_when_it_says_nothing_else(rc: Recrawler) -> None:
    u = "http://a.test/bare"
    assert rc.get(u) is None
    assert rc.observe_links([records.make("link", url=u)], T0)["links"] == 1
    assert rc.get(u) is not None and rc.get(u)["url"] == u


def test_a_batch_of_links_with_bad_fields_is_counted_not_fatal(rc: Recrawler) -> None:
    u = "http://a.test/x"
    links = [records.make("link", url=u, parent=["not", "a", "url"]),  # a parent that is no string
             records.make("link", url=u, parent="http://a.test/"),
             {"kind": "link", "v": 1, "url": 42},  # no usable URL
             {"kind": "fetch", "v": 1, "url": u}]  # not a link
    got = rc.observe_links(links, T0)
    assert got == {"links": 2, "hints": 0, "ignored": 2}
    assert rc.get(u)["home"] and len(rc.get(u)["in"]) == 1


def test_a_big_batch_of_links_commits_in_bounded_transactions_and_learns_each_link_once(rc: Recrawler) -> None:
    # One write transaction per OBSERVE_CHUNK URLs: LMDB keeps a transaction's dirty
    # pages for reuse while the environment is open, and these keys are hashes, so
    # one transaction for a whole batch's links left its size in heap (issue 19).
    from crawl.recrawl.recrawler import OBSERVE_CHUNK

    n = 2 * OBSERVE_CHUNK + 7
    urls = [f"http://h{i % 50}.test/page/{i}" for i in range(n)]
    links = [records.make("link", url=u, parent=f"http://h{i % 50}.test/", depth=1) for i, u in enumerate(urls)]
    before = rc.env.info()["last_txnid"]
    assert rc.observe_links(links, T0)["links"] == n
    assert rc.env.info()["last_txnid"] - before == 3  # ceil(n / OBSERVE_CHUNK), not one and not n
    assert all(len(rc.get(u)["in"]) == 1 for u in urls[:: OBSERVE_CHUNK // 3])
    # the same batch again (a re-run after a crash between two chunks) counts no parent twice
    rc.observe_links(links, T0 + 1)
    assert all(len(rc.get(u)["in"]) == 1 and rc.get(u)["home"] for u in urls[:: OBSERVE_CHUNK // 3])


def _resident(data_file: Path) -> int:
    """Bytes of ``data_file``'s mappings resident in this process (/proc/self/smaps)."""
    total, ours = 0, False
    for line in Path("/proc/self/smaps").read_text().splitlines():
        head = line.split(None, 5)
        if len(head) >= 5 and "-" in head[0] and ":" in head[3]:  # a mapping's first line
            ours = len(head) == 6 and head[5] == str(data_file)
        elif ours and line.startswith("Rss:"):
            total += int(line.split()[1]) * 1024
    return total


def test_a_batch_of_links_lets_go_of_the_map_pages_it_touched(rc: Recrawler) -> None:
    # Keys are hashes, so a batch reads pages all over the map and the kernel maps
    # 64 KB around each: before the trim inside observe_links, one batch of a
    # link-heavy crawl held the whole 160 MB file resident (issue 19).
    from crawl.core.maptrim import file_backed_bytes
    from crawl.recrawl.recrawler import TRIM_EVERY

    data = (Path(rc.env.path()) / "data.mdb").resolve()
    rc.observe_links([records.make("link", url=f"http://h{i % 97}.test/a/much/longer/path/{i}",
                                   parent=f"http://h{i % 97}.test/") for i in range(40_000)], T0)
    with rc.env.begin() as txn:  # map every page of the file
        assert sum(len(v) for _, v in txn.cursor(db=rc.pages)) > 5_000_000
    before = _resident(data)
    assert before > 5_000_000
    rc.trimmer.budget = file_backed_bytes() - 1  # type: ignore[operator]  # over it: the next look trims
    rc.trimmer.calls = 0  # that look comes with the batch's last URL (every TRIM_EVERY)
    rc.observe_links([records.make("link", url=f"http://new.test/{i}") for i in range(TRIM_EVERY)], T0)
    assert rc.trimmer.trims >= 1
    assert _resident(data) < 1_000_000  # one lookup and a commit since the trim
    assert len(rc.get("http://h5.test/a/much/longer/path/5")["in"]) == 1  # the data is all still there


def test_sitemap_lastmod_is_a_hint_ahead_of_the_model_and_changefreq_a_prior(rc: Recrawler) -> None:
    u, v = "http://a.test/news", "http://a.test/old"
    rc.observe([fetch(u, T0), fetch(v, T0)], T0)
    sm = [records.make("link", url=u, source="sitemap", parent="http://a.test/sitemap.xml",
                       lastmod="2026-05-29T10:00:00Z", changefreq="hourly"),
          records.make("link", url=v, source="sitemap", parent="http://a.test/sitemap.xml",
                       lastmod="2020-01-01", changefreq="yearly")]
    got = rc.observe_links(sm, T0 + DAY)
    assert got["hints"] == 1  # only the entry modified after our fetch
    assert rc.get(u)["rate"] > 100 * rc.get(v)["rate"]
    due = rc.due(T0 + DAY, 10)
    assert [(r["url"], r["reason"], r["priority"]) for r in due] == [(u, "hint", 0)]


def test_due_order_pings_first_then_the_most_overdue_and_reemit(rc: Recrawler) -> None:
    urls = [f"http://h{k}.test/" for k in range(3)]
    for k, u in enumerate(urls):
        rc.observe([fetch(u, T0 + k, etag=f'"e{k}"')], T0 + k)
    rc.ping(["http://new.test/pinged"], T0 + 10)
    late = T0 + 400 * DAY
    assert rc.backlog(late) == 4
    first = rc.due(late, 2)
    assert [r["url"] for r in first] == ["http://new.test/pinged", urls[0]]
    assert first[0]["reason"] == "ping" and first[0]["priority"] == 0
    assert first[1]["reason"] == "recrawl" and first[1]["etag"] == '"e0"'  # for a conditional GET
    assert rc.backlog(late) == 2
    assert [r["url"] for r in rc.due(late, 10)] == urls[1:]
    assert rc.due(late + 60, 10) == []  # emitted: not again until a result or reemit
    assert len(rc.due(late + rc.cfg.reemit, 10)) == 4


def test_a_ping_newer_than_the_fetch_result_stands(rc: Recrawler) -> None:
    u = "http://a.test/live"
    rc.observe([fetch(u, T0, digest="a")], T0)
    rc.ping([u], T0 + 100)
    rc.observe([fetch(u, T0 + 50, digest="b")], T0 + 120)  # started before the ping
    assert [r["reason"] for r in rc.due(T0 + 120, 5)] == ["ping"]
    rc.ping([u], T0 + 200)
    rc.observe([fetch(u, T0 + 300, digest="c")], T0 + 300)  # the ping's own fetch
    assert rc.due(T0 + 301, 5) == []


def test_allowance_is_a_token_bucket(rc: Recrawler) -> None:
    assert rc.allowance(T0, 2.0, burst=10) == 20  # a first run gets one burst
    assert rc.allowance(T0 + 1.25, 2.0, burst=10) == 2
    assert rc.allowance(T0 + 1.5, 2.0, burst=10) == 1  # 0.5 carried + 0.5
    assert rc.allowance(T0 + 10_000, 2.0, burst=10) == 20


def test_settings_are_saved_in_the_crawl_directory(tmp_path: Path) -> None:
    with Recrawler(CrawlDir(tmp_path)) as r:
        r.configure(budget=5.0, min_interval=600.0)
    with Recrawler(CrawlDir(tmp_path)) as r:
        assert (r.cfg.budget, r.cfg.min_interval, r.cfg.share) == (5.0, 600.0, 0.5)


def test_readd_requeues_done_urls_in_the_same_cycle(tmp_path: Path) -> None:
    u = "http://a.test:8080/page"
    with Frontier(CrawlDir(tmp_path).frontier) as fr:
        fr.add([records.make("url", url=u)], T0)
        lease = fr.next(1, 60, T0)[0]
        fr.complete([fetch(u, T0, lease=lease["lease"])], T0 + 1)
        assert fr.state_of(u) == "done"
        assert fr.add([records.make("url", url=u)], T0 + 2)["known"] == 1  # why readd exists
        got = readd(fr, [records.make("url", url=u, due=T0 + 100, priority=0, etag='"e"')], T0 + 2)
        assert got["added"] == 1 and fr.state_of(u) == "queued"
        assert readd(fr, [records.make("url", url=u)], T0 + 3)["known"] == 1  # still queued
        assert fr.next(1, 60, T0 + 50) == []  # not before its due time
        again = fr.next(1, 60, T0 + 101)
        assert [r["url"] for r in again] == [u] and again[0]["etag"] == '"e"'


def test_enqueue_due_moves_due_urls_into_the_frontier(tmp_path: Path) -> None:
    from crawl.frontier import enqueue_due

    cd = CrawlDir(tmp_path)
    urls = [f"http://h{k}.test:8080/" for k in range(5)]
    with Frontier(cd.frontier) as fr, Recrawler(cd, sync=False) as r:
        fr.add([records.make("url", url=u) for u in urls], T0)
        leases = fr.next(10, 60, T0)
        fr.complete([fetch(x["url"], T0, lease=x["lease"]) for x in leases], T0 + 1)
        r.observe([fetch(u, T0 + 1) for u in urls], T0 + 1)
        assert enqueue_due(r, fr, T0 + 2, 10)["emitted"] == 0  # nothing due yet
        later = T0 + 200 * DAY
        got = enqueue_due(r, fr, later, 3)
        assert got["emitted"] == 3 and got["added"] == 3
        assert r.backlog(later) == 2
        assert len(fr.next(10, 60, later)) == 3


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.tuples(st.sampled_from(["observe", "ping", "due", "link"]), st.integers(0, 5),
                          st.integers(0, 3), st.floats(0, 5 * DAY)), max_size=40))
def test_schedule_invariants_under_any_sequence(ops) -> None:
    """Whatever happens, every known page is scheduled at most once, a due
    batch never repeats a URL, and the backlog never exceeds what is scheduled."""
    import tempfile

    with tempfile.TemporaryDirectory() as d, Recrawler(CrawlDir(d), sync=False) as r:
        t = T0
        for op, k, v, dt in ops:
            t += dt
            u = f"http://h{k % 2}.test/{k}"
            if op == "observe":
                r.observe([fetch(u, t, digest=str(v))], t)
            elif op == "ping":
                r.ping([u], t)
            elif op == "link":
                r.observe_links([records.make("link", url=u, parent=f"http://h0.test/{v}", source="sitemap",
                                              lastmod="2030-01-01")], t)
            else:
                got = [x["url"] for x in r.due(t, v + 1)]
                assert len(got) == len(set(got)) <= v + 1
            st_ = r.stats(t)
            scheduled = sum(1 for j in range(6) if (p := r.get(f"http://h{j % 2}.test/{j}")) and p.get("slot"))
            assert st_["scheduled"] == scheduled
            assert st_["backlog"] <= st_["scheduled"]


# ---- simulated clock: the test web's change process --------------------------------


def test_simulated_testweb_learns_rates_fetches_fast_pages_more_and_beats_uniform(tmp_path: Path) -> None:
    """60 pages of the test web (hourly, daily, weekly and static pages), 21
    simulated days, 0.005 fetches/s (7 a page a day). Stated tolerances: the
    test web's pages change periodically, not as a Poisson process, so the
    Poisson estimator runs high on them; daily and weekly pages are within a
    factor 0.7-1.6 of the truth at the median (0.5-2.5 for every page), and
    rates order correctly across classes."""
    urls, version_at, truth = web_truth(0, 6, 10)
    cfg = RecrawlConfig(budget=0.005, share=1.0)
    with Recrawler(CrawlDir(tmp_path), cfg, sync=False) as r:
        res = simulate(r, urls, version_at, T0, 21 * DAY, tick=1800, warmup=7 * DAY,
                       per_second=cfg.budget, samples=300)
        by_rate: dict[float, list[tuple[float, int]]] = {}
        for u in urls:
            by_rate.setdefault(truth[u], []).append((r.get(u)["rate"], len(res.visits[u])))
    classes = sorted(by_rate)  # static, weekly, daily, hourly
    assert len(classes) == 4
    for true in (1 / DAY, 1 / (7 * DAY)):
        ratios = [est / true for est, _ in by_rate[true]]
        assert 0.7 < statistics.median(ratios) < 1.6, (true, ratios)
        assert all(0.5 < x < 2.5 for x in ratios), (true, ratios)
    medians = [statistics.median(est for est, _ in by_rate[c]) for c in classes]
    assert medians == sorted(medians) and len(set(medians)) == 4
    visits = [statistics.median(n for _, n in by_rate[c]) for c in classes]
    assert visits[0] < visits[1] < visits[2] < visits[3]  # pages that change often: fetched more
    assert res.fetches <= cfg.budget * 14 * DAY * 1.01  # the budget held
    assert res.freshness > res.uniform + 0.02, (res.freshness, res.uniform)


def test_simulated_poisson_pages_rates_within_25_percent(tmp_path: Path) -> None:
    """Pages whose changes *are* Poisson (known rates, seeded): after 60 days on
    the model's own irregular schedule every class's median estimate is within
    25% of the truth."""
    rng = random.Random(11)
    rates = {f"http://p.test/{k}": r for k, r in
             enumerate([1 / (6 * HOUR)] * 10 + [1 / DAY] * 10 + [1 / (4 * DAY)] * 10)}
    changes = {}
    for u, lam in rates.items():
        t, times = T0, []
        while t < T0 + 61 * DAY:
            t += rng.expovariate(lam)
            times.append(t)
        changes[u] = times

    def version_at(url: str, t: float) -> int:
        return bisect.bisect_right(changes[url], t)

    cfg = RecrawlConfig(budget=len(rates) * 4 / DAY, share=1.0, window=64)
    with Recrawler(CrawlDir(tmp_path), cfg, sync=False) as r:
        simulate(r, list(rates), version_at, T0, 60 * DAY, tick=1800, per_second=cfg.budget, samples=10)
        for lam in set(rates.values()):
            ratios = [r.get(u)["rate"] / lam for u in rates if rates[u] == lam]
            assert abs(statistics.median(ratios) - 1) < 0.25, (1 / lam, ratios)


# ---- the command -------------------------------------------------------------------


def crawl(*args: str, stdin: bytes = b"") -> subprocess.CompletedProcess[bytes]:
    return subprocess.run([sys.executable, "-m", "crawl", *args], input=stdin, capture_output=True,
                          cwd=ROOT, timeout=60)


def test_cli_observe_passes_through_ping_emit_enqueue_and_stats(tmp_path: Path) -> None:
    d = str(tmp_path / "c")
    u = "http://a.test:8080/x"
    lines = [orjson.dumps(fetch(u, T0, digest="a")), b"{broken", orjson.dumps(fetch(u, T0 + DAY, digest="b")),
             orjson.dumps(records.make("link", url=u, parent="http://a.test:8080/", source="a"))]
    p = crawl("recrawl", "observe", "--dir", d, "--strict", stdin=b"\n".join(lines) + b"\n")
    assert p.returncode == 3
    assert b"line 2: invalid JSON" in p.stderr
    out = [orjson.loads(x) for x in p.stdout.splitlines()]
    assert [r["kind"] for r in out] == ["fetch", "fetch", "link"]  # passed through, in order
    p = crawl("recrawl", "ping", "--dir", d, "--now", str(T0 + DAY), "http://a.test:8080/hot")
    assert p.returncode == 0 and b"1 URL(s) pinged" in p.stderr
    for _ in range(2):  # without --enqueue a dry run: the ping is shown, and still there
        p = crawl("recrawl", "--dir", d, "--now", str(T0 + DAY + 60))
        assert [orjson.loads(x)["url"] for x in p.stdout.splitlines()] == ["http://a.test:8080/hot"]
        assert b"dry run" in p.stderr
    p = crawl("recrawl", "--dir", d, "--now", str(T0 + 200 * DAY), "--enqueue")
    assert [orjson.loads(x)["reason"] for x in p.stdout.splitlines()] == ["ping", "recrawl"]
    with Frontier(CrawlDir(d).frontier) as fr:
        assert fr.state_of(u) == "queued"
    st = orjson.loads(crawl("recrawl", "stats", "--dir", d, "--json", "--now", str(T0 + 200 * DAY + 60)).stdout)
    assert st["pages"] == 2 and st["backlog"] == 0 and st["policy"] == "optimal"
    page = orjson.loads(crawl("recrawl", "stats", "--dir", d, "--url", u, "--json").stdout)
    assert page["obs"] == [[DAY, 1]] and page["home"]


def test_cli_from_log_catches_up_once(tmp_path: Path) -> None:
    from crawl.run.crawllog import CrawlLog, event_of

    d = tmp_path / "c"
    u = "http://a.test/x"
    log = CrawlLog(CrawlDir(d).log)
    for i in range(3):
        log.write([event_of(records.make("fetch", url=u, outcome="ok", digest=f"d{i % 2}"), T0 + i * HOUR)])
    for _ in range(2):  # the second run finds nothing new: history is unchanged
        p = crawl("recrawl", "--dir", str(d), "--from-log", "--now", str(T0 + 3 * HOUR))
        assert p.returncode == 0
        page = orjson.loads(crawl("recrawl", "stats", "--dir", str(d), "--url", u, "--json").stdout)
        assert page["n"] == 3 and page["obs"] == [[HOUR, 1], [HOUR, 1]]


def test_cli_budget_limits_each_run_and_bad_values_are_usage_errors(tmp_path: Path) -> None:
    d = str(tmp_path / "c")
    urls = [f"http://h{k}.test/" for k in range(30)]
    with Recrawler(CrawlDir(d)) as r:
        r.observe([fetch(u, T0) for u in urls], T0)
    later = T0 + 365 * DAY
    p = crawl("recrawl", "--dir", d, "--budget", "20/m", "--share", "0.5", "--now", str(later), "--enqueue")
    assert len(p.stdout.splitlines()) == 10  # the first run: a 60 s burst of 10/m
    p = crawl("recrawl", "--dir", d, "--now", str(later + 30))  # a dry run spends nothing
    assert len(p.stdout.splitlines()) == 5
    p = crawl("recrawl", "--dir", d, "--now", str(later + 30), "--enqueue")  # settings were saved
    assert len(p.stdout.splitlines()) == 5
    assert "backlog" in crawl("recrawl", "stats", "--dir", d).stdout.decode()
    st = orjson.loads(crawl("stats", "--dir", d, "--json").stdout)
    assert st["recrawl"]["backlog"] >= 15 and st["recrawl"]["pages"] == 30  # shows in crawl stats
    p = crawl("recrawl", "--dir", d, "--budget", "fast")
    assert p.returncode == 2 and b"expected a positive rate" in p.stderr
    p = crawl("recrawl", "--help")
    assert p.returncode == 0 and b"crawl recrawl ping" in p.stdout


def test_cli_without_enqueue_is_a_dry_run(tmp_path: Path) -> None:
    """`crawl recrawl --limit 5` only shows: the pings it lists are still there for the
    run that queues them (they used to be spent, and not emitted again for an hour)."""
    d = tmp_path / "c"
    urls = [f"http://a.test/p{i}" for i in range(8)]
    with Recrawler(CrawlDir(d)) as r:
        r.observe([fetch(u, T0) for u in urls], T0)
    p = crawl("recrawl", "ping", "--dir", str(d), "--now", str(T0 + 60), *urls)
    assert p.returncode == 0 and b"8 URL(s) pinged" in p.stderr
    before = (d / "recrawl" / "data.mdb").read_bytes()
    shown = []
    for _ in range(2):
        p = crawl("recrawl", "--dir", str(d), "--limit", "5", "--now", str(T0 + 120))
        shown.append([orjson.loads(x) for x in p.stdout.splitlines()])
        assert b"nothing changed" in p.stderr
    assert shown[0] == shown[1] and len(shown[0]) == 5  # the same five pings, twice
    assert {r["reason"] for r in shown[0]} == {"ping"}
    assert (d / "recrawl" / "data.mdb").read_bytes() == before  # not a byte written
    with Recrawler(CrawlDir(d)) as r:
        assert r.stats(T0 + 120)["pings"] == 8
    p = crawl("recrawl", "--dir", str(d), "--limit", "5", "--now", str(T0 + 120), "--enqueue")
    assert len(p.stdout.splitlines()) == 5
    with Recrawler(CrawlDir(d)) as r:
        assert r.stats(T0 + 120)["pings"] == 3


def test_cli_ping_validates_and_canonicalises(tmp_path: Path) -> None:
    d = tmp_path / "c"
    p = crawl("recrawl", "ping", "--dir", str(d), "http://a.test/ok", "ftp://x/", "http://h:99999/")
    assert p.returncode == 2 and b"Traceback" not in p.stderr
    assert b"unsupported-scheme" in p.stderr and b"invalid-port" in p.stderr and b"nothing was pinged" in p.stderr
    p = crawl("recrawl", "ping", "--dir", str(d), "HTTP://A.test:80/x/../news")
    assert p.returncode == 0
    with Recrawler(CrawlDir(d)) as r:
        assert r.get("http://a.test/news") is not None and r.stats(T0)["pings"] == 1


def test_cli_stats_for_people_and_json(tmp_path: Path) -> None:
    d = tmp_path / "c"
    u = "http://a.test/x"
    with Recrawler(CrawlDir(d)) as r:
        r.observe([fetch(u, T0, digest="a"), fetch(u, T0 + DAY, digest="b")], T0 + DAY)
    view = crawl("recrawl", "stats", "--dir", str(d), "--url", u, "--now", str(T0 + DAY)).stdout.decode()
    for label in ("last fetched", "change rate", "importance", "next visit", "payload digest then",
                  "recent visits"):
        assert label in view, view
    assert "UTC" in view and "1d changed" in view
    assert not any(line.split()[0] in ("hd", "hs", "imp", "slot", "obs") for line in view.splitlines())
    raw = orjson.loads(crawl("recrawl", "stats", "--dir", str(d), "--url", u, "--json").stdout)
    assert raw["obs"] == [[DAY, 1]] and "hd" in raw and raw["slot"][0] == 2
    view = crawl("recrawl", "stats", "--dir", str(d)).stdout.decode()
    assert "pages known" in view and "mu (optimal policy's multiplier)" in view


# ---- end to end: real fetches from the test web, clock advanced between rounds ------


def test_real_fetches_from_the_testweb_teach_the_model(tmp_path: Path) -> None:
    from conftest import start_testweb
    from fetchutil import run_batch

    with start_testweb(tmp_path, hosts=3, seed=2, pages=8, mix="plain", clock=T0) as web:
        pages = [p for p in web.pages.values()
                 if p["status"] == 200 and p["content_type"].startswith("text/html")
                 and not p["disallowed"] and p["url"].endswith((".html", "/"))]
        hourly = [p["url"] for p in pages if p["change_period"] == 3600]
        static = [p["url"] for p in pages if p["change_period"] is None]
        assert hourly and static
        urls = hourly[:3] + static[:3]
        d = tmp_path / "crawl"
        with Recrawler(CrawlDir(d), RecrawlConfig(), sync=False) as r:
            t = T0
            seen = {"changed": 0, "unchanged": 0, "not_modified": 0}
            for _ in range(4):
                res = run_batch(d, urls, web.hosts_file.read_text())
                assert {x["outcome"] for x in res} <= {"ok", "not-modified"}, res
                for x in res:  # the fetcher's clock is real; the web's is simulated
                    x["fetched_at"] = t
                seen["not_modified"] += sum(x["outcome"] == "not-modified" for x in res)
                got = r.observe(res, t)
                seen["changed"] += got["changed"]
                seen["unchanged"] += got["unchanged"]
                web.advance_clock(2 * HOUR)
                t += 2 * HOUR
            # hourly pages change every round (2 h apart); static pages answer 304
            assert seen["changed"] == 3 * len(hourly[:3])
            assert seen["unchanged"] == 3 * len(static[:3])
            assert seen["not_modified"] >= 3 * len(static[:3])
            # three visits each, and static pages share their hosts' (busy) prior: 2x apart already
            assert min(r.get(u)["rate"] for u in hourly[:3]) > 2 * max(r.get(u)["rate"] for u in static[:3])


def test_learn_link_says_when_a_link_told_nothing_new() -> None:
    from crawl.recrawl.page import learn_link

    page = {"url": "http://a.test/p", "host": "a.test", "obs": [], "last": 1000.0}
    link = {"kind": "link", "url": "http://a.test/p", "parent": "http://a.test/", "depth": 2}
    assert learn_link(page, link) == "changed"  # a new parent, the home page, a depth
    assert page["home"] and page["depth"] == 2 and len(page["in"]) == 1
    assert learn_link(page, link) == ""  # the same parent again: nothing to store
    assert learn_link(page, {**link, "depth": 1}) == "changed"  # shallower
    assert learn_link(page, {**link, "parent": "http://a.test/q"}) == "changed"
    sitemap = {**link, "source": "sitemap", "lastmod": "2026-01-01T00:00:00Z"}
    assert learn_link(page, sitemap) == "hint"  # lastmod after our last fetch


_PARENTS = st.sampled_from(["http://a.test/", "http://a.test/index.html", "http://a.test/x", "http://a.test/y",
                            "http://a.test/p", None, 7])
_LINKS = st.lists(st.fixed_dictionaries({
    "kind": st.just("link"), "url": st.just("http://a.test/p"), "parent": _PARENTS,
    "depth": st.one_of(st.none(), st.booleans(), st.integers(0, 6)),
    "source": st.sampled_from(["a", "a", "link", "sitemap", "feed", "redirect"]),
}), max_size=6)


@settings(max_examples=300, deadline=None)
@given(full=st.booleans(), home=st.booleans(), depth=st.one_of(st.none(), st.integers(0, 6)), links=_LINKS)
def test_a_saturated_page_skips_only_links_learn_link_would_learn_nothing_from(full: bool, home: bool, depth: int | None,
                                                                 links: list[dict]) -> None:
    """observe_links skips a page's links when the page is saturated and they bring no
    news for it (page.saturated, page.news_for): then learn_link
    returns "" for each of them and leaves the page as it was."""
    import copy

    from crawl.recrawl.page import MAX_IN, learn_link, news_for, saturated

    page: dict = {"url": "http://a.test/p", "host": "a.test", "obs": [], "last": 1000.0,
                  "in": [f"{i:010x}" for i in range(MAX_IN if full else 3)]}
    if home:
        page["home"] = True
    if depth is not None:
        page["depth"] = depth
    before = copy.deepcopy(page)
    skip = saturated(page) and not news_for(page.get("depth"), links)
    learned = [learn_link(page, rec) for rec in links]
    if skip:
        assert learned == [""] * len(links) and page == before
    if full and home and not any(learned) and page == before:
        assert skip  # and it does skip every such page (nothing but a full list or no home page refuses)


def test_a_saturated_page_is_not_read_again_and_still_learns_what_it_could(tmp_path: Path) -> None:
    """Issue 19: a navigation target (in-link list full, linked from a home page) was read
    and decoded once per batch for nothing. Remembered, it is read again only for a
    shallower link or a sitemap entry, and the pages stored end up exactly as without
    the memo (a second crawl directory, its memo emptied before every batch)."""
    from crawl.recrawl.page import MAX_IN

    target = "http://a.test/nav"

    def link(parent: str, depth: int, **extra: object) -> dict:
        return {"kind": "link", "v": 1, "url": target, "host": "a.test", "parent": parent,
                "depth": depth, "source": "a", **extra}

    filling = [link("http://a.test/", 2)] + [link(f"http://a.test/p{i}", 3) for i in range(MAX_IN + 5)]
    batches = [
        filling,  # saturates it (at depth 2)
        [link(f"http://a.test/q{i}", 3) for i in range(20)] + [link("http://a.test/r", 2)],  # nothing new
        [link("http://a.test/s", 1)],  # shallower: read and lowered
        [link("http://a.test/t", 1), link("http://a.test/u", 2)],  # nothing new at depth 1
        [link("http://a.test/sm.xml", 4, source="sitemap", lastmod="2030-01-01T00:00:00Z", changefreq="daily")],
    ]
    with Recrawler(CrawlDir(tmp_path / "memo"), RecrawlConfig(), sync=False) as r, \
            Recrawler(CrawlDir(tmp_path / "none"), RecrawlConfig(), sync=False) as plain:
        reads: list[str] = []
        real = r._get

        def spy(txn, key, url):  # noqa: ANN001, ANN202 - counts the reads of the memo'd one
            reads.append(url)
            return real(txn, key, url)

        r._get = spy  # type: ignore[method-assign]
        got = []
        for i, b in enumerate(batches):
            reads.clear()
            got.append(r.observe_links(b, 1000.0 + i))
            plain._saturated.clear()
            assert plain.observe_links(b, 1000.0 + i) == got[-1]  # the same counts
            got[-1] = (got[-1], len(reads))
        assert [n for _, n in got] == [1, 0, 1, 0, 1]  # read when new, shallower, a sitemap entry
        assert [c["links"] for c, _ in got] == [len(b) for b in batches]
        page = r.get(target)
        assert page == plain.get(target)
        assert page["depth"] == 1 and len(page["in"]) == MAX_IN and page["home"]
        assert page.get("cf") == "daily"  # the sitemap entry was learned


def test_the_saturated_memo_is_bounded_in_urls_and_characters(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The memo of saturated pages forgets everything once it would pass either bound
    (a crawl of long URLs must not hold megabytes of them), and learning stays right."""
    from crawl.recrawl import recrawler
    from crawl.recrawl.page import MAX_IN

    monkeypatch.setattr(recrawler, "SATURATED_CHARS", 400)
    targets = [f"http://a.test/{'n' * 60}{i}" for i in range(12)]  # ~75 characters each

    def links(url: str, depth: int) -> list[dict]:
        home = {"kind": "link", "v": 1, "url": url, "host": "a.test", "parent": "http://a.test/", "depth": depth}
        return [home] + [{**home, "parent": f"http://a.test/p{i}"} for i in range(MAX_IN + 1)]

    with Recrawler(CrawlDir(tmp_path), RecrawlConfig(), sync=False) as r:
        for t in targets:
            r.observe_links(links(t, 3), 1000.0)
            assert r._saturated_chars <= 400 and sum(map(len, r._saturated)) == r._saturated_chars
        assert 0 < len(r._saturated) <= 400 // 75
        r.observe_links([{**links(targets[0], 1)[0], "parent": "http://a.test/z"}], 1001.0)
        assert r.get(targets[0])["depth"] == 1  # forgotten or not, a shallower link still teaches


def test_fetch_history_is_written_later_in_bounded_commits(tmp_path: Path) -> None:
    """The fetch stage's validators (History.update_later) are merged in memory, seen
    by get at once, and written in one commit per FLUSH_URLS URLs or FLUSH_SECONDS,
    not one per stored group; update writes what waits first."""
    from crawl.core import close_env, open_env
    from crawl.recrawl.history import FLUSH_SECONDS, FLUSH_URLS, History

    env = open_env(tmp_path / "fetchstate")
    try:
        h, disk = History(env), History(env)  # disk: a reader with nothing pending
        n = 10 * FLUSH_URLS
        for i in range(n):  # one group of one page each, as a single host gives
            h.update_later([(f"http://a.test/{i}", {"etag": f"e{i}"})], now=100.0)
        assert h.commits == n // FLUSH_URLS  # 10, where update gave 640
        h.update_later([("http://a.test/0", {"status": 304})], now=100.0)
        assert h.get("http://a.test/0") == {"url": "http://a.test/0", "etag": "e0", "status": 304}
        assert disk.get("http://a.test/0") == {"url": "http://a.test/0", "etag": "e0"}  # not written yet
        h.update_later([("http://a.test/1", {"etag": None})], now=100.0 + FLUSH_SECONDS)  # the time bound
        assert disk.get("http://a.test/0")["status"] == 304 and disk.get("http://a.test/1") == {"url": "http://a.test/1"}
        h.update_later([("http://a.test/2", {"etag": "x"})], now=200.0)
        h.update([("http://a.test/2", {"status": 200})])
        assert disk.get("http://a.test/2") == {"url": "http://a.test/2", "etag": "x", "status": 200}
        h.update_later([("http://a.test/3", {"etag": "y"})], now=300.0)
        h.flush()  # as open_fetcher does at close
        assert disk.get("http://a.test/3") == {"url": "http://a.test/3", "etag": "y"}
    finally:
        close_env(env)
