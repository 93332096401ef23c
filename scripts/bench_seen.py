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
import subprocess
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
        # Bulk-load the exact set in a child process (big batches go straight
        # to sorted runs; its memory is not ours), then let SeenSet rebuild its filter from it,
        # as it does whenever bloom.bin is missing.
        t = time.perf_counter()
        subprocess.run([sys.executable, __file__, "--load", d, str(n)], check=True)
        load = time.perf_counter() - t
        base = rss()
        t = time.perf_counter()
        s = SeenSet(Path(d) / "seen", expected=n + 200_000, fp_rate=0.01)
        build = time.perf_counter() - t
        after = rss()
        next_new = n

        def workload(new_share: float, total: int, skew: float = 0.0) -> tuple[float, float]:
            nonlocal next_new
            batches = []
            for _ in range(total // BATCH):
                b = []
                for _ in range(BATCH):
                    if rng.random() < new_share:
                        b.append(fp(next_new))
                        next_new += 1
                    elif skew:
                        # power-law popularity: a few URLs (navigation) on every page
                        b.append(fp(int(n * rng.random() ** skew)))
                    else:
                        b.append(fp(rng.randrange(n)))
                batches.append(b)
            t0, c0 = time.perf_counter(), time.process_time()
            for b in batches:
                s.add_fps(b)
            return total / (time.perf_counter() - t0), total / (time.process_time() - c0)

        links = workload(0.06, 200_000)
        skewed = workload(0.06, 200_000, skew=4.0)
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
    print(f"seen @ {n:,} URLs: exact set bulk-loaded in {load:.1f} s; filter rebuilt from it"
          f" in {build:.1f} s ({n / build:,.0f} keys/s)")
    def fmt(r: tuple[float, float]) -> str:
        return f"{r[0]:,.0f} checks/s wall ({r[1]:,.0f} per CPU second)"

    def goal(r: tuple[float, float]) -> str:
        cpu = "met" if r[1] >= 500_000 else "NOT met"
        wall = "met" if r[0] >= 500_000 else "NOT met"
        return f"goal 500,000: {cpu} per CPU second, {wall} wall-clock"

    print(f"  seen checks, links mix (6% new, seen ones uniform, batched {BATCH}): {fmt(links)}"
          f"; {goal(links)}")
    print(f"  seen checks, links mix with power-law popularity: {fmt(skewed)}; {goal(skewed)}")
    print(f"  seen checks, all seen: {fmt(seen_all)}; all new (fsync per batch): {fmt(new_all)}")
    print(f"  unseen() on URL records incl. canonicalisation: {records_rate:,.0f} URLs/s")
    print(f"  bloom false-positive rate: measured {measured:.4%}, sizing formula {expected:.4%}"
          f" (target 1.00%), ratio {measured / expected:.3f}")
    print(f"  memory per URL: bloom {s.bloom.nbytes * 8 / total:.1f} bits"
          f" ({s.bloom.nbytes / 2**20:.1f} MiB), anonymous RSS {anon / n:.1f} B,"
          f" LMDB file {disk / total:.1f} B; RSS total {after['VmRSS'] / 2**20:.0f} MiB"
          f" (file-backed LMDB pages {after.get('RssFile', 0) / 2**20:.0f} MiB)")


def load(d: str, n: int) -> None:
    """Child process: add n fingerprints through SeenSet in 1M batches, then
    remove the filter file so the parent rebuilds it from the exact set."""
    path = Path(d) / "seen"
    with SeenSet(path, expected=n, sync=False) as s:
        for i in range(0, n, 1_000_000):
            s.add_fps(list(map(fp, range(i, min(n, i + 1_000_000)))))
    (path / "bloom.bin").unlink()


def main() -> None:
    if sys.argv[1:2] == ["--load"]:
        load(sys.argv[2], int(sys.argv[3]))
        return
    print(f"seen bench (load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores;"
          f" LMDB commits are fsynced as in `crawl seen`)")
    sizes = [int(a) for a in sys.argv[1:]] or [1_000_000, 10_000_000]
    os.environ.setdefault("PYTHONHASHSEED", "0")
    for n in sizes:
        run(n)


if __name__ == "__main__":
    main()
