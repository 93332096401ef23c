"""What a site audit needs, gathered from a crawl directory alone, in bounded memory.

Read-only: the crawl log (every fetch and duplicate event), the link graph
(each parsed page's out-links), the frontier's counters and host states and
the robots cache (each host's robots.txt and current delay, through
:func:`crawl.report.why.host_politeness`). Nothing is
re-parsed and nothing is locked, so a report runs beside a live crawl or on
a copy of its directory.

Memory is bounded by the number of *URLs*, not edges: one pass over the log
keeps the latest fetch of each URL (a few small fields); one pass over the
graph keeps only the edges that point at a broken URL (the referrers the
auditor asked for), the canonical each page declares, and for the orphan
check a 64-bit hash per linked URL (sorted once, 8 bytes each).
"""

from __future__ import annotations

import math
from array import array
from bisect import bisect_left
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from crawl.canon import CanonError, canonicalize
from crawl.core import CrawlDir
from crawl.parse import LinkGraph
from crawl.run import read_log

from .why import host_politeness

BROKEN_OUTCOMES = frozenset({"dns-error", "timeout", "connect-error", "protocol-error"})
TOP_N = 100  # rows of the "slow" and "large" sections
MAX_REFERRERS = 10_000  # per broken URL: enough for any real audit, bounded for a link farm
SLOT = 10  # seconds per point of the fetch-rate series (re-bucketed to at most 120 points)
MAX_CHAIN = 30  # hops followed before a redirect chain is called a loop


@dataclass(slots=True)
class Fetch:
    """The latest fetch of one URL, as the crawl log says."""

    url: str
    host: str
    outcome: str
    status: int | None
    ts: float
    seconds: float | None
    bytes: int | None
    depth: int | None
    content_type: str
    location: str | None
    rule: str | None
    parent: str | None
    anchor: str | None


@dataclass
class Section:
    """One table of the report: rows are dicts with the same keys, in column order."""

    name: str
    title: str
    columns: list[str]
    rows: list[dict[str, Any]] = field(default_factory=list)
    note: str = ""
    total: int | None = None  # rows before a cut, when the section keeps only the top ones


@dataclass
class Report:
    sections: dict[str, Section]
    plots: dict[str, Any]
    overview: dict[str, Any]


def _is_broken(f: Fetch) -> bool:
    if f.outcome == "http-error" and isinstance(f.status, int) and f.status >= 400:
        return True
    return f.outcome in BROKEN_OUTCOMES


def _kind_of_break(f: Fetch) -> str:
    if f.outcome == "http-error" and isinstance(f.status, int):
        return f"{f.status // 100}xx"
    return {"dns-error": "DNS", "connect-error": "connect"}.get(f.outcome, f.outcome)


def _status_class(f: Fetch) -> str:
    if isinstance(f.status, int) and 100 <= f.status < 600:
        return f"{f.status // 100}xx"
    return f.outcome


def _canon(url: str) -> str:
    try:
        return canonicalize(url).url
    except (CanonError, ValueError):
        return url


def _percentile(values: list[float], q: float) -> float | None:
    if not values:
        return None
    values = sorted(values)
    return values[min(len(values) - 1, max(0, math.ceil(q * len(values)) - 1))]


def _num(v: object) -> float | None:
    return float(v) if isinstance(v, int | float) and not isinstance(v, bool) else None


def _int(v: object) -> int | None:
    return v if isinstance(v, int) and not isinstance(v, bool) else None


def _str(v: object) -> str | None:
    return v if isinstance(v, str) else None


class _Log:
    """One pass over the crawl log."""

    def __init__(self) -> None:
        self.latest: dict[str, Fetch] = {}
        self.events = 0
        self.first_ts: float | None = None
        self.last_ts: float | None = None
        self.per_slot: dict[int, list[int]] = defaultdict(lambda: [0, 0])  # 10 s slot -> [fetches, errors]
        self.latency: list[float] = []
        self.bytes = 0
        self.duplicates: dict[str, tuple[str, int | None, str]] = {}  # url -> (of, distance, kind)
        self.host_events: Counter[str] = Counter()
        self.host_first: dict[str, float] = {}
        self.host_last: dict[str, float] = {}

    def add(self, ev: dict[str, Any]) -> None:
        kind = ev.get("event")
        url = _str(ev.get("url"))
        if url is None:
            return
        if kind == "duplicate":
            of = _str(ev.get("duplicate_of"))
            if of:
                self.duplicates[url] = (of, _int(ev.get("distance")), _str(ev.get("dup_kind")) or "near")
            return
        if kind != "fetch":
            return
        ts = _num(ev.get("ts")) or 0.0
        outcome = _str(ev.get("outcome")) or "unknown"
        robots = ev.get("robots")
        f = Fetch(
            url=url, host=_str(ev.get("host")) or "", outcome=outcome, status=_int(ev.get("status")),
            ts=ts, seconds=_num(ev.get("seconds")), bytes=_int(ev.get("bytes")), depth=_int(ev.get("depth")),
            content_type=_str(ev.get("content_type")) or "", location=_str(ev.get("location")),
            rule=_str(robots.get("rule")) if isinstance(robots, dict) else None,
            parent=_str(ev.get("parent")), anchor=_str(ev.get("anchor")),
        )
        if outcome == "deferred":  # the lease went on robots.txt; the URL was not fetched yet
            return
        self.events += 1
        self.first_ts = ts if self.first_ts is None else min(self.first_ts, ts)
        self.last_ts = ts if self.last_ts is None else max(self.last_ts, ts)
        bucket = self.per_slot[int(ts // SLOT)]
        bucket[0] += 1
        if _is_broken(f) or outcome == "http-error":
            bucket[1] += 1
        if f.seconds is not None and outcome in ("ok", "not-modified", "redirect", "http-error"):
            self.latency.append(f.seconds)
        self.bytes += f.bytes or 0
        self.host_events[f.host] += 1
        self.host_first.setdefault(f.host, ts)
        self.host_last[f.host] = ts
        if ev.get("duplicate_of") and isinstance(ev.get("duplicate_of"), str):
            self.duplicates[url] = (ev["duplicate_of"], _int(ev.get("distance")), "near")
        self.latest[url] = f


class _Graph:
    """One pass over the link graph, keeping what the sections need and no more."""

    def __init__(self, broken: set[str]) -> None:
        self.broken = broken
        self.referrers: dict[str, list[tuple[str, str]]] = defaultdict(list)
        self.referrer_counts: Counter[str] = Counter()
        self.canonical: dict[str, str] = {}  # page -> the canonical it declares
        self.linked = array("q")  # hash() of URLs some page links to (not a sitemap): 8 bytes each
        self.sitemap: dict[int, str] = {}  # hash -> URL listed in a sitemap
        self.traps: dict[str, list[tuple[str, str]]] = defaultdict(list)  # heuristic -> (url, from)
        self.pages = 0
        self.edges = 0
        self.cut = 0

    def add(self, src: str, edges: list[list[Any]], cut: int) -> None:
        self.pages += 1
        self.edges += len(edges)
        self.cut += cut
        # the hot loop of a report (millions of edges): one unpack, the cheap tests first
        broken, linked = self.broken, self.linked
        for edge in edges:
            try:
                dst, anchor, rel, source, trap = edge
            except (TypeError, ValueError):
                continue
            if rel and "canonical" in rel.split():
                self.canonical.setdefault(src, dst)
                continue
            if source == "sitemap":
                self.sitemap[hash(dst)] = dst
                continue
            linked.append(hash(dst))
            if trap:
                self.traps[trap].append((dst, src))
            if dst in broken:
                self.referrer_counts[dst] += 1
                refs = self.referrers[dst]
                if len(refs) < MAX_REFERRERS:
                    refs.append((src, anchor))


def gather(root: str | Path, top: int = TOP_N) -> Report:
    """The whole audit of crawl directory ``root``."""
    cd = CrawlDir(root)
    log = _Log()
    if cd.log.exists():
        for ev in read_log(cd.log):
            log.add(ev)
    latest = log.latest
    broken = {u for u, f in latest.items() if _is_broken(f)}
    graph = _Graph(broken)
    if (cd.graph / "data.mdb").exists():
        with LinkGraph(cd.graph, readonly=True) as g:
            for src, edges, cut in g.pages():
                graph.add(src, edges, cut)
    sections: dict[str, Section] = {}
    for s in (_hosts(log, graph, host_politeness(cd.root)), _broken(latest, graph), _redirects(latest), _duplicates(log),
              _canonicals(latest, graph, log), _robots(latest), _traps(graph),
              _slow(latest, top), _large(latest, top), _non_html(latest), _depth(latest),
              _orphans(graph)):
        sections[s.name] = s
    overview = _overview(cd, log, graph, sections)
    sections = {"overview": _overview_section(overview), **sections}
    return Report(sections=sections, plots=_plots(log, sections), overview=overview)


# -- sections ------------------------------------------------------------------

def _overview(cd: CrawlDir, log: _Log, graph: _Graph, sections: dict[str, Section]) -> dict[str, Any]:
    outcomes = Counter(f.outcome for f in log.latest.values())
    span = (log.last_ts - log.first_ts) if log.first_ts is not None and log.last_ts is not None else 0.0
    out: dict[str, Any] = {
        "dir": str(cd.root), "urls": len(log.latest), "fetches": log.events,
        "pages_ok": outcomes.get("ok", 0), "hosts": len(log.host_events), "bytes": log.bytes,
        "first": log.first_ts, "last": log.last_ts, "duration_s": round(span, 1),
        "outcomes": dict(sorted(outcomes.items())),
        "broken_links": len(sections["broken"].rows), "redirect_chains": len(sections["redirects"].rows),
        "duplicate_clusters": len(sections["duplicates"].rows), "graph_pages": graph.pages,
        "graph_edges": graph.edges, "links_cut": graph.cut,
    }
    try:
        from crawl.run import gather as stats_gather

        st = stats_gather(cd.root)
        fr = st.get("frontier") or {}
        out["cycle"] = fr.get("cycle")
        out["queued"] = fr.get("queued")
    except Exception:  # noqa: BLE001 - the frontier's counters are a bonus, not the audit
        out["cycle"] = None
    return out


def _iso(ts: float | None) -> str | None:
    import datetime as dt

    return None if ts is None else dt.datetime.fromtimestamp(ts, dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _overview_section(o: dict[str, Any]) -> Section:
    rows = [{"figure": k, "value": _iso(v) if k in ("first", "last") else v}
            for k, v in o.items() if k != "outcomes"]
    rows += [{"figure": f"outcome {k}", "value": v} for k, v in o["outcomes"].items()]
    return Section("overview", "Overview", ["figure", "value"], rows)


def _hosts(log: _Log, graph: _Graph, politeness: dict[str, dict[str, Any]]) -> Section:
    per: dict[str, dict[str, Any]] = {}
    lat: dict[str, list[float]] = defaultdict(list)
    traps: Counter[str] = Counter()
    for items in graph.traps.values():
        for dst, _ in items:
            traps[_host_of(dst)] += 1
    dup_hosts: Counter[str] = Counter(_host_of(u) for u in log.duplicates)
    for f in log.latest.values():
        row = per.setdefault(f.host, {"host": f.host, "urls": 0, "2xx": 0, "3xx": 0, "4xx": 0, "5xx": 0,
                                      "other": 0, "robots_blocked": 0, "bytes": 0})
        row["urls"] += 1
        cls = _status_class(f)
        if f.outcome == "robots-disallowed":
            row["robots_blocked"] += 1
        elif cls in ("2xx", "3xx", "4xx", "5xx"):
            row[cls] += 1
        else:
            row["other"] += 1
        row["bytes"] += f.bytes or 0
        if f.seconds is not None and f.outcome != "robots-disallowed":
            lat[f.host].append(f.seconds)
    rows = []
    for host, row in sorted(per.items()):
        span = log.host_last.get(host, 0) - log.host_first.get(host, 0)
        errors = row["4xx"] + row["5xx"] + row["other"]
        fetched = row["urls"] - row["robots_blocked"]
        ls = lat.get(host, [])
        row.update({
            "error_rate": round(errors / fetched, 3) if fetched else None,
            "pages_per_s": round(log.host_events[host] / span, 2) if span > 0 else None,
            "mean_s": round(sum(ls) / len(ls), 4) if ls else None,
            "p95_s": round(_percentile(ls, 0.95) or 0, 4) if ls else None,
            "duplicates": dup_hosts.get(host, 0), "trap_flags": traps.get(host, 0),
        })
        p = politeness.get(host, {})
        row.update({"robots": p.get("robots", ""), "delay_s": p.get("delay_s"),
                    "delay_reason": p.get("delay_reason", "")})
        rows.append(row)
    cols = ["host", "urls", "2xx", "3xx", "4xx", "5xx", "other", "robots_blocked", "robots", "delay_s",
            "delay_reason", "error_rate", "pages_per_s", "mean_s", "p95_s", "bytes", "duplicates", "trap_flags"]
    return Section("hosts", "Hosts", cols, rows)


def _host_of(url: str) -> str:
    start = url.find("//")
    end = url.find("/", start + 2) if start >= 0 else -1
    return url[start + 2:end if end >= 0 else None] if start >= 0 else ""


def _broken(latest: dict[str, Fetch], graph: _Graph) -> Section:
    rows = []
    for url in sorted(graph.broken):
        f = latest[url]
        refs = graph.referrers.get(url, [])
        rows.append({
            "url": url, "kind": _kind_of_break(f), "status": f.status, "outcome": f.outcome,
            "referrers": graph.referrer_counts.get(url, 0),
            "linked_from": [{"page": p, "anchor": a} for p, a in refs],
        })
    return Section("broken", "Broken links", ["url", "kind", "status", "outcome", "referrers", "linked_from"],
                   rows, note="every page that links to each broken URL, with its anchor text")


def _redirects(latest: dict[str, Fetch]) -> Section:
    redirects = {u: f for u, f in latest.items() if f.outcome == "redirect" and f.location}
    targets = {_canon(f.location) for f in redirects.values() if f.location}
    rows = []
    covered: set[str] = set()
    heads = [u for u in sorted(redirects) if u not in targets]
    rest = [u for u in sorted(redirects) if u in targets]  # inside chains, or in loops with no way in
    for start in heads + rest:
        if start in covered:
            continue
        chain = [start]
        cur = start
        loop = False
        while cur in redirects and len(chain) <= MAX_CHAIN:
            covered.add(cur)
            nxt = _canon(redirects[cur].location or "")
            if nxt in chain:
                loop = True
                chain.append(nxt)
                break
            chain.append(nxt)
            cur = nxt
        if loop or (len(chain) > 1 and start not in targets):
            final = latest.get(chain[-1])
            hosts = {_host_of(u) for u in chain}
            rows.append({
                "start": start, "hops": len(chain) - 1, "final": chain[-1],
                "final_status": final.status if final and not loop else None,
                "final_outcome": ("loop" if loop else final.outcome if final else "not fetched"),
                "cross_host": len(hosts) > 1, "loop": loop, "chain": chain,
            })
    return Section("redirects", "Redirect chains",
                   ["start", "hops", "final", "final_status", "final_outcome", "cross_host", "loop", "chain"],
                   rows)


def _duplicates(log: _Log) -> Section:
    clusters: dict[str, list[tuple[str, int | None, str]]] = defaultdict(list)
    for url, (of, dist, kind) in log.duplicates.items():
        clusters[of].append((url, dist, kind))
    rows = []
    for canonical, members in sorted(clusters.items(), key=lambda kv: (-len(kv[1]), kv[0])):
        rows.append({
            "canonical": canonical, "size": len(members) + 1,
            "exact": sum(1 for _, d, k in members if k == "exact" or d == 0),
            "near": sum(1 for _, d, k in members if not (k == "exact" or d == 0)),
            "members": [{"url": u, "distance": d, "kind": k} for u, d, k in sorted(members)],
        })
    return Section("duplicates", "Duplicate clusters", ["canonical", "size", "exact", "near", "members"],
                   rows, note="the canonical is the first page seen with this content")


def _canonicals(latest: dict[str, Fetch], graph: _Graph, log: _Log) -> Section:
    rows = []
    for page, declared in sorted(graph.canonical.items()):
        target = _canon(declared)
        if target == page:
            continue
        problem = ""
        f = latest.get(target)
        if f is None:
            problem = "canonical not fetched"
        elif f.outcome == "redirect":
            problem = "canonical redirects"
        elif _is_broken(f):
            problem = f"canonical is broken ({_kind_of_break(f)})"
        elif target in graph.canonical and _canon(graph.canonical[target]) != target:
            problem = "canonical declares another canonical"
        dup = log.duplicates.get(page)
        if not problem and dup is not None and dup[0] != target:
            problem = f"content duplicates {dup[0]}, not the declared canonical"
        if problem:
            rows.append({"page": page, "declared": declared, "problem": problem})
    return Section("canonicals", "rel=canonical conflicts", ["page", "declared", "problem"], rows)


def _robots(latest: dict[str, Fetch]) -> Section:
    by_rule: dict[tuple[str, str], list[str]] = defaultdict(list)
    for f in latest.values():
        if f.outcome == "robots-disallowed":
            by_rule[(f.host, f.rule or "(robots.txt unreachable: everything disallowed)")].append(f.url)
    rows = [{"host": h, "rule": r, "urls": len(us), "examples": sorted(us)[:20]}
            for (h, r), us in sorted(by_rule.items(), key=lambda kv: (-len(kv[1]), kv[0]))]
    return Section("robots", "Blocked by robots.txt", ["host", "rule", "urls", "examples"], rows)


def _traps(graph: _Graph) -> Section:
    rows = []
    for heuristic, items in sorted(graph.traps.items()):
        seen: dict[str, str] = {}
        for dst, src in items:
            seen.setdefault(dst, src)
        for dst, src in sorted(seen.items()):
            rows.append({"heuristic": heuristic, "url": dst, "linked_from": src})
    return Section("traps", "Trap-flagged URLs", ["heuristic", "url", "linked_from"], rows)


def _slow(latest: dict[str, Fetch], top: int) -> Section:
    timed = [f for f in latest.values() if f.seconds is not None and f.outcome in ("ok", "not-modified")]
    timed.sort(key=lambda f: -(f.seconds or 0))
    rows = [{"url": f.url, "seconds": round(f.seconds or 0, 4), "bytes": f.bytes} for f in timed[:top]]
    return Section("slow", "Slowest pages", ["url", "seconds", "bytes"], rows, total=len(timed))


def _large(latest: dict[str, Fetch], top: int) -> Section:
    sized = [f for f in latest.values() if f.bytes]
    sized.sort(key=lambda f: -(f.bytes or 0))
    rows = [{"url": f.url, "bytes": f.bytes, "content_type": f.content_type, "outcome": f.outcome}
            for f in sized[:top]]
    return Section("large", "Largest pages", ["url", "bytes", "content_type", "outcome"], rows, total=len(sized))


def _non_html(latest: dict[str, Fetch]) -> Section:
    rows = [{"url": f.url, "content_type": f.content_type or "(none)", "outcome": f.outcome}
            for f in sorted(latest.values(), key=lambda f: f.url)
            if f.content_type and "html" not in f.content_type
            and f.outcome in ("ok", "not-modified", "skipped-content-type")]
    return Section("non_html", "Non-HTML", ["url", "content_type", "outcome"], rows)


def _depth(latest: dict[str, Fetch]) -> Section:
    c = Counter(f.depth for f in latest.values() if f.depth is not None)
    rows = [{"depth": d, "urls": n} for d, n in sorted(c.items())]
    return Section("depth", "Depth distribution", ["depth", "urls"], rows)


def _orphans(graph: _Graph) -> Section:
    # 8 bytes per edge, sorted once: a set of millions of Python ints would cost ~70 bytes each
    linked = np.unique(np.frombuffer(graph.linked, dtype=np.int64)) if len(graph.linked) else np.empty(0, np.int64)
    urls = sorted(graph.sitemap.items(), key=lambda kv: kv[1])
    if not urls:
        return Section("orphans", "In sitemaps, never linked", ["url"], [])
    wanted = np.array([h for h, _ in urls], dtype=np.int64)
    pos = np.searchsorted(linked, wanted)
    found = (pos < len(linked)) & (linked[np.minimum(pos, max(len(linked) - 1, 0))] == wanted) \
        if len(linked) else np.zeros(len(urls), dtype=bool)
    rows = [{"url": url} for (_, url), hit in zip(urls, found.tolist(), strict=True) if not hit]
    return Section("orphans", "In sitemaps, never linked", ["url"], rows)


# -- plots ---------------------------------------------------------------------

def _plots(log: _Log, sections: dict[str, Section]) -> dict[str, Any]:
    rate: list[tuple[float, float, float]] = []
    if log.per_slot:
        first, last = min(log.per_slot), max(log.per_slot)
        step = max(1, math.ceil((last - first + 1) / 120))  # slots per point
        for start in range(first, last + 1, step):
            got = [log.per_slot[s] for s in range(start, start + step) if s in log.per_slot]
            per_min = 60 / (SLOT * step)
            rate.append((start * SLOT, sum(g[0] for g in got) * per_min, sum(g[1] for g in got) * per_min))
    edges = [0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1, 2, 5, 10, 30]
    hist = [0] * (len(edges) + 1)
    for s in log.latency:
        hist[bisect_left(edges, s)] += 1
    labels = [f"<{e:g}s" for e in edges] + [f">={edges[-1]:g}s"]
    hosts = sorted(sections["hosts"].rows, key=lambda r: -r["urls"])[:20]
    depth = [(r["depth"], r["urls"]) for r in sections["depth"].rows]
    sizes = Counter(r["size"] for r in sections["duplicates"].rows)
    return {
        "rate": rate,  # (minute start, fetches, errors)
        "latency": list(zip(labels, hist, strict=True)),
        "status_mix": [(r["host"], r["2xx"], r["3xx"], r["4xx"], r["5xx"], r["other"] + r["robots_blocked"])
                       for r in hosts],
        "depth": depth,
        "cluster_sizes": sorted(sizes.items()),
    }
