"""Write the seed corpus of every fuzz target under tests/fuzz/corpus/<target>/.

    python tests/fuzz/make_seeds.py          # rewrite this script's seeds (others' files stay)

The seeds are committed; this script says how they were made and remakes
them after a format change. Each is small (a few KiB at most) and shows the
fuzzer one shape the parser must handle, so mutation starts from valid
input instead of having to discover gzip headers or WARC framing by chance.
Control bytes at the front follow each target's layout (tests/fuzz/targets.py).
The canonicaliser's corpus also holds ``urls.txt``, kept by the canon tests.
"""

from __future__ import annotations

import gzip
import sys
import tempfile
import zlib
from pathlib import Path

import brotli

HERE = Path(__file__).resolve().parent
CORPUS = HERE / "corpus"

ROBOTS = {
    "basic.txt": b"User-agent: *\nDisallow: /private\nAllow: /private/ok\nSitemap: https://a.test/s.xml\n",
    "groups.txt": (b"User-agent: crawl\nUser-agent: other\nDisallow: /x\nCrawl-delay: 2.5\n\n"
                   b"User-agent: *\nDisallow: /\nRequest-rate: 1/10s 0800-1700\n"
                   b"# comment\nUser-agent: foo*bot\nAllow: /$\nDisallow: /*.pdf$\n"),
    "lenient.txt": (b"\xef\xbb\xbfuser agent crawl\r\ndisalow /a\rDisallowed: /b\nallow /b/c?x=%3A\n"
                    b"User-agent:Googlebot/2.1 (+http://x)\nDisallow : /%E2%82%AC/%7euser\n"
                    b"crawl-delay: 1e3\nsite-map: /rel.xml\nDisallow: /\xff\xfe*$\n"),
    "wildcards.txt": b"User-agent: *\nDisallow: /a*b*c*d*e$\nDisallow: /*?*sort=\nAllow: /**/x$\nDisallow: *\n",
    "empty-rules.txt": b"Disallow: /before-any-group\nUser-agent: *\nDisallow:\nAllow:\nNoindex: /x\n",
}

CANON = {
    "relative.seed": ("http://Example.COM:80/a/b/c.html?x=1#top\n../d\n./e?b=2&a=1\n//other.test/p\n"
                      "?q\n#frag\n/abs/./x/../y\nhttps://example.com/\nmailto:x@y\n"),
    "hosts.seed": ("http://0x7f.1/\nhttp://[::FFFF:127.0.0.1]:8080/\nhttp://xn--nxasmq6b.test/\n"
                   "http://B\u00fccher.test/\nhttp://a..b/\nhttp://a_b.test./\nhttp://user:pw@h.test/\n"),
    "query.seed": ("http://a.test/p?utm_source=x&b=2&a=1&sessionid=9&a=0\n"
                   "http://a.test/p;jsessionid=ABC?x=%7e&y=%41%2f&&\nhttp://a.test/%zz%4%%41?\n"),
}

RECORD = {
    "plain-url": b"http://example.test/a?b",
    "url.json": b'{"kind":"url","v":1,"url":"http://a.test/","priority":3,"depth":0,"tag":"q4"}',
    "fetch.json": (b'{"kind":"fetch","v":1,"url":"http://a.test/","outcome":"ok","status":200,'
                   b'"warc":{"file":"crawl-1.warc.gz","offset":0,"length":123},"timings":{"total":0.1}}'),
    "lease.json": b'{"kind":"lease","v":1,"lease":"L1","url":"http://a.test/","host":"a.test","attempt":1,"deadline":1.5e9}',
    "bare-url.json": b'{"url":"http://a.test/\\u00e9\\ud83d\\ude00"}',
    "odd.json": b'[1,2,{"kind":"url"}]',
    "string.json": b'"http://a.test/"',
    "broken.json": b'{"kind":"url","url":',
    "numbers.json": b'{"kind":"stats","n":18446744073709551615,"m":-9223372036854775808,"f":1e308}',
}

PAGE = b"""<!doctype html><html><head><title> A  page </title><base href="/base/">
<link rel="canonical" href="http://a.test/canon"><link rel="stylesheet" href="/s.css">
<link rel="next alternate" href="/p2"><meta name="robots" content="noindex, crawl: nofollow">
<meta http-equiv="refresh" content="5; url='/later'"></head><body>
<a href="/a" rel="nofollow ugc">one <b>bold</b></a><a name="x">no href</a>
<map><area href="/area" alt="an area"></map><iframe src="/frame"></iframe><frame src="/f2">
<a href="javascript:void(0)" title="t"><img alt="img alt"></a></body></html>"""

LINKS = {
    "page.html": PAGE,
    "after-end.html": b"<html><body><a href=/in>in</a></body></html><a href=/after>after</a>",
    "soup.html": b"<div><div><a href=1><span><a href=2>x<p><table><td><a href=3>" + b"<i>" * 40,
    "meta.html": (b"<meta http-equiv=REFRESH content='0;URL=\"/q\"'><meta name=crawl content=none>"
                  b"<meta name=robots content='otherbot: noindex, max-snippet:3'>"),
    "binary.html": bytes(range(256)),
}

OK = b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\nContent-Type: text/html\r\n\r\nhello"
HTTP = {
    "length": b"\x00" + OK,
    "chunked": b"\x07HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n3;ext=1\r\nabc\r\n0\r\nX-Trailer: 1\r\n\r\n",
    "close": b"\x00HTTP/1.0 200 OK\r\nContent-Type: text/plain\r\n\r\nuntil the end",
    "continue": b"\x03HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 103 Early Hints\r\nLink: </s>\r\n\r\n" + OK,
    "no-body": b"\x00HTTP/1.1 204 No Content\r\nContent-Length: 10\r\n\r\nHTTP/1.1 304 Not Modified\r\n\r\n",
    "extra": b"\x00" + OK + b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n",
    "mixed": b"\x00HTTP/1.1 200 OK\r\nContent-Length: 3\r\nTransfer-Encoding: gzip, chunked\r\n\r\n1\r\nx\r\n0\r\n\r\n",
    "lenient": b"\x01HTTP/1.1 301 Moved\nLocation: /x\n folded\nX: a\x01b\nContent-Length: 0\n\n",
    "short": b"\x00HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\nonly this",
    "upgrade": b"\x00HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\r\n",
}

TEXT = b"<html><body>" + b"compressible text " * 40 + b"</body></html>"


def _codings() -> dict[str, bytes]:
    # layout: byte 0 = index into targets.CODINGS (255: header given in the input), byte 1 = piece size
    raw_deflate = zlib.compressobj(6, zlib.DEFLATED, -zlib.MAX_WBITS)
    raw = raw_deflate.compress(TEXT) + raw_deflate.flush()
    return {
        "gzip": b"\x00\x00" + gzip.compress(TEXT),
        "gzip-members": b"\x00\x02" + b"".join(gzip.compress(bytes([65 + i]) * 9) for i in range(8)),
        "gzip-trailing": b"\x00\x00" + gzip.compress(TEXT) + b"\x00\x00junk after the end",
        "deflate": b"\x01\x03" + zlib.compress(TEXT),
        "raw-deflate": b"\x01\x01" + raw,
        "br": b"\x02\x00" + brotli.compress(TEXT),
        "gzip-then-br": b"\x05\x04" + brotli.compress(gzip.compress(TEXT)),
        "br-then-gzip": b"\x06\x00" + gzip.compress(brotli.compress(TEXT)),
        "identity": b"\x04\x00" + TEXT,
        "own-header": b"\xff\x00gzip, identity, br\n" + brotli.compress(gzip.compress(TEXT)),
        "zeros": b"\x00\x00" + gzip.compress(b"\0" * 200_000),
        "br-zeros": b"\x02\x00" + brotli.compress(b"\0" * 300_000),
    }


def _warcs() -> dict[str, bytes]:
    # layout: byte 0 = index into targets' suffixes (0 .warc, 1 .warc.gz, 2 .warc.zst)
    from crawl import store

    out = {}
    with tempfile.TemporaryDirectory() as tmp:
        for i, comp in enumerate(("none", "gzip", "zstd")):
            d = Path(tmp) / comp
            w = store.WarcWriter(d, compression=comp)
            for url, body, enc in (("http://a.test/", TEXT, None), ("http://a.test/z", gzip.compress(TEXT), "gzip")):
                hdrs = [("Content-Type", "text/html"), ("Content-Length", str(len(body)))]
                if enc:
                    hdrs.append(("Content-Encoding", enc))
                resp = store.http_block("HTTP/1.1 200 OK", hdrs)
                buf = store.BodyBuffer(resp.headers_buff)
                buf.write(body)
                req = store.http_block("GET / HTTP/1.1", [("Host", "a.test")])
                w.write(store.Capture(url, "response", 1.78e9, {"outcome": "ok"}, ip="127.0.0.1",
                                      request=req, response=resp, body=buf))
            w.close()
            (f,) = [p for p in d.iterdir() if ".warc" in p.name and not p.name.endswith(".cdxj")]
            out[f"writer{f.name[f.name.index('.warc'):]}"] = bytes([i]) + f.read_bytes()
    block = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nX-Folded: a\r\n b\r\n\r\n5\r\nhello\r\n0\r\n\r\n"
    chunked = (b"WARC/1.1\r\nWARC-Type: response\r\nWARC-Target-URI: http://c.test/\r\n"
               b"WARC-Date: 2026-01-01T00:00:00Z\r\nWARC-Record-ID: <urn:uuid:1>\r\n"
               b"Content-Type: application/http; msgtype=response\r\n"
               b"Content-Length: %d\r\n\r\n%s\r\n\r\n" % (len(block), block))
    out["chunked.warc"] = b"\x00" + chunked
    out["torn.warc.gz"] = b"\x01" + gzip.compress(chunked)[:-9]
    return out


def write(name: str, files: dict[str, bytes | str]) -> None:
    folder = CORPUS / name
    folder.mkdir(parents=True, exist_ok=True)
    for fname, data in files.items():
        (folder / fname).write_bytes(data.encode() if isinstance(data, str) else data)


def main() -> int:
    write("robots", ROBOTS)
    write("canon", CANON)
    write("record", RECORD)
    write("links", LINKS)
    write("http", HTTP)
    write("codings", _codings())
    write("warc", _warcs())
    return 0


if __name__ == "__main__":
    sys.exit(main())
