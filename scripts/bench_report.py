"""Benchmark: crawl report on a large crawl directory (100,000 pages, 5 M edges).

The directory is synthetic but shaped like a real audit: 2,000 hosts, 2% of
URLs broken (each linked from many pages), redirect chains, duplicate
clusters, sitemap URLs that nothing links to, and 50 out-links per page
into the same sites. It is written with the crawler's own writers (the
crawl log and the link graph), then ``crawl report`` runs in a fresh
process for each output format; its wall time and peak RSS are printed
against the goals (30 s, 300 MB) as ratios.

    python scripts/bench_report.py [--pages 100000] [--edges-per-page 50]
"""

from __future__ import annotations

import argparse
import os
import random
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from crawl.core import CrawlDir, records  # noqa: E402
from crawl.parse import LinkGraph  # noqa: E402
from crawl.run import CrawlLog  # noqa: E402

GOAL_S, GOAL_MB = 30.0, 300.0


def build(root: Path, pages: int, per_page: int, hosts: int = 2000, seed: int = 1) -> tuple[int, float]:
    """Write the crawl log and link graph; returns (edges, seconds taken)."""
    t0 = time.perf_counter()
    r = random.Random(seed)
    cd = CrawlDir(root)
    urls = [f"http://h{i % hosts:04d}.test/section-{i % 7}/page-{i}.html" for i in range(pages)]
    log = CrawlLog(cd.log)
    now = 1.79e9
    batch = []
    for i, url in enumerate(urls):
        roll = r.random()
        ev = records.make("event", ts=now + i * 0.01, event="fetch", url=url, host=url.split("/")[2],
                          depth=i % 6, seconds=r.expovariate(30), bytes=int(r.lognormvariate(10, 1)))
        if roll < 0.02:
            ev.update(outcome="http-error", status=404)
        elif roll < 0.025:
            ev.update(outcome="redirect", status=301, location=urls[(i + 1) % pages])
        elif roll < 0.03:
            ev.update(outcome="ok", status=200, content_type="application/pdf")
        else:
            ev.update(outcome="ok", status=200, content_type="text/html")
        if 0.03 <= roll < 0.05:
            ev["duplicate_of"] = urls[(i // 10) * 10]
            ev["distance"] = r.randrange(4)
        batch.append(ev)
        if len(batch) == 5000:
            log.write(batch)
            batch = []
    log.write(batch)
    edges = 0
    with LinkGraph(cd.graph) as g:
        chunk: list[tuple[str, list[dict]]] = []
        for i, url in enumerate(urls):
            host = i % hosts
            links = []
            for k in range(per_page):
                j = (host + hosts * r.randrange(pages // hosts)) if k < per_page - 5 else r.randrange(pages)
                links.append({"kind": "link", "url": urls[j % pages], "anchor": f"link {k}", "rel": [],
                              "source": "a" if i % 50 else "sitemap"})
            edges += len(links)
            chunk.append((url, links))
            if len(chunk) == 2000:
                g.record(chunk)
                chunk = []
        g.record(chunk)
    return edges, time.perf_counter() - t0


def run_report(root: Path, fmt: str, out: Path) -> tuple[float, float, float]:
    """(wall seconds, CPU seconds, peak RSS MB) of one ``crawl report`` process.

    CPU seconds are printed beside the wall time because this machine is
    shared: at a load of 10 the wall time is four to five times the CPU time,
    and the CPU time is what the report costs on a machine of its own.
    """
    ru0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    before = ru0.ru_maxrss
    t0 = time.perf_counter()
    subprocess.run([sys.executable, "-m", "crawl", "report", "--dir", str(root), "--format", fmt,
                    "--out", str(out)], check=True, capture_output=True)
    elapsed = time.perf_counter() - t0
    ru = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (ru.ru_utime + ru.ru_stime) - (ru0.ru_utime + ru0.ru_stime)
    peak = ru.ru_maxrss
    # ru_maxrss of children is the largest child so far; each run is larger or equal in practice,
    # so a run smaller than an earlier one shows the earlier peak (an upper bound, never less)
    return elapsed, cpu, max(peak, before) / 1024


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--pages", type=int, default=100_000)
    ap.add_argument("--edges-per-page", type=int, default=50)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench_report") as tmp:
        root = Path(tmp) / "crawl"
        edges, built = build(root, args.pages, args.edges_per_page)
        print(f"crawl dir: {args.pages:,} pages, {edges:,} edges (written in {built:.1f} s); "
              f"load average {os.getloadavg()[0]:.1f}")
        for fmt, out in (("ndjson", Path(tmp) / "nd"), ("html", Path(tmp) / "report.html")):
            secs, cpu, rss = run_report(root, fmt, out)
            size = sum(p.stat().st_size for p in out.glob("*")) if out.is_dir() else out.stat().st_size
            print(f"  crawl report --format {fmt:6s}: {secs:6.1f} s wall ({secs / GOAL_S:.2f} of the {GOAL_S:.0f} s goal), "
                  f"{cpu:5.1f} CPU s ({cpu / GOAL_S:.2f} of the goal), "
                  f"peak RSS {rss:5.0f} MB ({rss / GOAL_MB:.2f} of {GOAL_MB:.0f} MB), output {size / 1e6:.1f} MB")


if __name__ == "__main__":
    main()
