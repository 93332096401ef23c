"""Safety rules of ``crawl fetch`` seen from the server: what a fetch process may
never ask for, checked in the test web's own request log (real processes, one
crawl directory, the shared ``testweb`` fixture)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import orjson


def test_a_robots_500_verdict_cached_by_one_fetch_process_holds_in_the_next(testweb: Any, tmp_path: Path) -> None:
    """bin/crawl-pipeline starts a new ``crawl fetch`` every round: the second process
    reads the first one's "unreachable" verdict back from LMDB and must still fetch
    nothing but robots.txt from that host (RFC 9309 2.3.1.4: disallow everything)."""
    name = testweb.with_behaviour("500")[0]
    pages = [p["url"] for p in testweb.pages_of(name) if p["path"] != "/robots.txt"][:2]
    assert len(pages) == 2
    d = tmp_path / "D"
    mark = len(testweb.requests())
    got = []
    for url in pages:  # one process each, one crawl dir
        p = subprocess.run([sys.executable, "-m", "crawl", "fetch", "--dir", str(d), "--resolve-file",
                            str(testweb.hosts_file), "--allow-private", "--timeout", "2"],
                           input=url.encode() + b"\n", capture_output=True, timeout=60)
        assert p.returncode == 0, p.stderr[-2000:]
        got += [orjson.loads(line) for line in p.stdout.splitlines()]
    # (robots-unreachable: the name the outcome is getting; robots-disallowed before)
    assert all(r["outcome"] in ("robots-disallowed", "robots-unreachable") for r in got), got
    assert [r["robots"]["source"] for r in got] == ["fetched", "cache"]  # the second read LMDB
    assert all(r["robots"]["verdict"] == "unreachable" for r in got)
    asked = [r["path"] for r in testweb.requests(mark) if r["host"] == name]
    assert asked == ["/robots.txt"]  # the server saw one robots.txt request and no page


def test_a_name_with_a_refused_and_an_allowed_address_reaches_only_the_allowed(
        testweb: Any, tmp_path: Path) -> None:
    """The DNS-rebinding defence: the dialler connects only to addresses the policy
    allowed, never to another address of the same name (here listed first, and
    served by the same test web, so a wrong connection would be answered and logged)."""
    name = testweb.with_behaviour("simple")[0]
    allowed = testweb.address(name)
    refused = next(a for a in testweb.addresses if a != allowed)
    hosts = tmp_path / "hosts"
    hosts.write_text(f"{refused} {name}\n{allowed} {name}\n")
    mark = len(testweb.requests())
    p = subprocess.run([sys.executable, "-m", "crawl", "fetch", "--dir", str(tmp_path / "D"),
                        "--resolve-file", str(hosts), "--allow-cidr", f"{allowed}/32", "--timeout", "2"],
                       input=testweb.url(name, "/").encode() + b"\n", capture_output=True, timeout=60)
    assert p.returncode == 0, p.stderr[-2000:]
    [r] = [orjson.loads(line) for line in p.stdout.splitlines()]
    assert r["outcome"] == "ok" and r["ip"] == allowed, r
    seen = [(x["addr"], x["path"]) for x in testweb.requests(mark) if x["host"] == name]
    assert seen == [(allowed, "/robots.txt"), (allowed, "/")], seen


def _fetch_home(testweb: Any, tmp_path: Path, addresses: list[str]) -> dict[str, Any]:
    name = testweb.with_behaviour("simple")[1]
    hosts = tmp_path / "hosts"
    hosts.write_text("".join(f"{a} {name}\n" for a in addresses))
    p = subprocess.run([sys.executable, "-m", "crawl", "fetch", "--dir", str(tmp_path / "D"),
                        "--resolve-file", str(hosts), "--allow-private", "--timeout", "2"],
                       input=testweb.url(name, "/").encode() + b"\n", capture_output=True, timeout=60)
    assert p.returncode == 0, p.stderr[-2000:]
    [r] = [orjson.loads(line) for line in p.stdout.splitlines()]
    return r


# Loopback addresses nothing listens on: a connection there is refused at once.
_DEAD = ["127.0.250.1", "127.0.250.2", "127.0.250.3"]


def test_the_dialler_tries_three_addresses_of_a_name(testweb: Any, tmp_path: Path) -> None:
    name = testweb.with_behaviour("simple")[1]
    r = _fetch_home(testweb, tmp_path, _DEAD[:2] + [testweb.address(name)])
    assert r["outcome"] == "ok" and r["ip"] == testweb.address(name), r


def test_the_dialler_gives_up_after_three_addresses(testweb: Any, tmp_path: Path) -> None:
    """Bounded work per host: a name with many dead addresses costs three attempts."""
    name = testweb.with_behaviour("simple")[1]
    mark = len(testweb.requests())
    r = _fetch_home(testweb, tmp_path, [*_DEAD, testweb.address(name)])
    # robots.txt is the first request, so the failure shows there: nothing may be fetched
    assert r["outcome"] in ("robots-unreachable", "robots-disallowed", "connect-error"), r
    assert "warc" not in r
    assert not [x for x in testweb.requests(mark) if x["host"] == name]  # the fourth never dialled
