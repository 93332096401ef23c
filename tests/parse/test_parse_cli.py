"""`crawl parse` end to end: real WARC files, real subprocesses, real spools."""

from __future__ import annotations

import select
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import orjson
import pytest
from click.testing import CliRunner

from crawl.commands import cli
from crawl.core import CrawlDir
from crawl.store import BodyBuffer, Capture, WarcWriter, http_block


def store_pages(warc_dir: Path, pages: list[tuple[str, list[tuple[str, str]], bytes]],
                compression: str = "gzip") -> list[dict[str, Any]]:
    """Write responses with the real WARC writer; return their fetch records."""
    w = WarcWriter(warc_dir, compression=compression)
    out = []
    for url, headers, body in pages:
        resp = http_block("HTTP/1.1 200 OK", headers)
        buf = BodyBuffer(resp.headers_buff or b"")
        buf.write(body)
        ptr = w.write(Capture(url=url, kind="response", ts=time.time(), metadata={},
                              response=resp, body=buf))
        out.append({"kind": "fetch", "v": 1, "url": url, "outcome": "ok", "status": 200,
                    "depth": 1, "priority": 1, "warc": ptr})
    w.sync()
    w.close()
    return out


def run(args: list[str], stdin: bytes, cwd: Path | None = None) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run([sys.executable, "-m", "crawl", "parse", *args], input=stdin,
                          capture_output=True, timeout=60, cwd=cwd)


def invoke(args: list[str], stdin: bytes) -> tuple[int, bytes]:
    """In-process run (click's CliRunner): same command, no interpreter start."""
    res = CliRunner().invoke(cli, ["parse", *args], input=stdin)
    if res.exception and not isinstance(res.exception, SystemExit):
        raise res.exception
    return res.exit_code, res.stdout_bytes


def lines(out: bytes) -> list[dict[str, Any]]:
    return [orjson.loads(line) for line in out.splitlines()]


def ndjson(recs: list[dict[str, Any]]) -> bytes:
    return b"".join(orjson.dumps(r) + b"\n" for r in recs)


@pytest.fixture
def crawl(tmp_path: Path) -> tuple[Path, list[dict[str, Any]]]:
    d = tmp_path / "crawl"
    fetches = store_pages(CrawlDir(d).warc, [
        ("http://a.test/", [("Content-Type", "text/html; charset=utf-8")],
         b'<title>Home</title><a href="/x">x</a><a href="http://b.test/y" rel=nofollow>y</a>'
         b'<a href="http://[bad">bad</a>'),
        ("http://a.test/sitemap.xml", [("Content-Type", "application/xml")],
         b"<urlset><url><loc>http://a.test/s1</loc><lastmod>2026-01-01</lastmod></url></urlset>"),
        ("http://a.test/img.png", [("Content-Type", "image/png")], b"\x89PNG\r\n\x1a\n" + bytes(64)),
    ])
    return d, fetches


def test_parses_pages_read_back_from_the_warc(crawl: tuple[Path, list[dict[str, Any]]]) -> None:
    d, fetches = crawl
    redirect = {"kind": "fetch", "url": "http://a.test/old", "outcome": "redirect", "status": 301,
                "location": "http://a.test/new", "depth": 3}
    failed = {"kind": "fetch", "url": "http://a.test/t", "outcome": "timeout"}
    p = run(["--dir", str(d), "--stats", str(d / "stats.json")],
            ndjson([*fetches, redirect, failed]))
    assert p.returncode == 0, p.stderr
    out = lines(p.stdout)
    assert [(r["kind"], r["url"], r["source"]) for r in out] == [
        ("link", "http://a.test/x", "a"),
        ("link", "http://a.test/s1", "sitemap"),
        ("link", "http://a.test/new", "redirect"),
    ]
    assert out[1]["lastmod"] == "2026-01-01" and out[2]["depth"] == 3
    stats = orjson.loads((d / "stats.json").read_bytes())
    assert stats["kind"] == "stats" and stats["command"] == "parse"
    assert (stats["in"], stats["out"], stats["links"], stats["nofollow_links"],
            stats["invalid_hrefs"], stats["redirects"], stats["not_parsed"], stats["pages_other"]) == (
        5, 3, 3, 1, 1, 1, 1, 1)


def test_rejects_and_page_events(crawl: tuple[Path, list[dict[str, Any]]], tmp_path: Path) -> None:
    d, fetches = crawl
    pages = tmp_path / "pages.ndjson"
    p = run(["--dir", str(d), "--rejects", "--pages", str(pages)], ndjson(fetches))
    assert p.returncode == 0, p.stderr
    kinds = [r["kind"] for r in lines(p.stdout)]
    assert kinds == ["link", "reject", "link"]
    events = lines(pages.read_bytes())
    assert [(e["event"], e["url"], e["type"]) for e in events] == [
        ("page", "http://a.test/", "html"), ("page", "http://a.test/sitemap.xml", "urlset"),
        ("page", "http://a.test/img.png", "other")]
    assert events[0]["title"] == "Home"
    mixed = run(["--dir", str(d), "--pages", "-"], ndjson(fetches[:1]))
    assert [r["kind"] for r in lines(mixed.stdout)] == ["link", "event"]


def test_without_dir_reads_warc_paths_as_given(
        crawl: tuple[Path, list[dict[str, Any]]], monkeypatch: pytest.MonkeyPatch) -> None:
    d, fetches = crawl
    warc = CrawlDir(d).warc
    absolute = [{**f, "warc": {**f["warc"], "file": str(warc / f["warc"]["file"])}} for f in fetches]
    code, out = invoke([], ndjson(absolute[:1]))
    assert code == 0
    assert [r["url"] for r in lines(out)] == ["http://a.test/x"]
    via = invoke(["--warc-dir", str(warc)], ndjson(fetches[:1]))[1]
    assert [r["url"] for r in lines(via)] == ["http://a.test/x"]
    monkeypatch.chdir(warc)  # relative to the working directory
    rel = invoke([], ndjson(fetches[:1]))[1]
    assert [r["url"] for r in lines(rel)] == ["http://a.test/x"]


def test_zstd_warcs(tmp_path: Path) -> None:
    d = tmp_path / "z"
    fetches = store_pages(CrawlDir(d).warc, [
        ("http://z.test/", [("Content-Type", "text/html")], b'<a href="/zz">z</a>')], "zstd")
    p = run(["--dir", str(d)], ndjson(fetches))
    assert [r["url"] for r in lines(p.stdout)] == ["http://z.test/zz"]


def test_bad_input_is_reported_with_line_numbers(crawl: tuple[Path, list[dict[str, Any]]]) -> None:
    d, fetches = crawl
    bad = b'{"kind": "fetch"}\nnot json at all\n{"kind":"url","url":"http://x/"}\n'
    p = run(["--dir", str(d)], ndjson(fetches[:1]) + bad)
    assert p.returncode == 0
    assert [r["url"] for r in lines(p.stdout)] == ["http://a.test/x"]
    err = p.stderr.decode()
    assert "line 2" in err and "line 3" in err and "line 4" in err
    strict = run(["--dir", str(d), "--strict"], ndjson(fetches[:1]) + bad)
    assert strict.returncode == 3


def test_missing_warc_is_reported_and_skipped(crawl: tuple[Path, list[dict[str, Any]]]) -> None:
    d, fetches = crawl
    gone = {**fetches[0], "url": "http://a.test/gone",
            "warc": {"file": "nope.warc.gz", "offset": 0, "length": 10}}
    escape = {**fetches[0], "url": "http://a.test/escape",
              "warc": {"file": "../../../etc/passwd", "offset": 0, "length": 10}}
    p = run(["--dir", str(d), "--rejects", "--stats", str(d / "s.json")],
            ndjson([gone, escape, fetches[0]]))
    assert p.returncode == 0, p.stderr
    out = lines(p.stdout)
    assert [r["kind"] for r in out] == ["reject", "reject", "link", "reject"]  # last: bad href
    assert "http://a.test/gone" in p.stderr.decode()
    assert orjson.loads((d / "s.json").read_bytes())["unreadable"] == 2


@pytest.mark.parametrize("where", ["dir", "paths"])
def test_malformed_pointers_are_named_counted_and_skipped(crawl: tuple[Path, list[dict[str, Any]]],
                                                          where: str) -> None:
    """With --dir (names inside DIR/warc) and without (pointers' file names as paths):
    each malformed pointer is one message naming its fault, one reject, one count."""
    d, fetches = crawl
    good = dict(fetches[0]["warc"])
    if where == "paths":
        good["file"] = str(CrawlDir(d).warc / good["file"])
    bad = {
        "http://a.test/no-offset": {"file": good["file"]},
        "http://a.test/nul": {"file": "x\x00y.warc.gz", "offset": 0, "length": 10},
        "http://a.test/float": {**good, "length": 1e15},
        "http://a.test/huge": {**good, "length": 10**15},
        "http://a.test/negative": {**good, "offset": -5},
        "http://a.test/bool": {**good, "length": True},
    }
    recs = [{**fetches[0], "url": u, "warc": ptr} for u, ptr in bad.items()]
    recs.append({**fetches[0], "warc": good})
    args = ["--dir", str(d)] if where == "dir" else []
    p = run([*args, "--rejects", "--stats", str(d / "s.json")], ndjson(recs))
    assert p.returncode == 0, p.stderr
    err = p.stderr.decode()
    assert "Traceback" not in err
    for url in bad:
        assert sum(url + ":" in line for line in err.splitlines()) == 1, err
    for words in ("has no offset or length", "control characters", "length 1000000000000000.0",
                  "past the end of", "negative offset", "length True"):
        assert words in err, words
    out = lines(p.stdout)
    assert [r["input"] for r in out if r["kind"] == "reject" and "unreadable" in r["error"]] == list(bad)
    assert [r["url"] for r in out if r["kind"] == "link"] == ["http://a.test/x"]  # the good page
    assert orjson.loads((d / "s.json").read_bytes())["unreadable"] == len(bad)


def test_spool_in_spool_out(crawl: tuple[Path, list[dict[str, Any]]], tmp_path: Path) -> None:
    d, fetches = crawl
    put = subprocess.run([sys.executable, "-m", "crawl", "spool", "put", str(tmp_path / "in")],
                         input=ndjson(fetches), capture_output=True, timeout=60)
    assert put.returncode == 0, put.stderr
    p = run(["--dir", str(d), "-i", f"spool:{tmp_path / 'in'}", "-o", f"spool:{tmp_path / 'out'}"],
            b"")
    assert p.returncode == 0, p.stderr
    take = subprocess.run([sys.executable, "-m", "crawl", "spool", "take", str(tmp_path / "out")],
                          capture_output=True, timeout=60)
    assert sorted(r["url"] for r in lines(take.stdout)) == ["http://a.test/s1", "http://a.test/x"]


def test_options_change_behaviour(tmp_path: Path) -> None:
    d = tmp_path / "o"
    body = b"".join(b'<a href="/p%d">%d</a>' % (i, i) for i in range(30))
    body += b'<a rel=nofollow href="/nf">n</a><a href="/a/b/a/b">loop</a>'
    fetches = store_pages(CrawlDir(d).warc, [("http://o.test/", [("Content-Type", "text/html")], body)])
    capped = lines(invoke(["--dir", str(d), "--max-links", "5"], ndjson(fetches))[1])
    assert len(capped) == 5
    follow = lines(invoke(["--dir", str(d), "--follow-nofollow"], ndjson(fetches))[1])
    assert [r["url"] for r in follow][-1] == "http://o.test/nf" and len(follow) == 31
    demote = lines(invoke(["--dir", str(d), "--traps", "demote"], ndjson(fetches))[1])
    assert demote[-1]["trap"] == "repeated-segments"
    off = lines(invoke(["--dir", str(d), "--traps", "off"], ndjson(fetches))[1])
    assert off[-1]["url"] == "http://o.test/a/b/a/b" and "trap" not in off[-1]
    meta = store_pages(CrawlDir(d).warc, [("http://o.test/m", [("Content-Type", "text/html")],
                                           b'<meta name="o" content="nofollow"><a href="/x">x</a>')])
    assert len(lines(invoke(["--dir", str(d)], ndjson(meta))[1])) == 1
    # the product token of --user-agent names the meta tag that applies to us
    assert lines(invoke(["--dir", str(d), "--user-agent", "o/1.0 (+http://o.test)"],
                        ndjson(meta))[1]) == []
    assert invoke(["--dir", str(d), "--traps", "sometimes"], b"")[0] == 2


def test_help_has_an_example() -> None:
    p = subprocess.run([sys.executable, "-m", "crawl", "parse", "--help"], capture_output=True,
                       text=True, timeout=60)
    assert p.returncode == 0
    assert "crawl parse --dir D" in p.stdout and "--max-links" in p.stdout


def test_streams_records_before_input_ends(crawl: tuple[Path, list[dict[str, Any]]]) -> None:
    d, fetches = crawl
    proc = subprocess.Popen([sys.executable, "-m", "crawl", "parse", "--dir", str(d)],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        assert proc.stdin is not None and proc.stdout is not None
        proc.stdin.write(ndjson(fetches[:1]))
        proc.stdin.flush()
        ready, _, _ = select.select([proc.stdout], [], [], 30)
        assert ready, "no output while stdin is still open"
        assert orjson.loads(proc.stdout.readline())["url"] == "http://a.test/x"
        proc.stdin.close()
        assert proc.wait(timeout=30) == 0
    finally:
        proc.kill()
        proc.wait()


def test_quiet_on_a_closed_pipe(tmp_path: Path) -> None:
    d = tmp_path / "many"
    body = b"".join(b'<a href="/p%d">%d</a>' % (i, i) for i in range(3000))
    fetches = store_pages(CrawlDir(d).warc, [("http://m.test/", [("Content-Type", "text/html")], body)] * 3)
    (tmp_path / "in.ndjson").write_bytes(ndjson(fetches))
    p = subprocess.run(f"{sys.executable} -m crawl parse --dir {d} < {tmp_path / 'in.ndjson'} | head -1",
                       shell=True, capture_output=True, timeout=60)
    assert p.stdout.count(b"\n") == 1
    assert b"Traceback" not in p.stderr and b"Broken pipe" not in p.stderr
