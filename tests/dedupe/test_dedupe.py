"""Duplicate detection: text extraction, the Deduper on real LMDB, the test
web's near-duplicate groups (recall and precision), and `crawl dedupe`."""

from __future__ import annotations

import random
import shutil
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import orjson
import pytest

from crawl.canon import canonicalize
from crawl.core import CrawlError, Spool
from crawl.dedupe import Deduper
from crawl.dedupe.deduper import payload_digest
from crawl.text import analyse
from crawl.text.extract import canonical_link, visible_text

_rng = random.Random(11)
_VOCAB = [f"{w}{i}" for i, w in enumerate(["alpha", "beta", "gamma", "delta", "omega"] * 600)]


def article(seed: int, words: int = 300) -> str:
    r = random.Random(seed)
    paras = []
    for _ in range(words // 50):
        paras.append("<p>" + " ".join(r.choice(_VOCAB) for _ in range(50)) + ".</p>")
    return "\n".join(paras)


def page(body: str, *, nav: str = "Home | News | About", foot: str = "(c) 2026 Example",
         canonical: str | None = None, extra_head: str = "") -> bytes:
    link = f'<link rel="canonical" href="{canonical}">' if canonical else ""
    return (f"<!DOCTYPE html><html><head><title>T</title>{link}{extra_head}"
            f"<script>var x = 'script words never count';</script>"
            f"<style>.a {{ color: red }}</style></head><body>"
            f"<header><nav>{nav}</nav></header><main><article>{body}</article></main>"
            f"<aside>advert {_rng.random()}</aside><footer>{foot}</footer></body></html>").encode()


def fetch(url: str, **kw: Any) -> dict[str, Any]:
    return {"kind": "fetch", "v": 1, "url": url, "outcome": "ok", "status": 200, **kw}


def run(dd: Deduper, items: list[tuple[str, bytes]], ctype: str = "text/html") -> list[dict[str, Any]]:
    bodies = dict(items)
    return dd.check([fetch(u) for u, _ in items], lambda r: (bodies[r["url"]], ctype))


# -- text ---------------------------------------------------------------------


def test_visible_text_drops_boilerplate_and_keeps_blocks() -> None:
    html = page("<h1>Title here</h1><p>First para.</p><div>Second <b>bold</b> part</div>",
                nav="Menu links", foot="Footer text")
    doc = analyse(html)
    assert doc.blocks == ["Title here", "First para.", "Second bold part"]
    text = visible_text(html)
    for gone in ("Menu", "Footer", "advert", "script words", "color"):
        assert gone not in text


def test_canonical_link_is_resolved_against_the_page() -> None:
    html = page("<p>x</p>", canonical="/a/b?x=1")
    assert canonical_link(html, "http://h.test/c/d") == "http://h.test/a/b?x=1"
    assert analyse(html, None, "http://h.test/").canonical == "http://h.test/a/b?x=1"
    assert canonical_link(page("<p>x</p>")) is None


@pytest.mark.parametrize("body, note", [
    (b"", "empty body"),
    (b"   \n\t ", "empty body"),
    (bytes(range(256)) * 40, "binary"),
    (b"\x89PNG\r\n\x1a\n" + b"\0" * 2000, "binary"),
])
def test_junk_gives_a_note_not_an_exception(body: bytes, note: str) -> None:
    doc = analyse(body)
    assert doc.blocks == [] and doc.error and note in doc.error


def test_malformed_html_still_yields_its_text() -> None:
    html = b"<html><body><p>unclosed <div><table><tr><td>cell one<td>cell two</p></span>" \
           b"<p>after the mess</body>"
    assert visible_text(html) == "unclosed cell one cell two after the mess"
    assert "caf\u00e9" in visible_text("<p>caf\u00e9</p>".encode("latin-1"), "no-such-charset-x")


# -- the deduper ----------------------------------------------------------------


def test_exact_copy_under_another_url(tmp_path: Path) -> None:
    body = page(article(1))
    with Deduper(tmp_path / "d") as dd:
        a, b = run(dd, [("http://a.test/1", body), ("http://mirror.test/1", body)])
    assert "duplicate_of" not in a and len(a["simhash"]) == 16
    assert (b["duplicate_of"], b["distance"], b["dup_kind"]) == ("http://a.test/1", 0, "exact")
    assert b["status"] == 200  # fields pass through


def test_print_and_mobile_versions_are_near_duplicates(tmp_path: Path) -> None:
    text = article(2, 600)
    original = page(text)
    printed = page(text + "<p>Printed from http://a.test/story</p>", nav="", foot="")
    mobile = page(text, nav="Menu", foot="Mobile site")
    other = page(article(3, 600))
    with Deduper(tmp_path / "d") as dd:
        out = run(dd, [("http://a.test/story", original), ("http://a.test/print/story", printed),
                       ("http://m.a.test/story", mobile), ("http://a.test/other", other)])
    assert "duplicate_of" not in out[0]
    for rec in out[1:3]:
        assert rec["duplicate_of"] == "http://a.test/story"
        assert rec["dup_kind"] == "near" and 0 <= rec["distance"] <= 3
    assert "duplicate_of" not in out[3]
    assert dd.counts["near"] == 2


def test_rel_canonical_names_the_original_whatever_came_first(tmp_path: Path) -> None:
    text = article(4, 600)
    orig = "http://a.test/story"
    with Deduper(tmp_path / "d") as dd:
        out = run(dd, [
            ("http://a.test/print/story", page(text, nav="", canonical=orig)),
            ("http://a.test/story?ref=side", page(text, nav="x", canonical=orig)),
            (orig, page(text, canonical=orig)),
        ])
    assert out[0].get("canonical") == orig and "duplicate_of" not in out[0]
    assert out[1]["duplicate_of"] == orig
    assert "duplicate_of" not in out[2]  # the declared original is never a copy


def test_a_refetch_is_not_a_copy_of_itself(tmp_path: Path) -> None:
    body = page(article(5))
    with Deduper(tmp_path / "d") as dd:
        out = run(dd, [("http://a.test/x", body), ("http://a.test/x", body)])
        out += run(dd, [("http://a.test/x", page(article(5) + "<p>one more line here</p>"))])
    assert all("duplicate_of" not in r for r in out)


def test_blocks_repeated_across_a_host_are_ignored(tmp_path: Path) -> None:
    disclaimer = "<p>" + " ".join(_VOCAB[:400:4]) + "</p>"
    with Deduper(tmp_path / "d", repeated_block_pages=3) as dd:
        items = [(f"http://a.test/{i}", page(article(100 + i, 100) + disclaimer)) for i in range(6)]
        out = run(dd, items)
        # a short page that is mostly the disclaimer: without the block
        # counts it would look like every other page of the host
        late = run(dd, [("http://a.test/late", page(article(200, 50) + disclaimer))])
    assert all("duplicate_of" not in r for r in out + late)
    assert dd.counts["boilerplate_blocks"] >= 3


def test_other_records_pass_and_failures_become_fields(tmp_path: Path) -> None:
    recs = [
        {"kind": "url", "v": 1, "url": "http://a.test/"},
        fetch("http://a.test/404", outcome="http-error", status=404),
        fetch("http://a.test/gone"),
        fetch("http://a.test/img.png"),
        fetch("http://a.test/short"),
    ]

    def bodies(rec: dict[str, Any]) -> tuple[bytes, str]:
        if rec["url"].endswith("gone"):
            raise CrawlError("cannot read WARC record: file vanished")
        if rec["url"].endswith(".png"):
            return b"\x89PNG\r\n\x1a\n" + bytes(100), "image/png"
        return b"<p>too short</p>", "text/html"

    with Deduper(tmp_path / "d") as dd:
        out = dd.check(recs, bodies)
    assert out[:2] == recs[:2]
    assert "file vanished" in out[2]["dedupe_error"]
    assert "not text" in out[3]["dedupe_note"] and "simhash" not in out[3]
    assert "words" in out[4]["dedupe_note"]
    with Deduper(tmp_path / "d") as dd:  # the png's digest was remembered
        again = dd.check([fetch("http://b.test/copy.png")], bodies=lambda r: bodies(recs[3]))
    assert again[0]["dup_kind"] == "exact"
    assert payload_digest(b"") == "sha1:3I42H3S6NNFQ2MSVX7XZKYAYSCX5QBYJ"


# -- the test web: every near-duplicate group found, nothing distinct merged ----


def test_near_duplicate_recall_and_precision_on_the_test_web(testweb, tmp_path: Path) -> None:
    pages = [p for p in testweb.pages.values()
             if p["status"] == 200 and (p["content_type"] or "").startswith("text/html")
             and testweb.hosts[p["host"]]["behaviour"] in ("plain", "near-dups", "mirror",
                                                           "mirror-origin")
             and p.get("behaviour") != "sitemap"]
    truth: dict[str, str | None] = {}
    crawled = []
    for p in pages:
        url = canonicalize(p["url"]).url
        orig = p.get("near_duplicate_of") or p.get("duplicate_of")
        if orig and canonicalize(orig).url == url:
            continue  # a tracking-parameter copy: `crawl canon` merges it before any fetch
        if url not in truth:
            truth[url] = canonicalize(orig).url if orig else None
            crawled.append((url, p["url"]))
    assert sum(v is not None for v in truth.values()) >= 20
    with ThreadPoolExecutor(8) as ex:
        resp = list(ex.map(lambda c: testweb.get(c[1]), crawled))
    bodies = {u: (r.content, r.headers.get("content-type", "")) for (u, _), r in zip(crawled, resp, strict=True)}
    with Deduper(tmp_path / "d") as dd:
        out = dd.check([fetch(u) for u, _ in crawled], lambda r: bodies[r["url"]])
    found = {r["url"]: r.get("duplicate_of") for r in out}
    tp = sum(1 for u, o in truth.items() if o and found[u] == o)
    fn = sum(1 for u, o in truth.items() if o and found[u] != o)
    fp = sum(1 for u, o in truth.items() if not o and found[u])
    recall, precision = tp / (tp + fn), tp / (tp + fp) if tp + fp else 1.0
    print(f"test web near-duplicates: {tp} found, {fn} missed, {fp} wrong; "
          f"recall {recall:.3f}, precision {precision:.3f}")
    assert (recall, precision) == (1.0, 1.0), [u for u, o in truth.items() if (o or None) != found[u]]


# -- the command ----------------------------------------------------------------


def _crawl(*args: str, stdin: bytes = b"") -> subprocess.CompletedProcess[bytes]:
    return subprocess.run([sys.executable, "-m", "crawl", *args], input=stdin,
                          capture_output=True, timeout=120)


def test_cli_explain_two_files(tmp_path: Path) -> None:
    text = article(7, 600)
    (tmp_path / "a.html").write_bytes(page(text))
    (tmp_path / "b.html").write_bytes(page(text, nav="other nav", foot="other foot"))
    p = _crawl("dedupe", "--explain", "-f", str(tmp_path / "a.html"), "-f", str(tmp_path / "b.html"))
    assert p.returncode == 0, p.stderr
    out = orjson.loads(p.stdout)
    assert out["a"]["simhash"] == out["b"]["simhash"] and out["distance"] == 0
    assert out["verdict"].startswith("near-duplicates")
    bad = _crawl("dedupe", "--explain", "-f", str(tmp_path / "a.html"))
    assert bad.returncode == 2 and b"two pages" in bad.stderr


def test_cli_after_a_real_fetch_into_warc(testweb, tmp_path: Path) -> None:
    host = testweb.with_behaviour("near-dups")[0]
    original = next(p["near_duplicate_of"] for p in testweb.pages_of(host)
                    if p.get("near_duplicate_of"))
    copies = [p["url"] for p in testweb.pages_of(host) if p.get("near_duplicate_of") == original]
    urls = [original, *copies, testweb.url(host, "/")]
    d = str(tmp_path / "crawl")
    f = _crawl("fetch", "--dir", d, "--resolve-file", str(testweb.hosts_file), "--allow-private",
               stdin="\n".join(urls).encode() + b"\n")
    assert f.returncode == 0, f.stderr
    fetched = [orjson.loads(x) for x in f.stdout.splitlines()]
    fetched.sort(key=lambda r: urls.index(r["url"]) if r["url"] in urls else 99)
    assert [r["outcome"] for r in fetched] == ["ok"] * len(urls)
    p = _crawl("dedupe", "--dir", d, "--stats", str(tmp_path / "s.json"),
               stdin=b"".join(orjson.dumps(r) + b"\n" for r in fetched) + b"{broken\n")
    assert p.returncode == 0, p.stderr
    out = [orjson.loads(x) for x in p.stdout.splitlines()]
    assert "duplicate_of" not in out[0]
    assert [r.get("duplicate_of") for r in out[1:-1]] == [original] * len(copies)
    assert "duplicate_of" not in out[-1]
    assert b"line %d" % (len(fetched) + 1) in p.stderr
    stats = orjson.loads((tmp_path / "s.json").read_bytes())
    assert stats["near"] == len(copies) and stats["bad_records"] == 1
    e = _crawl("dedupe", "--dir", d, "--explain", original, copies[0])
    assert e.returncode == 0, e.stderr
    assert orjson.loads(e.stdout)["distance"] <= 3
    missing = _crawl("dedupe", "--dir", d, "--explain", original, "http://nowhere.test/")
    assert missing.returncode == 2 and b"-f FILE" in missing.stderr


def test_cli_jobs_gives_the_same_records_as_one_process(testweb, tmp_path: Path) -> None:
    """`--jobs 2` reads and fingerprints pages in worker processes: the records,
    their order and the counters are those of one process, over several
    batches (with an unreadable page and a malformed line among them), and a
    spool input is acked to the end."""
    pages = [p["url"] for h in (*testweb.with_behaviour("near-dups"), *testweb.with_behaviour("plain")[:6])
             for p in testweb.pages_of(h) if p["status"] == 200]
    assert len(pages) > 250
    d = tmp_path / "crawl"
    f = _crawl("fetch", "--dir", str(d), "--resolve-file", str(testweb.hosts_file), "--allow-private",
               stdin="\n".join(pages).encode() + b"\n")
    assert f.returncode == 0, f.stderr
    fetched = [orjson.loads(x) for x in f.stdout.splitlines()]
    ok = next(i for i, r in enumerate(fetched) if r["outcome"] == "ok")
    lost = dict(fetched[ok], warc={"file": "nothing-here.warc.gz", "offset": 0, "length": 10})
    lines = [orjson.dumps(r) for r in fetched[:250]] + [b"{broken", orjson.dumps(lost)] + \
        [orjson.dumps(r) for r in fetched[250:]]
    feed = b"\n".join(lines) + b"\n"
    got = {}
    for jobs in (1, 2):
        shutil.copytree(d, tmp_path / f"j{jobs}", ignore=shutil.ignore_patterns("dedupe"))
        p = _crawl("dedupe", "--dir", str(tmp_path / f"j{jobs}"), "--jobs", str(jobs),
                   "--stats", str(tmp_path / f"s{jobs}.json"), stdin=feed)
        assert p.returncode == 0, p.stderr
        got[jobs] = ([orjson.loads(x.replace(f"/j{jobs}/".encode(), b"/J/")) for x in p.stdout.splitlines()],
                     orjson.loads((tmp_path / f"s{jobs}.json").read_bytes()))
    assert got[2] == got[1]
    out, stats = got[2]
    assert len(out) == len(fetched) + 1 and stats.get("unreadable") == 1 and stats["bad_records"] == 1, stats
    assert stats["near"] + stats.get("exact", 0) >= 10
    assert "dedupe_error" in out[250]
    html = [r for r in out if r["outcome"] == "ok" and "html" in (r.get("content_type") or "")
            and "dedupe_error" not in r]
    assert len(html) > 100 and all("simhash" in r or "dedupe_note" in r for r in html)
    # spool in, spool out, with workers: every record through, nothing left claimed
    with Spool(tmp_path / "in") as sp:
        sp.put(fetched)
    shutil.copytree(d, tmp_path / "js", ignore=shutil.ignore_patterns("dedupe"))
    p = _crawl("dedupe", "--dir", str(tmp_path / "js"), "-j", "2", "-i", f"spool:{tmp_path / 'in'}",
               "-o", f"spool:{tmp_path / 'out'}")
    assert p.returncode == 0, p.stderr
    with Spool(tmp_path / "in") as sp_in, Spool(tmp_path / "out") as sp_out:
        assert sum(sp_in.counts().values()) == 0, sp_in.counts()
        back = [orjson.loads(v) for _, v in sp_out.claim(10_000)]
    assert sorted(r["url"] for r in back) == sorted(r["url"] for r in fetched)
    assert [r.get("duplicate_of") for r in back] == [r.get("duplicate_of") for r in got[1][0] if "url" in r
                                                     and "dedupe_error" not in r]


@pytest.mark.parametrize("jobs", [1, 2])
def test_cli_malformed_pointers_are_said_counted_and_passed_on(tmp_path: Path, jobs: int) -> None:
    """A fetch record whose warc pointer is malformed crashed the stage (KeyError for a
    missing offset, ValueError for a NUL, MemoryError for a length of 1e15); now each
    is named on stderr, counted as unreadable and passed on with dedupe_error."""
    from crawl.core import CrawlDir
    from crawl.store import BodyBuffer, Capture, WarcWriter, http_block

    d = tmp_path / "d"
    w = WarcWriter(CrawlDir(d).warc)
    resp = http_block("HTTP/1.1 200 OK", [("Content-Type", "text/html")])
    buf = BodyBuffer(resp.headers_buff)
    buf.write(page(article(3)))
    good = w.write(Capture("http://a.test/good", "response", 1.78e9, {}, response=resp, body=buf))
    w.close()
    assert good is not None
    bad = {
        "http://a.test/no-offset": {"file": good["file"]},
        "http://a.test/nul": {"file": "x\x00y.warc.gz", "offset": 0, "length": 10},
        "http://a.test/float": {**good, "length": 1e15},
        "http://a.test/huge": {**good, "length": 10**15},
        "http://a.test/outside": {"file": "../../x.warc.gz", "offset": 0, "length": 10},
        "http://a.test/negative": {**good, "offset": -5},
        "http://a.test/text": {**good, "length": "ten"},
    }
    feed = b"".join(orjson.dumps(fetch(u, warc=ptr)) + b"\n" for u, ptr in bad.items())
    feed += orjson.dumps(fetch("http://a.test/good", warc=good)) + b"\n"
    p = _crawl("dedupe", "--dir", str(d), "--jobs", str(jobs), "--stats", str(tmp_path / "s.json"),
               stdin=feed)
    assert p.returncode == 0, p.stderr
    err = p.stderr.decode()
    assert "Traceback" not in err
    out = {r["url"]: r for r in map(orjson.loads, p.stdout.splitlines())}
    assert list(out) == [*bad, "http://a.test/good"]  # nothing dropped, order kept
    for url in bad:
        assert "dedupe_error" in out[url] and "simhash" not in out[url]
        assert sum(line.startswith(f"crawl dedupe: {url}: ") for line in err.splitlines()) == 1
    assert "has no offset or length" in err and "control characters" in err
    assert "past the end of" in err and "outside the WARC directory" in err
    assert "simhash" in out["http://a.test/good"]
    assert orjson.loads((tmp_path / "s.json").read_bytes())["unreadable"] == len(bad)


def test_cli_jobs_workers_die_with_the_parent(tmp_path: Path) -> None:
    """`crawl dedupe --jobs 2` SIGKILLed alone (stdin still open, workers idle): its
    forkserver, workers and resource tracker must not live on."""
    import os
    import signal

    from proctree import alive, cmdline, group, kill_leftovers, parent, wait_for

    proc = subprocess.Popen([sys.executable, "-m", "crawl", "dedupe", "--dir", str(tmp_path / "d"),
                             "--jobs", "2"], stdin=subprocess.PIPE, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL, start_new_session=True)
    pgid, before = proc.pid, set()
    assert proc.stdin is not None
    try:
        # one batch makes the pool start a worker (its pointer leads nowhere: an error string)
        proc.stdin.write(orjson.dumps(fetch("http://a.test/", warc={"file": "none.warc.gz", "offset": 0,
                                                                   "length": 10})) + b"\n")
        proc.stdin.flush()

        def workers() -> list[int]:
            procs = group(pgid)
            servers = {p for p in procs if "forkserver" in cmdline(p)}
            return [p for p in procs if p in servers and parent(p) in servers]

        assert wait_for(lambda: len(workers()) >= 1, 60), [cmdline(p) for p in group(pgid)]
        before = group(pgid)
        assert any("resource_tracker" in cmdline(p) for p in before)
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(10)
        assert wait_for(lambda: not alive(before, pgid), 15), [cmdline(p) for p in alive(before, pgid)]
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        proc.stdin.close()
        kill_leftovers(before, pgid)


def test_a_fingerprint_survives_the_trip_from_a_worker(tmp_path: Path) -> None:
    """What `--jobs` workers send back (Fingerprint.__reduce__) settles to the same simhash."""
    import pickle

    from crawl.dedupe import fingerprint_pages

    items = {f"http://a.test/{i}": page(article(300 + i, 400)) for i in range(3)}
    items["http://a.test/empty"] = b""
    recs = [fetch(u) for u in items]
    sent = fingerprint_pages(recs, lambda r: (items[r["url"]], "text/html"))
    back = pickle.loads(pickle.dumps(sent))
    assert [i for i, _ in back] == [i for i, _ in sent]
    for (_, a), (_, b) in zip(sent, back, strict=True):
        assert (b.url, b.digest, b.note, b.whole, b.cuts, b.block_keys, b.doc.canonical) == \
            (a.url, a.digest, a.note, a.whole, a.cuts, a.block_keys, a.doc.canonical)
        assert b.hashes.tolist() == a.hashes.tolist()
        a.keep([False] + [True] * (len(a.block_keys) - 1) if a.block_keys else None)
        b.keep([False] + [True] * (len(b.block_keys) - 1) if b.block_keys else None)
        assert (b.simhash, b.words) == (a.simhash, a.words)
    with Deduper(tmp_path / "d") as one, Deduper(tmp_path / "e") as two:
        assert one.record(recs, fingerprint_pages(recs, lambda r: (items[r["url"]], "text/html"))) == \
            two.record(recs, pickle.loads(pickle.dumps(fingerprint_pages(recs, lambda r: (items[r["url"]],
                                                                                             "text/html")))))
