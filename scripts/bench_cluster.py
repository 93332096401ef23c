"""Scale-out: pages/s of 1, 2 and 3 `crawl run --cluster` nodes on a politeness-bound web.

One 3-server JetStream cluster (R3, fsync always) on loopback serves every
run. Each run gets a fresh test web (BENCH_HOSTS hosts, default 2,000, on
BENCH_ADDRESSES loopback addresses, a BENCH_CROSS share of body links to
other hosts so that links cross nodes), a fresh crawl name (`crawl cluster
init --nodes N`, so the first map waits for all N), and N crawl nodes
started together with the same seeds and a BENCH_DELAY (1 s) per-host
delay, each for BENCH_SECONDS (30). A plain single-machine `crawl run` on
the same web is the baseline the ratios are also given against.

Measured per run, from outside the crawler:
- pages: 200 answers to the web's ordinary pages in the server's log;
  pages/s over the run's wall time;
- CPU: user + system of every crawl run tree (RUSAGE_CHILDREN: runs and their
  parse children and bridges), of the bridges alone (sampled from /proc every
  0.2 s, the last sample kept) and of the three nats-servers (before/after);
- routed links: the bridges' published record counts (bridge-status.json).
The engine's CPU = bridges + servers. Printed: pages/s and the ratio to one
node, crawl CPU ms per page, engine CPU ms per page and its share of all CPU
per page, engine µs per routed link. The goals (issue 20): engine <= 10 % of
the CPU per page; with politeness the bound, 3 nodes >= 2.5x one node. On a
2-core box three nodes share two cores: the last lines say whether the cores
were the bound (CPU seconds per second near 2) and what N machines give.
"""

from __future__ import annotations

import json
import os
import resource
import shutil
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from crawl.cluster import DevCluster  # noqa: E402

OUT = ROOT / "bench-out" / "cluster"
HOSTS = int(os.environ.get("BENCH_HOSTS", "2000"))
SECONDS = float(os.environ.get("BENCH_SECONDS", "60"))
# pages/s is counted after a warm-up: a cluster node starts slower (its bridge joins,
# the first map settles, seeds go out through the stream to their owners, robots.txt)
WARMUP = float(os.environ.get("BENCH_WARMUP", "20"))
DELAY = os.environ.get("BENCH_DELAY", "1.0")
ADDRESSES = os.environ.get("BENCH_ADDRESSES", "500")
CROSS = os.environ.get("BENCH_CROSS", "0.3")
NODES = [int(x) for x in os.environ.get("BENCH_NODES", "1,2,3").split(",")]
CRAWL = [sys.executable, "-m", "crawl"]
CORES = os.cpu_count() or 1


def children_cpu() -> float:
    ru = resource.getrusage(resource.RUSAGE_CHILDREN)
    return ru.ru_utime + ru.ru_stime


def proc_cpu(pid: int) -> float:
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


class Web:
    def __init__(self, name: str) -> None:
        from crawl.testweb.manifest import web_of

        self.dir = OUT / name
        shutil.rmtree(self.dir, ignore_errors=True)
        self.proc = subprocess.Popen(
            [*CRAWL, "testweb", "serve", "--out", str(self.dir), "--hosts", str(HOSTS), "--mix", "plain",
             "--pages", "20", "--links", "4", "--cross", CROSS, "--seed", "7", "--addresses", ADDRESSES],
            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, cwd=ROOT)
        assert self.proc.stdout is not None
        self.ready = json.loads(self.proc.stdout.readline())
        self.web = web_of(self.dir)

    def pages(self, t0_ns: int) -> tuple[int, float]:
        """(pages served in the whole run, pages/s after the warm-up, to the last page)."""
        time.sleep(0.3)
        with open(self.dir / "requests.log", "rb") as f:
            log = [json.loads(line) for line in f if line.strip()]
        ends = sorted(e["end"] for e in log if e["status"] == 200
                      and self.web.page_index(e["path"].partition("?")[0]) is not None)
        warm = t0_ns + int(WARMUP * 1e9)
        late = [t for t in ends if t >= warm]
        rate = len(late) / max(1e-3, (late[-1] - warm) / 1e9) if late else 0.0
        return len(ends), rate

    def stop(self) -> None:
        self.proc.send_signal(signal.SIGTERM)
        self.proc.wait(30)


class BridgeCPU(threading.Thread):
    """The CPU seconds of each bridge process, sampled until stopped (last sample kept)."""

    def __init__(self, dirs: list[Path]) -> None:
        super().__init__(daemon=True)
        self.dirs, self.cpu, self.done = dirs, {}, threading.Event()

    def run(self) -> None:
        while not self.done.wait(0.2):
            for d in self.dirs:
                try:
                    pid = json.loads((d / "cluster" / "bridge-status.json").read_bytes())["pid"]
                except (OSError, ValueError, KeyError):
                    continue
                c = proc_cpu(pid)
                if c:
                    self.cpu[(d, pid)] = c

    def total(self) -> float:
        self.done.set()
        self.join()
        return sum(self.cpu.values())


def common(d: Path, web: Web) -> list[str]:
    return [*CRAWL, "run", "--dir", str(d), "--seeds", str(web.dir / "seeds.txt"),
            "--resolve-file", str(web.dir / "hosts"), "--allow-private", "--scope", "any",
            "--delay", DELAY, "--progress", "none", "--duration", f"{SECONDS:.0f}s",
            "--user-agent", "crawl/0.1 (crawl-bench)"]


def run_plain() -> dict[str, Any]:
    web = Web("web-plain")
    d = OUT / "plain"
    shutil.rmtree(d, ignore_errors=True)
    cpu0, t0, t0_ns = children_cpu(), time.monotonic(), time.monotonic_ns()
    p = subprocess.run(common(d, web), capture_output=True, text=True, cwd=ROOT)
    wall, cpu = time.monotonic() - t0, children_cpu() - cpu0
    if p.returncode != 0:
        sys.stderr.write(p.stderr[-3000:])
        raise SystemExit("crawl run failed")
    pages, rate = web.pages(t0_ns)
    web.stop()
    return {"nodes": "plain", "pages": pages, "rate": rate, "wall": wall, "cpu": cpu, "engine": 0.0, "routed": 0}


def run_cluster(cluster: DevCluster, n: int) -> dict[str, Any]:
    web = Web(f"web-{n}")
    name = f"bench{n}_{os.getpid()}"
    subprocess.run([*CRAWL, "cluster", "init", "--servers", cluster.servers_arg, "--crawl", name,
                    "--nodes", str(n)], check=True, capture_output=True, cwd=ROOT)
    dirs = [OUT / f"n{n}" / f"c{i + 1}" for i in range(n)]
    for d in dirs:
        shutil.rmtree(d, ignore_errors=True)
    srv0 = sum(proc_cpu(s.pid) for s in cluster.servers)
    cpu0, t0, t0_ns = children_cpu(), time.monotonic(), time.monotonic_ns()
    sampler = BridgeCPU(dirs)
    sampler.start()
    procs = [subprocess.Popen([*common(d, web), "--cluster", cluster.servers_arg, "--crawl", name,
                               "--node", f"c{i + 1}"], stdout=subprocess.DEVNULL,
                              stderr=open(d.parent / f"c{i + 1}.err", "w"), cwd=ROOT)  # noqa: SIM115
             for i, d in enumerate(dirs) if d.parent.mkdir(parents=True, exist_ok=True) or True]
    for p in procs:
        p.wait(SECONDS + 120)
    wall, cpu = time.monotonic() - t0, children_cpu() - cpu0
    bridges = sampler.total()
    servers = sum(proc_cpu(s.pid) for s in cluster.servers) - srv0
    routed = 0
    for d in dirs:
        try:
            routed += json.loads((d / "cluster" / "bridge-status.json").read_bytes())["published"]
        except (OSError, ValueError, KeyError):
            pass
    bad = [i for i, p in enumerate(procs) if p.returncode != 0]
    if bad:
        for i in bad:
            sys.stderr.write((dirs[i].parent / f"c{i + 1}.err").read_text()[-2000:])
        raise SystemExit(f"crawl run --cluster failed on node(s) {bad}")
    pages, rate = web.pages(t0_ns)
    web.stop()
    return {"nodes": n, "pages": pages, "rate": rate, "wall": wall, "cpu": cpu + servers, "engine": bridges + servers,
            "routed": routed, "bridges": bridges, "servers": servers}


def main() -> None:
    OUT.mkdir(parents=True, exist_ok=True)
    print(f"web: {HOSTS} hosts on {ADDRESSES} addresses, delay {DELAY} s, {float(CROSS):.0%} of body "
          f"links to other hosts; {SECONDS:.0f} s per run; {CORES} cores; "
          f"load {Path('/proc/loadavg').read_text().split()[:3]}")
    rows = [run_plain()]
    shutil.rmtree(OUT / "servers", ignore_errors=True)  # a fresh cluster: no old streams
    with DevCluster(OUT / "servers", 3) as cluster:
        for n in NODES:
            rows.append(run_cluster(cluster, n))
    one = next((r for r in rows if r["nodes"] == 1), rows[0])
    plain = rows[0]
    print(f"{'nodes':>6} {'pages':>7} {'pages/s*':>8} {'x1 node':>8} {'x plain':>8} {'CPU ms/page':>12} "
          f"{'engine ms/page':>15} {'engine %':>9} {'routed':>8} {'engine us/link':>15} {'CPU s/s':>8}")
    for r in rows:
        rate = r["rate"]
        base1 = max(1e-9, one["rate"])
        base0 = max(1e-9, plain["rate"])
        per = 1000 * r["cpu"] / max(1, r["pages"])
        eng = 1000 * r["engine"] / max(1, r["pages"])
        link = 1e6 * r["engine"] / r["routed"] if r["routed"] else 0.0
        print(f"{r['nodes']!s:>6} {r['pages']:>7} {rate:>8.1f} {rate / base1:>8.2f} "
              f"{rate / base0:>8.2f} {per:>12.2f} {eng:>15.2f} "
              f"{100 * r['engine'] / max(1e-9, r['cpu']):>8.1f}% {r['routed']:>8} {link:>15.1f} "
              f"{r['cpu'] / r['wall']:>8.2f}")
    print(f"* after a {WARMUP:.0f} s warm-up; CPU columns cover the whole run (start-up included)")
    for r in rows[1:]:
        print(f"engine CPU with {r['nodes']} node(s): bridges {r['bridges']:.2f} s, nats-servers "
              f"{r['servers']:.2f} s, crawl runs (with parse children) {r['cpu'] - r['engine']:.2f} s")
    last = rows[-1]
    busy = last["cpu"] / last["wall"]
    if busy > 0.8 * CORES:
        per_node = one["rate"]
        print(f"the {CORES} cores were the bound with {last['nodes']} nodes ({busy:.2f} CPU s/s): "
              f"on N machines each node keeps its own cores, so N nodes give ~N x {per_node:.1f} "
              f"pages/s less the engine's share ({100 * last['engine'] / max(1e-9, last['cpu']):.1f} % "
              "of the CPU here, spread over the servers' machines)")
    print(f"load after: {Path('/proc/loadavg').read_text().split()[:3]}")


if __name__ == "__main__":
    main()
