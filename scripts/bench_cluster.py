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
Before the node runs, the engine alone: two bridges, BENCH_ROUTE_RATES links a
second (200 and 400) fed into one's outbox for the other's shards for
BENCH_ROUTE_SECONDS (20): CPU per routed link above idle and records per message.
The engine's CPU = bridges + servers. Printed: pages/s and the ratio to one
node, crawl CPU ms per page, engine CPU ms per page and its share of all CPU
per page, engine µs per routed link. The goals (issue 20): engine <= 10 % of
the CPU per page; with politeness the bound, 3 nodes >= 2.5x one node. On a
2-core box three nodes share two cores with whatever else runs there: the last
lines give, per run, the CPU-seconds per second used against those available
(the cores less what other jobs used meanwhile, from /proc/stat), whether the
cores were the bound, and a paper calculation of what N machines give.
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
ROUTE_RATES = [float(x) for x in os.environ.get("BENCH_ROUTE_RATES", "200,400").split(",") if x]
ROUTE_SECONDS = float(os.environ.get("BENCH_ROUTE_SECONDS", "20"))


def children_cpu() -> float:
    ru = resource.getrusage(resource.RUSAGE_CHILDREN)
    return ru.ru_utime + ru.ru_stime


def machine_cpu() -> float:
    """CPU seconds the whole machine has spent busy (every process, every core: /proc/stat)."""
    fields = Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]
    user, nice, system, _idle, _iowait, irq, softirq, steal = (int(x) for x in fields[:8])
    return (user + nice + system + irq + softirq + steal) / os.sysconf("SC_CLK_TCK")


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
    cpu0, t0, t0_ns, m0 = children_cpu(), time.monotonic(), time.monotonic_ns(), machine_cpu()
    p = subprocess.run(common(d, web), capture_output=True, text=True, cwd=ROOT)
    wall, cpu, machine = time.monotonic() - t0, children_cpu() - cpu0, machine_cpu() - m0
    if p.returncode != 0:
        sys.stderr.write(p.stderr[-3000:])
        raise SystemExit("crawl run failed")
    pages, rate = web.pages(t0_ns)
    web.stop()
    return {"nodes": "plain", "pages": pages, "rate": rate, "wall": wall, "cpu": cpu, "engine": 0.0, "routed": 0,
            "messages": 0, "machine": machine}


def run_cluster(cluster: DevCluster, n: int) -> dict[str, Any]:
    web = Web(f"web-{n}")
    name = f"bench{n}_{os.getpid()}"
    subprocess.run([*CRAWL, "cluster", "init", "--servers", cluster.servers_arg, "--crawl", name,
                    "--nodes", str(n)], check=True, capture_output=True, cwd=ROOT)
    dirs = [OUT / f"n{n}" / f"c{i + 1}" for i in range(n)]
    for d in dirs:
        shutil.rmtree(d, ignore_errors=True)
    srv0 = sum(proc_cpu(s.pid) for s in cluster.servers)
    cpu0, t0, t0_ns, m0 = children_cpu(), time.monotonic(), time.monotonic_ns(), machine_cpu()
    sampler = BridgeCPU(dirs)
    sampler.start()
    procs = [subprocess.Popen([*common(d, web), "--cluster", cluster.servers_arg, "--crawl", name,
                               "--node", f"c{i + 1}"], stdout=subprocess.DEVNULL,
                              stderr=open(d.parent / f"c{i + 1}.err", "w"), cwd=ROOT)  # noqa: SIM115
             for i, d in enumerate(dirs) if d.parent.mkdir(parents=True, exist_ok=True) or True]
    for p in procs:
        p.wait(SECONDS + 120)
    wall, cpu, machine = time.monotonic() - t0, children_cpu() - cpu0, machine_cpu() - m0
    bridges = sampler.total()
    servers = sum(proc_cpu(s.pid) for s in cluster.servers) - srv0
    routed = messages = 0
    for d in dirs:
        try:
            st = json.loads((d / "cluster" / "bridge-status.json").read_bytes())
        except (OSError, ValueError):
            continue
        routed += int(st.get("published") or 0)
        messages += int(st.get("messages") or 0)
    bad = [i for i, p in enumerate(procs) if p.returncode != 0]
    if bad:
        for i in bad:
            sys.stderr.write((dirs[i].parent / f"c{i + 1}.err").read_text()[-2000:])
        raise SystemExit(f"crawl run --cluster failed on node(s) {bad}")
    pages, rate = web.pages(t0_ns)
    web.stop()
    return {"nodes": n, "pages": pages, "rate": rate, "wall": wall, "cpu": cpu + servers, "engine": bridges + servers,
            "routed": routed, "messages": messages, "bridges": bridges, "servers": servers, "machine": machine}


def run_routing(cluster: DevCluster, rate: float, seconds: float) -> dict[str, Any]:
    """The engine alone: two bridges (no crawl), ``rate`` links a second for b's shards
    put into a's outbox in twentieth-second slices (as a crawl's parse side does), until
    b's inbox holds them all. Engine CPU (both bridges and the servers) above what the
    same processes spent idle just before, per link; records per message from a's status."""
    import zlib

    from crawl.core import Spool

    name = f"route_{os.getpid()}"
    subprocess.run([*CRAWL, "cluster", "init", "--servers", cluster.servers_arg, "--crawl", name, "--nodes", "2"],
                   check=True, capture_output=True, cwd=ROOT)
    root = OUT / "route"
    shutil.rmtree(root, ignore_errors=True)
    procs = {}
    for n in ("a", "b"):
        (root / n).mkdir(parents=True)
        procs[n] = subprocess.Popen([*CRAWL, "cluster", "bridge", "--servers", cluster.servers_arg, "--crawl", name,
                                     "--node", n, str(root / n)], stderr=open(root / f"{n}.err", "w"),  # noqa: SIM115
                                    cwd=ROOT)

    def owned(n: str) -> list[int] | None:
        try:
            m = json.loads((root / n / "cluster" / "map.json").read_bytes())
        except (OSError, ValueError):
            return None
        return None if m.get("draining") else m.get("owned")

    try:
        end = time.monotonic() + 120
        while time.monotonic() < end:
            oa, ob = owned("a"), owned("b")
            if oa and ob and len(oa) + len(ob) == 1024:
                break
            time.sleep(0.5)
        else:
            raise SystemExit("routing run: the two bridges did not share the map in 120 s")
        mine_b = set(owned("b") or ())
        pids = [s.pid for s in cluster.servers] + [p.pid for p in procs.values()]
        time.sleep(5)
        c0, t0 = sum(map(proc_cpu, pids)), time.monotonic()
        time.sleep(10)
        idle = (sum(map(proc_cpu, pids)) - c0) / (time.monotonic() - t0)
        links: list[dict[str, Any]] = []
        i = 0
        while len(links) < int(rate * seconds):
            v = zlib.crc32(f"r{i}.test".encode()) % 1024
            if v in mine_b:
                links.append({"kind": "link", "v": 1, "url": f"http://r{i}.test/p{i}", "vshard": v, "depth": 1})
            i += 1
        step = max(1, int(rate / 20))
        c0, t0 = sum(map(proc_cpu, pids)), time.monotonic()
        with Spool(root / "a" / "cluster" / "outbox") as out, Spool(root / "b" / "cluster" / "inbox") as inbox:
            for k in range(0, len(links), step):
                out.put(links[k:k + step])
                time.sleep(0.05)
            while sum(inbox.counts().values()) < len(links) and time.monotonic() - t0 < seconds + 120:
                time.sleep(0.2)
            arrived = sum(inbox.counts().values())
        wall = time.monotonic() - t0
        used = sum(map(proc_cpu, pids)) - c0 - idle * wall
        st = json.loads((root / "a" / "cluster" / "bridge-status.json").read_bytes())
    finally:
        for p in procs.values():
            p.terminate()
            p.wait(30)
    return {"links": len(links), "arrived": arrived, "rate": rate, "idle": idle, "per_link": used / max(1, arrived),
            "messages": int(st.get("messages") or 0)}


def paper(rows: list[dict[str, Any]], one: dict[str, Any]) -> None:
    """What N machines give, from this run's per-page costs: each machine runs one crawl
    node and its bridge on its own cores; the nats-servers run on 3 machines of their own
    (or beside nodes: their CPU per page is added to the nodes' then). Bound by the web's
    politeness (hosts / delay) and by the cores. Once from the 1-node run's costs, once
    from the largest run's (a bridge that routes costs more than one that does not)."""
    most = max((r for r in rows if isinstance(r["nodes"], int)), key=lambda r: r["nodes"], default=one)
    for r in ([one, most] if most is not one else [one]):
        _paper(r)


def _paper(one: dict[str, Any]) -> None:
    if one["pages"] <= 0:
        return
    bridge_ms = 1000 * one.get("bridges", 0.0) / one["pages"]
    server_ms = 1000 * one.get("servers", 0.0) / one["pages"]
    crawl_ms = 1000 * (one["cpu"] - one["engine"]) / one["pages"]
    polite = HOSTS / float(DELAY)
    per_machine = CORES * 1000 / max(1e-9, crawl_ms + bridge_ms)
    print(f"on paper ({one['nodes']}-node costs of this run: crawl {crawl_ms:.2f} + bridge {bridge_ms:.2f} ms of CPU per page "
          f"on the node's machine, servers {server_ms:.2f} ms per page on theirs; this web's politeness bound "
          f"{HOSTS} hosts / {float(DELAY):g} s = {polite:.0f} pages/s):")
    for n in (1, 2, 3, 5, 10):
        cpu_bound = n * per_machine
        got = min(cpu_bound, polite)
        print(f"  {n:>2} machine(s) of {CORES} cores: up to {cpu_bound:,.0f} pages/s by CPU, "
              f"{got:,.0f} pages/s with politeness ({'politeness' if polite <= cpu_bound else 'CPU'} the bound); "
              f"servers need {got * server_ms / 1000:.2f} CPU-s/s in all")


def goals(rows: list[dict[str, Any]], one: dict[str, Any]) -> None:
    """The issue's two goals, judged on this run's figures (a goal is met or it is not)."""
    for r in rows[1:]:
        share = 100 * r["engine"] / max(1e-9, r["cpu"])
        print(f"goal: engine <= 10 % of the CPU per page with {r['nodes']} node(s): {share:.1f} % "
              f"({'met' if share <= 10 else 'NOT met'})")
    three = next((r for r in rows if r["nodes"] == 3), None)
    if three is None or one["rate"] <= 0:
        return
    ratio = three["rate"] / one["rate"]
    used = three["cpu"] / three["wall"]
    avail = max(0.0, CORES - max(0.0, three["machine"] / three["wall"] - used))
    polite = HOSTS / float(DELAY)
    if ratio >= 2.5:
        verdict = "met"
    elif used >= 0.8 * avail:
        verdict = (f"not shown here: the cores were the bound (3 nodes used {used:.2f} of {avail:.2f} "
                   f"CPU-s/s), not politeness ({polite:.0f} pages/s); the paper calculation above gives N machines")
    else:
        verdict = "NOT met, and the cores were not the bound"
    print(f"goal: 3 nodes >= 2.5x the pages/s of one with politeness the bound: {ratio:.2f}x ({verdict})")


def main() -> None:
    OUT.mkdir(parents=True, exist_ok=True)
    print(f"web: {HOSTS} hosts on {ADDRESSES} addresses, delay {DELAY} s, {float(CROSS):.0%} of body "
          f"links to other hosts; {SECONDS:.0f} s per run; {CORES} cores; "
          f"load {Path('/proc/loadavg').read_text().split()[:3]}")
    rows = [run_plain()]
    shutil.rmtree(OUT / "servers", ignore_errors=True)  # a fresh cluster: no old streams
    with DevCluster(OUT / "servers", 3) as cluster:
        time.sleep(5)
        c0, t0 = sum(proc_cpu(x.pid) for x in cluster.servers), time.monotonic()
        time.sleep(15)
        base = (sum(proc_cpu(x.pid) for x in cluster.servers) - c0) / (time.monotonic() - t0)
        routing = [run_routing(cluster, r, ROUTE_SECONDS) for r in ROUTE_RATES]
        for n in NODES:
            rows.append(run_cluster(cluster, n))
    print(f"an idle 3-server cluster (no crawl, no bridge): {1000 * base:.1f} ms of CPU per second")
    for r in routing:
        per_msg = f"{r['links'] / r['messages']:.1f}" if r["messages"] else "?"
        print(f"engine alone: {r['links']} links at {r['rate']:.0f}/s from one bridge to another: "
              f"{1e6 * r['per_link']:.0f} us of CPU per link above idle (both bridges and the 3 servers; "
              f"idle {1000 * r['idle']:.1f} ms/s), {per_msg} records per message, {r['arrived']} arrived "
              "in the wait")
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
        above = r["engine"] - base * r["wall"]
        print(f"engine with {r['nodes']} node(s) above the idle cluster's {1000 * base:.1f} ms/s: "
              f"{1000 * above / max(1, r['pages']):.2f} ms/page, "
              f"{100 * above / max(1e-9, r['cpu'] - base * r['wall']):.1f} % of the CPU per page")
    for r in rows[1:]:
        print(f"engine CPU with {r['nodes']} node(s): bridges {r['bridges']:.2f} s, nats-servers "
              f"{r['servers']:.2f} s, crawl runs (with parse children) {r['cpu'] - r['engine']:.2f} s")
    print("CPU-seconds per second: available = cores less what other jobs on the machine used "
          "during the run (/proc/stat); used = this run's processes")
    for r in rows:
        used = r["cpu"] / r["wall"]
        others = max(0.0, r["machine"] / r["wall"] - used)
        avail = max(0.0, CORES - others)
        bound = "the cores were the bound" if used >= 0.8 * avail else "the cores were not the bound"
        per_msg = f"; {r['routed'] / r['messages']:.1f} records per message" if r.get("messages") else ""
        print(f"  {r['nodes']!s:>5}: used {used:.2f} of {avail:.2f} available ({CORES} cores, other jobs "
              f"{others:.2f}): {bound}{per_msg}")
    paper(rows, one)
    goals(rows, one)
    print(f"load after: {Path('/proc/loadavg').read_text().split()[:3]}")


if __name__ == "__main__":
    main()
