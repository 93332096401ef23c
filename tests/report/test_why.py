"""crawl why against a real crawl of the test web: each behaviour explained with its cause.

One crawl (module fixture) of a web whose first hosts have every robots
variant and behaviour, seeded with hosts 0-12 only and run with ``--scope
host --max-depth 2``, so links to hosts 13-15 are out of scope and links
from depth-2 pages are too deep. The expected answers come from the web's
manifest (robots rules, busy pages and their Retry-After, traps, near
duplicates, every page's links) and from the server's request log, never
from the crawler's own code. ``why`` and ``stats --format openmetrics`` are
also run while the crawl is still going.
"""

from __future__ import annotations

import re
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import orjson
import pytest
from conftest import start_testweb

from crawl.canon import canonicalize
from crawl.report import why_host, why_url
from crawl.run import read_log

CRAWL = [sys.executable, "-m", "crawl"]
RUN = ["--delay", "0.05", "--timeout", "2", "--connect-timeout", "2", "--lease", "8s", "--idle-exit", "2s",
       "--progress", "none", "--backoff-base", "0.5s", "--backoff-cap", "4s", "--park-for", "2s",
       "--duration", "60s", "--max-delay", "0.5s", "--scope", "host", "--max-depth", "2"]
SEEDED = 13  # hosts 0..12 are seeded: every robots variant, near-dups, traps, busy


def _canon(url: str) -> str:
    return canonicalize(url).url


def _why(d: Path, *args: str) -> dict[str, Any]:
    """``crawl why --json``'s answer, from the library (the command is run by the tests that
    check it: starting a Python process per question would cost seconds each)."""
    if args[0] == "--host":
        got = why_host(d, args[1])
    else:
        got = why_url(d, args[0], referrers=int(args[2]) if len(args) > 2 else 10)
    decoded: dict[str, Any] = orjson.loads(orjson.dumps(got))  # what --json prints
    return decoded


@pytest.fixture(scope="module")
def crawled(tmp_path_factory: pytest.TempPathFactory) -> Any:
    base = tmp_path_factory.mktemp("why")
    with start_testweb(base / "web", hosts=16, seed=3, pages=10, links=4, hang=4, busy=1, cross=0.3) as web:
        seeds = base / "seeds.txt"
        seeds.write_text("".join(web.url(i, "/") + "\n" for i in range(SEEDED)))
        d = base / "crawl"
        proc = subprocess.Popen([*CRAWL, "run", "--dir", str(d), "--seeds", str(seeds), "--resolve-file",
                                 str(web.hosts_file), "--allow-private", *RUN],
                                stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        live: dict[str, Any] = {}
        try:
            deadline = time.monotonic() + 60
            while time.monotonic() < deadline and proc.poll() is None:
                if (d / "run-status.json").exists() and any((d / "log").glob("*.zst")):
                    break
                time.sleep(0.2)
            live["running_before"] = proc.poll() is None
            live["why"] = subprocess.run([*CRAWL, "why", "--dir", str(d), "--host", web.host(12), "--json"],
                                         capture_output=True, text=True, timeout=60)
            live["stats"] = subprocess.run([*CRAWL, "stats", "--dir", str(d), "--format", "openmetrics"],
                                           capture_output=True, text=True, timeout=60)
            live["running_after"] = proc.poll() is None
            _, err = proc.communicate(timeout=150)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
        assert proc.returncode == 0, err[-3000:]
        yield web, d, live


def _events(d: Path) -> list[dict[str, Any]]:
    return [ev for ev in read_log(d / "log") if ev.get("event") == "fetch"]


def _host_of(web: Any, behaviour: str) -> str:
    return web.with_behaviour(behaviour)[0]


# -- while the crawl runs ---------------------------------------------------------------

def test_why_and_openmetrics_answer_while_the_crawl_runs(crawled: Any) -> None:
    web, d, live = crawled
    assert live["running_before"] and live["running_after"], "the crawl ended before the checks ran"
    assert live["why"].returncode == 0, live["why"].stderr
    got = orjson.loads(live["why"].stdout)
    assert got["kind"] == "why-host" and got["host"] == f"{web.host(12)}:{web.port}"
    assert live["stats"].returncode == 0 and live["stats"].stdout.endswith("# EOF\n"), live["stats"].stderr


# -- robots variants --------------------------------------------------------------------

def _winning_rule(rules: list[list[str]], path: str) -> str | None:
    """RFC 9309's longest match (allow wins a tie), from the manifest's rules alone."""
    best: tuple[int, bool, str] | None = None
    for kind, pattern in rules:
        anchored = pattern.endswith("$")
        rx = ".*".join(re.escape(p) for p in (pattern[:-1] if anchored else pattern).split("*"))
        if re.match(rx + ("$" if anchored else ""), path):
            cand = (len(pattern), kind == "allow", f"{kind.capitalize()}: {pattern}")
            if best is None or cand[:2] > best[:2]:
                best = cand
    return best[2] if best else None


def test_robots_rules_name_the_matched_rule(crawled: Any) -> None:
    web, d, _ = crawled
    host = _host_of(web, "rules")
    rules = web.hosts[host]["robots"]["rules"]
    blocked = {e["url"] for e in _events(d) if e["outcome"] == "robots-disallowed" and e["host"].startswith(host)}
    pages = [p for p in web.pages_of(host) if p["disallowed"] and _canon(p["url"]) in blocked]
    assert pages, "the crawl met no page the rules host disallows"
    for page in pages:
        w = _why(d, page["url"])
        assert w["cause"] == "robots-disallowed", w["verdict"]
        assert w["robots"]["verdict"] == "disallowed"
        assert w["robots"]["rule"] == _winning_rule(rules, page["path"]), page["path"]
        assert w["robots"]["group"] == web.hosts[host]["robots"]["agent"]
        assert w["fetches"] and w["fetches"][-1]["outcome"] == "robots-disallowed"
    # and an allowed page of the same host says so, with no rule or the allow that won
    ok = next(p for p in web.pages_of(host) if not p["disallowed"] and p["path"] == "/")
    w = _why(d, ok["url"])
    assert w["robots"]["verdict"] == "allowed" and w["robots"]["rule"] == _winning_rule(rules, "/")


@pytest.mark.parametrize("variant", ["500", "timeout"])
def test_unreadable_robots_keeps_the_urls_queued_and_says_why(crawled: Any, variant: str) -> None:
    web, d, _ = crawled
    host = _host_of(web, variant)
    home = web.url(host, "/")
    w = _why(d, home)
    file = w["robots"]["file"]
    assert w["robots"]["verdict"] == "unreachable"
    if variant == "500":
        assert file["status"] == web.hosts[host]["robots"]["status"] == 500
    else:  # the server holds the connection longer than --timeout 2
        assert file["error"].startswith("timeout"), file
    assert w["frontier"]["state"] == "queued" and w["cause"] == "robots-wait", w["verdict"]
    assert w["host"]["wait"]["cause"] == "robots-wait"
    h = _why(d, "--host", f"{host}:{web.port}")
    assert h["wait"]["cause"] == "robots-wait"
    assert h["robots"][0]["verdict"] == "unreachable"
    assert h["state"]["queued"] >= 1
    assert [c["cause"] for c in h["changes"]] == ["robots-wait"]
    # the server's log: nothing but robots.txt was asked of this host
    assert {r["path"] for r in web.requests() if r["host"] == host} == {"/robots.txt"}


# -- 429 with Retry-After ---------------------------------------------------------------

def test_429_with_retry_after_the_host_waits_it(crawled: Any) -> None:
    web, d, _ = crawled
    host = _host_of(web, "busy")
    page = next(p for p in web.pages_of(host) if p.get("busy_status") == 429 and p.get("retry_after", "").isdigit())
    wait = float(page["retry_after"])
    w = _why(d, page["url"])
    statuses = [f["status"] for f in w["fetches"]]
    assert statuses == [page["busy_status"]] * page["busy_times"] + [200], statuses
    assert w["fetches"][0]["retry_after"] == wait
    h = _why(d, "--host", f"{host}:{web.port}")
    change = next(c for c in h["changes"] if c["url"] == _canon(page["url"]) and c["status"] == 429)
    assert change["cause"] == "retry-after" and change["retry_after"] == wait and change["delay"] == wait
    # and the crawl did wait that long, from the end of the 429 to its next request to the host
    assert change["next_request_after"] >= wait - 0.005
    # the server saw the same: the next request to the host came Retry-After later
    reqs = [r for r in web.requests() if r["host"] == host]
    i = next(i for i, r in enumerate(reqs) if r["path"] == page["path"] and r["status"] == 429)
    assert (reqs[i + 1]["start"] - reqs[i]["end"]) / 1e9 >= wait - 0.01
    # a 429 without Retry-After is the exponential backoff instead
    other = next(p for p in web.pages_of(host) if p.get("busy_status") == 429 and not p.get("retry_after"))
    change = next(c for c in h["changes"] if c["url"] == _canon(other["url"]) and c["status"] == 429)
    assert change["cause"] == "backoff" and change["retry_after"] is None


# -- traps, near duplicates -------------------------------------------------------------

def test_trap_urls_name_their_heuristic(crawled: Any) -> None:
    web, d, _ = crawled
    host = _host_of(web, "traps")
    entry = next(t for t in web.hosts[host]["traps"] if t["name"] == "calendar")["entry"]
    w = _why(d, entry)
    assert web.pages[entry]["trap"] == "calendar"
    assert w["trap"] == {"heuristic": "calendar", "action": "demote"}
    assert w["fetches"], "a demoted trap URL is still fetched"


def test_near_duplicates_name_the_page_and_distance(crawled: Any) -> None:
    web, d, _ = crawled
    fetched = {e["url"] for e in _events(d) if e["outcome"] == "ok"}
    root = {_canon(p["url"]): _canon(p.get("near_duplicate_of") or p["url"]) for p in web.pages.values()}
    dups = [p for p in web.pages.values() if p.get("near_duplicate_of") and _canon(p["url"]) in fetched]
    assert dups
    said = 0
    for p in dups:
        w = _why(d, p["url"])
        if w["dedupe"] is None:  # it arrived before every other copy of its original: it is the first seen
            continue
        said += 1
        # a copy of the same original (the original itself, or a variant that came first)
        assert root.get(w["dedupe"]["of"]) == root[_canon(p["url"])], (p["url"], w["dedupe"])
        assert isinstance(w["dedupe"]["distance"], int) and w["dedupe"]["distance"] >= 0
        assert w["cause"] == "duplicate" and w["dedupe"]["of"] in w["verdict"]
    assert said >= len(dups) // 2, f"only {said} of {len(dups)} near duplicates were explained as such"


# -- out of scope, too deep -------------------------------------------------------------

def test_out_of_scope_link_names_the_host_rule(crawled: Any) -> None:
    web, d, _ = crawled
    stored = {e["url"] for e in _events(d) if e["outcome"] == "ok"}
    outside = {web.host(i) for i in range(SEEDED, 16)}
    links = [(_canon(link["url"]), _canon(p["url"])) for p in web.pages.values() if _canon(p["url"]) in stored
             and p.get("meta_robots") != "nofollow"
             for link in p.get("links", []) if link["tag"] == "a" and "nofollow" not in link["rel"]
             and link["url"].split("/")[2].split(":")[0] in outside]
    assert links, "no stored page links to an unseeded host (raise --cross)"
    target, page = links[0]
    w = _why(d, target, "--referrers", "1000")
    assert w["cause"] == "off-host", w["verdict"]
    assert w["scope"]["mode"] == "host" and not w["scope"]["in_scope"]
    assert w["seen"] is False and w["frontier"]["state"] == "unknown" and not w["fetches"]
    assert page in {r["page"] for r in w["referrers"]["pages"]}
    assert w["referrers"]["complete"]


def test_too_deep_link_names_the_depth_limit(crawled: Any) -> None:
    web, d, _ = crawled
    events = _events(d)
    depth = {e["url"]: e.get("depth") for e in events}
    at_limit = {u for u, k in depth.items() if k == 2}
    seeded = {web.host(i) for i in range(SEEDED)}
    candidates = [(_canon(link["url"]), _canon(p["url"])) for p in web.pages.values() if _canon(p["url"]) in at_limit
                  and p.get("meta_robots") != "nofollow"
                  for link in p.get("links", []) if link["tag"] == "a" and "nofollow" not in link["rel"]
                  and link["url"].split("/")[2].split(":")[0] in seeded and _canon(link["url"]) not in depth
                  and not web.pages.get(link["url"], {}).get("trap")]
    assert candidates, "no page at depth 2 links to a page the crawl never reached"
    target, page = candidates[0]
    w = _why(d, target)
    assert w["cause"] == "max-depth", w["verdict"]
    assert w["depth"]["depth"] == 3 and w["scope"]["max_depth"] == 2
    assert "--max-depth 2" in w["scope"]["rule"]


# -- the other answers ------------------------------------------------------------------

def test_canonical_form_lists_the_rules_that_changed_it(crawled: Any) -> None:
    web, d, _ = crawled
    url = web.url(0, "/").replace("http://", "HTTP://").rstrip("/") + "/?utm_source=x#frag"
    w = _why(d, url)
    assert w["canonical"]["url"] == _canon(url) == web.url(0, "/")
    assert {"whatwg-parse", "fragment", "tracking-params"} <= {r["rule"] for r in w["canonical"]["rules"]}
    assert w["fetches"][-1]["outcome"] == "ok" and w["fetches"][-1]["warc"]["length"] > 0
    assert w["seen"] is True and w["frontier"]["state"] == "done"
    # the command: --json is the library's answer, and the text says the same facts
    res = subprocess.run([*CRAWL, "why", "--dir", str(d), url, "--json"], capture_output=True, text=True, timeout=60)
    assert res.returncode == 0, res.stderr
    cmd = orjson.loads(res.stdout)
    for key in ("canonical", "scope", "depth", "seen", "frontier", "fetches", "dedupe", "referrers", "cause"):
        assert cmd[key] == w[key], key
    text = subprocess.run([*CRAWL, "why", "--dir", str(d), url], capture_output=True, text=True, timeout=60)
    assert text.returncode == 0 and "rule fragment" in text.stdout and w["verdict"] in text.stdout


def test_bad_invocations_are_one_line(crawled: Any, tmp_path: Path) -> None:
    _, d, _ = crawled
    for args in ([], ["http://a.test/", "--host", "a.test"], ["--host", "http://a.test/"]):
        res = subprocess.run([*CRAWL, "why", "--dir", str(d), *args], capture_output=True, text=True, timeout=60)
        assert res.returncode == 2 and "Traceback" not in res.stderr and len(res.stderr.strip().splitlines()) <= 3
    res = subprocess.run([*CRAWL, "why", "--dir", str(tmp_path / "nope"), "http://a.test/"], capture_output=True,
                         text=True, timeout=60)
    assert res.returncode == 2 and "no crawl directory" in res.stderr
    res = subprocess.run([*CRAWL, "why", "--dir", str(d), "ftp://a.test/x"], capture_output=True, text=True,
                         timeout=60)
    assert res.returncode == 0 and "not crawlable: unsupported-scheme" in res.stdout, res.stderr


# -- monitoring: crawl stats --format openmetrics -------------------------------------------

def _families(text: str) -> dict[str, Any]:
    """Both of prometheus_client's parsers must read it: OpenMetrics (strict, wants # EOF) and
    the classic text format, which node_exporter's textfile collector speaks."""
    from prometheus_client.openmetrics.parser import (
        text_string_to_metric_families as openmetrics_parse,
    )
    from prometheus_client.parser import text_string_to_metric_families as text_parse

    classic = {f.name: f for f in text_parse(text)}
    strict = {f.name: f for f in openmetrics_parse(text)}
    assert set(classic) == set(strict) and all(f.type == "gauge" for f in strict.values())
    return strict


def _samples(fams: dict[str, Any], name: str) -> dict[str, Any]:
    return {s.labels.get("host", ""): s for s in fams[name].samples}


def test_openmetrics_parses_and_matches_the_ground_truth(crawled: Any) -> None:
    web, d, live = crawled
    from crawl.report import openmetrics

    _families(live["stats"].stdout)  # the one written while the crawl ran parses too
    events = _events(d)
    now = max(e["ts"] for e in events) + 1.0  # the window then holds the whole crawl
    fams = _families(openmetrics(d, now=now))
    crawl = str(d.resolve())
    assert {s.labels["crawl"] for f in fams.values() for s in f.samples} == {crawl}
    # the server's request log is the truth for what the hosts answered
    pages = [r for r in web.requests() if r["path"] != "/robots.txt"]
    window = _samples(fams, "crawl_rate_window_seconds")[""].value
    assert _samples(fams, "crawl_429_rate")[""].value * window == pytest.approx(
        sum(r["status"] == 429 for r in pages))
    assert _samples(fams, "crawl_5xx_rate")[""].value * window == pytest.approx(
        sum(500 <= r["status"] <= 599 for r in pages))
    busy = f"{_host_of(web, 'busy')}:{web.port}"
    busy_pages = [r for r in pages if r["host"] == _host_of(web, "busy")]
    got429, got5xx = (sum(r["status"] == code for r in busy_pages) for code in (429, 503))
    assert got429 and got5xx
    assert _samples(fams, "crawl_host_429_rate")[busy].value * window == pytest.approx(got429)
    assert _samples(fams, "crawl_host_5xx_rate")[busy].value * window == pytest.approx(got5xx)
    # what is queued at the end: the URLs of the hosts whose robots.txt cannot be read
    depth = _samples(fams, "crawl_host_queue_depth")
    assert sum(s.value for s in depth.values()) == _samples(fams, "crawl_queue_depth")[""].value > 0
    waiting = {f"{h}:{web.port}" for v in ("500", "timeout") for h in web.with_behaviour(v)}
    assert {h for h, s in depth.items() if s.value} == waiting
    for h in waiting:
        delay = next(s for s in fams["crawl_host_delay_seconds"].samples if s.labels["host"] == h)
        assert delay.labels["reason"] == "robots-wait"
        assert _samples(fams, "crawl_host_next_eligible_timestamp_seconds")[h].value == \
            why_host(d, h, now=now)["wait"]["next"]
    assert 0 <= _samples(fams, "crawl_idle_ratio")[""].value <= 1


def test_report_hosts_table_has_robots_state_and_delay_reason(crawled: Any) -> None:
    web, d, _ = crawled
    from crawl.report import gather

    rows = {r["host"]: r for r in gather(d).sections["hosts"].rows}
    port = web.port
    for variant, state in (("500", "unreachable (500)"), ("404", "unavailable (404: all allowed)"),
                           ("simple", "parsed"), ("rules", "parsed")):
        host = f"{web.with_behaviour(variant)[0]}:{port}"
        assert rows[host]["robots"] == state, (variant, rows[host])
    rules = f"{_host_of(web, 'rules')}:{port}"
    # the rules host asks Crawl-delay (manifest), which --max-delay 0.5s caps
    assert web.hosts[_host_of(web, "rules")]["robots"]["crawl_delay"] > 0.5
    assert rows[rules]["delay_reason"] == "max-delay" and rows[rules]["delay_s"] == 0.5
    for v in ("500", "timeout"):
        assert rows[f"{web.with_behaviour(v)[0]}:{port}"]["delay_reason"] == "robots-wait"
