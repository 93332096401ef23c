"""crawl run end to end against the test web: coverage, politeness, crash safety.

Every claim here is checked from outside the crawler: the server's own
request log (audited with ``crawl testweb audit``), the manifest's ground
truth, and the WARC files and crawl log left in the crawl directory.
"""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import time
from collections import Counter, deque
from collections.abc import Callable
from pathlib import Path
from typing import Any

import orjson
import pytest
from conftest import TestWeb, start_testweb

from crawl.core import records
from crawl.run import read_log

CRAWL = [sys.executable, "-m", "crawl"]
DELAY = 0.2  # per-host delay for these tests (the audit checks the same number)
# --backoff-cap stays above the test web's longest Retry-After (an HTTP-date 3 s ahead):
# a cap below what a server asked for is a retry-after violation in the audit.
FAST = ["--timeout", "2", "--connect-timeout", "2", "--lease", "8s", "--idle-exit", "3s",
        "--progress", "plain", "--interval", "5s", "--backoff-base", "0.5s", "--backoff-cap", "4s",
        "--park-for", "3s"]


def run_args(web: TestWeb, d: Path, *extra: str) -> list[str]:
    return [*CRAWL, "run", "--dir", str(d), "--seeds", str(web.seeds_file),
            "--resolve-file", str(web.hosts_file), "--allow-private", "--scope", "any",
            "--delay", str(DELAY), *FAST, *extra]


def crawl(web: TestWeb, d: Path, *extra: str, timeout: float = 240) -> subprocess.CompletedProcess[str]:
    res = subprocess.run(run_args(web, d, *extra), capture_output=True, text=True, timeout=timeout)
    assert res.returncode == 0, res.stderr[-3000:]
    return res


def stored(d: Path) -> Counter[str]:
    """URL -> times it was stored as a page (crawl log: ok, or not-modified: a 304
    whose revisit record points at the copy stored before)."""
    return Counter(e["url"] for e in read_log(d / "log") if e.get("outcome") in ("ok", "not-modified"))


def audit(web: TestWeb, since: int = 0, until: int | None = None, delay: float = DELAY) -> dict[str, Any]:
    """``crawl testweb audit`` over the server's log, requests ``since`` .. ``until``
    (one crawl's share of a web that served several; a new crawl dir owes nothing
    to the requests of another)."""
    log = web.dir / f"audit-{since}-{until}.log"
    log.write_bytes(b"".join(orjson.dumps(r) + b"\n" for r in web.requests()[since:until]))
    res = subprocess.run([*CRAWL, "testweb", "audit", str(web.dir), "--log", str(log), "--delay", str(delay),
                          "--per-ip", "4", "--agent", "crawl", "--json"],
                         capture_output=True, text=True, timeout=120)
    lines = [orjson.loads(x) for x in res.stdout.splitlines() if x.strip()]
    violations = [x for x in lines if x.get("kind") == "violation"]
    return {"rc": res.returncode, "violations": violations, "summary": lines[-1] if lines else {}}


def assert_polite(web: TestWeb, since: int = 0, until: int | None = None, delay: float = DELAY) -> int:
    """Every end-to-end crawl ends here: the server saw no violation of any rule
    (overlap, gap, per-ip, disallowed, retry-after, backoff). Returns how many
    requests were audited, so a caller can tell the crawl reached the server."""
    a = audit(web, since, until, delay)
    assert a["violations"] == [], a["violations"][:10]
    assert a["rc"] == 0 and a["summary"]["kind"] == "audit", a
    n: int = a["summary"]["requests"]
    return n


def logged(web: TestWeb) -> int:
    """How many requests the server has logged so far (a mark for :func:`audit`)."""
    return len(web.requests())


def reachable(web: TestWeb) -> set[str]:
    """Manifest pages a correct crawler must store: HTML pages that are
    reachable from the seeds through followable links, allowed by robots, on
    hosts that answer normally."""
    seeds = web.seeds_file.read_text().split()
    todo, seen = deque(seeds), set(seeds)
    out = set()
    while todo:
        url = todo.popleft()
        page = web.pages.get(url)
        if page is None or page.get("disallowed") or page.get("status") != 200:
            continue
        if not str(page.get("content_type", "")).startswith("text/html"):
            continue
        if page.get("trap") or web.hosts[page["host"]]["behaviour"] != "plain":
            continue
        out.add(url)
        if "nofollow" in str(page.get("meta_robots") or ""):
            continue
        for link in page.get("links", []):
            if "nofollow" in link.get("rel", []) or link["url"] in seen:
                continue
            seen.add(link["url"])
            todo.append(link["url"])
    return out


def dup_scores(web: TestWeb, d: Path, stored_urls: set[str]) -> tuple[float, float]:
    """Recall over manifest duplicate pairs that were both stored; precision of
    the crawl's duplicate events against the manifest's groups."""
    parent: dict[str, str] = {}

    def root(u: str) -> str:
        while parent.get(u, u) != u:
            u = parent[u]
        return u

    pairs = []
    for url, page in web.pages.items():
        orig = page.get("duplicate_of") or page.get("near_duplicate_of")
        if orig:
            parent[root(url)] = root(orig)
            if url in stored_urls and orig in stored_urls:
                pairs.append((url, orig))
    flagged = {e["url"]: e["duplicate_of"] for e in read_log(d / "log") if e.get("event") == "duplicate"}
    found = sum(1 for u, o in pairs if u in flagged or o in flagged)

    def ordinary(u: str) -> bool:
        # Behaviour pages (charset, busy...) are byte-identical across hosts and
        # trap pages near-identical by design; the manifest does not group them.
        p = web.pages.get(u)
        return p is not None and not p.get("behaviour") and not p.get("trap")

    judged = {u: o for u, o in flagged.items() if ordinary(u) and ordinary(o)}
    right = sum(1 for u, o in judged.items() if root(u) == root(o))
    return (found / len(pairs) if pairs else 1.0), (right / len(judged) if judged else 1.0)


@pytest.fixture(scope="module")
def mixed_web(tmp_path_factory: pytest.TempPathFactory) -> Any:
    with start_testweb(tmp_path_factory.mktemp("runweb"), hosts=300, seed=3, pages=4, links=4,
                       latency=0.05, hang=3, busy=1) as web:
        yield web


def test_run_covers_the_web_politely(mixed_web: TestWeb, tmp_path: Path) -> None:
    d = tmp_path / "crawl"
    # --max-per-host bounds the trap hosts (whose robots.txt also asks for 2 s)
    res = crawl(mixed_web, d, "--json", "--max-per-host", "25", "--parse-procs", "1", timeout=280)
    final = orjson.loads(res.stdout.splitlines()[-1])
    assert final["stopping"] in ("done", "idle")
    got = stored(d)
    want = reachable(mixed_web)
    covered = len(want & set(got)) / len(want)
    print(f"\ncoverage of reachable allowed pages on plain hosts: {covered:.3%} "
          f"({len(want & set(got))}/{len(want)}); pages stored: {sum(got.values())}")
    assert covered == 1.0, sorted(want - set(got))[:10]
    # once per cycle: no URL stored twice
    assert max(got.values()) == 1
    # the server saw no politeness violation, no disallowed fetch, no Retry-After cut short
    assert assert_polite(mixed_web) > len(want)
    busy = [r for r in mixed_web.requests() if r.get("status") in (429, 503) and "crawl" in r.get("ua", "")]
    assert any(r.get("retry_after") for r in busy) and any("retry_after" not in r for r in busy)
    # near-duplicates and mirrors are flagged, and nothing distinct is merged
    recall, precision = dup_scores(mixed_web, d, set(got))
    print(f"duplicates: recall {recall:.1%}, precision {precision:.1%}")
    assert recall >= 0.9 and precision == 1.0
    # traps are bounded: no trap host got more than a small multiple of its real pages
    reqs = Counter(r["host"] for r in mixed_web.requests() if "crawl" in r.get("ua", ""))
    for host, rec in mixed_web.hosts.items():
        if rec.get("traps"):
            assert reqs[host] <= 25 + 2, (host, reqs[host])  # + robots.txt and a deferral


def test_sigkill_resume_gives_the_same_pages(tmp_path: Path) -> None:
    # 48 pages a host at 0.2 s: about 10 s of crawling, so a dozen kills 0.6-1.8 s
    # after each start land mid-crawl (with 16 pages a faster start-up finished the
    # crawl after 8 of them, and the later runs had nothing left to be killed in)
    with start_testweb(tmp_path / "w", hosts=40, seed=5, pages=48, links=4, mix="plain") as web:
        ref = tmp_path / "ref"
        crawl(web, ref)
        want = set(stored(ref))
        assert len(want) > 200
        mark = logged(web)
        assert_polite(web, 0, mark)

        d = tmp_path / "killed"
        rng = random.Random(11)
        kills = 0
        for i in range(30):
            if kills >= 12:
                break
            # alternate: parse side in-process, then in a child process
            extra = ("--parse-procs", "1") if i % 2 else ("--parse-procs", "0")
            proc = subprocess.Popen(run_args(web, d, *extra), stdout=subprocess.DEVNULL,
                                    stderr=subprocess.DEVNULL, start_new_session=True)
            time.sleep(rng.uniform(0.6, 1.8))
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGKILL)  # the whole process tree
                kills += 1
            proc.wait()
        crawl(web, d)  # resume to the end
        got = stored(d)
        assert kills >= 10
        assert set(got) == want, (sorted(want - set(got))[:5], sorted(set(got) - want)[:5])
        # at-least-once: only a few pages (those in flight at a kill) may be stored twice
        assert sum(got.values()) - len(got) <= kills * 64
        # politeness survives SIGKILL: the frontier's durable host times and leases
        # hold across the restarts, so the server saw one polite crawl
        assert_polite(web, mark)


def sigterm_after(args: list[str], path: Path, settle: float,
                  ready: Callable[[], bool] | None = None) -> tuple[int, str, str, float]:
    """Start ``args``; once ``path`` exists (and ``ready()`` says so) and ``settle``
    seconds more have passed, SIGTERM it. Returns exit status, stdout, stderr and
    seconds from signal to exit."""
    proc = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 60
    while not (path.exists() and (ready is None or ready())) and time.monotonic() < deadline:
        time.sleep(0.02)
    time.sleep(settle)
    t0 = time.monotonic()
    proc.send_signal(signal.SIGTERM)
    out, err = proc.communicate(timeout=120)
    return proc.returncode, out, err, time.monotonic() - t0


def test_sigterm_stops_quickly_commits_and_resumes(tmp_path: Path) -> None:
    with start_testweb(tmp_path / "w", hosts=30, seed=9, pages=8, links=4, mix="plain") as web:
        d = tmp_path / "c"
        # signal once the loop runs (start-up on a loaded machine can take seconds)
        rc, out, err, took = sigterm_after(run_args(web, d, "--parse-procs", "1"),
                                           d / "run-status.json", settle=2.0)
        assert rc == 0, err[-2000:]
        assert "signal SIGTERM" in err
        assert took < 120  # did not hang (how quickly is what "signal SIGTERM" above says)
        before = set(stored(d))
        crawl(web, d)
        after = stored(d)
        assert before <= set(after)
        mark = logged(web)
        assert_polite(web, 0, mark)  # the stopped crawl and its resumption, as one
        ref = tmp_path / "ref"
        crawl(web, ref)
        assert set(after) == set(stored(ref))
        assert_polite(web, mark)


def test_sigterm_while_seeding_stops_cleanly(tmp_path: Path) -> None:
    """A signal before the loop is up (a long seed list being admitted) still ends
    the run cleanly: exit 0, stopped by the signal, nothing leased. (The next run
    admits the rest: every run admits all its seeds, and admission is idempotent.)"""
    seeds = tmp_path / "seeds.txt"
    seeds.write_text("".join(f"http://h{i % 3000}.test/p{i}\n" for i in range(200_000)))
    hosts = tmp_path / "hosts"
    hosts.write_text("# no names: nothing may be fetched\n")
    d = tmp_path / "c"
    args = [*CRAWL, "run", "--dir", str(d), "--seeds", str(seeds), "--resolve-file", str(hosts),
            "--scope", "any", "--progress", "none", "--json"]
    from crawl.core import CrawlDir
    from crawl.frontier import Frontier

    def queued() -> int:
        with Frontier(CrawlDir(d).frontier) as fr:
            return fr.pending()["queued"]

    # the handler is in place before the dir; signal once the first chunk of seeds is in
    # (on a loaded machine that can take longer than any fixed wait)
    def some_queued() -> bool:
        try:
            return queued() > 0
        except Exception:  # the run is still creating the frontier
            return False

    rc, out, err, took = sigterm_after(args, CrawlDir(d).frontier / "data.mdb", settle=0.0, ready=some_queued)
    assert rc == 0, err[-2000:]
    final = orjson.loads(out.splitlines()[-1])
    assert final["stopping"] == "signal SIGTERM" and final["fetched"] == 0
    assert took < 120  # did not hang; that the signal stopped it is the line above
    assert 0 < queued() <= 200_000


def test_budgets_and_scope(tmp_path: Path) -> None:
    with start_testweb(tmp_path / "w", hosts=20, seed=4, pages=10, links=4, mix="plain") as web:
        d = tmp_path / "c"
        # a roomy idle exit: on a loaded machine hosts in timeout backoff must not end it early
        crawl(web, d, "--max-pages", "40", "--idle-exit", "30s")
        assert 40 <= sum(stored(d).values()) < 40 + 64  # in-flight fetches finish
        mark = logged(web)
        assert_polite(web, 0, mark)
        d2 = tmp_path / "c2"
        first = web.seeds_file.read_text().split()[0]
        subprocess.run([*CRAWL, "run", "--dir", str(d2), first, "--scope", "host",
                        "--resolve-file", str(web.hosts_file), "--allow-private", "--delay", "0.05",
                        "--max-depth", "1", *FAST], check=True, capture_output=True, timeout=120)
        hosts = {u.split("/")[2] for u in stored(d2)}
        assert hosts == {first.split("/")[2]}
        depth_ok = {e["url"]: e.get("depth", 0) for e in read_log(d2 / "log")}
        assert max(depth_ok.values()) <= 1
        assert_polite(web, mark, delay=0.05)


def test_config_file_and_flags(tmp_path: Path) -> None:
    cfg = tmp_path / "c.toml"
    cfg.write_text('max-pages = 3\nscope = "nowhere"\n')
    res = subprocess.run([*CRAWL, "run", "--dir", str(tmp_path / "d"), "--config", str(cfg),
                          "http://a.test/"], capture_output=True, text=True, timeout=60)
    assert res.returncode == 2 and "nowhere" in res.stderr
    cfg.write_text("max_pagez = 3\n")
    res = subprocess.run([*CRAWL, "run", "--dir", str(tmp_path / "d"), "--config", str(cfg),
                          "http://a.test/"], capture_output=True, text=True, timeout=60)
    assert res.returncode == 2 and "unknown setting" in res.stderr


def test_recrawl_mode_refetches_pinged_pages_conditionally(tmp_path: Path) -> None:
    with start_testweb(tmp_path / "w", hosts=6, seed=8, pages=4, links=3, mix="plain") as web:
        d = tmp_path / "c"
        crawl(web, d)
        first = stored(d)
        pinged = sorted(first)[:3]
        subprocess.run([*CRAWL, "recrawl", "ping", "--dir", str(d), *pinged], check=True,
                       capture_output=True, timeout=60)
        # --cycle continue: only what the pings re-admit (the default, auto, would start
        # a new cycle here and fetch the seeds again: tests/run/test_nights.py)
        crawl(web, d, "--recrawl", "--duration", "6s", "--cycle", "continue")
        events = [e for e in read_log(d / "log") if e.get("event") == "fetch"]
        again = Counter(e["url"] for e in events if e.get("outcome") in ("ok", "not-modified"))
        for url in pinged:
            assert again[url] == 2, (url, again[url])
        # the re-fetch was conditional: the unchanged page answered 304
        assert any(e["url"] in pinged and e.get("outcome") == "not-modified" for e in events)
        # nothing else was fetched twice
        assert all(n == 1 for u, n in again.items() if u not in pinged)
        # both runs on one crawl dir: the second keeps the host times the first left
        assert_polite(web)


def test_leasing_waits_while_the_parse_side_is_behind(tmp_path: Path) -> None:
    """Backpressure: with max_backlog fetch results unparsed, no lease goes out until
    the parse side acknowledges some (a --duration run then ends on time)."""
    import threading

    from crawl.core import CrawlDir
    from crawl.run import Crawl, RunOptions

    opts = RunOptions(max_backlog=3)
    opts.scope.mode = "any"
    cr = Crawl(CrawlDir(tmp_path / "c"), opts)
    try:
        assert cr.seed(["http://a.test/", "http://b.test/"])["added"] == 2
        cr.fetched.put([records.make("fetch", url=f"http://x.test/{i}", outcome="ok") for i in range(3)])
        timer = threading.Timer(0.3, lambda: setattr(cr, "stopping", "test"))
        timer.start()
        assert list(cr.lease_batches(10)) == []  # held back until stopped
        timer.join()
        assert cr.progress.backpressure > 0 and cr.status(time.time())["unparsed"] == 3
        claimed = cr.fetched.claim(3)
        cr.fetched.ack(k for k, _ in claimed)
        cr.stopping = ""
        batch = next(cr.lease_batches(10))
        assert {lease["url"] for lease in batch.records} == {"http://a.test/", "http://b.test/"}
    finally:
        cr.close()
