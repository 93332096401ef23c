"""Benchmark: one `crawl fetch` process against the bundled test web.

Starts `crawl testweb serve` with >= 2,000 plain hosts (no slow or hostile
ones: this measures the fetcher, not the timeouts), feeds every page URL to
one `crawl fetch` subprocess (no politeness delay: fetch has none, the
frontier owns it), and prints pages/s, CPU-ms per page of the fetch process,
and WARC MB/s. The test web runs on the same (shared) cores, so the figures
are a floor, and the server's own CPU time is printed beside them.

    python scripts/bench_fetch.py [--hosts 2000] [--pages 3] [--concurrency 256] [--profile]

--profile runs the fetch in-process under cProfile (CPU time of the event-loop
thread) and prints the share of each package and the top functions.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import orjson

ROOT = Path(__file__).resolve().parent.parent


def start_web(out: Path, hosts: int, pages: int) -> tuple[subprocess.Popen[bytes], dict]:
    cmd = [sys.executable, "-m", "crawl", "testweb", "serve", "--out", str(out), "--hosts", str(hosts),
           "--pages", str(pages), "--mix", "plain", "--links", "4",
           "--full-manifest-limit", str(hosts)]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, cwd=ROOT)
    assert proc.stdout is not None
    ready = orjson.loads(proc.stdout.readline())
    return proc, ready


def proc_cpu(pid: int) -> float:
    """User + system CPU seconds of a running process, from /proc."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--hosts", type=int, default=2000)
    ap.add_argument("--pages", type=int, default=3)
    ap.add_argument("--concurrency", type=int, default=256)
    ap.add_argument("--profile", action="store_true")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-fetch-") as tmp:
        web_dir, crawl_dir = Path(tmp) / "web", Path(tmp) / "D"
        web, ready = start_web(web_dir, args.hosts, args.pages)
        try:
            urls = []
            with open(web_dir / "manifest.ndjson", "rb") as f:
                for line in f:
                    rec = orjson.loads(line)
                    if rec["kind"] == "page" and rec.get("content_type", "").startswith("text/html") \
                            and "robots" not in rec["path"] and not rec.get("disallowed"):
                        urls.append(rec["url"])
            inp = Path(tmp) / "urls.txt"
            inp.write_text("\n".join(urls) + "\n")
            web_cpu0 = proc_cpu(web.pid)
            if args.profile:
                profile(inp, crawl_dir, web_dir / "hosts", args.concurrency)
                return
            t0 = time.perf_counter()
            cmd = [sys.executable, "-m", "crawl", "fetch", "--dir", str(crawl_dir), "--resolve-file",
                   str(web_dir / "hosts"), "--allow-private", "-c", str(args.concurrency), "--host-delay", "0"]
            with open(inp, "rb") as i, open(Path(tmp) / "out.ndjson", "wb") as o:
                p = subprocess.Popen(cmd, stdin=i, stdout=o, cwd=ROOT)
                _, status, usage = os.wait4(p.pid, 0)
            wall = time.perf_counter() - t0
            web_cpu = proc_cpu(web.pid) - web_cpu0
        finally:
            web.terminate()
            web.wait()
        out = [orjson.loads(x) for x in (Path(tmp) / "out.ndjson").read_bytes().splitlines()]
        ok = sum(1 for r in out if r["outcome"] == "ok")
        warc_bytes = sum(f.stat().st_size for f in (crawl_dir / "warc").glob("*.warc.gz"))
        cpu = usage.ru_utime + usage.ru_stime
        outcomes: dict[str, int] = {}
        for r in out:
            outcomes[r["outcome"]] = outcomes.get(r["outcome"], 0) + 1
        print(f"fetch: {len(urls):,} pages from {args.hosts:,} hosts (+{args.hosts:,} robots.txt) "
              f"in {wall:.1f} s, concurrency {args.concurrency}; outcomes {outcomes}")
        print(f"fetch: {len(out) / wall:,.0f} pages/s ({ok / wall:,.0f} ok pages/s), "
              f"{cpu * 1000 / max(1, len(out)):.2f} CPU-ms/page in crawl fetch "
              f"(test web server used {web_cpu:.1f} CPU-s, {web_cpu * 1000 / max(1, len(out)):.2f} ms/page)")
        print(f"warc: {warc_bytes / 1e6:,.1f} MB gzip written, {warc_bytes / 1e6 / wall:,.1f} MB/s; "
              f"peak RSS of crawl fetch <= {usage.ru_maxrss / 1024:,.0f} MiB (Linux keeps the forking "
              f"parent's peak across exec, so this is a ceiling); cores {os.cpu_count()}, "
              f"load average {os.getloadavg()[0]:.1f}")
        if os.WEXITSTATUS(status) != 0:
            sys.exit(f"crawl fetch exited with status {os.WEXITSTATUS(status)}")


def profile(inp: Path, crawl_dir: Path, hosts: Path, concurrency: int) -> None:
    """CPU profile of the event-loop thread, summed by package, plus the top functions."""
    import cProfile
    import pstats

    from crawl.commands import main as crawl_main

    sys.stdin = open(inp)  # noqa: SIM115
    real_stdout, sys.stdout = sys.stdout, open(os.devnull, "w")  # noqa: SIM115
    prof = cProfile.Profile(time.thread_time)
    prof.enable()
    try:
        crawl_main(["fetch", "--dir", str(crawl_dir), "--resolve-file", str(hosts), "--allow-private",
                    "-c", str(concurrency), "--host-delay", "0"])
    except SystemExit:
        pass
    prof.disable()
    sys.stdout = real_stdout
    stats = pstats.Stats(prof)
    by_pkg: dict[str, float] = {}
    for (path, _line, _fn), (_cc, _nc, tt, _ct, _callers) in stats.stats.items():  # type: ignore[attr-defined]
        pkg = "builtins/C"
        for name in ("trio", "httptools", "warcio", "lmdb", "crawl", "orjson"):
            if f"/{name}/" in path:
                pkg = name
                break
        else:
            if path.endswith(".py"):
                pkg = "stdlib"
        by_pkg[pkg] = by_pkg.get(pkg, 0.0) + tt
    total = sum(by_pkg.values()) or 1.0
    print("profile: event-loop thread CPU by package: " + ", ".join(
        f"{k} {v / total:.0%}" for k, v in sorted(by_pkg.items(), key=lambda kv: -kv[1])))
    stats.sort_stats("tottime").print_stats(15)


if __name__ == "__main__":
    main()
