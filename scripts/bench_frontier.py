"""Benchmark the durable frontier: adds/s, lease+complete pairs/s, RSS, bytes per URL.

    python scripts/bench_frontier.py                      # defaults: 100k hosts, 1M URLs
    python scripts/bench_frontier.py --rss-urls 10000000  # the 10M-URL RSS figure (takes minutes)

Every commit is fsynced (sync=True), as in production. The clock is
simulated (``now`` advances 2 s per lease round) so every host is due again
after its 1 s politeness delay without the benchmark sleeping. Goals
(issue 4): >= 50,000 adds/s, >= 20,000 lease+complete pairs/s, RSS < 300 MB
at 10M queued URLs, <= 150 bytes on disk per queued URL.

"Bytes on disk" counts the pages LMDB has in use (B-tree pages of every named
database), not the file size, which also holds pages freed by copy-on-write
that LMDB reuses. RSS is reported as a whole and split into anonymous memory
(the process's own heap) and file-backed pages of the memory map (page cache
the kernel can drop at any time).
"""

from __future__ import annotations

import argparse
import random
import shutil
import subprocess
import sys
import tempfile
import time
import zlib
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from crawl.frontier import Frontier  # noqa: E402

BATCH = 10_000


def url_batches(n: int, hosts: int, start: int = 0):  # type: ignore[no-untyped-def]
    for lo in range(start, start + n, BATCH):
        hi = min(lo + BATCH, start + n)
        yield [
            {"kind": "url", "v": 1, "url": f"http://www.host{i % hosts}.example.com/section/{i // hosts % 50}/page-{i}.html",
             "depth": 2}
            for i in range(lo, hi)
        ]


def used_bytes(fr: Frontier) -> int:
    pages = 0
    with fr.env.begin() as txn:
        for db in fr.db.values():
            s = txn.stat(db)
            pages += s["branch_pages"] + s["leaf_pages"] + s["overflow_pages"]
    s = fr.env.stat()
    pages += s["branch_pages"] + s["leaf_pages"] + s["overflow_pages"]
    return pages * s["psize"]


def proc_status() -> dict[str, int]:
    out = {}
    for line in Path("/proc/self/status").read_text().splitlines():
        key, _, value = line.partition(":")
        if key in ("VmRSS", "VmHWM", "RssAnon", "RssFile"):
            out[key] = int(value.split()[0]) * 1024
    return out


def add_all(fr: Frontier, n: int, hosts: int) -> tuple[float, float]:
    """Wall and CPU seconds spent in Frontier.add (record generation excluded)."""
    spent = cpu = 0.0
    for batch in url_batches(n, hosts):
        t, c = time.perf_counter(), time.process_time()
        fr.add(batch, 1000.0)
        spent += time.perf_counter() - t
        cpu += time.process_time() - c
    return spent, cpu


def ip_of(host: str) -> str:
    """~1.5 hosts per address (65,536 addresses), so the per-IP cap rarely binds."""
    h = zlib.crc32(host.encode()) & 0xFFFF
    return f"10.0.{h >> 8}.{h & 255}"


def scatter(fr: Frontier, batch: int, hosts: int, now: float) -> float:
    """Lease every host once and complete it with a random response time, so
    the schedule is no longer in host-id order (as after hours of a real crawl,
    where each host's next-allowed time depends on its own delays): later
    lease batches then touch hosts spread over the whole database."""
    rnd = random.Random(4)
    for _ in range(hosts // batch):
        leases = fr.next(batch, 60.0, now)
        fr.complete([{"kind": "fetch", "v": 1, "url": r["url"], "lease": r["lease"], "outcome": "ok",
                      "status": 200, "ip": ip_of(r["host"]), "timings": {"total": rnd.uniform(0.0, 60.0)}}
                     for r in leases], now)
    return now + 300.0  # every host is due again (the release delay is capped at 300 s)


def pairs(fr: Frontier, seconds: float, batch: int, now: float = 2000.0) -> tuple[int, float, float]:
    """Leases handed out and completed, with wall and CPU seconds in next + complete."""
    done, spent, cpu = 0, 0.0, 0.0
    while spent < seconds:
        t, c = time.perf_counter(), time.process_time()
        leases = fr.next(batch, 60.0, now)
        spent += time.perf_counter() - t
        cpu += time.process_time() - c
        results = [{"kind": "fetch", "v": 1, "url": r["url"], "lease": r["lease"], "outcome": "ok",
                    "status": 200, "ip": ip_of(r["host"]), "timings": {"total": 0.1}}
                   for r in leases]
        t, c = time.perf_counter(), time.process_time()
        fr.complete(results, now)
        spent += time.perf_counter() - t
        cpu += time.process_time() - c
        done += len(leases)
        now += 2.0
    return done, spent, cpu


def rss_child(n: int, hosts: int, path: str) -> None:
    with Frontier(path) as fr:
        add_all(fr, n, hosts)
        st = proc_status()
        print(n, st["VmRSS"], st["VmHWM"], st.get("RssAnon", 0), st.get("RssFile", 0), used_bytes(fr),
              fr.stats(1000.0)["queued"], flush=True)


def mb(n: float) -> str:
    return f"{n / 1e6:,.0f} MB"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--hosts", type=int, default=100_000)
    ap.add_argument("--urls", type=int, default=1_000_000)
    ap.add_argument("--pair-seconds", type=float, default=15.0)
    ap.add_argument("--lease-batch", type=int, default=1000)
    ap.add_argument("--rss-urls", type=int, default=0, help="also add this many URLs in a fresh process "
                    "and report its RSS (10,000,000 for the issue's figure)")
    ap.add_argument("--scatter", action="store_true", help="also measure pairs after one pass over every "
                    "host with random response times (hosts then come up in an order unrelated to their ids)")
    ap.add_argument("--rss-child", type=int, help=argparse.SUPPRESS)
    ap.add_argument("--dir", help="work directory (default: a temporary one, removed)")
    args = ap.parse_args()
    if args.rss_child:
        rss_child(args.rss_child, args.hosts, args.dir)
        return

    work = Path(args.dir or tempfile.mkdtemp(prefix="bench-frontier-"))
    try:
        with Frontier(work / "f1") as fr:
            spent, cpu = add_all(fr, args.urls, args.hosts)
            print(f"frontier add: {args.urls / spent:,.0f} adds/s ({args.urls / cpu:,.0f} per CPU-second; "
                  f"{args.urls:,} URLs, {args.hosts:,} hosts, fsynced batches of {BATCH:,}) goal 50,000")
            per_url = used_bytes(fr) / fr.stats(1000.0)["queued"]
            print(f"frontier disk: {per_url:,.0f} bytes per queued URL (LMDB pages in use) goal <= 150")
            n, spent, cpu = pairs(fr, args.pair_seconds, args.lease_batch)
            print(f"frontier next+complete: {n / spent:,.0f} pairs/s ({n / cpu:,.0f} per CPU-second; "
                  f"batches of {args.lease_batch}, {args.hosts:,} hosts, {args.urls:,} queued) goal 20,000")
            if args.scatter:
                now = scatter(fr, args.lease_batch, args.hosts, 3000.0)
                n, spent, cpu = pairs(fr, args.pair_seconds, args.lease_batch, now)
                print(f"frontier next+complete, scattered schedule: {n / spent:,.0f} pairs/s "
                      f"({n / cpu:,.0f} per CPU-second; hosts leased in an order unrelated to their ids)")
            st = proc_status()
            print(f"frontier RSS: {mb(st['VmRSS'])} at {args.urls:,} queued URLs (peak {mb(st['VmHWM'])}; "
                  f"anonymous {mb(st.get('RssAnon', 0))}, file-backed {mb(st.get('RssFile', 0))}, "
                  f"trimmed {fr.trimmer.trims} times)")
        shutil.rmtree(work / "f1", ignore_errors=True)
        if not args.rss_urls:
            print("frontier RSS at 10,000,000 URLs: run with --rss-urls 10000000 (takes ~10-20 min)")
            return
        out = subprocess.run(
            [sys.executable, __file__, "--rss-child", str(args.rss_urls), "--hosts", str(args.hosts),
             "--dir", str(work / "f2")], capture_output=True, text=True, check=True,
        ).stdout.split()
        n, rss, hwm, anon, filemap, used, queued = map(int, out)
        print(f"frontier RSS: {mb(rss)} at {n:,} queued URLs (peak {mb(hwm)}; anonymous {mb(anon)}, "
              f"file-backed {mb(filemap)}) goal < 300 MB at 10,000,000")
        print(f"frontier disk at {queued:,} URLs: {used / queued:,.0f} bytes per queued URL")
    finally:
        if not args.dir:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
