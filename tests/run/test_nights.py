"""Night after night: the README's cron line, run unchanged three times against the test web.

The line and its ``nightly.toml`` are read from README.md itself (so the
documented example is the tested one); the test only points the paths at a
temporary directory and adds what the test web needs (its hosts file,
loopback addresses, a short delay: flags win over the config file). A
"night" is compressed into seconds: the test web's simulated clock moves
on a day between runs (page versions, ETags, Last-Modified follow it), and
the freshness model of the crawl dir is told to consider a page due again
after 2 s of real time instead of an hour (its saved ``max-interval``), as
a day of real time would make it.

Everything is checked from the crawl's own records: the crawl log's fetch
events, the WARC records they point to (read back with warcio), the
freshness model's observations, and the run-status each night leaves.
"""

from __future__ import annotations

import io
import re
import shlex
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import orjson
from conftest import ROOT, TESTWEB_CLOCK, TestWeb, start_testweb
from warcio.archiveiterator import ArchiveIterator

from crawl.core import CrawlDir
from crawl.frontier import Frontier
from crawl.recrawl import Recrawler
from crawl.run import read_log
from crawl.testweb.manifest import records_for

CRAWL = [sys.executable, "-m", "crawl"]
DAY = 86400.0
TEST_FLAGS = ["--delay", "0.05", "--response-factor", "1", "--parse-procs", "0", "--timeout", "3", "--connect-timeout", "3", "--idle-exit", "5s",
              "--progress", "plain", "--interval", "5s"]


def readme_cron() -> tuple[list[str], str]:
    """The cron line's command (up to the redirection) and the nightly.toml, from README.md."""
    text = (ROOT / "README.md").read_text()
    line = next(x.strip() for x in text.splitlines() if x.strip().startswith("0 2 * * * crawl run"))
    command = shlex.split(line.removeprefix("0 2 * * * ").split(">>")[0])
    m = re.search(r"\n    # nightly\.toml\n((?:    .+\n)+)", text)
    assert m, "README.md: the nightly.toml example is gone"
    toml = "".join(x[4:] + "\n" for x in m.group(1).splitlines())
    return command, toml


def warc_record(d: Path, ptr: dict[str, Any]) -> Any:
    """The WARC record a crawl-log pointer names, read with warcio; (type, headers)."""
    with open(d / "warc" / ptr["file"], "rb") as f:
        f.seek(ptr["offset"])
        data = f.read(ptr["length"])
    rec = next(iter(ArchiveIterator(io.BytesIO(data))))
    return rec.rec_type, rec.rec_headers


def versions(web: TestWeb, at: float) -> dict[str, int]:
    """URL -> Last-Modified of every ordinary HTML page at simulated time ``at`` (ground truth)."""
    return {p["url"]: p["last_modified"] for p in records_for(web.dir, now=at)
            if p.get("kind") == "page" and p.get("status") == 200 and not p.get("disallowed")
            and p.get("last_modified") is not None and str(p.get("content_type", "")).startswith("text/html")}


def test_the_readme_cron_line_crawls_again_every_night(tmp_path: Path) -> None:
    command, toml = readme_cron()
    srv = tmp_path / "srv"
    srv.mkdir()
    (srv / "nightly.toml").write_text(toml)
    with start_testweb(tmp_path / "w", hosts=4, seed=21, pages=6, links=3, mix="plain",
                       clock=TESTWEB_CLOCK, news=2) as web:
        (srv / "seeds.txt").write_text(web.seeds_file.read_text())
        args = [a.replace("/srv/crawl/", f"{srv}/") for a in command]
        assert args[:2] == ["crawl", "run"] and "--config" in args
        args = [*CRAWL, *args[1:], "--resolve-file", str(web.hosts_file), "--allow-private", *TEST_FLAGS]
        d = Path(args[args.index("--dir") + 1])
        with Recrawler(CrawlDir(d)) as rc:  # a "day" of the model is 2 s (module docstring)
            rc.configure(min_interval=1.0, max_interval=2.0)

        nights: list[tuple[float, float, dict[str, Any], str]] = []
        for night in range(3):
            if night:
                web.advance_clock(DAY)
                time.sleep(2.5)  # the model's "day"
            t0 = time.time()
            p = subprocess.run(args, capture_output=True, text=True, timeout=240)
            assert p.returncode == 0, p.stderr[-3000:]
            status = orjson.loads((d / "run-status.json").read_bytes())
            nights.append((t0, time.time(), status, p.stderr))

        events = [e for e in read_log(d / "log") if e.get("event") == "fetch"]

        def of_night(n: int) -> list[dict[str, Any]]:
            t0, t1, _, _ = nights[n]
            return [e for e in events if t0 <= e["ts"] <= t1]

        truth = [versions(web, TESTWEB_CLOCK + n * DAY) for n in range(3)]
        stored_first = {e["url"] for e in of_night(0) if e["outcome"] == "ok"}
        tracked = set(truth[0]) & stored_first  # the ordinary pages night 1 stored
        assert len(tracked) >= len(truth[0]) // 2, (len(tracked), len(truth[0]))
        truth = [{u: v[u] for u in tracked} for v in truth]
        total = 0
        for n in range(3):
            night = of_night(n)
            pages = [e for e in night if e["outcome"] in ("ok", "not-modified")]
            status, err = nights[n][2], nights[n][3]
            total += len(pages)
            # per run: every night crawls, whatever the crawl dir already holds
            assert status["pages"] == len(pages) > 0, (n, status["pages"], len(pages))
            assert status["pages_total"] == total
            assert status["cycle"] == n and status["stopping"] == "done"
            if n:
                assert f"cycle {n} starts" in err, err[-2000:]
        model = Recrawler(CrawlDir(d))
        try:
            for n in (1, 2):
                night = of_night(n)
                by_url: dict[str, list[dict[str, Any]]] = {}
                for e in night:
                    by_url.setdefault(e["url"], []).append(e)
                changed = {u for u in truth[n] if truth[n][u] != truth[n - 1][u]}
                unchanged = set(truth[n]) - changed
                assert changed and unchanged, "the web must have both kinds of page tonight"
                revisited = changed_seen = 0
                for url in changed:
                    got = by_url.get(url, [])
                    assert [e["outcome"] for e in got] == ["ok"], (n, url, got)
                    kind, headers = warc_record(d, got[0]["warc"])
                    before = [e for e in of_night(n - 1) if e["url"] == url and e["outcome"] == "ok"]
                    assert kind == "response"
                    if before:  # refetched and its payload is new
                        assert headers.get_header("WARC-Payload-Digest") != \
                            warc_record(d, before[-1]["warc"])[1].get_header("WARC-Payload-Digest")
                        changed_seen += 1
                for url in unchanged:
                    got = by_url.get(url, [])
                    for e in got:  # a 304 (a cheap revisit), or not fetched (the model's choice)
                        assert e["outcome"] == "not-modified", (n, url, e)
                        kind, headers = warc_record(d, e["warc"])
                        assert kind == "revisit" and "server-not-modified" in headers.get_header("WARC-Profile")
                        revisited += 1
                assert changed_seen and revisited, (n, changed_seen, revisited)
                # new links are followed: the articles a changed home page links to tonight
                homes = [u for u in changed if u.endswith("/")]
                fresh = {e["url"] for e in night if "/latest/" in e["url"] and e["outcome"] == "ok"}
                earlier = {e["url"] for m in range(n) for e in of_night(m) if "/latest/" in e["url"]}
                assert homes and fresh - earlier, (n, homes, sorted(fresh))
                for url in fresh - earlier:
                    assert url.rsplit("/", 2)[0] + "/" in homes
            # the freshness model saw the changes as changes and the 304s as none
            for url in (u for u in truth[2] if truth[2][u] != truth[1][u]):
                assert model.get(url)["obs"][-1][1] == 1, url
            for url in (u for u in truth[2] if truth[2][u] == truth[1][u] and u in truth[1]):
                page = model.get(url)
                if page["n"] > 1:
                    assert page["obs"][-1][1] == 0, url
        finally:
            model.close()


def test_a_new_cycle_with_the_separate_commands(tmp_path: Path) -> None:
    """The README's pipeline way (The frontier, Cycles): new-cycle, the seeds to
    ``frontier add`` directly (``crawl seen`` would filter them), then what is due."""
    with start_testweb(tmp_path / "w", hosts=2, seed=22, pages=3, links=2, mix="plain") as web:
        d = tmp_path / "c"
        with Recrawler(CrawlDir(d)) as rc:
            rc.configure(min_interval=1.0, max_interval=1.0)
        subprocess.run([*CRAWL, "run", "--dir", str(d), "--seeds", str(web.seeds_file), "--resolve-file",
                        str(web.hosts_file), "--allow-private", *TEST_FLAGS], check=True, capture_output=True,
                       timeout=240)
        seeds = web.seeds_file.read_text()

        def sh(*cmd: str, stdin: str = "") -> str:
            p = subprocess.run([*CRAWL, *cmd], input=stdin, capture_output=True, text=True, timeout=120)
            assert p.returncode == 0, (cmd, p.stderr[-2000:])
            return p.stdout

        def queued() -> int:
            with Frontier(CrawlDir(d).frontier) as fr:
                return fr.pending()["queued"]

        assert queued() == 0
        sh("frontier", "new-cycle", "--dir", str(d))
        assert sh("seen", "--dir", str(d), stdin=seeds) == ""  # why the seeds bypass crawl seen
        sh("frontier", "add", "--dir", str(d), stdin=seeds)
        assert queued() == len(seeds.split())
        time.sleep(1.5)  # the model's interval (1 s) has passed for every page
        sh("recrawl", "--dir", str(d), "--enqueue", "--limit", "100000")
        stored = {e["url"] for e in read_log(d / "log") if e.get("outcome") == "ok"}
        assert queued() == len(stored)  # every stored page is due again; the seeds once
        with Frontier(CrawlDir(d).frontier) as fr:
            leased = {x["url"] for x in fr.next(100, 60.0, time.time())}
        assert set(seeds.split()) <= leased


def test_a_host_whose_robots_txt_is_down_does_not_hold_the_next_cycle_back(tmp_path: Path) -> None:
    with start_testweb(tmp_path / "w", hosts=2, seed=23, pages=3, links=2, mix="500") as web:  # simple, 500
        [down] = web.with_behaviour("500")
        [up] = [h for h in web.host_names if h != down]
        d = tmp_path / "c"
        args = [*CRAWL, "run", "--dir", str(d), "--seeds", str(web.seeds_file), "--resolve-file",
                str(web.hosts_file), "--allow-private", *TEST_FLAGS, "--robots-retry", "1h", "--idle-exit", "1s"]
        for _ in range(2):
            p = subprocess.run(args, capture_output=True, text=True, timeout=240)
            assert p.returncode == 0, p.stderr[-3000:]
        st = orjson.loads((d / "run-status.json").read_bytes())
        assert "cycle 1 starts" in p.stderr and st["cycle"] == 1, p.stderr[-2000:]
        assert st["hosts_waiting_robots"] == 1 and st["urls_waiting_robots"] >= 1  # still kept queued
        home = web.url(up)
        visits = [e["outcome"] for e in read_log(d / "log") if e.get("event") == "fetch" and e["url"] == home
                  and e["outcome"] != "deferred"]  # (a lease spent on robots.txt)
        assert visits in (["ok", "not-modified"], ["ok", "ok"]), visits  # fetched again in cycle 1
