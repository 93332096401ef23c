"""Benchmark `crawl parse`: pages/s and MB/s on the test web's pages.

Figures printed:

1. the parse core (:func:`crawl.parse.parse_body`: charset, lxml, links,
   canonicalisation, traps, records) on 1,000 test-web pages of ~30 KB,
   against the goal of 1,000 pages/s per core;
2. the link-extraction variants we chose between (same pages, each
   collecting (tag, href) of the link-bearing elements), as ratios against
   the one crawl.parse.links uses;
3. one 5 MB page, and a link-dense 5.5 MB page of 60,000 links, read up to
   the tag cap (goal for both: under 200 ms of CPU), the latter also split
   into its parts (the budget's counts, tree, links taken, records);
4. the whole command, ``crawl parse --dir`` in a subprocess reading the
   bodies back from a gzip WARC, records out through a pipe;
5. hostile pages of up to 5 MB (:func:`hostile_pages`: one tag of 64,000
   attributes, tags of fifteen attributes each, deep nesting, stray end tags
   over a deep stack, end tags a higher-priority element blocks, repeated
   ``<body>``, 60,000 links, the same link 160,000 times, a 5 MB single
   line, a 5 MB comment, unclosed tags, nested anchors, a 5 MB run of
   ``<``, a head of 200,000 ``<link>``, a Link header of 100 KB of ``<``):
   p50 and p99 of the parse core's CPU ms over several rounds each, against
   the 200 ms goal (the design's parse p99), as a ratio to a typical
   test-web page, with the bound that cut the page; and the same for
   ``crawl.text.analyse`` (what ``crawl dedupe`` reads of the same bodies).

Each figure is the best of a few rounds. "per CPU-second" divides by the
process's CPU time instead of wall time, which is the fairer per-core figure
on a machine shared with other work. Run: ``python scripts/bench_parse.py``.
"""

from __future__ import annotations

import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import orjson
from lxml import etree, html

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from crawl.parse import ParseConfig, budget, links  # noqa: E402
from crawl.parse.pages import parse_body  # noqa: E402
from crawl.parse.traps import TrapPolicy  # noqa: E402
from crawl.store import BodyBuffer, Capture, WarcWriter, http_block  # noqa: E402
from crawl.testweb import Web, WebConfig  # noqa: E402
from crawl.testweb.content import page_html  # noqa: E402

HEADERS = [("Content-Type", "text/html; charset=utf-8")]
CFG = ParseConfig(traps=TrapPolicy(year=time.gmtime().tm_year))


def best(fn: Callable[[], object], rounds: int = 3) -> tuple[float, float]:
    """(wall, cpu) seconds of the fastest of ``rounds`` runs."""
    fn()  # warm caches
    out = (float("inf"), float("inf"))
    for _ in range(rounds):
        w, c = time.perf_counter(), time.process_time()
        fn()
        out = min(out, (time.perf_counter() - w, time.process_time() - c))
    return out


def test_web_pages(n_hosts: int = 20, n_pages: int = 50, size: int = 30 * 1024) -> list[tuple[str, bytes]]:
    """Ordinary test-web pages averaging ``size`` bytes (the generator's size
    knob is a target it pads towards, so it is calibrated once)."""
    def make(knob: int) -> list[tuple[str, bytes]]:
        web = Web(WebConfig(hosts=n_hosts, pages=n_pages, min_size=knob, max_size=knob, mix="plain"))
        return [(web.url(i, web.page(i, k).path), page_html(web, i, k, 0))
                for i in range(n_hosts) for k in range(n_pages)]

    pages = make(size)
    mean = sum(len(b) for _, b in pages) / len(pages)
    return pages if abs(mean - size) < size * 0.05 else make(int(size * size / mean))


# -- extraction variants -------------------------------------------------------
_TAGS = frozenset(("a", "area", "link", "iframe", "frame", "base", "meta", "title"))


class _Target:
    """Parser-target variant: no tree, a Python call per start tag and text."""

    def __init__(self) -> None:
        self.out: list[tuple[str, dict[str, str]]] = []
        self.in_a = 0
        self.text: list[str] = []

    def start(self, tag: str, attrib: dict[str, str]) -> None:
        if tag in _TAGS:
            self.out.append((tag, dict(attrib)))
            self.in_a += tag == "a"

    def end(self, tag: str) -> None:
        if tag == "a" and self.in_a:
            self.in_a -= 1

    def data(self, d: str) -> None:
        if self.in_a:
            self.text.append(d)

    def close(self) -> list[tuple[str, dict[str, str]]]:
        return self.out


def v_ours(b: bytes) -> object:
    return [(el.tag, el.get("href")) for el in links._elements(b)[0]]


def v_target(b: bytes) -> object:
    return etree.fromstring(b, etree.HTMLParser(encoding="utf-8", target=_Target()))


def v_lxml_html_iterlinks(b: bytes) -> object:
    return list(html.document_fromstring(b).iterlinks())


def v_xpath(b: bytes) -> object:
    doc = etree.fromstring(b, _TREE_PARSER)
    return doc.xpath("//a|//area|//link|//iframe|//frame|//base|//meta|//title")


_TREE_PARSER = etree.HTMLParser(encoding="utf-8", remove_comments=True, collect_ids=False)
_DENSE_PARSER = etree.HTMLParser(**links._PARSER_OPTIONS)  # what crawl.parse.links uses


def v_pull(b: bytes) -> object:
    p = etree.HTMLPullParser(events=("start",), tag=list(_TAGS), encoding="utf-8",
                             remove_comments=True, collect_ids=False)
    p.feed(b)
    p.close()
    return [(el.tag, el.get("href")) for _, el in p.read_events()]


# -- hostile pages -----------------------------------------------------------------
MB5 = 5_000_000
_FIRST = b"<html><body><a href=/first>first</a>"


def _fill(unit: bytes, head: bytes = _FIRST, size: int = MB5) -> bytes:
    return head + unit * ((size - len(head)) // len(unit))


def _attributes(n: int, name: bytes = b"div") -> bytes:
    return b"<" + name + b" " + b" ".join(b"a%d" % i for i in range(n)) + b">"


def hostile_pages() -> dict[str, tuple[bytes, list[tuple[str, str]]]]:
    """Name -> (body, headers): shapes that made libxml2 or our code quadratic or heavy."""
    deep = _FIRST + b"<div>" * 2040
    pages = {
        "one tag, 64,000 attributes": _FIRST + _attributes(64_000) + b"<a href=/after>after</a>",
        "tags of 15 attributes": _fill(_attributes(15, b"br")),
        "deep nesting (unclosed div)": _fill(b"<div>"),
        "stray end tags, 2,040 deep": _fill(b"</x>", deep),
        "blocked end tags": _fill(b"</span>", _FIRST + b"<span>" + b"<div>" * 2000),
        "repeated <body>, 2,040 deep": _fill(b"<body>", deep),
        "60,000 links": b"<html><body>" + b"".join(
            b'<p>some words here and there <a href="/section/page-%d.html?x=%d">anchor %d</a></p>\n'
            % (i, i, i) for i in range(60_000)) + b"</body></html>",
        "one link 160,000 times": _fill(b"<a href=/x>x</a>"),
        "5 MB single line": _fill(b"word "),
        "5 MB comment": _FIRST + b"<!--" + b"x" * (MB5 - 60) + b"--><a href=/after>after</a>",
        "unclosed <p>": _fill(b"<p>x"),
        "nested anchors": _fill(b"<a href=/n><span>text "),
        "5 MB of '<'": _fill(b"<"),
        "head of 200,000 <link>": b"<html><head>" + b"<link rel=x href=/a>" * 200_000
                                  + b"<link rel=canonical href=/c>",
    }
    out = {name: (body, HEADERS) for name, body in pages.items()}
    out["Link header of 100 KB '<'"] = (_FIRST, HEADERS + [("Link", "<" * 100_000)])
    return out


def percentiles(fn: Callable[[], object], rounds: int) -> tuple[float, float]:
    """(p50, p99) of this thread's CPU seconds over ``rounds`` runs (after one to warm up)."""
    fn()
    times = []
    for _ in range(rounds):
        c = time.thread_time()
        fn()
        times.append(time.thread_time() - c)
    times.sort()
    return times[len(times) // 2], times[min(len(times) - 1, int(len(times) * 0.99))]


def hostile(typical: float, rounds: int = 15) -> None:
    """The hostile set against the parse p99 goal; ``typical`` is a test-web page's CPU seconds."""
    from crawl.text import analyse

    print(f"hostile pages ({rounds} rounds each; p50 / p99 CPU ms; x = p99 over a typical "
          f"{typical * 1e3:.2f} ms page; goal: p99 <= 200 ms):")
    worst = 0.0
    for name, (body, headers) in hostile_pages().items():
        res = parse_body("http://h.test/", headers, body, config=CFG)
        p50, p99 = percentiles(lambda b=body, h=headers: parse_body("http://h.test/", h, b, config=CFG), rounds)
        t50, t99 = percentiles(lambda b=body: analyse(b, "utf-8", folded=True), max(3, rounds // 3))
        worst = max(worst, p99)
        page = res.page or {}
        cut = f"{page['parse_limit']} at {page.get('parse_limit_at', '?')}" if "parse_limit" in page else "read whole"
        print(f"  {name:30s} {len(body) / 1e6:4.1f} MB  parse {p50 * 1e3:6.1f} / {p99 * 1e3:6.1f} ms "
              f"({p99 / typical:5.0f}x, {'met' if p99 <= 0.2 else 'NOT met'}; {len(res.links):,} links, "
              f"{cut})  text {t50 * 1e3:6.1f} / {t99 * 1e3:6.1f} ms")
    print(f"  worst parse p99: {worst * 1e3:.0f} ms (goal <= 200 ms: {'met' if worst <= 0.2 else 'NOT met'})")


# -- the whole command -----------------------------------------------------------
def stored_in_warc(pages: list[tuple[str, bytes]], warc_dir: Path) -> list[dict]:
    """Write the pages as `crawl fetch` would (response records in a gzipped WARC); their fetch
    records, with the payload digest the writer computes (scripts/bench_dedupe.py uses it too)."""
    from crawl.dedupe.deduper import payload_digest

    w = WarcWriter(warc_dir, compression="gzip")
    fetches = []
    for url, body in pages:
        resp = http_block("HTTP/1.1 200 OK", HEADERS)
        buf = BodyBuffer(resp.headers_buff or b"")
        buf.write(body)
        ptr = w.write(Capture(url=url, kind="response", ts=time.time(), metadata={},
                              response=resp, body=buf))
        fetches.append({"kind": "fetch", "v": 1, "url": url, "outcome": "ok", "status": 200, "depth": 1,
                        "content_type": HEADERS[0][1], "digest": payload_digest(body),
                        "warc": ptr})
    w.sync()
    w.close()
    return fetches


def command_run(pages: list[tuple[str, bytes]]) -> tuple[float, int]:
    with tempfile.TemporaryDirectory() as tmp:
        d = Path(tmp) / "crawl"
        fetches = [orjson.dumps(r) for r in stored_in_warc(pages, d / "warc")]
        stdin = b"\n".join(fetches) + b"\n"
        t = time.perf_counter()
        p = subprocess.run([sys.executable, "-m", "crawl", "parse", "--dir", str(d)],
                           input=stdin, capture_output=True, check=True, cwd=ROOT)
        return time.perf_counter() - t, p.stdout.count(b"\n")


def main() -> None:
    pages = test_web_pages()
    total = sum(len(b) for _, b in pages)
    mb = total / 1e6
    n = len(pages)
    print(f"parse: {n} test-web pages, {total / n / 1024:.1f} KiB each on average")

    counts = [0]

    def core() -> None:
        counts[0] = sum(len(parse_body(u, HEADERS, b, config=CFG).links) for u, b in pages)

    wall, cpu = best(core)
    print(f"parse core: {n / wall:,.0f} pages/s, {mb / wall:.1f} MB/s, "
          f"{counts[0] / wall:,.0f} links/s (wall); {n / cpu:,.0f} pages per CPU-second "
          f"(goal >= 1,000 pages/s per core: {'met' if n / cpu >= 1000 else 'NOT met'})")

    bodies = [b for _, b in pages[:300]]
    _, full = best(lambda: [links.extract(b) for b in bodies], rounds=5)
    print(f"extract (crawl.parse.links.extract, all of it): {full / len(bodies) * 1e6:.0f} us/page (CPU)")
    variants = {
        "crawl.parse.links: tree + iter(tags)": v_ours,
        "parser target (no tree)": v_target,
        "lxml.html + iterlinks": v_lxml_html_iterlinks,
        "HTMLPullParser(tag=...) always": v_pull,
        "tree + one xpath": v_xpath,
    }
    # Interleaved rounds, best CPU time each: fair on a machine shared with others.
    cpu = {name: float("inf") for name in variants}
    for _ in range(7):
        for name, fn in variants.items():
            c = time.process_time()
            for b in bodies:
                fn(b)
            cpu[name] = min(cpu[name], time.process_time() - c)
    ours = cpu["crawl.parse.links: tree + iter(tags)"]
    for name, t in cpu.items():
        ratio = "" if t == ours else f" (crawl.parse.links is {t / ours:.2f}x faster)"
        print(f"extract ({name}): {t / len(bodies) * 1e6:.0f} us/page (CPU){ratio}")

    # A 5 MB page: test-web pages glued together (those without a meta
    # robots tag, which would rule the whole page), ~45 links per 100 KB.
    glued = b"".join(b for _, b in pages if b'name="robots"' not in b)
    big = b"<html><body>" + glued[: 5 * 1000 * 1000] + b"</body></html>"
    res = parse_body(pages[0][0], HEADERS, big, config=CFG)
    wall, cpu = best(lambda: parse_body(pages[0][0], HEADERS, big, config=CFG))
    print(f"parse {len(big) / 1e6:.1f} MB page: {wall * 1000:.0f} ms wall, {cpu * 1000:.0f} ms CPU, "
          f"{len(res.links):,} links (goal < 200 ms: {'met' if cpu < 0.2 else 'NOT met'})")

    # The worst case for the caps: 60,000 distinct links; the parse reads the first
    # budget.MAX_TAGS tags of it (crawl/parse/budget.py), up to 10,000 links are emitted.
    dense = b"<html><body>" + b"".join(
        b'<p>some words here and there <a href="/section/page-%d.html?x=%d">anchor %d</a></p>\n'
        % (i, i, i) for i in range(60_000)) + b"</body></html>"
    res = parse_body(pages[0][0], HEADERS, dense, config=CFG)
    wall, cpu = best(lambda: parse_body(pages[0][0], HEADERS, dense, config=CFG), rounds=5)
    page = res.page or {}
    print(f"parse {len(dense) / 1e6:.1f} MB link-dense page: {wall * 1000:.0f} ms wall, "
          f"{cpu * 1000:.0f} ms CPU, {len(res.links):,} links emitted, "
          f"{res.counts.get('links_cut', 0):,} cut, parse_limit {page.get('parse_limit')} "
          f"at byte {page.get('parse_limit_at', 0):,} (goal < 200 ms: {'met' if cpu < 0.2 else 'NOT met'})")
    read = dense[:page.get("parse_limit_at", len(dense))]
    _, counts = best(lambda: budget.limit(dense), rounds=5)
    _, tree = best(lambda: etree.fromstring(read, _DENSE_PARSER), rounds=5)

    def take() -> None:
        stream = links.scan(dense)[1]
        for n, _ in enumerate(stream, 1):
            if n == CFG.max_links:
                break
        stream.count_rest()

    _, scan = best(take, rounds=5)
    print(f"  of which: the budget's counts {counts * 1000:.0f} ms; libxml2 tree of the "
          f"{len(read) / 1e6:.2f} MB read {tree * 1000:.0f} ms; the links taken and counted "
          f"{(scan - tree - counts) * 1000:.0f} ms; resolving, checking and writing the "
          f"{len(res.links):,} records {(cpu - scan) * 1000:.0f} ms")

    t, out = command_run(pages)
    print(f"crawl parse (subprocess, gzip WARC in, NDJSON out): {n / t:,.0f} pages/s, "
          f"{mb / t:.1f} MB/s, {out:,} records, {t:.2f} s including interpreter start")

    typical, _ = percentiles(lambda: parse_body(pages[0][0], HEADERS, pages[0][1], config=CFG), 51)
    hostile(typical)


if __name__ == "__main__":
    if sys.argv[1:] == ["--hostile"]:  # only section 5
        first = test_web_pages(1, 10)[0]
        hostile(percentiles(lambda: parse_body(first[0], HEADERS, first[1], config=CFG), 51)[0])
    else:
        main()
