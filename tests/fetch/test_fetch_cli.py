"""`crawl fetch` as a real subprocess: pipes, spools, crashes, signals, memory."""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson
import pytest

from crawl import store
from crawl.core import Spool
from crawl.store import cdxj

sys.path.insert(0, str(Path(__file__).parent.parent))
from hostile import HTML, Server, bomb, hosts_text  # noqa: E402


@pytest.fixture(scope="module")
def srv() -> Iterator[Server]:
    bomb("gzip"), bomb("br")
    s = Server(delay=3.0).start()
    yield s
    s.stop()


@pytest.fixture
def hosts(tmp_path: Path) -> Path:
    p = tmp_path / "hosts"
    p.write_text(hosts_text())
    return p


def cmd(d: Path, hosts: Path, *extra: str) -> list[str]:
    return [sys.executable, "-m", "crawl", "fetch", "--dir", str(d), "--resolve-file", str(hosts),
            "--allow-private", "--timeout", "2", "--connect-timeout", "1", *extra]


def results(data: bytes) -> list[dict[str, Any]]:
    return [orjson.loads(line) for line in data.splitlines()]


def test_pipe_with_bad_lines_and_strict(srv: Server, tmp_path: Path, hosts: Path) -> None:
    lines = [srv.url("allow.test", "/ok"), "{not json", srv.url("allow.test", "/notfound"),
             '{"kind": "fetch", "url": "x", "outcome": "ok"}']
    p = subprocess.run(cmd(tmp_path / "D", hosts, "--strict"), input="\n".join(lines).encode(),
                       capture_output=True, timeout=60)
    out = results(p.stdout)
    assert sorted(r["outcome"] for r in out) == ["http-error", "ok"]
    assert p.returncode == 3
    assert b"line 2" in p.stderr and b"line 4" in p.stderr


def test_results_stream_before_stdin_closes(srv: Server, tmp_path: Path, hosts: Path) -> None:
    proc = subprocess.Popen(cmd(tmp_path / "D", hosts), stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    assert proc.stdin and proc.stdout
    proc.stdin.write(srv.url("allow.test", "/ok").encode() + b"\n")
    proc.stdin.flush()
    line = proc.stdout.readline()  # arrives while stdin is still open
    assert orjson.loads(line)["outcome"] == "ok"
    proc.stdin.close()
    assert proc.wait(timeout=30) == 0


def test_closed_stdout_exits_quietly(srv: Server, tmp_path: Path, hosts: Path) -> None:
    urls = "".join(srv.url("allow.test", f"/ok{i}") + "\n" for i in range(300))
    p = subprocess.run(" ".join(cmd(tmp_path / "D", hosts)) + " | head -1", shell=True,
                       input=urls.encode(), capture_output=True, timeout=60)
    assert p.returncode == 0 and len(p.stdout.splitlines()) == 1
    assert b"Traceback" not in p.stderr
    for f in cdxj.warc_files(tmp_path / "D" / "warc"):  # closed cleanly
        assert store.scan(f).torn_at is None


def test_spool_in_spool_out_acks_input(srv: Server, tmp_path: Path, hosts: Path) -> None:
    src, dst = tmp_path / "in", tmp_path / "out"
    with Spool(src) as sp:
        sp.put([{"kind": "url", "v": 1, "url": srv.url("allow.test", f"/ok{i}")} for i in range(30)])
    p = subprocess.run(cmd(tmp_path / "D", hosts, "-i", f"spool:{src}", "-o", f"spool:{dst}"),
                       capture_output=True, timeout=60)
    assert p.returncode == 0, p.stderr
    with Spool(src) as sp:
        assert sp.counts() == {"queued": 0, "claimed": 0}
    with Spool(dst) as sp:
        got = [orjson.loads(v) for batch in sp.drain(100) for _, v in batch]
    assert len(got) == 30 and {r["outcome"] for r in got} == {"ok"}


def test_sigkill_mid_batch_leaves_readable_warcs_and_no_unstored_results(
        srv: Server, tmp_path: Path, hosts: Path) -> None:
    d = tmp_path / "D"
    urls = "".join(srv.url("allow.test", f"/slowish/{i}") + "\n" for i in range(400)).encode()
    out = open(tmp_path / "out.ndjson", "wb")  # noqa: SIM115
    proc = subprocess.Popen(cmd(d, hosts, "-c", "8"), stdin=subprocess.PIPE, stdout=out)
    assert proc.stdin
    proc.stdin.write(urls)
    proc.stdin.flush()
    deadline = time.time() + 30
    while time.time() < deadline and (tmp_path / "out.ndjson").stat().st_size < 20_000:
        time.sleep(0.05)
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=10)
    out.close()
    raw = (tmp_path / "out.ndjson").read_bytes()
    complete = raw[: raw.rfind(b"\n") + 1]
    got = results(complete)
    assert 0 < len(got) < 400
    warc = d / "warc"
    for r in got:  # every emitted result points at a record that reads back whole
        assert r["outcome"] == "ok"
        body = store.read_response(warc, r["warc"]).body
        assert body.endswith(r["url"].split(str(srv.port))[1].encode())
    for f in cdxj.warc_files(warc):  # readers cope; at most the tail is torn
        res = store.scan(f)
        assert res.records > 0
        if res.torn_at is not None:
            assert all(r["warc"]["offset"] < res.torn_at for r in got if r["warc"]["file"] == f.name)


def test_sigint_exits_130_with_the_warc_intact(srv: Server, tmp_path: Path, hosts: Path) -> None:
    d = tmp_path / "D"
    urls = [srv.url("allow.test", "/ok")] + [srv.url("allow.test", f"/slowish/{i}") for i in range(200)]
    proc = subprocess.Popen(cmd(d, hosts, "-c", "4"), stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE)
    assert proc.stdin and proc.stdout
    proc.stdin.write("\n".join(urls).encode() + b"\n")
    proc.stdin.flush()
    assert orjson.loads(proc.stdout.readline())["kind"] == "fetch"
    proc.send_signal(signal.SIGINT)
    rest, err = proc.communicate(timeout=30)
    assert proc.returncode == 130, err
    for f in cdxj.warc_files(d / "warc"):
        assert store.scan(f).torn_at is None


def _peak_rss_kib(args: list[str], stdin: bytes, tmp_path: Path) -> tuple[int, list[dict[str, Any]]]:
    """Run to completion, polling the child's high-water RSS (VmHWM) from /proc.

    (rusage's ru_maxrss is no use here: Linux carries the forking pytest
    process's peak across exec.)
    """
    inp, outp = tmp_path / "in.txt", tmp_path / "res.ndjson"
    inp.write_bytes(stdin)
    peak = 0
    with open(inp, "rb") as i, open(outp, "wb") as o:
        proc = subprocess.Popen(args, stdin=i, stdout=o, stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + 120  # "did not hang", not a speed claim
        while proc.poll() is None:
            if time.monotonic() > deadline:
                proc.kill()
                proc.wait()
                raise AssertionError(f"crawl fetch still running after 120 s: {args}")
            try:
                status = Path(f"/proc/{proc.pid}/status").read_text()
                peak = max(peak, int(status.split("VmHWM:")[1].split()[0]))
            except (OSError, IndexError, ValueError):
                pass
            time.sleep(0.02)
    assert proc.returncode == 0
    return peak, results(outp.read_bytes())


def test_hostile_routes_end_within_limits_with_bounded_memory(srv: Server, tmp_path: Path,
                                                             hosts: Path) -> None:
    base_rss, _ = _peak_rss_kib(cmd(tmp_path / "D0", hosts), srv.url("allow.test", "/ok").encode(),
                                tmp_path)
    paths = ["/huge"] * 4 + ["/endless"] * 2 + ["/gzip-bomb", "/br-bomb"] * 2 + ["/trickle", "/slow-headers",
                                                                             "/big-headers", "/image"]
    urls = "\n".join(srv.url("allow.test", p) for p in paths).encode()
    rss, got = _peak_rss_kib(cmd(tmp_path / "D", hosts), urls, tmp_path)
    assert len(got) == len(paths)
    # every one was cut short by a cap (the process ends: _peak_rss_kib gives up after 120 s)
    assert {r["outcome"] for r in got} <= {"too-large", "timeout", "protocol-error", "skipped-content-type"}
    # 4 x 20 MB + 2 endless + 4 bombs of 200 MB decoded went by: memory barely moved
    print(f"peak RSS {base_rss} KiB (one page) vs {rss} KiB (hostile batch)")
    assert rss - base_rss < 40 * 1024, (base_rss, rss)


def test_crawl_index_command(srv: Server, tmp_path: Path, hosts: Path) -> None:
    d = tmp_path / "D"
    url = srv.url("allow.test", "/gzip")
    p = subprocess.run(cmd(d, hosts), input=url.encode(), capture_output=True, timeout=60)
    assert orjson.loads(p.stdout)["outcome"] == "ok"
    index = [sys.executable, "-m", "crawl", "index", "--dir", str(d)]
    p = subprocess.run(index, capture_output=True, timeout=60)
    assert p.returncode == 0 and b"captures indexed" in p.stderr
    p = subprocess.run(index + ["--url", url], capture_output=True, timeout=60)
    hit = orjson.loads(p.stdout.splitlines()[0])
    assert hit["url"] == url and hit["status"] == "200" and hit["filename"].endswith(".warc.gz")
    p = subprocess.run(index + ["--url", url, "--body"], capture_output=True, timeout=60)
    assert p.stdout.startswith(b"<!doctype html>") and len(p.stdout) == len(HTML) * 50
    p = subprocess.run(index + ["--url", srv.url("allow.test", "/never")], capture_output=True, timeout=60)
    assert p.returncode == 2 and b"no capture" in p.stderr
    assert subprocess.run(index + ["--check"], capture_output=True, timeout=60).returncode == 0
    f = cdxj.warc_files(d / "warc")[0]
    f.write_bytes(f.read_bytes()[:-7])  # tear the last record
    p = subprocess.run(index + ["--check"], capture_output=True, timeout=60)
    assert p.returncode == 1 and orjson.loads(p.stdout.splitlines()[0])["torn_at"] is not None


def test_plain_urls_are_validated_like_every_stage(tmp_path: Path, hosts: Path) -> None:
    """A plain URL the canonicaliser refuses is outcome invalid-url with its reason (the
    unclosed IPv6 bracket used to be a traceback and protocol-error 'internal error')."""
    bad = ["http://[::1", "ftp://x.test/", "http://h.test:99999/", "http//typo"]
    p = subprocess.run(cmd(tmp_path / "D", hosts), input="\n".join(bad).encode() + b"\n",
                       capture_output=True, timeout=60)
    assert p.returncode == 0 and b"Traceback" not in p.stderr
    out = results(p.stdout)
    assert [r["url"] for r in out] == bad
    assert {r["outcome"] for r in out} == {"invalid-url"}
    assert [r["error"].split(":")[0] for r in out] == ["invalid-host", "unsupported-scheme", "invalid-port",
                                                      "relative-without-base"]
