"""``crawl frontier`` as users run it: CliRunner for the commands, real
concurrent ``python -m crawl`` processes for "no double lease"."""

from __future__ import annotations

import re
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import orjson
from click.testing import CliRunner, Result

from crawl.commands import cli
from crawl.frontier import Frontier

FAST = ["--delay", "0.01", "--response-factor", "0"]


def crawl(*args: str, stdin: str | bytes = "") -> Result:
    return CliRunner().invoke(cli, list(args), input=stdin)


def records(text: str) -> list[dict[str, Any]]:
    return [orjson.loads(line) for line in text.splitlines() if line.strip()]


def fetches(leases: list[dict[str, Any]], **fields: Any) -> str:
    recs = [{"kind": "fetch", "url": r["url"], "lease": r["lease"], "outcome": "ok", "status": 200, **fields}
            for r in leases]
    return "".join(orjson.dumps(r).decode() + "\n" for r in recs)


def test_add_next_complete_roundtrip(tmp_path: Path) -> None:
    d = str(tmp_path / "c")
    res = crawl("frontier", "add", "--dir", d, stdin="http://a.test/1\nhttp://b.test/\n"
                '{"kind": "link", "url": "http://a.test/2", "depth": 1, "anchor": "two"}\n')
    assert res.exit_code == 0 and res.stdout == ""
    res = crawl("frontier", "next", "--dir", d, "-n", "10", "--lease", "2m")
    leases = records(res.stdout)
    assert sorted(r["url"] for r in leases) == ["http://a.test/1", "http://b.test/"]
    assert all(r["kind"] == "lease" and r["deadline"] > time.time() + 100 for r in leases)
    res = crawl("frontier", "complete", "--dir", d, *FAST, stdin=fetches(leases))
    events = records(res.stdout)
    assert res.exit_code == 0 and [e["disposition"] for e in events] == ["done", "done"]
    time.sleep(0.02)
    [lease] = records(crawl("frontier", "next", "--dir", d).stdout)
    assert lease["url"] == "http://a.test/2" and lease["anchor"] == "two"  # fields pass through


def test_bad_input_is_reported_and_strict_exits_3(tmp_path: Path) -> None:
    d = str(tmp_path / "c")
    res = crawl("frontier", "add", "--dir", d, "--strict",
                stdin='http://a.test/\n{"kind": "url"}\nnot json {\n{"url": "ftp://x.test/f"}\n')
    assert res.exit_code == 3
    assert "line 2" in res.stderr and '"url"' in res.stderr
    assert "line 3" in res.stderr
    assert "rejected 'ftp://x.test/f'" in res.stderr
    with Frontier(Path(d) / "frontier") as fr:  # the good line still went in
        assert fr.state_of("http://a.test/") == "queued"


def test_complete_unknown_lease_reports_and_changes_nothing(tmp_path: Path) -> None:
    d = str(tmp_path / "c")
    crawl("frontier", "add", "--dir", d, stdin="http://a.test/\n")
    res = crawl("frontier", "complete", "--dir", d, stdin=fetches([{"url": "http://a.test/",
                                                                    "lease": "00000000000000aa"}]))
    assert res.exit_code == 0
    [ev] = records(res.stdout)
    assert ev["event"] == "frontier.unknown-lease" and "unknown or expired" in res.stderr
    res = crawl("frontier", "complete", "--dir", d, stdin='{"kind": "fetch", "url": "http://a.test/"}\n')
    assert res.exit_code == 0 and 'no "outcome" field' in res.stderr  # caught by the reader
    with Frontier(Path(d) / "frontier") as fr:
        assert fr.state_of("http://a.test/") == "queued"


def test_stats_dump_cycle_and_requeue(tmp_path: Path) -> None:
    d = str(tmp_path / "c")
    crawl("frontier", "add", "--dir", d, stdin="http://a.test/1\nhttp://a.test/2\nhttp://b.test/\n")
    crawl("frontier", "next", "--dir", d, "-n", "1", "--lease", "0.05s")
    stats = orjson.loads(crawl("frontier", "stats", "--dir", d, "--json").stdout)
    for key in ("queued", "hosts", "hosts_ready", "in_flight", "hosts_parked", "backlog", "idle_fraction"):
        assert key in stats
    assert (stats["queued"], stats["hosts"], stats["in_flight"]) == (2, 2, 1)
    assert "hosts ready" in crawl("frontier", "stats", "--dir", d).stdout
    dump = orjson.loads(crawl("frontier", "dump", "--dir", d, "--host", "a.test", "--json").stdout)
    assert dump["host"] == "a.test" and dump["queued"] + ("lease" in dump) == 2
    time.sleep(0.06)
    res = crawl("frontier", "requeue-expired", "--dir", d)
    assert res.exit_code == 0 and "requeued 1" in res.stderr
    assert "cycle 1" in crawl("frontier", "new-cycle", "--dir", d).stderr


def test_next_wait(tmp_path: Path) -> None:
    d = str(tmp_path / "c")
    crawl("frontier", "add", "--dir", d)  # nothing added, but the frontier is there
    # empty and idle: --wait ends instead of waiting for URLs that can never come (a
    # process that blocked would run into the timeout: a bound on hanging, not on speed)
    p = subprocess.run([sys.executable, "-m", "crawl", "frontier", "next", "--dir", d, "--wait"],
                       capture_output=True, timeout=60)
    assert p.returncode == 0 and p.stdout == b"", p.stderr
    # a URL due in a moment: `next` says nothing yet, `next --wait` blocks until it is due.
    # "Not yet" proves something only if `next` ended before the due time; on a loaded
    # machine a short margin can pass during the call, so that try is set aside (its own
    # dir: the URL it may have leased stays out of the way) and the margin grows
    for i, margin in enumerate((0.5, 2.0, 8.0, 30.0)):
        d = str(tmp_path / f"due{i}")
        due = time.time() + margin
        crawl("frontier", "add", "--dir", d, stdin=orjson.dumps({"url": "http://a.test/", "due": due}))
        early = crawl("frontier", "next", "--dir", d)
        if time.time() < due:
            break
    assert early.exit_code == 0 and early.stdout == ""  # not due yet
    res = crawl("frontier", "next", "--dir", d, "--wait")
    assert [r["url"] for r in records(res.stdout)] == ["http://a.test/"]
    assert time.time() >= due  # it waited for the due time


def test_help_has_examples() -> None:
    res = crawl("frontier", "--help")
    assert "crawl frontier next --dir D -n 100" in res.stdout
    res = crawl("frontier", "next", "--help")
    for flag in ("--lease", "--wait", "--per-ip", "--delay", "--park-for"):
        assert flag in res.stdout


def _spawn(args: list[str], stdin: bytes = b"") -> subprocess.Popen[bytes]:
    p = subprocess.Popen([sys.executable, "-m", "crawl", *args], stdin=subprocess.PIPE,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert p.stdin is not None
    p.stdin.write(stdin)
    p.stdin.close()
    return p


def _collect(p: subprocess.Popen[bytes]) -> list[dict[str, Any]]:
    assert p.stdout is not None and p.stderr is not None
    out = p.stdout.read()
    err = p.stderr.read()
    assert p.wait(timeout=60) == 0, err.decode()
    return records(out.decode())


def test_concurrent_next_and_complete_processes_never_double_lease(tmp_path: Path) -> None:
    d = str(tmp_path / "c")
    urls = [f"http://c{h:03d}.test/{i}" for i in range(2) for h in range(60)]
    crawl("frontier", "add", "--dir", d, stdin="\n".join(urls))
    all_leases: list[dict[str, Any]] = []
    for _round in range(2):
        procs = [_spawn(["frontier", "next", "--dir", d, "-n", "25", "--lease", "5m"]) for _ in range(3)]
        batch = [r for p in procs for r in _collect(p)]
        hosts = [r["host"] for r in batch]
        assert len(hosts) == len(set(hosts)) == 60, "a host was leased twice at once"
        all_leases += batch
        halves = [batch[::2], batch[1::2]]
        procs = [_spawn(["frontier", "complete", "--dir", d, *FAST], fetches(h).encode()) for h in halves]
        done = [e for p in procs for e in _collect(p)]
        assert [e["disposition"] for e in done] == ["done"] * 60
        time.sleep(0.02)
    assert sorted(r["url"] for r in all_leases) == sorted(urls)  # each URL exactly once
    assert len({r["lease"] for r in all_leases}) == 120


def test_add_validates_with_the_canonicaliser(tmp_path: Path) -> None:
    """A URL `crawl canon` refuses is not queued (it was, with a port of 99999), and what
    is queued is in canonical form, as the frontier keys it."""
    d = str(tmp_path / "c")
    res = crawl("frontier", "add", "--dir", d, stdin="http://h.test:99999/\nHTTP://A.test:80/x/../y\nhttp//typo\n")
    assert res.exit_code == 0
    assert "rejected 'http://h.test:99999/': invalid-port" in res.stderr
    assert "rejected 'http//typo'" in res.stderr
    assert [r["url"] for r in records(crawl("frontier", "next", "--dir", d, "-n", "10").stdout)] == ["http://a.test/y"]
    with Frontier(Path(d) / "frontier") as fr:
        assert fr.stats(time.time())["hosts"] == 1


def test_dump_finds_a_host_without_its_port_and_keeps_to_limit(tmp_path: Path) -> None:
    d = str(tmp_path / "c")
    crawl("frontier", "add", "--dir", d, stdin="".join(f"http://h0000.test:8080/p{i}\n" for i in range(12)))
    dump = orjson.loads(crawl("frontier", "dump", "--dir", d, "--host", "h0000.test", "--json", "--limit", "5").stdout)
    assert dump["known"] and dump["host"] == "h0000.test:8080"
    assert [e["url"] for e in dump["queue"]] == [f"http://h0000.test:8080/p{i}" for i in range(5)]
    assert not orjson.loads(crawl("frontier", "dump", "--dir", d, "--host", "h0000.test:9", "--json").stdout)["known"]
    crawl("frontier", "next", "--dir", d, "-n", "1")
    view = crawl("frontier", "dump", "--dir", d, "--host", "h0000.test", "--limit", "2").stdout
    assert "in flight" in view and "http://h0000.test:8080/p0 (lease" in view and " UTC " in view
    assert "queue (2 shown" in view and "deadline" in view
    assert not re.search(r"\b1[0-9]{9}\b", view)  # people get ISO times, not unix seconds
