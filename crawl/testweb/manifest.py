"""The ground truth of a web, and the files ``crawl testweb serve`` writes.

``DIR/manifest.json`` is the summary (config, port, addresses, which hosts
have which behaviour); ``DIR/manifest.ndjson`` has one ``host`` record per
host, each followed by one ``page`` record per URL that host answers
deterministically (pages, images, PDFs, sitemaps, robots.txt, broken links,
the entry points of its behaviour). Webs larger than ``full_limit`` hosts
get host records only; their pages come from :func:`host_records` on demand
(``crawl testweb manifest``), from the same functions the server uses.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from dataclasses import asdict
from pathlib import Path
from typing import Any

import orjson

from . import content
from .generator import NEAR_DUP_VARIANTS, ROBOTS_LIMIT, TRAP_PATTERNS, Web
from .router import ADMIN_HOST, HTML

MANIFEST_VERSION = 1
FULL_LIMIT = 500
# A realistic page lists ~200 links (up to 3,000): its web's pages are listed only up
# to this many pages in all, or manifest.ndjson would take minutes and gigabytes.
REALISTIC_FULL_PAGES = 2_500


def _page_record(web: Web, i: int, path: str, **fields: Any) -> dict[str, Any]:
    rec: dict[str, Any] = {
        "kind": "page", "host": web.host_name(i), "url": web.url(i, path), "path": path,
        "status": 200, "content_type": HTML, "links": [],
        "disallowed": web.disallowed(i, path),
        "duplicate_of": None, "near_duplicate_of": None, "trap": None,
        "change_period": None, "meta_robots": None, "canonical": None, "behaviour": None,
    }
    rec.update(fields)
    return rec


def host_record(web: Web, i: int) -> dict[str, Any]:
    h = web.host(i)
    rules, delay = web.robots_rules(i)
    robots_status = {"404": 404, "500": 500, "timeout": None}.get(h.robots, 200)
    robots = {
        "variant": h.robots, "status": robots_status, "rules": [list(r) for r in rules],
        "crawl_delay": delay, "agent": web.config.agent,
        "sitemaps": [web.url(i, "/sitemap.xml")] if robots_status == 200 else [],
        "complete_disallow": h.robots in ("500", "timeout"),
    }
    if h.robots == "redirect":
        robots["redirects"] = [web.url(i, "/robots-moved.txt"), web.url(i, "/policies/robots.txt")]
    recovered = web.recovered_rules(i)
    if recovered is not None:  # fails recovers_after times, then answers with these rules
        robots["recovers_after"] = web.config.robots_recover
        robots["recovered_rules"] = [list(r) for r in recovered]
    if h.robots == "oversize":
        robots["ignored_after_bytes"] = ROBOTS_LIMIT
        robots["rules_beyond_limit"] = [["disallow", "/blog/"]]
    traps = []
    if h.behaviour == "traps":
        entries = dict(zip(("calendar", "session", "deep", "facets"), web.entry_points(i), strict=True))
        traps = [{"name": n, "pattern": p, "entry": web.url(i, entries[n])} for n, p in TRAP_PATTERNS.items()]
    return {
        "kind": "host", "host": h.name, "index": i, "address": h.address, "base": web.base(i),
        "behaviour": h.behaviour, "robots": robots,
        "mirror_of": web.host_name(h.mirror_of) if h.mirror_of is not None else None,
        "traps": traps, "pages": web.config.pages,
    }


def page_records(web: Web, i: int, now: float) -> Iterator[dict[str, Any]]:
    """Every URL host ``i`` answers deterministically, with what a crawler should see."""
    h = web.host(i)
    src = h.mirror_of if h.mirror_of is not None else i
    for k in range(web.config.pages):
        spec = web.page(i, k)
        version, last_modified = web.version(spec, now)
        yield _page_record(
            web, i, spec.path,
            links=[{"url": lk.url, "tag": lk.tag, "rel": list(lk.rel), "href": lk.href} for lk in spec.links],
            change_period=spec.change_period, meta_robots=spec.meta_robots,
            canonical=web.url(src, spec.path), base_href=spec.base_href,
            duplicate_of=web.url(src, spec.path) if src != i else None,
            last_modified=last_modified, version=version, approx_bytes=spec.size,
        )
        yield _page_record(web, i, f"/img/photo-{k}.png", content_type="image/png")
        if k % 3 == 0:
            yield _page_record(web, i, f"/files/report-{k}.pdf", content_type="application/pdf")
        if k % 9 == 8:
            yield _page_record(web, i, f"/gone/{k}.html", status=404)
    for path in ("/sitemap.xml", "/sitemap-pages.xml", "/sitemap-files.xml"):
        yield _page_record(web, i, path, content_type="application/xml", behaviour="sitemap")
    yield from _special_records(web, i)


def _special_records(web: Web, i: int) -> Iterator[dict[str, Any]]:
    h = web.host(i)
    b = h.behaviour
    if b == "near-dups":
        for k in range(1, min(5, web.config.pages)):
            original = web.url(i, web.path(k))
            for v in NEAR_DUP_VARIANTS:
                exact = v == "tracking"
                yield _page_record(
                    web, i, web.near_dup_path(k, v), behaviour=f"near-dup:{v}", canonical=original,
                    duplicate_of=original if exact else None,
                    near_duplicate_of=None if exact else original,
                )
    elif b == "traps":
        for name, path in zip(("calendar", "session", "deep", "facets"), web.entry_points(i), strict=True):
            yield _page_record(web, i, path, trap=name, behaviour="trap")
    elif b == "redirects":
        for n in range(5, -1, -1):
            status = 301 if n == 0 else (301, 302, 303, 307, 308)[n % 5]
            target = web.path(1) if n == 0 else f"/redirect/chain-{n - 1}"
            yield _page_record(web, i, f"/redirect/chain-{n}", status=status,
                               location=web.url(i, target), behaviour="redirect-chain")
        yield _page_record(web, i, "/redirect/loop-a", status=302,
                           location=web.url(i, "/redirect/loop-b"), behaviour="redirect-loop")
        yield _page_record(web, i, "/redirect/loop-b", status=302,
                           location=web.url(i, "/redirect/loop-a"), behaviour="redirect-loop")
        yield _page_record(web, i, "/redirect/away", status=302, behaviour="redirect-cross-host",
                           location=web.url((i + 1) % web.config.hosts, "/"))
        yield _page_record(web, i, "/redirect/relative", status=301, behaviour="redirect-relative",
                           location=web.url(i, "/redirect/chain-2"))
    elif b == "busy":
        for n, (status, retry) in enumerate(((429, "2"), (429, None), (503, "http-date"), (503, None))):
            yield _page_record(web, i, f"/busy/{n}.html", behaviour="busy", busy_status=status,
                               retry_after=retry, busy_times=web.config.busy)
    elif b == "reset":
        yield _page_record(web, i, "/reset/head.html", status=None, behaviour="reset-head")
        yield _page_record(web, i, "/reset/body.html", behaviour="reset-body")
    elif b == "endless":
        yield _page_record(web, i, "/stream/endless.html", behaviour="endless")
    elif b == "huge":
        yield _page_record(web, i, "/huge.html", behaviour="huge", content_length=web.config.huge_bytes)
    elif b == "gzip-bomb":
        yield _page_record(web, i, "/bomb.html", behaviour="gzip-bomb", content_encoding="gzip",
                           decoded_bytes=web.config.bomb_bytes)
    elif b in ("gzip-multi", "gzip-trailing"):
        body = content.gzip_page(web, i, b)
        yield _page_record(web, i, "/gzip/multi.html" if b == "gzip-multi" else "/gzip/trailing.html",
                           behaviour=b, content_encoding="gzip", decoded_bytes=len(body),
                           links=[{"url": u, "tag": "a", "rel": [], "href": u} for u in content.gzip_page_links(web, i)])
    elif b == "content-type":
        for path, ctype, real in (("/ct/missing.html", None, "html"),
                                  ("/ct/wrong.html", "application/octet-stream", "html"),
                                  ("/ct/html-as-png.png", "image/png", "html"),
                                  ("/ct/png-as-html.html", HTML, "png")):
            yield _page_record(web, i, path, content_type=ctype, behaviour="content-type", real_type=real)
    elif b == "charset":
        for path, ctype in (("/charset/bogus-label.html", "text/html; charset=x-no-such-charset"),
                            ("/charset/invalid-bytes.html", HTML), ("/charset/conflict.html", HTML)):
            yield _page_record(web, i, path, content_type=ctype, behaviour="charset")
    yield from _robots_records(web, i)


def _robots_records(web: Web, i: int) -> Iterator[dict[str, Any]]:
    v = web.host(i).robots
    common = {"disallowed": False, "content_type": "text/plain"}
    if v == "timeout":
        yield _page_record(web, i, "/robots.txt", **{**common, "content_type": None}, status=None,
                           behaviour="robots-timeout", hang_seconds=web.config.hang)
    elif v == "redirect":
        yield _page_record(web, i, "/robots.txt", **common, status=301, behaviour="robots",
                           location=web.url(i, "/robots-moved.txt"))
        yield _page_record(web, i, "/robots-moved.txt", **common, status=302, behaviour="robots",
                           location=web.url(i, "/policies/robots.txt"))
        yield _page_record(web, i, "/policies/robots.txt", **common, behaviour="robots")
    else:
        status = {"404": 404, "500": 500}.get(v, 200)
        ctype = HTML if status == 404 else "text/plain"
        yield _page_record(web, i, "/robots.txt", **{**common, "content_type": ctype},
                           status=status, behaviour="robots")


def summary(web: Web, now: float, full: bool) -> dict[str, Any]:
    cfg = web.config
    special: dict[str, list[str]] = {}
    counts: dict[str, int] = {}
    robots: dict[str, list[str]] = {}
    for i in range(cfg.hosts):
        h = web.host(i)
        counts[h.behaviour] = counts.get(h.behaviour, 0) + 1
        if h.behaviour != "plain" and len(special.setdefault(h.behaviour, [])) < 100:
            special[h.behaviour].append(h.name)
        if h.robots != "simple" and len(robots.setdefault(h.robots, [])) < 100:
            robots[h.robots].append(h.name)
    return {
        "kind": "testweb", "v": MANIFEST_VERSION, "config": asdict(cfg), "port": cfg.port,
        "addresses": web.addresses(), "admin_host": ADMIN_HOST, "agent": cfg.agent,
        "hosts": cfg.hosts, "behaviour_counts": counts, "behaviours": special,
        "robots_variants": robots, "robots_limit": ROBOTS_LIMIT, "pages_listed": full,
        "started_at": now, "pid": os.getpid(),
        "files": {"hosts": "hosts", "seeds": "seeds.txt", "manifest": "manifest.ndjson",
                  "requests": "requests.log"},
    }


def write_all(web: Web, out: Path, now: float, full_limit: int = FULL_LIMIT) -> dict[str, Any]:
    """Write hosts, seeds.txt, manifest.ndjson, then manifest.json (last: it means ready)."""
    out.mkdir(parents=True, exist_ok=True)
    n = web.config.hosts
    full = n <= full_limit
    if web.config.profile == "realistic":
        full = full and n * web.config.pages <= REALISTIC_FULL_PAGES
    with open(out / "hosts.tmp", "w") as f:
        f.write("# crawl testweb: host name to loopback address (hosts-file format)\n")
        f.write(f"{web.address(0)} {ADMIN_HOST}\n")
        for i in range(n):
            f.write(f"{web.address(i)} {web.host_name(i)}\n")
    with open(out / "seeds.tmp", "w") as f:
        for i in range(n):
            f.write(web.url(i, "/") + "\n")
    with open(out / "manifest.ndjson.tmp", "wb") as f:
        for i in range(n):
            f.write(orjson.dumps(host_record(web, i), option=orjson.OPT_APPEND_NEWLINE))
            if full:
                f.write(b"".join(orjson.dumps(r, option=orjson.OPT_APPEND_NEWLINE)
                                 for r in page_records(web, i, now)))
    for tmp, final in (("hosts.tmp", "hosts"), ("seeds.tmp", "seeds.txt"),
                       ("manifest.ndjson.tmp", "manifest.ndjson")):
        os.replace(out / tmp, out / final)
    summ = summary(web, now, full)
    (out / "manifest.json.tmp").write_bytes(orjson.dumps(summ, option=orjson.OPT_INDENT_2))
    os.replace(out / "manifest.json.tmp", out / "manifest.json")
    return summ


def read_manifest(out: Path) -> tuple[dict[str, Any], dict[str, dict[str, Any]], dict[str, dict[str, Any]]]:
    """(summary, host records by host name, page records by URL) of a served web."""
    summ = orjson.loads((out / "manifest.json").read_bytes())
    hosts: dict[str, dict[str, Any]] = {}
    pages: dict[str, dict[str, Any]] = {}
    with open(out / "manifest.ndjson", "rb") as f:
        for line in f:
            rec = orjson.loads(line)
            if rec["kind"] == "host":
                hosts[rec["host"]] = rec
            else:
                pages[rec["url"]] = rec
    return summ, hosts, pages


def web_of(out: Path) -> Web:
    """The web a running (or stopped) ``serve`` described in ``out/manifest.json``."""
    from .generator import WebConfig

    summ = orjson.loads((out / "manifest.json").read_bytes())
    return Web(WebConfig(**summ["config"]))


def records_for(out: Path, hosts: list[str] | None = None, now: float | None = None) -> Iterator[dict[str, Any]]:
    """Host and page records of ``hosts`` (default: all), computed now: for webs too big to list."""
    web = web_of(out)
    if now is None:
        now = orjson.loads((out / "manifest.json").read_bytes())["started_at"]
    indices: list[int] = []
    for name in hosts or []:
        i = web.host_index(name)
        if i is None:
            raise KeyError(name)
        indices.append(i)
    for i in indices if hosts else range(web.config.hosts):
        yield host_record(web, i)
        yield from page_records(web, i, now)
