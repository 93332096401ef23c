"""Shared fixtures: the synthetic test web, running in a real subprocess.

``testweb`` (session scope) is one small web shared by every test: 40 hosts
(every behaviour and robots variant appears on the first 20; hosts 3, 13,
23, 33 are in the registered domain shop.test), 10 pages per host, 16
loopback addresses, a *simulated* clock frozen at ``TESTWEB_CLOCK`` so page
versions and Last-Modified never change under a test. Do not move its clock
or rely on its request log being empty: start your own web for that.

``start_testweb(tmp_path, hosts=N, seed=S, **knobs)`` is a context manager
that starts a private web; ``knobs`` are ``crawl testweb serve`` options
with dashes as underscores (``pages=5, mix="plain", clock=1.78e9,
latency=0.05, drip=0.001, hang=2, busy=1, robots_recover=2, agent="crawl", links=4,
cross=0.2, addresses=4, huge_bytes=10**6, bomb_bytes=1<<24,
full_manifest_limit=N``). Its log holds only your requests, so
``crawl.testweb.audit.audit(web.requests(), web.hosts)`` (or ``crawl
testweb audit web.dir``) checks a crawler's politeness.

Hosts by behaviour: ``testweb.with_behaviour("traps")`` (also robots
variants: ``"rules"``, ``"oversize"``, ``"timeout"``...). Above
``full_manifest_limit`` hosts ``.pages`` is empty; use ``crawl testweb
manifest``.

Both give a :class:`TestWeb`::

    def test_home(testweb):
        r = testweb.get(testweb.url(0, "/"))        # connects to the host's address
        page = testweb.pages[testweb.url(0, "/")]   # its manifest record
        assert r.status_code == page["status"]
        testweb.requests()                          # the server log, flushed first

Crawler tests point the crawler's DNS override at ``testweb.hosts_file``
and seed it from ``testweb.seeds_file``; URLs carry the port
(``http://h0001.test:PORT/``).
"""

from __future__ import annotations

import contextlib
import os
import selectors
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import orjson
import pytest

ROOT = Path(__file__).resolve().parent.parent
# Who the crawler says it is in tests (inherited by every crawl subprocess): a
# User-Agent with a contact, so the "no contact configured" warning is not
# printed by every fetch and run; still the product token "crawl", so robots.txt
# groups match as with the default. tests/core/test_identity.py unsets it.
os.environ.setdefault("CRAWL_USER_AGENT", "crawl/0.1 (+http://127.0.0.1/; crawl test suite, loopback only)")
TESTWEB_CLOCK = 1_780_000_000.0  # 2026-05-28T20:26:40Z
ADMIN_HOST = "admin.testweb.test"


class TestWeb:
    """A running test web: its files, its ground truth, and helpers to talk to it."""

    __test__ = False  # not a test class, despite the name

    def __init__(self, out: Path, ready: dict[str, Any], proc: subprocess.Popen[bytes]) -> None:
        self.dir = out
        self.proc = proc
        self.port: int = ready["port"]
        self.addresses: list[str] = ready["addresses"]
        self.hosts_file = out / "hosts"
        self.seeds_file = out / "seeds.txt"
        self.manifest: dict[str, Any] = orjson.loads((out / "manifest.json").read_bytes())
        self.hosts: dict[str, dict[str, Any]] = {}  # host name -> host record
        self.pages: dict[str, dict[str, Any]] = {}  # URL -> page record
        self.host_names: list[str] = []  # by host index
        with open(out / "manifest.ndjson", "rb") as f:
            for line in f:
                rec = orjson.loads(line)
                if rec["kind"] == "host":
                    self.hosts[rec["host"]] = rec
                    self.host_names.append(rec["host"])
                else:
                    self.pages[rec["url"]] = rec
        self.resolve: dict[str, str] = {}
        for line in self.hosts_file.read_text().splitlines():
            if line and not line.startswith("#"):
                addr, name = line.split()
                self.resolve[name] = addr
        self._client = httpx.Client(timeout=10.0, follow_redirects=False)

    # -- names ---------------------------------------------------------------
    def host(self, which: int | str) -> str:
        """A host name from its index or name."""
        return self.host_names[which] if isinstance(which, int) else which

    def url(self, host: int | str, path: str = "/") -> str:
        return f"http://{self.host(host)}:{self.port}{path}"

    def address(self, host: int | str) -> str:
        return self.resolve[self.host(host)]

    def with_behaviour(self, behaviour: str) -> list[str]:
        """Host names with this behaviour (or robots variant)."""
        return [h for h, rec in self.hosts.items()
                if rec["behaviour"] == behaviour or rec["robots"]["variant"] == behaviour]

    def pages_of(self, host: int | str) -> list[dict[str, Any]]:
        name = self.host(host)
        return [p for p in self.pages.values() if p["host"] == name]

    # -- talking to it -------------------------------------------------------
    def get(self, url: str, *, method: str = "GET", **kw: Any) -> httpx.Response:
        """Request ``url`` from the test web, connecting to its host's address."""
        u = httpx.URL(url)
        headers = {"Host": f"{u.host}:{u.port}", "User-Agent": "crawl-tests", **kw.pop("headers", {})}
        direct = u.copy_with(host=self.resolve[u.host])
        return self._client.request(method, direct, headers=headers, **kw)

    def admin(self, path: str) -> dict[str, Any]:
        r = self._client.get(f"http://{self.addresses[0]}:{self.port}{path}",
                             headers={"Host": ADMIN_HOST})
        r.raise_for_status()
        result: dict[str, Any] = r.json()
        return result

    def set_clock(self, t: float) -> None:
        self.admin(f"/clock?set={t}")

    def advance_clock(self, seconds: float) -> None:
        self.admin(f"/clock?advance={seconds}")

    def requests(self, since: int = 0) -> list[dict[str, Any]]:
        """Requests the server has logged (the log is flushed first), from number ``since`` on.

        The shared web's log holds every test's requests: take
        ``n = len(testweb.requests())`` before, and ``testweb.requests(n)`` after.
        """
        self.admin("/flush")
        with open(self.dir / "requests.log", "rb") as f:
            return [orjson.loads(line) for line in f if line.strip()][since:]

    def stop(self) -> None:
        self._client.close()
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


@contextlib.contextmanager
def start_testweb(tmp_path: Path, hosts: int = 40, seed: int = 0, **knobs: Any) -> Iterator[TestWeb]:
    """Start ``crawl testweb serve`` in a subprocess on an ephemeral port; stop it on exit."""
    out = Path(tmp_path) / f"web-{hosts}-{seed}"
    cmd = [sys.executable, "-m", "crawl", "testweb", "serve", "--out", str(out),
           "--hosts", str(hosts), "--seed", str(seed), "--port", str(knobs.pop("port", 0))]
    for name, value in knobs.items():
        cmd += [f"--{name.replace('_', '-')}", str(value)]
    env = {**os.environ, "PYTHONPATH": str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", "")}
    out.mkdir(parents=True, exist_ok=True)
    errlog = open(out / "serve.err", "wb")  # noqa: SIM115 - a file, not a pipe: it never fills up
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=errlog, env=env, cwd=ROOT,
                            preexec_fn=_die_with_parent)
    web = None
    try:
        ready = _read_ready(proc, out, timeout=60)
        web = TestWeb(out, ready, proc)
        yield web
    finally:
        if web is not None:
            web.stop()
        elif proc.poll() is None:
            proc.kill()
            proc.wait()
        errlog.close()
        if proc.stdout is not None:
            proc.stdout.close()


def _die_with_parent() -> None:
    """Linux: SIGTERM the server if pytest dies without cleaning up (no orphaned webs)."""
    try:
        import ctypes

        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass


def _read_ready(proc: subprocess.Popen[bytes], out: Path, timeout: float) -> dict[str, Any]:
    assert proc.stdout is not None
    sel = selectors.DefaultSelector()
    sel.register(proc.stdout, selectors.EVENT_READ)
    if not sel.select(timeout):
        proc.kill()
        raise RuntimeError(f"crawl testweb serve did not start within {timeout} s")
    line = proc.stdout.readline()
    if not line:
        proc.wait()
        err = (out / "serve.err").read_text(errors="replace")
        raise RuntimeError(f"crawl testweb serve exited: {err}")
    ready: dict[str, Any] = orjson.loads(line)
    return ready


_THIS = sys.modules[__name__]


def pytest_plugin_registered(plugin: object) -> None:
    """Keep ``import conftest`` meaning this file. Test modules import the helpers
    above with ``from conftest import ...``; pytest imports every directory's
    conftest.py under the one module name ``conftest`` and so, once it has loaded
    a deeper one (tests/cluster/conftest.py), modules collected after it would
    get that one instead (an ImportError at collection, alphabet-dependent)."""
    if plugin is not _THIS and getattr(plugin, "__name__", None) == "conftest":
        sys.modules["conftest"] = _THIS


# end-to-end crawls, the costliest part of the suite (see pytest_collection_modifyitems)
LONG_FIRST = ("tests/run/", "tests/report/", "tests/recrawl/", "tests/cluster/",
              "tests/frontier/test_frontier_kill.py", "tests/dedupe/test_dedupe.py",
              "tests/test_cli_errors.py", "tests/testweb/test_realistic.py")


@pytest.hookimpl(tryfirst=True)  # before xdist reads the marks (--dist loadgroup)
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """``make test`` runs the suite on pytest-xdist workers (``-n``, ``--dist loadgroup``):
    the tests of a module that share one of its module- or class-scoped fixtures (a web,
    a crawl, a cluster made once for them) go to one worker, so that it is still made
    once; every other test goes to whichever worker is free. Session fixtures (the
    shared ``testweb``) are made once per worker.

    On workers the end-to-end files (minutes of crawling each) are handed out
    first, so that no worker starts one while the others have run dry."""
    if os.environ.get("PYTEST_XDIST_WORKER"):
        items.sort(key=lambda item: not item.nodeid.startswith(LONG_FIRST))  # stable: one order on every worker
    for item in items:
        info = getattr(item, "_fixtureinfo", None)
        if info is None:
            continue
        if any(defs and defs[-1].scope in ("module", "class", "package")
               for defs in info.name2fixturedefs.values()):
            item.add_marker(pytest.mark.xdist_group(item.nodeid.split("::")[0]))


@pytest.fixture(scope="session")
def testweb(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TestWeb]:
    """The shared web: 40 hosts, 10 pages each, simulated clock (see module docstring)."""
    with start_testweb(tmp_path_factory.mktemp("testweb"), hosts=40, seed=0, pages=10,
                       clock=TESTWEB_CLOCK, hang=30) as web:
        yield web


@pytest.fixture
def start_testweb_factory() -> Any:
    """``start_testweb`` as a fixture, for tests that prefer not to import conftest."""
    return start_testweb
