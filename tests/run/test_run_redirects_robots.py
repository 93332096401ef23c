"""Hostile hosts end to end: redirect chains that never end, robots.txt that will not answer.

Against private test webs, counted from the server's own request log and
held to the server-side politeness audit: a redirect chain, same-host or
bouncing between hosts, is followed for five hops and no further, in
``crawl run`` and in ``bin/crawl-pipeline``; a host whose robots.txt answers
500 or times out gets nothing but robots.txt requests until it answers, and
then its pages are crawled -- its URLs waited, queued, in between.
"""

from __future__ import annotations

import os
import subprocess
import time
from collections import Counter, deque
from pathlib import Path
from typing import Any

import orjson
from conftest import ROOT, TestWeb, start_testweb
from test_run import CRAWL, DELAY, FAST

from crawl.run import read_log
from crawl.testweb.audit import audit
from crawl.testweb.rules import rules_disallow


def run(web: TestWeb, d: Path, seeds: list[str], *extra: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    seeds_file = d.parent / f"{d.name}-seeds.txt"
    seeds_file.write_text("".join(u + "\n" for u in seeds))
    res = subprocess.run([*CRAWL, "run", "--dir", str(d), "--seeds", str(seeds_file),
                          "--resolve-file", str(web.hosts_file), "--allow-private", "--scope", "any",
                          "--delay", str(DELAY), *FAST, *extra], capture_output=True, text=True, timeout=timeout)
    assert res.returncode == 0, res.stderr[-3000:]
    return res


def polite(web: TestWeb, since: int = 0) -> list[dict[str, Any]]:
    """The crawler's requests from number ``since`` on, after the audit found nothing wrong."""
    reqs = [r for r in web.requests(since) if r.get("ua", "").startswith("crawl/")]
    violations = audit(reqs, web.hosts, delay=DELAY, per_ip=4, agent="crawl")
    assert violations == [], violations[:5]
    assert reqs
    return reqs


def paths(reqs: list[dict[str, Any]], host: str, prefix: str) -> Counter[str]:
    return Counter(r["path"] for r in reqs if r["host"] == host and r["path"].startswith(prefix))


def fetches(d: Path) -> dict[str, dict[str, Any]]:
    return {e["url"]: e for e in read_log(d / "log") if e.get("event") == "fetch"}


# -- redirects -----------------------------------------------------------------------------


def check_chains(reqs: list[dict[str, Any]], a: str, b: str) -> None:
    """chain-30 on a, across-20 from b to a and back: six requests each (the start and
    five redirects followed), never the seventh; every request once."""
    long = Counter({p: n for p, n in paths(reqs, a, "/redirect/chain-").items() if int(p.rsplit("-", 1)[1]) > 5})
    assert long == Counter(f"/redirect/chain-{n}" for n in range(25, 31))
    across = paths(reqs, a, "/redirect/across-") + paths(reqs, b, "/redirect/across-")
    assert across == Counter(f"/redirect/across-{n}" for n in range(15, 21))
    assert {r["host"] for r in reqs if r["path"] == "/redirect/across-17"} == {a}  # it did cross


def test_redirect_chains_stop_after_five_hops_in_crawl_run(tmp_path: Path) -> None:
    # --mix redirects: hosts 1 and 3 redirect, across-N bounces between them
    with start_testweb(tmp_path / "w", hosts=4, seed=31, pages=4, links=2, mix="redirects") as web:
        a, b = web.with_behaviour("redirects")
        d = tmp_path / "crawl"
        # --max-depth cannot end a chain (a redirect keeps its depth); the hop count does
        run(web, d, [web.url(a, "/redirect/chain-30"), web.url(b, "/redirect/across-20"), web.url(a, "/")],
            "--max-depth", "1")
        reqs = polite(web)
        check_chains(reqs, a, b)
        # the test web's own chain-5, linked from the home page: each of its six redirects
        # requested once (chain-0's is the sixth: not followed); the loop ends at the seen set
        short = Counter({p: n for p, n in paths(reqs, a, "/redirect/chain-").items()
                         if int(p.rsplit("-", 1)[1]) <= 5})
        assert short == Counter(f"/redirect/chain-{n}" for n in range(6)), short
        assert paths(reqs, a, "/redirect/loop-") == Counter(["/redirect/loop-a", "/redirect/loop-b"])
        got = fetches(d)
        for url in (web.url(a, "/redirect/chain-25"), web.url(a, "/redirect/across-15")):
            assert got[url]["outcome"] == "redirect-limit" and got[url]["hops"] == 5, got[url]
        assert got[web.url(a, "/redirect/chain-26")]["outcome"] == "redirect"
        assert got[web.url(a, "/redirect/chain-26")]["hops"] == 4
        target = web.pages[web.url(a, "/redirect/chain-0")]["location"]
        assert got[target]["outcome"] == "ok"  # chain-0's target still came, by its own link


def test_redirect_chains_stop_after_five_hops_in_the_pipeline(tmp_path: Path) -> None:
    # Every round of the pipeline starts seven processes, so the chain starts at four hops
    # already (a seed record may say so): the count must survive fetch, parse, seen and
    # frontier add, and a host boundary, for the fifth redirect to be the last one followed.
    with start_testweb(tmp_path / "w", hosts=4, seed=33, pages=4, links=2, mix="redirects") as web:
        a, b = web.with_behaviour("redirects")
        seeds = tmp_path / "seeds.ndjson"
        seeds.write_bytes(orjson.dumps({"kind": "url", "url": web.url(b, "/redirect/across-20"), "hops": 4}) + b"\n")
        env = {**os.environ, "POLITE": f"--delay {DELAY}", "CRAWL": " ".join(CRAWL)}
        res = subprocess.run([str(ROOT / "bin" / "crawl-pipeline"), str(tmp_path / "pipe"), str(seeds),
                              "--resolve-file", str(web.hosts_file), "--allow-private", "--timeout", "2"],
                             env=env, capture_output=True, text=True, timeout=300)
        assert res.returncode == 0, res.stderr[-3000:]
        reqs = polite(web)
        assert paths(reqs, b, "/redirect/") == Counter(["/redirect/across-20"])
        assert paths(reqs, a, "/redirect/") == Counter(["/redirect/across-19"])  # hop 5, on a: not followed
        last = orjson.loads((tmp_path / "pipe" / "fetched.ndjson").read_text().splitlines()[-1])
        assert (last["url"], last["outcome"], last["hops"]) == (web.url(a, "/redirect/across-19"), "redirect-limit", 5)


# -- robots.txt that cannot be read ---------------------------------------------------------


def allowed_pages(web: TestWeb, hosts: set[str]) -> set[str]:
    """HTML pages of ``hosts`` reachable from their home pages, allowed by the rules their
    robots.txt has once it answers (``recovered_rules``) or always had."""
    out: set[str] = set()
    todo = deque(web.url(h, "/") for h in hosts)
    seen = set(todo)
    while todo:
        url = todo.popleft()
        page = web.pages.get(url)
        if page is None or page["host"] not in hosts or page["status"] != 200:
            continue
        robots = web.hosts[page["host"]]["robots"]
        if rules_disallow(robots.get("recovered_rules", robots["rules"]), page["path"]):
            continue
        if not str(page.get("content_type", "")).startswith("text/html"):
            continue
        out.add(url)
        for link in page["links"]:
            if link["url"] not in seen and "nofollow" not in link.get("rel", []):
                seen.add(link["url"])
                todo.append(link["url"])
    return out


def before_robots_answered(reqs: list[dict[str, Any]], host: str) -> list[tuple[str, int]]:
    """(path, status) of every request to ``host`` up to its first robots.txt answered 200."""
    out = []
    for r in reqs:
        if r["host"] == host:
            out.append((r["path"], r["status"]))
            if r["path"] == "/robots.txt" and r["status"] == 200:
                break
    return out


def test_a_host_whose_robots_txt_fails_waits_then_is_crawled(tmp_path: Path) -> None:
    # h0001: robots.txt answers 500, h0002: it hangs past --timeout; twice each, then 200
    with start_testweb(tmp_path / "w", hosts=3, seed=32, pages=4, links=2, mix="500,timeout",
                       robots_recover=2, hang=4) as web:
        r500, rhang = web.with_behaviour("500")[0], web.with_behaviour("timeout")[0]
        d = tmp_path / "crawl"
        # a timed-out check is a slow answer, and the frontier waits k x its time: k = 1 here
        res = run(web, d, [web.url(r500, "/"), web.url(rhang, "/")], "--robots-retry", "1s",
                  "--timeout", "1", "--response-factor", "1")
        reqs = polite(web)
        # before robots.txt answered, the server saw robots.txt requests and nothing else
        assert before_robots_answered(reqs, r500) == [("/robots.txt", 500)] * 2 + [("/robots.txt", 200)]
        assert before_robots_answered(reqs, rhang) == [("/robots.txt", 0)] * 2 + [("/robots.txt", 200)]
        # ... and then its pages were fetched, none lost to the wait
        want = allowed_pages(web, {r500, rhang})
        got = {u for u, e in fetches(d).items() if e["outcome"] == "ok"}
        assert len(want) >= 4 and want <= got, sorted(want - got)
        for host in (r500, rhang):
            assert f"robots.txt of {host}:{web.port} is unreachable" in res.stderr, res.stderr[-2000:]
            assert f"robots.txt of {host}:{web.port} can be read again after 2 failed checks" in res.stderr
        last = fetches(d)
        assert not [u for u, e in last.items() if e["outcome"] == "robots-unreachable"]  # every URL got on
        assert all("/private/" in u for u, e in last.items() if e["outcome"] == "robots-disallowed")
        log = Counter(e["outcome"] for e in read_log(d / "log") if e.get("event") == "fetch")
        assert log["robots-unreachable"] == 4  # two failed checks per host, one result each


def test_urls_stay_queued_across_runs_and_the_operator_is_told(tmp_path: Path) -> None:
    with start_testweb(tmp_path / "w", hosts=2, seed=34, pages=5, links=2, mix="500",
                       robots_recover=1) as web:
        host = web.with_behaviour("500")[0]
        key = f"{host}:{web.port}"
        urls = [p["url"] for p in web.pages_of(host) if p["path"] != "/robots.txt"]
        d = tmp_path / "crawl"
        # the first run gives up waiting (idle) before the next robots.txt check
        started = time.time()
        first = run(web, d, urls, "--robots-retry", "5s", "--idle-exit", "1s", "--json")
        final = orjson.loads(first.stdout.splitlines()[-1])
        assert final["stopping"] == "idle" and final["queued"] == len(urls)
        assert final["hosts_waiting_robots"] == 1 and final["urls_waiting_robots"] == len(urls)
        [w] = final["robots_waiting"]
        assert (w["host"], w["urls"], w["checks"], w["status"]) == (key, len(urls), 1, 500)
        # the next check is --robots-retry after the failed one, made during this run
        # (not "after the run's end": a loaded machine can take 5 s to go idle and stop)
        assert started + 5 <= w["next_check"] <= final["ts"] + 5 + 1
        assert f"is unreachable (robots.txt returned 500): nothing is fetched there, {len(urls)} URLs " \
               "kept queued; next check" in first.stderr
        assert f"waiting on an unreachable robots.txt (1 host, {len(urls)} URLs" in first.stderr
        assert f"{key}: {len(urls)} URLs waiting, next check" in first.stderr
        assert [r["path"] for r in polite(web) if r["host"] == host] == ["/robots.txt"]
        st = subprocess.run([*CRAWL, "stats", "--dir", str(d), "--json"], capture_output=True, text=True,
                            timeout=60, check=True)
        waiting = orjson.loads(st.stdout)["robots_waiting"]
        assert (waiting["hosts"], waiting["urls"], waiting["list"][0]["host"]) == (1, len(urls), key)
        table = subprocess.run([*CRAWL, "stats", "--dir", str(d)], capture_output=True, text=True,
                               timeout=60, check=True, env={**os.environ, "COLUMNS": "200"})
        assert "robots wait" in table.stdout and f"{len(urls)} URLs waiting" in table.stdout
        # the next run (cron, say) checks again when due, and the pages come
        second = run(web, d, [], "--robots-retry", "5s", "--idle-exit", "10s", "--json")
        final = orjson.loads(second.stdout.splitlines()[-1])
        assert final["stopping"] == "done" and final["hosts_waiting_robots"] == 0
        reqs = polite(web)
        assert before_robots_answered(reqs, host) == [("/robots.txt", 500), ("/robots.txt", 200)]
        got = {u for u, e in fetches(d).items() if e["outcome"] == "ok"}
        want = {u for u in urls if web.pages[u]["status"] == 200 and web.pages[u]["content_type"].startswith("text/html")
                and not web.pages[u]["path"].startswith("/private/")}
        assert want and want <= got, sorted(want - got)
