"""How many ordinary pages per second the test web serves with keep-alive, from one core.

Starts ``crawl testweb serve --mix plain`` (one single-threaded process,
pinned to one CPU when ``taskset`` exists), then drives it with ``wrk``
(installed with apt-get when missing) through a Lua script that cycles over
every page of every host by Host header. Each page is fetched once first, so
the figure is the steady state of a crawl benchmark that revisits the web;
the cold figure (pages generated on demand, per CPU-second) is printed too. Without wrk it
falls back to a Python load generator and says so (that one is slower than
the server, so its figure is a lower bound).

    python scripts/bench_testweb.py [--seconds 5] [--connections 64] [--profile both]
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import httpx
import orjson

ROOT = Path(__file__).resolve().parent.parent
TARGET = 5000


def cpu_seconds(pid: int) -> float:
    """User + system CPU time of a process (Linux /proc)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def count_log(out: Path) -> int:
    with open(out / "requests.log", "rb") as f:
        return sum(1 for _ in f)


def ensure_tool(name: str) -> str | None:
    """The path of a command, installed from Debian's package of that name when
    missing (as root, ``apt-get update`` only if the first try fails); None if not."""
    found = shutil.which(name)
    if found:
        return found
    if shutil.which("apt-get") and os.geteuid() == 0:
        quiet = {"stdout": subprocess.DEVNULL, "stderr": subprocess.DEVNULL}
        if subprocess.run(["apt-get", "install", "-y", name], **quiet).returncode != 0:
            subprocess.run(["apt-get", "update"], **quiet)
            subprocess.run(["apt-get", "install", "-y", name], **quiet)
    return shutil.which(name)


def start(out: Path, hosts: int, pages: int, profile: str) -> tuple[subprocess.Popen[bytes], dict]:
    cmd = [sys.executable, "-m", "crawl", "testweb", "serve", "--out", str(out), "--hosts", str(hosts),
           "--pages", str(pages), "--mix", "plain", "--addresses", "4", "--clock", "1780000000",
           "--profile", profile]
    if shutil.which("taskset"):
        cmd = ["taskset", "-c", "0", *cmd]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, cwd=ROOT)
    assert proc.stdout is not None
    return proc, orjson.loads(proc.stdout.readline())


def targets(out: Path) -> list[tuple[str, str, str]]:
    """(address, host header, path) of every ordinary page."""
    addr = {}
    for line in (out / "hosts").read_text().splitlines():
        if line and not line.startswith("#"):
            a, n = line.split()
            addr[n] = a
    result = []
    with open(out / "manifest.ndjson", "rb") as f:
        for line in f:
            rec = orjson.loads(line)
            if rec["kind"] == "page" and rec.get("version") is not None:
                result.append((addr[rec["host"]], rec["host"], rec["path"]))
    return result


def warm(port: int, urls: list[tuple[str, str, str]]) -> tuple[float, int]:
    t0 = time.perf_counter()
    total = 0
    with httpx.Client() as c:
        for a, h, p in urls:
            total += len(c.get(f"http://{a}:{port}{p}", headers={"Host": h}).content)
    return len(urls) / (time.perf_counter() - t0), total // len(urls)


def run_wrk(wrk: str, port: int, urls: list[tuple[str, str, str]], seconds: int, conns: int) -> float:
    # every connection goes to the first address; the Host header picks the site
    lines = ",".join(f'{{"{h}","{p}"}}' for _, h, p in urls)
    lua = (
        f"local t = {{{lines}}}\nlocal i = 0\n"
        "request = function()\n  i = i % #t + 1\n"
        "  return wrk.format('GET', t[i][2], {['Host'] = t[i][1]})\nend\n"
    )
    with tempfile.NamedTemporaryFile("w", suffix=".lua", delete=False) as f:
        f.write(lua)
    cmd = [wrk, "-t1", f"-c{conns}", f"-d{seconds}s", "-s", f.name, f"http://{urls[0][0]}:{port}/"]
    out = subprocess.run(cmd, capture_output=True, text=True, check=True).stdout
    os.unlink(f.name)
    m = re.search(r"Requests/sec:\s+([\d.]+)", out)
    errors = re.search(r"Non-2xx or 3xx responses: (\d+)", out)
    if errors:
        print(f"warning: {errors.group(1)} non-2xx answers", file=sys.stderr)
    return float(m.group(1)) if m else 0.0


def run_python(port: int, urls: list[tuple[str, str, str]], seconds: int, conns: int) -> float:
    count = [0] * conns
    stop = time.monotonic() + seconds

    def worker(n: int) -> None:
        with httpx.Client() as c:
            j = n
            while time.monotonic() < stop:
                a, h, p = urls[j % len(urls)]
                c.get(f"http://{a}:{port}{p}", headers={"Host": h})
                count[n] += 1
                j += conns

    threads = [threading.Thread(target=worker, args=(n,)) for n in range(conns)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return sum(count) / seconds


def generation_rate(profile: str, n_hosts: int = 40, pages: int = 50) -> float:
    """Pages per CPU-second the router produces for never-seen pages (the cold path)."""
    sys.path.insert(0, str(ROOT))
    from crawl.testweb import Clock, Web, WebConfig, content, realistic
    from crawl.testweb.router import Request, Router

    content._pool()  # built once per process, at the first page
    realistic._code_pool(), realistic._table_pool()
    web = Web(WebConfig(seed=1, hosts=n_hosts, pages=pages, port=8080, mix="plain", profile=profile))
    router = Router(web, Clock(1_780_000_000))
    reqs = [Request("GET", web.path(k), web.host_name(i)) for i in range(n_hosts) for k in range(pages)]
    t0 = time.process_time()
    for r in reqs:
        router.handle(r)
    return len(reqs) / (time.process_time() - t0)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seconds", type=int, default=5)
    ap.add_argument("--connections", type=int, default=64)
    ap.add_argument("--hosts", type=int, default=50)
    ap.add_argument("--pages", type=int, default=20)
    ap.add_argument("--profile", choices=["synthetic", "realistic", "both"], default="both",
                    help="which tier of pages (crawl testweb serve --profile)")
    args = ap.parse_args()
    wrk = ensure_tool("wrk")
    for profile in ("synthetic", "realistic") if args.profile == "both" else (args.profile,):
        one_tier(args, wrk, profile)


def one_tier(args: argparse.Namespace, wrk: str | None, profile: str) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "web"
        proc, ready = start(out, args.hosts, args.pages, profile)
        try:
            port = ready["port"]
            urls = targets(out)
            cold, avg = warm(port, urls)
            cpu0, served0 = cpu_seconds(proc.pid), count_log(out)
            if wrk:
                rate = run_wrk(wrk, port, urls, args.seconds, args.connections)
                tool = f"wrk, {args.connections} keep-alive connections"
            else:
                rate = run_python(port, urls, args.seconds, min(args.connections, 8))
                tool = "Python load generator (wrk unavailable): a lower bound"
            time.sleep(0.3)  # the log is flushed every 100 ms
            cpu, served = cpu_seconds(proc.pid) - cpu0, count_log(out) - served0
            logged = count_log(out)
        finally:
            proc.terminate()
            proc.wait(10)
    print(f"testweb [{profile}]: {rate:,.0f} pages/s served from one core ({tool}; "
          f"{len(urls):,} distinct pages, {avg / 1024:.1f} KiB average; target {TARGET:,}) "
          f"ratio {rate / TARGET:.1f}x target")
    print(f"testweb [{profile}]: {served / cpu:,.0f} pages per CPU-second of the server process "
          f"({served:,} pages in {cpu:.2f} s of user+system CPU; kernel softirq work not counted)")
    gen = generation_rate(profile)
    print(f"testweb [{profile}]: {gen:,.0f} cold pages per CPU-second (first request of a page: generated, "
          f"in-process; warm-up over HTTP with one httpx client ran at {cold:,.0f} pages/s)")
    print(f"testweb [{profile}]: {logged:,} requests in the log")


if __name__ == "__main__":
    main()
