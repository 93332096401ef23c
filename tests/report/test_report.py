"""crawl report against a real crawl of the test web, checked against the web's manifest.

The test web knows which links each page has and which URLs do not exist
(its ``/gone/`` pages answer 404), where its redirect chains lead and which
pages are mirrors; the report must say exactly that, from the crawl
directory alone. The HTML page is opened in headless Chromium from Debian's
packages: when it is missing the test installs it if it runs as root (as CI
does), and elsewhere skips, saying how to get it.
"""

from __future__ import annotations

import csv
import os
import re
import shutil
import subprocess
import sys
from collections import defaultdict
from pathlib import Path
from typing import Any

import orjson
import pytest
from conftest import start_testweb

from crawl.canon import canonicalize
from crawl.run import read_log

CRAWL = [sys.executable, "-m", "crawl"]
FAST = ["--delay", "0.05", "--timeout", "2", "--connect-timeout", "2", "--lease", "8s", "--idle-exit", "2s",
        "--progress", "none", "--backoff-base", "0.5s", "--backoff-cap", "4s", "--park-for", "2s",
        "--max-per-host", "40", "--duration", "45s"]


def _canon(url: str) -> str:
    return canonicalize(url).url


@pytest.fixture(scope="module")
def crawled(tmp_path_factory: pytest.TempPathFactory) -> Any:
    """A web with every behaviour once (22 hosts), crawled to the end."""
    base = tmp_path_factory.mktemp("report")
    with start_testweb(base / "web", hosts=22, seed=12, pages=10, links=4, hang=1, busy=1) as web:
        d = base / "crawl"
        res = subprocess.run([*CRAWL, "run", "--dir", str(d), "--seeds", str(web.seeds_file),
                              "--resolve-file", str(web.hosts_file), "--allow-private", "--scope", "any",
                              *FAST], capture_output=True, text=True, timeout=240)
        assert res.returncode == 0, res.stderr[-3000:]
        out = base / "out"
        res = subprocess.run([*CRAWL, "report", "--dir", str(d), "--format", "ndjson", "--out", str(out)],
                             capture_output=True, text=True, timeout=120)
        assert res.returncode == 0, res.stderr
        yield web, d, out




def _rows(out: Path, name: str) -> list[dict[str, Any]]:
    return [orjson.loads(line) for line in (out / f"{name}.ndjson").read_bytes().splitlines()]


def _latest(d: Path) -> dict[str, dict[str, Any]]:
    latest: dict[str, dict[str, Any]] = {}
    for ev in read_log(d / "log"):
        if ev.get("event") == "fetch" and ev.get("outcome") != "deferred":
            latest[ev["url"]] = ev
    return latest


def test_broken_links_list_exactly_the_pages_that_link_to_them(crawled: Any) -> None:
    web, d, out = crawled
    latest = _latest(d)
    stored = {u for u, e in latest.items() if e["outcome"] == "ok" and "html" in e.get("content_type", "")}
    # ground truth: the manifest's links of every stored page (a and area, followed)
    truth: dict[str, set[str]] = defaultdict(set)
    for page in web.pages.values():
        if page.get("meta_robots") == "nofollow" or _canon(page["url"]) not in stored:
            continue
        for link in page.get("links", []):
            if link.get("tag") in ("a", "area") and "nofollow" not in link.get("rel", []):
                truth[_canon(link["url"])].add(_canon(page["url"]))
    rows = _rows(out, "broken")
    gone = [r for r in rows if "/gone/" in r["url"]]
    assert gone, "the test web links to /gone/ pages that answer 404"
    for r in rows:
        assert latest[r["url"]]["outcome"] in ("http-error", "timeout", "dns-error", "connect-error",
                                                "protocol-error")
    for r in gone:
        assert r["status"] == 404 and r["kind"] == "4xx"
        got = {ref["page"] for ref in r["linked_from"]}
        assert got == truth[r["url"]], r["url"]
        assert r["referrers"] == len(got)
        assert all(ref["anchor"] for ref in r["linked_from"])
    # every broken URL the crawl met is listed, and nothing else
    broken = {u for u, e in latest.items() if (e["outcome"] == "http-error" and e.get("status", 0) >= 400)
              or e["outcome"] in ("timeout", "dns-error", "connect-error", "protocol-error")}
    assert {r["url"] for r in rows} == broken


def test_csv_has_one_row_per_referrer(crawled: Any) -> None:
    web, d, out = crawled
    csv_out = out.parent / "csv"
    subprocess.run([*CRAWL, "report", "--dir", str(d), "--format", "csv", "--out", str(csv_out)],
                   check=True, capture_output=True, timeout=120)
    with open(csv_out / "broken.csv", newline="") as fh:
        rows = list(csv.DictReader(fh))
    expected = sum(max(1, len(r["linked_from"])) for r in _rows(out, "broken"))
    assert len(rows) == expected and "linked_from.page" in rows[0] and "linked_from.anchor" in rows[0]


def test_redirect_chains_loops_and_cross_host(crawled: Any) -> None:
    web, d, out = crawled
    host = next(h for h, rec in web.hosts.items() if rec["behaviour"] == "redirects")
    by_start = {r["start"]: r for r in _rows(out, "redirects")}
    base = next(p["url"] for p in web.pages.values() if p["host"] == host and p["path"] == "/")
    chain5 = by_start[_canon(base.rstrip("/") + "/redirect/chain-5")]
    page1 = next(p for p in web.pages.values() if p["host"] == host
                 and p.get("behaviour") == "redirect-chain" and p["path"] == "/redirect/chain-0")
    assert chain5["hops"] == 6 and not chain5["loop"] and not chain5["cross_host"]
    assert chain5["final"] == _canon(page1["location"]) and chain5["final_status"] == 200
    loops = [r for r in by_start.values() if r["loop"]]
    assert len(loops) == 1 and {u.rsplit("/", 1)[1] for u in loops[0]["chain"]} == {"loop-a", "loop-b"}
    away = by_start[_canon(base.rstrip("/") + "/redirect/away")]
    assert away["cross_host"] and away["hops"] == 1


def test_duplicate_clusters_agree_with_the_manifest(crawled: Any) -> None:
    web, d, out = crawled
    latest = _latest(d)
    root: dict[str, str] = {}  # URL -> the original it copies (itself when it copies nothing)
    for p in web.pages.values():
        u = _canon(p["url"])
        root[u] = _canon(p.get("duplicate_of") or p.get("near_duplicate_of") or p["url"])
    rows = _rows(out, "duplicates")
    assert rows
    for r in rows:
        members = [r["canonical"]] + [m["url"] for m in r["members"]]
        assert r["size"] == len(members)
        # nothing distinct is merged: every member copies the same original
        roots = {root.get(u, u) for u in members}
        mirrors = {u for u in members if u not in root}  # not in the manifest: a variant URL
        assert len(roots - mirrors) <= 1 or len(roots) == 1, (r["canonical"], roots)
    # the clusters are exactly the crawl's duplicate verdicts, grouped by what they duplicate
    verdicts: dict[str, set[str]] = defaultdict(set)
    last: dict[str, str] = {}
    for ev in read_log(d / "log"):
        if ev.get("event") == "duplicate":
            last[ev["url"]] = ev["duplicate_of"]
    for url, of in last.items():
        verdicts[of].add(url)
    assert {r["canonical"]: {m["url"] for m in r["members"]} for r in rows} == dict(verdicts)
    # how many of the manifest's stored mirrors dedupe found is dedupe's figure, not the report's
    clustered = {m["url"]: r["canonical"] for r in rows for m in r["members"]}
    pairs = found = 0
    for p in web.pages.values():
        u = _canon(p["url"])
        if p.get("duplicate_of") and latest.get(u, {}).get("outcome") == "ok":
            orig = _canon(p["duplicate_of"])
            if orig == u or latest.get(orig, {}).get("outcome") != "ok":
                continue  # a tracking-parameter copy the canonicaliser merged, or an unfetched original
            pairs += 1
            found += clustered.get(u) == orig or clustered.get(orig) == u
    assert pairs
    print(f"\nstored mirror pairs the crawl clustered: {found}/{pairs} (dedupe's recall on a 10-page web)")


def test_html_report_is_one_self_contained_page(crawled: Any) -> None:
    web, d, out = crawled
    page = out.parent / "report.html"
    subprocess.run([*CRAWL, "report", "--dir", str(d), "--format", "html", "--out", str(page)],
                   check=True, capture_output=True, timeout=120)
    text = page.read_text()
    # nothing to fetch: no external script, style, image or font
    assert not re.search(r"<(script|link|img|iframe)[^>]+(src|href)=", text)
    assert "@import" not in text and "url(" not in text
    for name in ("overview", "hosts", "broken", "redirects", "duplicates", "canonicals", "robots",
                 "traps", "slow", "large", "non_html", "depth", "orphans"):
        assert f'id="{name}"' in text and f'id="data-{name}"' in text
    assert text.count("<svg") == 5


def test_bad_invocations_are_one_line(tmp_path: Path) -> None:
    res = subprocess.run([*CRAWL, "report", "--dir", str(tmp_path / "typo")], capture_output=True,
                         text=True, timeout=60)
    assert res.returncode == 2 and "no crawl directory" in res.stderr and "Traceback" not in res.stderr
    (tmp_path / "d").mkdir()
    res = subprocess.run([*CRAWL, "report", "--dir", str(tmp_path / "d"), "--format", "csv"],
                         capture_output=True, text=True, timeout=60)
    assert res.returncode == 2 and "--out" in res.stderr and "Traceback" not in res.stderr
    # an empty crawl directory reports nothing, without failing
    res = subprocess.run([*CRAWL, "report", "--dir", str(tmp_path / "d")], capture_output=True,
                         text=True, timeout=60)
    assert res.returncode == 0, res.stderr


# -- the HTML page in a real browser (headless Chromium from Debian's packages) --------

FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync",
         "--disable-extensions", "--disable-default-apps", "--mute-audio"]


def _chromium() -> str:
    found = shutil.which("chromium") or shutil.which("chromium-browser")
    if found:
        return found
    if os.geteuid() != 0:
        pytest.skip("Chromium is not installed: apt-get install chromium (as root), then run again")
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    res = subprocess.run(["apt-get", "install", "-y", "--no-install-recommends", "chromium"],
                         capture_output=True, text=True, env=env, timeout=900)
    if res.returncode != 0:  # the package lists may be missing on a fresh machine
        subprocess.run(["apt-get", "update"], capture_output=True, env=env, timeout=600)
        res = subprocess.run(["apt-get", "install", "-y", "--no-install-recommends", "chromium"],
                             capture_output=True, text=True, env=env, timeout=900)
    assert res.returncode == 0, f"apt-get install chromium failed: {res.stderr[-2000:]}"
    found = shutil.which("chromium")
    assert found, "apt-get installed chromium but it is not on PATH"
    return found


def _browse(chromium: str, page: Path, tmp: Path, *what: str) -> subprocess.CompletedProcess[str]:
    profile = tmp / "profile"
    return subprocess.run([chromium, *FLAGS, f"--user-data-dir={profile}", "--enable-logging=stderr", "--v=0",
                           "--virtual-time-budget=5000", *what, page.as_uri()],
                          capture_output=True, text=True, timeout=120)


def test_every_section_renders_in_chromium(crawled: Any, tmp_path: Path) -> None:
    chromium = _chromium()
    _, d, out = crawled
    page = tmp_path / "report.html"
    subprocess.run([*CRAWL, "report", "--dir", str(d), "--format", "html", "--out", str(page)],
                   check=True, capture_output=True, timeout=120)
    res = _browse(chromium, page, tmp_path, "--dump-dom")
    assert res.returncode == 0, res.stderr[-2000:]
    dom = res.stdout
    assert 'data-report="ok"' in dom, "the page script did not finish"
    console = [line for line in res.stderr.splitlines() if "CONSOLE" in line or "Uncaught" in line]
    assert not console, console
    expected = {name: sum(1 for _ in (out / f"{name}.ndjson").open()) for name in
                ("hosts", "broken", "redirects", "duplicates", "robots", "non_html", "depth", "overview")}
    for name, n in expected.items():
        m = re.search(rf'<section class="report" id="{name}"[^>]*>', dom)
        assert m, f"section {name} missing from the rendered page"
        tag = m.group(0)
        assert f'data-rows="{n}"' in tag, (name, n, tag)
        assert f'data-rendered="{min(n, 50)}"' in tag, (name, tag)
    # the broken-links table shows referrers, the hosts table its figures
    assert "/gone/" in dom and dom.count("<svg") == 5
    shot = tmp_path / "report.png"
    res = _browse(chromium, page, tmp_path, f"--screenshot={shot}", "--window-size=1280,2000",
                  "--hide-scrollbars")
    assert shot.exists() and shot.stat().st_size > 10_000, res.stderr[-2000:]
    keep = Path(os.environ.get("CRAWL_SCREENSHOT_DIR", out.parent))
    shutil.copy(shot, keep / "report.png")
    print(f"\nscreenshot: {keep / 'report.png'}")
    assert orjson.loads((out / "overview.ndjson").read_bytes().splitlines()[0])
