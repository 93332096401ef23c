"""What `crawl` has imported before it does its work (issue 19: the first request within 0.3 s).

Each command runs in a fresh interpreter that prints ``sys.modules`` at the
moment that matters: when ``crawl run --help`` or ``crawl stats`` is done,
and, for ``crawl run``, at its first outgoing connect (the socket's connect
is wrapped: the list is written and the process ends there, before a byte
is sent). Module names are asserted, never times: heavy stages loaded too
early are what a slow start is made of, and they show on any machine.
"""

from __future__ import annotations

import importlib
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

# Run `crawl ARGV...`; write sorted(sys.modules) to $MODULES at the first connect (then end
# at once, status 0) or, if it never connects, when the command returns.
DRIVER = """
import json, os, socket, sys

def dump():
    with open(os.environ["MODULES"], "w") as f:
        json.dump(sorted(sys.modules), f)

def connect(self, address):
    dump()
    os._exit(0)

socket.socket.connect = connect
sys.argv = ["crawl", *sys.argv[1:]]
from crawl.commands import main
try:
    main()
finally:
    dump()
"""

# Loaded by none of these before their work: the parsers (lxml), the duplicate index,
# the cluster client, the report, the live table.
NEVER_EARLY = ("lxml", "crawl.parse.pages", "crawl.cluster", "crawl.report", "rich")


def modules(tmp_path: Path, *argv: str) -> set[str]:
    out = tmp_path / "modules.json"
    out.unlink(missing_ok=True)
    env = {**os.environ, "MODULES": str(out)}
    res = subprocess.run([sys.executable, "-c", DRIVER, *argv], capture_output=True, text=True,
                         timeout=120, env=env, cwd=ROOT)
    assert res.returncode == 0, res.stderr[-2000:]
    return set(json.loads(out.read_text()))


def loaded(mods: set[str], names: tuple[str, ...]) -> list[str]:
    return [n for n in names if n in mods]


def test_run_help_loads_none_of_the_loop(tmp_path: Path) -> None:
    mods = modules(tmp_path, "run", "--help")
    assert "crawl.commands.run" in mods  # the command's module did load (its flags were shown)
    assert not loaded(mods, (*NEVER_EARLY, "numpy", "crawl.dedupe", "crawl.run.crawl", "crawl.run.check",
                             "tldextract"))


def test_run_reaches_its_first_request_without_the_parsers_then_stats_reads_it(tmp_path: Path) -> None:
    """Seeds admitted, robots.txt about to be requested: the loop's own stages are there
    (the snapshot is late enough), the parsers and the public-suffix list (--scope host)
    are not. Then `crawl stats --json` reads that directory with none of the loop (its
    table, without --json, is drawn with rich)."""
    hosts = tmp_path / "hosts"
    hosts.write_text("127.0.0.1 site.test\n")
    d = tmp_path / "d"
    mods = modules(tmp_path, "run", "--dir", str(d), "--resolve-file", str(hosts), "--allow-private",
                   "--scope", "host", "--progress", "plain", "--idle-exit", "2s", "--timeout", "2",
                   "http://site.test:9/")
    assert loaded(mods, ("trio", "crawl.fetch", "crawl.frontier", "crawl.seen", "crawl.run.crawl")) == [
        "trio", "crawl.fetch", "crawl.frontier", "crawl.seen", "crawl.run.crawl"]
    assert not loaded(mods, (*NEVER_EARLY, "tldextract"))

    mods = modules(tmp_path, "stats", "--dir", str(d), "--json")
    assert "crawl.run.stats" in mods
    assert not loaded(mods, (*NEVER_EARLY, "numpy", "trio", "crawl.dedupe", "crawl.run.crawl", "crawl.run.check"))


def test_every_lazy_name_resolves() -> None:
    """A name in a lazy face's table (crawl.core.lazy) is what its module defines, and an
    unknown name is an AttributeError as from any module."""
    for package in ("crawl.run", "crawl.parse"):
        face = importlib.import_module(package)
        for name, module in face._LAZY.items():
            mod = importlib.import_module(f"{package}.{module}")
            assert getattr(face, name) is (mod if name == module else getattr(mod, name))
            assert name in dir(face)
        with pytest.raises(AttributeError, match="no attribute 'nope'"):
            face.nope  # noqa: B018
