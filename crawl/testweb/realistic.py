"""The realistic profile: pages shaped like real documentation and news sites.

The synthetic profile's pages (2-200 KB, about a dozen links) are cheap to
parse; real sites are not. Measured on documentation and news sites, pages
have a median near 25 KB, a mean near 40 KB, a 1 % tail past 500 KB and a
few of 1-2 MB, and carry 50 to 3,000 links, most of them in a navigation
sidebar that every page of a host repeats. Some pages are mostly code
(``<pre>`` blocks) or tables; index pages list thousands of entries.

Everything is still a pure function of (seed, host, page): the sidebar of a
host is built once (its HTML too) and shared by every page, and text, code
and table rows are slices of fixed pools, so a page costs about as much to
generate as to copy, and the server is never what a crawl waits on.

Links are listed in document order, exactly as a parser finds them:
the sidebar, then the article's links (in-page permalinks, links to other
pages, cross-host links), then the page's image.
"""

from __future__ import annotations

import functools
import html
import math
import posixpath
import random
from array import array
from typing import TYPE_CHECKING

from .shapes import CHANGE_PERIODS, Link, PageSpec, _rng
from .words import VOCAB, _pool, _words, chrome

if TYPE_CHECKING:
    from .generator import Web

# Page size (bytes of HTML): a log-normal body and a log-uniform fat tail.
BODY_MEDIAN = 18_000
BODY_SIGMA = 0.7
TAIL_SHARE = 0.015  # pages drawn from the tail
TAIL_LO, TAIL_HI = 300_000, 2_000_000
MIN_SIZE = 6_000
# Links: a per-host sidebar, then per-page body links.
SIDEBAR_LO, SIDEBAR_HI = 40, 400
MAX_LINKS = 3_000
MIN_LINKS = 50
KINDS = ("prose", "code", "table", "index")
KIND_WEIGHTS = (0.64, 0.2, 0.12, 0.04)


def page_size(r: random.Random) -> int:
    """A page size from the mixture (``r`` is the page's own generator)."""
    if r.random() < TAIL_SHARE:
        return int(TAIL_LO * (TAIL_HI / TAIL_LO) ** r.random())
    return int(min(TAIL_LO, max(MIN_SIZE, BODY_MEDIAN * math.exp(BODY_SIGMA * r.gauss()))))


def sidebar_size(web: Web, src: int) -> int:
    """How many links the sidebar of host ``src`` has (the same on each of its pages)."""
    r = _rng(web.config.seed, "sidebar", src)
    return int(SIDEBAR_LO * (SIDEBAR_HI / SIDEBAR_LO) ** (r.random() ** 1.5))


@functools.lru_cache(maxsize=4096)
def sidebar(web: Web, src: int) -> tuple[tuple[str, str], ...]:
    """(href, text) of host ``src``'s sidebar: every page (up to its size), then
    sections of pages as ``#fragment`` links, as a documentation tree lists them."""
    n = sidebar_size(web, src)
    pages = web.config.pages
    out: list[tuple[str, str]] = []
    for j in range(n):
        k = j % pages
        title = _title(src, k)
        if j < pages:
            out.append((web.path(k), title))
        else:
            out.append((f"{web.path(k)}#s{j // pages}", f"{title}: section {j // pages}"))
    return tuple(out)


@functools.lru_cache(maxsize=4096)
def sidebar_html(web: Web, src: int) -> str:
    items = "".join(f'<li class="toctree-l{1 + j % 3}"><a href="{html.escape(h)}">{html.escape(t)}</a></li>\n'
                    for j, (h, t) in enumerate(sidebar(web, src)))
    return f'<nav class="sidebar" aria-label="Contents">\n<ul>\n{items}</ul>\n</nav>'


def _title(src: int, k: int) -> str:
    return _words(("title", src, k), 3).title()


@functools.lru_cache(maxsize=4096)
def sidebar_links(web: Web, i: int) -> tuple[Link, ...]:
    """The sidebar of host ``i`` as links (a mirror shows its origin's sidebar under its own name)."""
    host = web.host(i)
    src = host.mirror_of if host.mirror_of is not None else i
    base = web.base(i)
    return tuple(Link(base + h, h, "a", (), t) for h, t in sidebar(web, src))


def _relative(target: str, base_dir: str) -> str:
    """``target`` (an absolute path) relative to the directory ``base_dir``; the
    web's pages are at most one directory deep, which keeps this cheap."""
    if base_dir == "/":
        return target[1:] or "./"
    if target.startswith(base_dir):
        return target[len(base_dir):] or "./"
    return ".." + target


_FORMS = ("root", "root", "relative", "relative", "absolute", "scheme")


def page_spec(web: Web, i: int, k: int) -> PageSpec:
    """The realistic page ``k`` of host ``i``: size, kind and links in document order."""
    cfg = web.config
    host = web.host(i)
    src = host.mirror_of if host.mirror_of is not None else i
    r = _rng(cfg.seed, "rpage", src, k)
    rand = r.random
    kind = "index" if k == 0 else r.choices(KINDS, KIND_WEIGHTS)[0]
    size = page_size(r)
    period = r.choice(CHANGE_PERIODS)
    phase = r.randrange(86400)
    meta = "noindex" if k % 11 == 5 else "nofollow" if k % 13 == 6 else None
    relative_only = host.behaviour in ("mirror-origin", "mirror")
    path = web.path(k)
    base_dir = posixpath.dirname(path).rstrip("/") + "/"
    page_url = web.url(i, path)
    own = web.base(i)
    nav = sidebar_links(web, i)
    links: list[Link] = list(nav)
    pages, hosts = cfg.pages, cfg.hosts

    def add(target_host: int, target: str, text: str, rel: tuple[str, ...] = (), form: str | None = None) -> None:
        if form is None:
            form = _FORMS[int(rand() * 6)]
        if target_host != src:
            form = "absolute" if form in ("root", "relative") else form
        elif relative_only:
            form = "root" if form in ("absolute", "scheme") else form
        base = web.base(target_host)
        if form == "absolute":
            href = base + target
        elif form == "scheme":
            href = base[5:] + target
        elif form == "root":
            href = target
        else:
            href = _relative(target, base_dir)
        links.append(Link((own if target_host == src else base) + target, href, "a", rel, text))

    room = MAX_LINKS - len(nav) - 8
    if kind == "index":  # a home page or a generated index: every page, then entries
        wanted = max(pages, int(150 * 20 ** (rand() ** 2)))
    else:
        wanted = max(MIN_LINKS - len(nav), int(8 * 25 ** (rand() ** 2)))
    wanted = max(0, min(room, wanted))
    sections = max(1, size // 6000)  # headings with permalinks, spread over the article
    if k + 1 < pages:
        add(src, web.path(k + 1), "Next")
    if kind == "index":  # every page of the host, so that all are reachable from the home page
        for n in range(min(pages, room)):
            add(src, web.path(n), _title(src, n), form="root")
        wanted -= min(pages, room)
    done = 0
    step = max(1, wanted // sections)
    for n in range(max(0, wanted)):
        if n % step == 0 and done < sections:
            links.append(Link(f"{page_url}#h{done}", f"#h{done}", "a", (), "\u00b6"))
            done += 1
        elif hosts > 1 and rand() < cfg.cross:
            other = int(rand() * (hosts - 1))
            other += other >= src
            add(other, web.path(int(rand() * pages)), "elsewhere")
        else:
            target = web.path(int(rand() * pages))
            if rand() < 0.3:
                target += f"#s{1 + int(rand() * 8)}"
            add(src, target, "see", rel=("nofollow",) if rand() < 0.05 else ())
    if k == 0:
        for ep in web.entry_points(src):
            add(src, ep, "special", form="root")
    if k % 3 == 0:
        add(src, f"/files/report-{k}.pdf", "report (PDF)")
    if k % 9 == 8:
        add(src, f"/gone/{k}.html", "an old page")
    links.append(Link(own + f"/img/photo-{k}.png", f"/img/photo-{k}.png", "img", (), f"/img/photo-{k}.png"))
    return PageSpec(i, k, path, size, period, phase, meta, None, tuple(links), kind=kind)


# -- the bytes -------------------------------------------------------------------
_CODE_LINES = 40_000
_TABLE_ROWS = 20_000


@functools.cache
def _code_pool() -> tuple[str, list[int]]:
    """Pseudo source code (already HTML-safe) and the offsets where its lines start."""
    r = random.Random("testweb-code")
    lines, starts, pos = [], [], 0
    shapes = ("def {a}_{b}({c}, {d}=None):", "    {a} = {b}.{c}({d}, {n})", "    return {a}_{b}({c})",
              "    if {a} is not None and {b} > {n}:", "        {a}.{b}[{n}] = {c}_{d}",
              "class {A}{B}({C}):", "    # {a} {b} {c} {d}", "{a} = [{b} for {c} in {d} if {c}]",
              "    for {a} in range({n}):", "import {a}.{b} as {c}")
    for _ in range(_CODE_LINES):
        w = r.choices(VOCAB, k=4)
        line = r.choice(shapes).format(a=w[0], b=w[1], c=w[2], d=w[3], n=r.randrange(1000),
                                       A=w[0].title(), B=w[1].title(), C=w[2].title()) + "\n"
        starts.append(pos)
        lines.append(line)
        pos += len(line)
    starts.append(pos)
    return "".join(lines), starts


@functools.cache
def _table_pool() -> tuple[str, list[int]]:
    r = random.Random("testweb-table")
    rows, starts, pos = [], [], 0
    for _ in range(_TABLE_ROWS):
        w = r.choices(VOCAB, k=5)
        row = (f"<tr><td><code>{w[0]}.{w[1]}</code></td><td>{r.randrange(10**6)}</td>"
               f"<td>{w[2]} {w[3]} {w[4]}</td><td>{r.random():.4f}</td></tr>\n")
        starts.append(pos)
        rows.append(row)
        pos += len(row)
    starts.append(pos)
    return "".join(rows), starts


def _slices(pool: tuple[str, list[int]], r: random.Random, run: int, count: int) -> list[str]:
    text, starts = pool
    top = len(starts) - run - 1
    picks = array("I", r.randbytes(4 * max(1, count)))
    return [text[starts[j]: starts[j + run]] for j in (p % top for p in picks)]


def _filler(kind: str, r: random.Random, nbytes: int) -> list[str]:
    """Blocks of about ``nbytes`` of content for a page of ``kind``."""
    if nbytes <= 0:
        return []
    share_code = {"code": 0.75, "prose": 0.1}.get(kind, 0.0)
    share_table = {"table": 0.75, "index": 0.3}.get(kind, 0.0)
    n_code = int(nbytes * share_code)
    n_table = int(nbytes * share_table)
    n_text = max(0, nbytes - n_code - n_table)
    blocks: list[str] = []
    if n_text:  # ~280-byte runs of 40 words, three to a paragraph
        runs = _slices(_pool(), r, 40, max(1, n_text // 280))
        blocks += [f"<p>{''.join(runs[j:j + 3])}</p>" for j in range(0, len(runs), 3)]
    if n_code:  # blocks of 12 lines, ~40 bytes a line
        blocks += [f'<pre class="highlight"><code>{c}</code></pre>'
                   for c in _slices(_code_pool(), r, 12, max(1, n_code // 480))]
    if n_table:  # tables of 20 rows, ~110 bytes a row
        blocks += ["<table>\n<tr><th>name</th><th>id</th><th>summary</th><th>score</th></tr>\n"
                   f"{t}</table>" for t in _slices(_table_pool(), r, 20, max(1, n_table // 2200))]
    r.shuffle(blocks)
    return blocks


def _esc(s: str) -> str:
    return html.escape(s) if "&" in s or "<" in s or '"' in s or ">" in s or "'" in s else s


def _a(link: Link) -> str:
    rel = f' rel="{" ".join(link.rel)}"' if link.rel else ""
    return f'<a href="{_esc(link.href)}"{rel}>{_esc(link.text)}</a>'


def page_html(web: Web, i: int, k: int, version: int, variant: str = "") -> bytes:
    """The bytes of a realistic page (``variant``: a near-duplicate variant or '')."""
    spec = web.page(i, k)
    host = web.host(i)
    src = host.mirror_of if host.mirror_of is not None else i
    name = web.host_name(src)
    title = f"{_title(src, k)} ({name})"
    canonical = web.url(src, spec.path)
    n_nav = sidebar_size(web, src)
    body = [lk for lk in spec.links[n_nav:] if lk.tag == "a"]
    images = [lk for lk in spec.links[n_nav:] if lk.tag == "img"]
    head = ['<!DOCTYPE html>\n<html lang="en">\n<head>\n<meta charset="utf-8">',
            f'<meta name="viewport" content="width=device-width, initial-scale=1">\n'
            f"<title>{html.escape(title)}</title>\n"
            f'<link rel="canonical" href="{canonical}">']
    if spec.meta_robots:
        head.append(f'<meta name="robots" content="{spec.meta_robots}">')
    head.append("</head>\n<body>")
    side = sidebar_html(web, src)
    if variant == "print":
        top = f"<header><p>Printed from {html.escape(canonical)}</p></header>\n<div hidden>{side}</div>"
    elif variant == "mobile":
        top = f'<header class="m"><button>Menu</button></header>\n<details>{side}</details>'
    else:
        top = f'<header><div class="logo">{name}</div></header>\n{side}'
    changing, ad, footer = chrome(web, spec, src, version, variant)
    r = _rng("rbody", src, k)
    fixed = sum(map(len, head)) + len(top) + len(changing) + 600 + 90 * len(body)
    blocks = _filler(spec.kind, r, spec.size - fixed)
    parts: list[str] = []
    # the article's links in order, spread evenly through the blocks
    n_links, n_blocks = len(body), len(blocks)
    b = 0
    for j, link in enumerate(body):
        until = (j + 1) * n_blocks // (n_links + 1)
        parts += blocks[b:until]
        b = max(b, until)
        if link.text == "\u00b6":
            parts.append(f'<h2 id="{link.href[1:]}">{_words(("h", src, k, j), 4).title()} {_a(link)}</h2>')
        elif spec.kind == "index":
            parts.append(f"<li>{_a(link)}</li>")
        else:
            parts.append(f"<p>See {_a(link)} for more.</p>")
    parts += blocks[b:]
    imgs = "".join(f'<img src="{html.escape(lk.href)}" alt="figure">' for lk in images)
    out = [*head, top, "<main><article>", f"<h1>{html.escape(title)}</h1>", changing, "\n".join(parts),
           imgs, "</article>", ad, "</main>", footer, "</body>\n</html>\n"]
    return "\n".join(out).encode()
