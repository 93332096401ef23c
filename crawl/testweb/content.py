"""Bytes of the synthetic web: HTML pages, robots files, sitemaps, PDFs, PNGs.

Every function is deterministic in its arguments. Pages carry real
boilerplate (navigation, footer, an ad block) around an article whose text
is drawn from a large pseudo-vocabulary, so distinct pages are distinct to a
simhash and variants of one article are near-duplicates of each other.
"""

from __future__ import annotations

import functools
import gzip
import html
import struct
import threading
import time
import zlib
from array import array
from email.utils import formatdate

from . import realistic
from .generator import ROBOTS_LIMIT, Link, PageSpec, Web
from .shapes import _rng
from .words import _BOILER as _BOILER
from .words import _RUN as _RUN
from .words import VOCAB as VOCAB
from .words import _pool as _pool
from .words import _text as _text
from .words import _words as _words
from .words import chrome as chrome


def http_date(t: float) -> str:
    return formatdate(t, usegmt=True)


def iso_date(t: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(t))


def _a(link: Link) -> str:
    rel = f' rel="{" ".join(link.rel)}"' if link.rel else ""
    return f'<a href="{html.escape(link.href)}"{rel}>{html.escape(link.text)}</a>'


def _article(spec: PageSpec, src: int, body_links: list[Link]) -> str:
    """The article text, padded to the page's size, with links woven in.

    All runs of text are drawn at once (one ``randbytes``), then grouped
    three to a paragraph: this is the hot loop of a cold page.
    """
    text, starts = _pool()
    top = len(starts) - _RUN - 1
    n_runs = max(1, (max(600, spec.size - 1500) // 7) // _RUN)
    picks = array("I", _rng("article", src, spec.k).randbytes(4 * n_runs))
    runs = [text[starts[j]: starts[j + _RUN] - 1] for j in [p % top for p in picks]]
    parts: list[str] = []
    n_links = len(body_links)
    for p, first in enumerate(range(0, n_runs, 3)):
        para = " ".join(runs[first: first + 3])
        if p < n_links:
            para += " " + _a(body_links[p])
        parts.append(f"<p>{para}</p>")
    for link in body_links[len(parts):]:
        parts.append(f"<p>See also {_a(link)}.</p>")
    return "\n".join(parts)


@functools.lru_cache(maxsize=256)  # the router keeps the responses; this serves variants
def page_html(web: Web, i: int, k: int, version: int, variant: str = "") -> bytes:
    """An ordinary page; ``variant`` is one of the near-duplicate variants or ''."""
    if web.config.profile == "realistic":
        return realistic.page_html(web, i, k, version, variant)
    spec = web.page(i, k)
    host = web.host(i)
    src = host.mirror_of if host.mirror_of is not None else i
    title = f"{_words(('title', src, k), 3).title()} ({web.host_name(src)})"
    n_nav = min(4, web.config.pages)
    nav, rest = list(spec.links[:n_nav]), spec.links[n_nav:]
    body_links = [lk for lk in rest if lk.tag == "a"]
    images = [lk for lk in rest if lk.tag == "img"]
    canonical = web.url(src, spec.path)
    head = ['<!DOCTYPE html>', '<html lang="en">', "<head>", '<meta charset="utf-8">',
            f"<title>{html.escape(title)}</title>",
            f'<link rel="canonical" href="{canonical}">']
    if spec.meta_robots:
        head.append(f'<meta name="robots" content="{spec.meta_robots}">')
    if spec.base_href:
        head.append(f'<base href="{spec.base_href}">')
    head.append("</head>")
    nav_html = " | ".join(_a(lk) for lk in nav)
    if variant == "mobile":
        header = f'<header class="m"><button>Menu</button><nav>{nav_html}</nav></header>'
    elif variant == "print":
        header = f"<header><p>Printed from {html.escape(canonical)}</p></header>"
    else:
        header = f'<header><div class="logo">{web.host_name(src)}</div><nav>{nav_html}</nav></header>'
    changing, ad, footer = chrome(web, spec, src, version, variant)
    imgs = "".join(f'<img src="{html.escape(lk.href)}" alt="figure">' for lk in images)
    article = _article(spec, src, body_links)
    body = ["<body>", header, "<main><article>", f"<h1>{html.escape(title)}</h1>", changing,
            article, imgs, "</article>", ad, "</main>", footer, "</body>", "</html>"]
    return "\n".join(head + body).encode()


def simple_html(title: str, links: list[tuple[str, str]], text_seed: object, words: int = 120) -> bytes:
    """A small page for traps, busy pages and other special paths."""
    items = "".join(f'<li><a href="{html.escape(h)}">{html.escape(t)}</a></li>' for h, t in links)
    return (
        f'<!DOCTYPE html>\n<html><head><meta charset="utf-8"><title>{html.escape(title)}</title>'
        f"</head>\n<body><h1>{html.escape(title)}</h1>\n<p>{_words(text_seed, words)}</p>\n"
        f"<ul>{items}</ul>\n<footer>{_BOILER}</footer></body></html>\n"
    ).encode()


# -- gzip members and trailing bytes ------------------------------------------
def gzip_page_links(web: Web, i: int) -> list[str]:
    """The links that only the last part of a gzip-multi or gzip-trailing page holds."""
    return [web.url(i, web.path(k)) for k in range(1, min(4, web.config.pages))]


def gzip_page(web: Web, i: int, behaviour: str) -> bytes:
    """The decoded page: its links come at the end, so a decoder that stops after
    the first gzip member finds none of them."""
    head = simple_html("Sent in parts", [], ("gzip", i, behaviour), words=400)
    links = "".join(f'<p><a href="{html.escape(u)}">part link {n}</a></p>'
                    for n, u in enumerate(gzip_page_links(web, i)))
    return head + f"<div>{links}</div>\n".encode()


def gzip_page_body(web: Web, i: int, behaviour: str) -> bytes:
    """gzip-multi: three members (RFC 1952 allows a row of them, and servers that
    append to a compressed log send them); gzip-trailing: one member, then a
    newline and bytes that are no gzip (a proxy's padding, a buggy server)."""
    page = gzip_page(web, i, behaviour)
    if behaviour == "gzip-multi":
        third = len(page) // 3
        parts = (page[:third], page[third:2 * third], page[2 * third:])
        return b"".join(gzip.compress(p, mtime=0) for p in parts)
    return gzip.compress(page, mtime=0) + b"\n<!-- not gzip -->\n" + b"\0" * 64


# -- robots.txt ---------------------------------------------------------------
def robots_txt(web: Web, i: int, variant: str | None = None) -> bytes:
    v = variant or web.host(i).robots
    sitemap = f"Sitemap: {web.url(i, '/sitemap.xml')}\n"
    head = f"# robots.txt for {web.host_name(i)} (crawl testweb)\n"
    if v == "rules":
        agent = web.config.agent
        return (
            head
            + "User-agent: otherbot\nUser-agent: examplebot\nDisallow: /\n\n"
            + f"User-agent: {agent}\n"
            + "Disallow: /private/\nAllow: /private/open-\n"
            + "Allow: /news/\nDisallow: /news/\n"
            + "Disallow: /*.pdf$\nDisallow: /docs/*draft\n"
            + "Crawl-delay: 2\n\n"
            + "User-agent: *\nDisallow: /\n\n"
            + sitemap
        ).encode()
    if v == "oversize":
        lines = [head, "User-agent: *\n", "Disallow: /private/\n"]
        size = sum(map(len, lines))
        n = 0
        while size < ROBOTS_LIMIT + 64 * 1024:
            line = f"Disallow: /archive/2019/item-{n:07d}-not-served.html\n"
            lines.append(line)
            size += len(line)
            n += 1
        # beyond the 500 KiB parsing limit: a conforming parser never sees this
        lines.append("Disallow: /blog/\n")
        lines.append(sitemap)
        return "".join(lines).encode()
    if v == "redirect-target":
        return (head + "User-agent: *\nDisallow: /private/\nDisallow: /docs/\n" + sitemap).encode()
    return (head + "User-agent: *\nDisallow: /private/\n\n" + sitemap).encode()


# -- sitemaps -----------------------------------------------------------------
def sitemap_index(web: Web, i: int, now: float) -> bytes:
    stamp = iso_date(now - now % 86400)
    items = "".join(
        f"<sitemap><loc>{web.url(i, p)}</loc><lastmod>{stamp}</lastmod></sitemap>\n"
        for p in ("/sitemap-pages.xml", "/sitemap-files.xml")
    )
    return (
        '<?xml version="1.0" encoding="UTF-8"?>\n'
        '<sitemapindex xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">\n'
        f"{items}</sitemapindex>\n"
    ).encode()


def sitemap_pages(web: Web, i: int, now: float) -> bytes:
    rows = []
    for k in range(web.config.pages):
        spec = web.page(i, k)
        _, lm = web.version(spec, now)
        rows.append(f"<url><loc>{web.url(i, spec.path)}</loc><lastmod>{iso_date(lm)}</lastmod></url>\n")
    return _urlset(rows)


def sitemap_files(web: Web, i: int) -> bytes:
    rows = [f"<url><loc>{web.url(i, f'/files/report-{k}.pdf')}</loc></url>\n"
            for k in range(0, web.config.pages, 3)]
    return _urlset(rows)


def _urlset(rows: list[str]) -> bytes:
    return (
        '<?xml version="1.0" encoding="UTF-8"?>\n'
        '<urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">\n'
        + "".join(rows) + "</urlset>\n"
    ).encode()


# -- binary resources ---------------------------------------------------------
@functools.lru_cache(maxsize=1024)
def pdf(title: str) -> bytes:
    text = title.replace("(", "").replace(")", "").replace("\\", "")
    stream = f"BT /F1 18 Tf 72 720 Td ({text}) Tj ET".encode()
    objs = [
        b"<< /Type /Catalog /Pages 2 0 R >>",
        b"<< /Type /Pages /Kids [3 0 R] /Count 1 >>",
        b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Contents 4 0 R "
        b"/Resources << /Font << /F1 5 0 R >> >> >>",
        b"<< /Length %d >>\nstream\n" % len(stream) + stream + b"\nendstream",
        b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>",
    ]
    out = bytearray(b"%PDF-1.4\n")
    offsets = []
    for n, obj in enumerate(objs, 1):
        offsets.append(len(out))
        out += b"%d 0 obj\n" % n + obj + b"\nendobj\n"
    xref = len(out)
    out += b"xref\n0 %d\n0000000000 65535 f \n" % (len(objs) + 1)
    out += b"".join(b"%010d 00000 n \n" % o for o in offsets)
    out += b"trailer\n<< /Size %d /Root 1 0 R >>\nstartxref\n%d\n%%%%EOF\n" % (len(objs) + 1, xref)
    return bytes(out)


@functools.lru_cache(maxsize=1024)
def png(seed: str, size: int = 16) -> bytes:
    r = _rng("png", seed)
    rgb = bytes(r.randrange(256) for _ in range(3))
    raw = b"".join(b"\x00" + rgb * size for _ in range(size))

    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(
            ">I", zlib.crc32(kind + data) & 0xFFFFFFFF)

    ihdr = struct.pack(">IIBBBBB", size, size, 8, 2, 0, 0, 0)
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", ihdr) + chunk(b"IDAT", zlib.compress(raw)) + chunk(b"IEND", b"")


_bomb_lock = threading.Lock()


@functools.lru_cache(maxsize=4)
def _gzip_bomb(total: int) -> bytes:
    chunk = 1 << 20
    zeros = bytes(chunk)
    n = max(1, total // chunk)
    c = zlib.compressobj(9, zlib.DEFLATED, -15)
    # after a full flush the compressor starts afresh, so every further
    # megabyte of zeros compresses to the same bytes: compress two, repeat one
    first = c.compress(zeros) + c.flush(zlib.Z_FULL_FLUSH)
    again = c.compress(zeros) + c.flush(zlib.Z_FULL_FLUSH)
    last = c.flush(zlib.Z_FINISH)
    crc = 0
    for _ in range(n):  # zlib.crc32 releases the GIL: fine in a worker thread
        crc = zlib.crc32(zeros, crc)
    header = b"\x1f\x8b\x08\x00\x00\x00\x00\x00\x02\xff"  # RFC 1952: deflate, no name, mtime 0
    return header + first + again * (n - 1) + last + struct.pack("<II", crc, (n * chunk) & 0xFFFFFFFF)


def gzip_bomb(total: int) -> bytes:
    """One gzip member (any decoder inflates all of it) of ``total`` zero bytes, ~1000:1.

    Takes about a second for 1 GiB (the CRC), so the server computes it in a
    worker thread, never on the event loop.
    """
    with _bomb_lock:
        return _gzip_bomb(total)
