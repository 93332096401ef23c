"""What the test web answers: one request in, one :class:`Response` out.

The router knows nothing about sockets. A response that needs time or
misbehaves on the wire (a hanging robots.txt, a reset, an endless body) says
so in ``action`` and the server carries it out.
"""

from __future__ import annotations

import dataclasses
import hashlib
import re
import time
from dataclasses import dataclass, field

from . import content
from .generator import Web, digest, trap_of

ADMIN_HOST = "admin.testweb.test"
HTML = "text/html; charset=utf-8"
CACHE_BYTES = 128 << 20  # ready-made page responses kept in memory


class Clock:
    """Unix time as the pages see it: real, or simulated and moved by hand.

    A simulated clock stands still until ``set``/``advance`` is called (the
    admin endpoint ``/clock`` does that), so tests of change rates and
    conditional requests never sleep.
    """

    def __init__(self, start: float | None = None) -> None:
        self.simulated = start is not None
        self._t = float(start) if start is not None else 0.0

    def now(self) -> float:
        return self._t if self.simulated else time.time()

    def set(self, t: float) -> None:
        self.simulated = True
        self._t = float(t)

    def advance(self, seconds: float) -> None:
        self.set(self.now() + seconds)


@dataclass
class Request:
    method: str
    target: str
    host: str  # lower case, without the port
    headers: dict[str, str] = field(default_factory=dict)  # lower-case names


@dataclass
class Response:
    status: int
    headers: list[tuple[str, str]] = field(default_factory=list)
    body: bytes = b""
    # None (send it), "hang", "reset-head", "reset-body", "endless", "huge", "bomb", "drip"
    action: str | None = None
    delay: float = 0.0
    head: bytes | None = None  # the server's cache of the status line and headers


def _ok(body: bytes, ctype: str | None = HTML, extra: list[tuple[str, str]] | None = None) -> Response:
    headers = [("Content-Type", ctype)] if ctype else []
    return Response(200, headers + (extra or []), body)


def not_found(what: str = "page") -> Response:
    return Response(404, [("Content-Type", HTML)],
                    f"<!DOCTYPE html><html><body><h1>404</h1><p>No such {what}.</p></body></html>\n".encode())


def _with_latest(body: bytes, version: int, n: int) -> bytes:
    """A home page with links to the articles of its newest ``n`` revisions (``--news``)."""
    items = "".join(f'<li><a href="/latest/{v}.html">news {v}</a></li>'
                    for v in range(max(0, version - n + 1), version + 1))
    return body.replace(b"</article>", f'<ul class="latest">{items}</ul></article>'.encode(), 1)


def redirect(status: int, location: str) -> Response:
    return Response(status, [("Location", location), ("Content-Type", HTML)],
                    f'<html><body><a href="{location}">moved</a></body></html>\n'.encode())


class Router:
    def __init__(self, web: Web, clock: Clock) -> None:
        self.web = web
        self.clock = clock
        self.busy: dict[tuple[int, str], int] = {}
        self.robots_asked: dict[int, int] = {}  # host -> robots.txt requests (robots_recover)
        # (host, page, version, variant) -> (etag, validators, response); responses are shared
        # between requests, so nothing downstream may modify them
        self._pages: dict[tuple[int, int, int, str], tuple[str, list[tuple[str, str]], Response]] = {}
        self._cached_bytes = 0

    def handle(self, req: Request) -> Response:
        web = self.web
        i = web.host_index(req.host)
        if i is None:
            return not_found("host on this test web")
        path, _, query = req.target.partition("?")
        resp = self._dispatch(i, req, path, query)
        if web.host(i).behaviour == "slow" and resp.action is None:
            resp = dataclasses.replace(resp, delay=web.config.latency, action="drip")
        return resp

    # -- dispatch ------------------------------------------------------------
    def _dispatch(self, i: int, req: Request, path: str, query: str) -> Response:
        web = self.web
        host = web.host(i)
        now = self.clock.now()
        if path == "/robots.txt":
            return self._robots(i)
        if host.robots == "redirect" and path == "/robots-moved.txt":
            return redirect(302, "/policies/robots.txt")
        if host.robots == "redirect" and path == "/policies/robots.txt":
            return _ok(content.robots_txt(web, i, "redirect-target"), "text/plain")
        if path == "/sitemap.xml":
            return _ok(content.sitemap_index(web, i, now), "application/xml")
        if path == "/sitemap-pages.xml":
            return _ok(content.sitemap_pages(web, i, now), "application/xml")
        if path == "/sitemap-files.xml":
            return _ok(content.sitemap_files(web, i), "application/xml")
        if web.config.news and path.startswith("/latest/"):
            return self._latest(i, path, now)
        k = web.page_index(path)
        if k is not None:
            variant = ""
            if host.behaviour == "near-dups" and query.startswith("ref="):
                variant = "ref"
            return self._page(i, k, variant, req)
        src = host.mirror_of if host.mirror_of is not None else i
        m = re.fullmatch(r"/img/photo-(\d+)\.png", path)
        if m and int(m.group(1)) < web.config.pages:
            return _ok(content.png(f"{src}/{m.group(1)}"), "image/png")
        m = re.fullmatch(r"/files/report-(\d+)\.pdf", path)
        if m and int(m.group(1)) < web.config.pages and int(m.group(1)) % 3 == 0:
            return _ok(content.pdf(f"Report {m.group(1)} of {web.host_name(src)}"), "application/pdf")
        special = getattr(self, "_" + host.behaviour.replace("-", "_"), None)
        if special is not None:
            resp = special(i, req, path, query)
            if resp is not None:
                return resp
        return not_found()

    def _robots(self, i: int) -> Response:
        v = self.web.host(i).robots
        recover = self.web.config.robots_recover
        if recover and v in ("500", "timeout"):
            asked = self.robots_asked.get(i, 0)
            self.robots_asked[i] = asked + 1
            if asked >= recover:  # back up: the plain file from now on
                return _ok(content.robots_txt(self.web, i, "simple"), "text/plain")
        if v == "404":
            return not_found("robots.txt")
        if v == "500":
            return Response(500, [("Content-Type", "text/plain")], b"internal error\n")
        if v == "timeout":
            return Response(0, action="hang", delay=self.web.config.hang)
        if v == "redirect":
            return redirect(301, "/robots-moved.txt")
        return _ok(content.robots_txt(self.web, i), "text/plain")

    def _page(self, i: int, k: int, variant: str, req: Request) -> Response:
        web = self.web
        spec = web.page(i, k)
        version, last_modified = web.version(spec, self.clock.now())
        cache_key = (i, k, version, variant)
        entry = self._pages.get(cache_key)
        if entry is None:
            src = web.host(i).mirror_of
            key = f"{src if src is not None else i}/{k}/{version}/{variant}"
            etag = f'"{hashlib.blake2b(key.encode(), digest_size=8).hexdigest()}"'
            validators = [("ETag", etag), ("Last-Modified", content.http_date(last_modified))]
            body = content.page_html(web, i, k, version, variant)
            if web.config.news and k == 0 and spec.change_period is not None:
                body = _with_latest(body, version, web.config.news)
            if self._cached_bytes + len(body) > CACHE_BYTES:  # a bound on memory, not an LRU:
                self._pages.clear()  # cheap, and a crawl rarely comes back to a page anyway
                self._cached_bytes = 0
            self._cached_bytes += len(body)
            entry = self._pages[cache_key] = (etag, validators, _ok(body, HTML, validators))
        etag, validators, resp = entry
        # RFC 9110 13.1.2/13.1.3: If-None-Match takes precedence over If-Modified-Since
        inm = req.headers.get("if-none-match")
        if inm is not None:
            if etag in (t.strip() for t in inm.split(",")) or inm.strip() == "*":
                return Response(304, validators)
        else:
            ims = req.headers.get("if-modified-since")
            when = _parse_date(ims) if ims is not None else None
            if when is not None and when >= last_modified:
                return Response(304, validators)
        return resp

    def _latest(self, i: int, path: str, now: float) -> Response:
        """``/latest/<revision>.html`` (``--news``): the article a home page's
        revision brought, there from that revision on."""
        m = re.fullmatch(r"/latest/(\d+)\.html", path)
        home = self.web.page(i, 0)
        if not m or home.change_period is None or int(m.group(1)) > self.web.version(home, now)[0]:
            return not_found()
        rev = int(m.group(1))
        return _ok(content.simple_html(f"Latest news, revision {rev}", [("/", "home")], ("latest", i, rev)))

    # -- behaviours ----------------------------------------------------------
    def _near_dups(self, i: int, req: Request, path: str, query: str) -> Response | None:
        for prefix, variant in (("/print", "print"), ("/m", "mobile")):
            if path.startswith(prefix + "/"):
                k = self.web.page_index(path[len(prefix):])
                if k is not None:
                    return self._page(i, k, variant, req)
        return None

    def _traps(self, i: int, req: Request, path: str, query: str) -> Response | None:
        trap = trap_of(path)
        if trap == "calendar":
            m = re.fullmatch(r"/calendar/(\d{4})/(\d{2})/", path)
            if not m:
                return None
            y, mo = int(m.group(1)), int(m.group(2))
            prev = (y, mo - 1) if mo > 1 else (y - 1, 12)
            nxt = (y, mo + 1) if mo < 12 else (y + 1, 1)
            links = [(f"../../{a:04d}/{b:02d}/", t) for (a, b), t in ((prev, "previous"), (nxt, "next"))]
            return _ok(content.simple_html(f"Events {y}-{mo:02d}", links, ("cal", i, y, mo)))
        if trap == "session":
            m = re.fullmatch(r"/s/([0-9a-f]+)/(index|page-\d+)\.html", path)
            if not m:
                return None
            links = [(f"/s/{digest(m.group(1), n)[:6]}/page-{n}.html", f"page {n}") for n in range(3)]
            return _ok(content.simple_html("Members area", links, ("session", i, m.group(2))))
        if trap == "deep":
            if not re.fullmatch(r"/deep/([ab]/)+", path):
                return None
            depth = path.count("/") - 2
            return _ok(content.simple_html(f"Level {depth}", [("a/", "a"), ("b/", "b")], ("deep", i, depth)))
        if trap == "facets" and path == "/search":
            params = dict(p.partition("=")[::2] for p in query.split("&") if p)
            links = []
            for name, values in (("color", "red blue green"), ("size", "s m l"), ("sort", "price name")):
                for value in values.split():
                    if params.get(name) != value:
                        links.append(("/search?" + _qs({**params, name: value}), f"{name} {value}"))
            page = int(params.get("page", "1")) if params.get("page", "1").isdigit() else 1
            links.append(("/search?" + _qs({**params, "page": str(page + 1)}), "next page"))
            return _ok(content.simple_html("Search results", links, ("facets", i, params.get("q"))))
        return None

    def _redirects(self, i: int, req: Request, path: str, query: str) -> Response | None:
        web = self.web
        m = re.fullmatch(r"/redirect/chain-(\d+)", path)
        if m:
            n = int(m.group(1))
            if n == 0:
                return redirect(301, web.path(1))
            return redirect((301, 302, 303, 307, 308)[n % 5], f"/redirect/chain-{n - 1}")
        if path == "/redirect/loop-a":
            return redirect(302, "/redirect/loop-b")
        if path == "/redirect/loop-b":
            return redirect(302, "/redirect/loop-a")
        if path == "/redirect/away":
            return redirect(302, web.url(self.away(i), "/"))
        if path == "/redirect/relative":
            return redirect(301, "chain-2")
        m = re.fullmatch(r"/redirect/across-(\d+)", path)
        if m:  # N + 1 redirects (N .. 0), each to the next redirects host, then its home page
            n = int(m.group(1))
            return redirect(302, web.url(self.next_redirects_host(i), f"/redirect/across-{n - 1}" if n else "/"))
        return None

    def away(self, i: int) -> int:
        return (i + 1) % self.web.config.hosts

    def next_redirects_host(self, i: int) -> int:
        """The next host after ``i`` (wrapping round) that also has the redirects
        behaviour, so a chain can cross hosts for ever; ``i`` itself if none is near."""
        hosts = self.web.config.hosts
        for k in range(1, min(hosts, 10_000)):
            j = (i + k) % hosts
            if self.web.host(j).behaviour == "redirects":
                return j
        return i

    def _busy(self, i: int, req: Request, path: str, query: str) -> Response | None:
        m = re.fullmatch(r"/busy/([0-3])\.html", path)
        if not m:
            return None
        n = int(m.group(1))
        seen = self.busy.get((i, path), 0)
        self.busy[(i, path)] = seen + 1
        if seen >= self.web.config.busy:
            return _ok(content.simple_html(f"Busy page {n}", [("/", "home")], ("busy", i, n)))
        status = 429 if n < 2 else 503
        headers = [("Content-Type", HTML)]
        if n == 0:
            headers.append(("Retry-After", "2"))
        elif n == 2:
            # transport time is real time, even under a simulated clock: a crawler waits for real
            headers.append(("Retry-After", content.http_date(time.time() + 3)))
        return Response(status, headers, b"<html><body>Slow down.</body></html>\n")

    def _reset(self, i: int, req: Request, path: str, query: str) -> Response | None:
        if path == "/reset/head.html":
            return Response(200, [("Content-Type", HTML)], b"", action="reset-head")
        if path == "/reset/body.html":
            body = content.simple_html("Cut short", [], ("reset", i), words=3000)
            return Response(200, [("Content-Type", HTML)], body, action="reset-body")
        return None

    def _endless(self, i: int, req: Request, path: str, query: str) -> Response | None:
        if path == "/stream/endless.html":
            return Response(200, [("Content-Type", HTML)], action="endless")
        return None

    def _huge(self, i: int, req: Request, path: str, query: str) -> Response | None:
        if path == "/huge.html":
            return Response(200, [("Content-Type", HTML)], action="huge")
        return None

    def _gzip_bomb(self, i: int, req: Request, path: str, query: str) -> Response | None:
        if path == "/bomb.html":  # the server builds the body off the event loop
            return Response(200, [("Content-Type", HTML), ("Content-Encoding", "gzip")], action="bomb")
        return None

    def _gzip_multi(self, i: int, req: Request, path: str, query: str) -> Response | None:
        if path == "/gzip/multi.html":
            return _ok(content.gzip_page_body(self.web, i, "gzip-multi"), HTML, [("Content-Encoding", "gzip")])
        return None

    def _gzip_trailing(self, i: int, req: Request, path: str, query: str) -> Response | None:
        if path == "/gzip/trailing.html":
            return _ok(content.gzip_page_body(self.web, i, "gzip-trailing"), HTML, [("Content-Encoding", "gzip")])
        return None

    def _content_type(self, i: int, req: Request, path: str, query: str) -> Response | None:
        page = content.simple_html("Typed wrongly", [("/", "home")], ("ct", i, path))
        if path == "/ct/missing.html":
            return _ok(page, None)
        if path == "/ct/wrong.html":
            return _ok(page, "application/octet-stream")
        if path == "/ct/html-as-png.png":
            return _ok(page, "image/png")
        if path == "/ct/png-as-html.html":
            return _ok(content.png(f"ct{i}"), HTML)
        return None

    def _charset(self, i: int, req: Request, path: str, query: str) -> Response | None:
        if path == "/charset/bogus-label.html":
            body = "<html><body><p>Caf\u00e9 cr\u00e8me br\u00fbl\u00e9e</p></body></html>\n".encode()
            return _ok(body, "text/html; charset=x-no-such-charset")
        if path == "/charset/invalid-bytes.html":
            body = b"<html><body><p>broken \xff\xfe bytes \xc3\x28 here \xed\xa0\x80</p></body></html>\n"
            return _ok(body, HTML)
        if path == "/charset/conflict.html":
            body = ('<html><head><meta charset="windows-1252"></head><body><p>Caf\u00e9 '
                    "\u201cquoted\u201d</p></body></html>\n").encode("cp1252")
            return _ok(body, HTML)
        return None


def _qs(params: dict[str, str]) -> str:
    return "&".join(f"{k}={v}" for k, v in sorted(params.items()))


def _parse_date(value: str) -> float | None:
    from email.utils import parsedate_to_datetime

    try:
        return parsedate_to_datetime(value).timestamp()
    except (TypeError, ValueError, IndexError):
        return None

