"""Benchmark the URL-seen set: batched checks/s at 1M and 10M URLs, with RSS.

Fingerprints stand in for canonical URLs (xxh3 of a counter, so any of them
can be regenerated without keeping 10M ints in RAM). Workloads per size:

* links:    the design notes' mix, 50 links a page of which ~3 are new
            (94% already seen, drawn uniformly from the whole set: the worst
            case, no locality at all);
* all-new:  every URL new (the filter answers alone, then one LMDB insert);
* all-seen: every URL known (every check needs the exact set).

Also measured: the filter's false-positive rate against its sizing, bytes per
URL (filter, LMDB file, anonymous RSS) and `unseen()` on URL records
including canonicalisation. Goal: >= 500,000 checks/s.

    python scripts/bench_seen.py            # 1M and 10M
    python scripts/bench_seen.py 200000     # one size
"""

from __future__ import annotations

import os
import random
import sys
import tempfile
import time
from pathlib import Path

import xxhash

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from crawl.seen import SeenSet  # noqa: E402

BATCH = 5000
_h = xxhash.xxh3_64_intdigest


def fp(i: int) -> int:
    return _h(i.to_bytes(8, "little"))


def rss() -> dict[str, int]:
    out = {}
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(("VmRSS", "RssAnon", "RssFile")):
                k, v = line.split(":")
                out[k] = int(v.split()[0]) * 1024
    return out


def run(n: int) -> None:
    rng = random.Random(n)
    with tempfile.TemporaryDirectory(prefix="bench_seen") as d:
        base = rss()
        s = SeenSet(Path(d) / "seen", expected=n, fp_rate=0.01)
        t = time.perf_counter()
        for start in range(0, n, 20_000):
            s.add_fps([fp(i) for i in range(start, min(n, start + 20_000))])
        build = time.perf_counter() - t
        after = rss()
        next_new = n

        def workload(new_share: float, total: int) -> float:
            nonlocal next_new
            batches = []
            for _ in range(total // BATCH):
                b = []
                for _ in range(BATCH):
                    if rng.random() < new_share:
                        b.append(fp(next_new))
                        next_new += 1
                    else:
                        b.append(fp(rng.randrange(n)))
                batches.append(b)
            t0 = time.perf_counter()
            for b in batches:
                s.add_fps(b)
            return total / (time.perf_counter() - t0)

        links = workload(0.06, 200_000)
        seen_all = workload(0.0, 100_000)
        new_all = workload(1.0, 100_000)
        # false positives: probe fingerprints that were never added
        probes = [fp(i) for i in range(10 * n, 10 * n + 500_000)]
        measured = sum(s.bloom.maybe_many(probes)) / len(probes)
        expected = s.bloom.expected_fp_rate(len(s))
        urls = [f"http://h{rng.randrange(5000)}.example/p/{rng.randrange(10**9)}?utm_source=x"
                for _ in range(50_000)]
        recs = [{"kind": "link", "v": 1, "url": u} for u in urls]
        t0 = time.perf_counter()
        for i in range(0, len(recs), BATCH):
            s.unseen(recs[i:i + BATCH])
        records_rate = len(recs) / (time.perf_counter() - t0)
        total = len(s)
        disk = sum(f.stat().st_size for f in (Path(d) / "seen").iterdir())
        s.close()
    anon = after.get("RssAnon", 0) - base.get("RssAnon", 0)
    print(f"seen @ {n:,} URLs: built in {build:.1f} s ({n / build:,.0f} inserts/s)")
    print(f"  seen checks (links mix, 6% new, batched {BATCH}): {links:,.0f} checks/s"
          f"  goal 500,000: {'met' if links >= 500_000 else 'NOT met'}")
    print(f"  seen checks (all seen): {seen_all:,.0f} checks/s; (all new): {new_all:,.0f} checks/s")
    print(f"  unseen() on URL records incl. canonicalisation: {records_rate:,.0f} URLs/s")
    print(f"  bloom false-positive rate: measured {measured:.4%}, sizing formula {expected:.4%}"
          f" (target 1.00%), ratio {measured / expected:.3f}")
    print(f"  memory per URL: bloom {s.bloom.nbytes * 8 / total:.1f} bits"
          f" ({s.bloom.nbytes / 2**20:.1f} MiB), anonymous RSS {anon / n:.1f} B,"
          f" LMDB file {disk / total:.1f} B; RSS total {after['VmRSS'] / 2**20:.0f} MiB"
          f" (file-backed LMDB pages {after.get('RssFile', 0) / 2**20:.0f} MiB)")


def main() -> None:
    sizes = [int(a) for a in sys.argv[1:]] or [1_000_000, 10_000_000]
    os.environ.setdefault("PYTHONHASHSEED", "0")
    for n in sizes:
        run(n)


if __name__ == "__main__":
    main()
