"""The parse stage: fetch results in, canonical link records out.

For each fetch result with ``outcome`` "ok" the body is read back from the
WARC store and parsed: HTML with lxml (:mod:`crawl.parse.links`, charset by
:mod:`crawl.text.charset`), an XML sitemap (:mod:`crawl.parse.sitemap`) or an RSS /
Atom feed (:mod:`crawl.parse.feed`). A "redirect"
result becomes one link to its ``location``. Every URL is canonicalised
(:func:`crawl.canon.canonicalize`) and checked against the trap heuristics
(:mod:`crawl.parse.traps`) before it is emitted.

What a link record says (fields documented in :mod:`crawl.core.records`):

- ``depth``: the parent's depth + 1. A redirect target and a page's
  ``rel=canonical`` keep the parent's depth: they name the same page, so
  following them is not a step further from the seed.
- ``position``: index of the link-bearing element on the page.
- ``priority`` (0 high .. 9 low): the parent's priority, one step lower for
  each of: rel ugc/sponsored (or nofollow when ``follow_nofollow``), a parent
  flagged duplicate by ``crawl dedupe``, a trap heuristic that demotes, and
  a position past :data:`POSITION_DEMOTE` (footer and pagination mass).
  Sitemap and feed entries, redirects and canonicals get no position
  penalty. A sitemap entry's ``<priority>`` (0.0 .. 1.0, the site's own
  ranking of its pages) moves it one step: up from :data:`SITEMAP_UP`,
  down to :data:`SITEMAP_DOWN`; the value itself travels as
  ``sitemap_priority`` (which ``crawl recrawl`` reads as importance), next
  to ``lastmod`` and ``changefreq``.

Not done here, on purpose: de-duplicating across pages (``crawl seen``) and
any I/O. The caller hands in a function that reads a body.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any, Protocol

import ada_url

from crawl.canon import CANON_VERSION, CanonError, Resolver
from crawl.core import Record, records
from crawl.text import charset

from . import feed, links, sitemap, traps
from .config import ANCHOR_CHARS as ANCHOR_CHARS
from .config import ParseConfig as ParseConfig

PRIORITY_MAX = 9
DEFAULT_PRIORITY = 1
POSITION_DEMOTE = 100
SITEMAP_UP = 0.8  # a sitemap <priority> at least this raises the link's priority a step
SITEMAP_DOWN = 0.2  # and at most this lowers it a step

_HTML_TYPES = frozenset({"text/html", "application/xhtml+xml", "application/html"})
_SNIFF_TYPES = frozenset({"", "application/octet-stream", "unknown/unknown"})
_HTML_SNIFF = re.compile(rb"<(?:!doctype\s+html|html|head|body|title|a\s|meta|div|p[\s>])", re.I)
# No '<' inside the <...>: with [^>]* a header of many '<' took quadratic time (100 KB: minutes)
_LINK_CANONICAL = re.compile(r"""<([^<>]*)>\s*;[^,<]*?\brel\s*=\s*"?canonical\b""", re.I)
_DEMOTING_RELS = frozenset({"ugc", "sponsored"})
_trap_check = traps.check
_trap_clean = traps._clean
_anchor_text = links.anchor_text
_SOURCES = {"urlset": "sitemap", "sitemapindex": "sitemap-index", "rss": "feed", "atom": "feed"}


class Response(Protocol):
    """What a stored response offers; :class:`crawl.store.StoredResponse` is one."""

    url: str
    headers: list[tuple[str, str]]
    body: bytes
    content_type: str


@dataclass(slots=True)
class PageResult:
    """Links (and, when asked, rejects) of one page, plus its summary event."""

    links: list[Record] = field(default_factory=list)
    rejects: list[Record] = field(default_factory=list)
    page: Record | None = None
    counts: dict[str, int] = field(default_factory=dict)
    error: str | None = None  # why the body could not be read, for the operator

    def add(self, key: str, n: int = 1) -> None:
        self.counts[key] = self.counts.get(key, 0) + n


def header_values(headers: Iterable[tuple[str, str]], name: str) -> list[str]:
    name = name.lower()
    return [v for k, v in headers if k.lower() == name]


def _mime(content_type: str | None) -> str:
    return (content_type or "").split(";", 1)[0].strip().lower()


def _int_field(value: Any, default: int) -> int:
    """A record's integer field, or ``default`` if it is missing or not an int."""
    if isinstance(value, int) and not isinstance(value, bool) and value >= 0:
        return value
    return default


def _looks_like_html(body: bytes) -> bool:
    return _HTML_SNIFF.search(body, 0, 1024) is not None


class _Emitter:
    """Turns raw hrefs of one page into link records, applying every filter."""

    def __init__(self, page_url: str, base: str, parent: Record, cfg: ParseConfig,
                 result: PageResult) -> None:
        self.page_url = page_url
        self.resolve = Resolver(base, cfg.canon)  # canonicalize(href, base, cfg.canon)
        self.cfg = cfg
        self.result = result
        self.depth = _int_field(parent.get("depth"), 0)
        # The parent's priority, one step lower for a duplicate's outlinks.
        self.priority = (_int_field(parent.get("priority"), DEFAULT_PRIORITY)
                         + (parent.get("duplicate_of") is not None))
        self.canon = cfg.canon
        self.trap_policy = cfg.traps
        # A link record's fields in their order; emit fills in the rest.
        self.template: Record = {
            "kind": "link", "v": records.VERSION, "url": "", "fp": "", "host": "",
            "canon_v": CANON_VERSION, "parent": page_url, "depth": 0, "priority": 0,
            "rel": [], "source": "",
        }
        self.seen: set[int] = set()  # fingerprints emitted (or the page's own)
        self.hrefs: set[str] = set()  # hrefs as written that canonicalised
        try:  # self-links are noise (resolving an absolute URL ignores the base)
            self.seen.add(self.resolve(page_url).fp)
        except CanonError:
            pass

    @property
    def base(self) -> str:
        return self.resolve.base

    @base.setter
    def base(self, base: str) -> None:
        self.resolve = Resolver(base, self.canon)

    def reject(self, href: str, error: str, source: str, position: int | None) -> None:
        if self.cfg.rejects:
            rec = records.make("reject", input=href[:4096], error=error,
                               parent=self.page_url, source=source)
            if position is not None:
                rec["position"] = position
            self.result.rejects.append(rec)

    def emit(self, href: str, source: str, rel: Iterable[str], position: int | None,
             same_depth: bool = False, penalty: int = 0, element: Any = None,
             extra: dict[str, Any] | None = None) -> Record | None:
        """One link record, or None (counted) if a filter drops the href.

        The anchor text of ``element`` is computed only for links that are
        emitted: on link-heavy pages most candidates are duplicates.
        """
        r = self.result
        hrefs = self.hrefs
        if href in hrefs:  # the same text again (nav bars, footers): skip canon
            r.add("dup_in_page")
            return None
        try:
            url, fp, _, host = self.resolve(href.strip())
        except CanonError as exc:
            if exc.reason == "unsupported-scheme":
                r.add("not_http")  # mailto:, javascript:, tel: -- not crawlable, not wrong
            else:
                r.add("invalid_hrefs")
                self.reject(href, f"{exc.reason}: {exc.detail}", source, position)
            return None
        hrefs.add(href)
        seen = self.seen
        if fp in seen:
            r.add("dup_in_page")
            return None
        seen.add(fp)
        depth = self.depth if same_depth else self.depth + 1
        tp = self.trap_policy  # the common "no rule can fire" case without a call more
        verdict = (None if tp.mode == "off" or _trap_clean(url, depth, tp)
                   else _trap_check(url, depth, tp))
        if verdict is not None:
            if verdict.action == traps.DROP:
                r.add("trap_dropped")
                self.reject(href, f"trap: {verdict.reason}", source, position)
                return None
            r.add("trap_demoted")
            penalty += 1
        priority = self.priority + penalty  # self.priority has the duplicate's step
        rec: Record = self.template.copy()  # ~2x cheaper than a dict display here
        rec["url"] = url
        rec["fp"] = "%016x" % fp  # noqa: UP031 -- twice as fast as the f-string
        rec["host"] = host
        rec["depth"] = depth
        rec["priority"] = (priority if 0 <= priority < PRIORITY_MAX
                           else PRIORITY_MAX if priority > 0 else 0)
        rec["rel"] = list(rel)
        rec["source"] = source
        if position is not None:
            rec["position"] = position
        if element is not None:
            anchor = _anchor_text(element, self.cfg.anchor_chars)
            if anchor:
                rec["anchor"] = anchor
        if verdict is not None:
            rec["trap"] = verdict.reason
        if extra:
            rec.update(extra)
        r.links.append(rec)
        counts = r.counts
        counts["links"] = counts.get("links", 0) + 1
        return rec


    def stream(self, stream: links.LinkStream, nofollow: bool) -> None:
        """The links of an HTML page: what :meth:`emit` does for each, with the
        page's nofollow and rel penalties, up to ``max_links``.

        The same steps as ``emit(href, source, rels, position, source ==
        "meta-refresh", penalty, element)`` per link, written out in one loop
        with its names bound once: on a page of thousands of links the call,
        its arguments and the lookups were a third of the time per link.
        ``emit`` stays the one definition for everything else (sitemaps,
        feeds, redirects, the canonical); tests/parse/test_parse_fast.py
        checks both give the same records and counts.
        """
        r = self.result
        out = r.links
        counts = r.counts
        cfg = self.cfg
        cap = cfg.max_links
        follow_nofollow = cfg.follow_nofollow
        hrefs = self.hrefs
        seen = self.seen
        resolve = self.resolve
        base_depth = self.depth
        base_priority = self.priority
        tp = self.trap_policy
        traps_off = tp.mode == "off"
        template = self.template
        anchor_chars = cfg.anchor_chars
        demoting = _DEMOTING_RELS.isdisjoint
        for href, source, rels, position, element in stream:
            if len(out) >= cap:  # the rest are counted, not made or resolved
                r.add("links_cut", 1 + stream.count_rest())
                break
            penalty = 0
            if nofollow or "nofollow" in rels:
                if not follow_nofollow:
                    counts["nofollow_links"] = counts.get("nofollow_links", 0) + 1
                    continue
                penalty = 1
            elif rels and not demoting(rels):
                penalty = 1
            if position >= POSITION_DEMOTE:
                penalty += 1
            if href in hrefs:  # the same text again (nav bars, footers): skip canon
                counts["dup_in_page"] = counts.get("dup_in_page", 0) + 1
                continue
            try:
                url, fp, _, host = resolve(href.strip())
            except CanonError as exc:
                if exc.reason == "unsupported-scheme":
                    r.add("not_http")
                else:
                    r.add("invalid_hrefs")
                    self.reject(href, f"{exc.reason}: {exc.detail}", source, position)
                continue
            hrefs.add(href)
            if fp in seen:
                counts["dup_in_page"] = counts.get("dup_in_page", 0) + 1
                continue
            seen.add(fp)
            depth = base_depth if source == "meta-refresh" else base_depth + 1
            verdict = None if traps_off or _trap_clean(url, depth, tp) else _trap_check(url, depth, tp)
            if verdict is not None:
                if verdict.action == traps.DROP:
                    r.add("trap_dropped")
                    self.reject(href, f"trap: {verdict.reason}", source, position)
                    continue
                r.add("trap_demoted")
                penalty += 1
            priority = base_priority + penalty
            rec = template.copy()
            rec["url"] = url
            rec["fp"] = "%016x" % fp  # noqa: UP031 -- twice as fast as the f-string
            rec["host"] = host
            rec["depth"] = depth
            rec["priority"] = (priority if 0 <= priority < PRIORITY_MAX
                               else PRIORITY_MAX if priority > 0 else 0)
            rec["rel"] = list(rels)
            rec["source"] = source
            rec["position"] = position
            if element is not None:
                anchor = _anchor_text(element, anchor_chars)
                if anchor:
                    rec["anchor"] = anchor
            if verdict is not None:
                rec["trap"] = verdict.reason
            out.append(rec)
            counts["links"] = counts.get("links", 0) + 1


def _page_event(url: str, parent: Record, now: float | None, **fields: Any) -> Record:
    ts = parent.get("fetched_at") if now is None else now
    return records.make("event", ts=ts if ts is not None else 0, event="page", url=url,
                        **{k: v for k, v in fields.items() if v is not None})


def _parse_html(url: str, headers: list[tuple[str, str]], body: bytes, ctype: str,
                em: _Emitter, cfg: ParseConfig) -> dict[str, Any]:
    r = em.result
    detected = charset.detect(body, ctype)
    utf8, replaced = charset.to_utf8(body, detected)
    if replaced:
        r.add("charset_replaced")
    page, stream = links.scan(utf8, cfg.agent)
    if page.error:
        r.add("parse_errors")
    if page.base:
        try:
            em.base = ada_url.join_url(url, page.base.strip())
        except ValueError:
            r.add("invalid_base")
    robots = page.robots | links.robots_directives(header_values(headers, "x-robots-tag"), cfg.agent)
    nofollow = "nofollow" in robots
    noindex = "noindex" in robots
    r.add("pages_html")
    if noindex:
        r.add("noindex_pages")
    if nofollow:
        r.add("nofollow_pages")
    # rel=canonical: the <link> element, else the HTTP Link header (RFC 8288).
    canonical_href = page.canonical
    if canonical_href is None:
        for value in header_values(headers, "link"):
            m = _LINK_CANONICAL.search(value)
            if m:
                canonical_href = m.group(1).strip()
                break
    canonical = None
    if canonical_href is not None:
        rec = em.emit(canonical_href, "link", ("canonical",), None, same_depth=True)
        canonical = rec["url"] if rec is not None else None
    em.stream(stream, nofollow)
    if stream.walk_cut and page.limit is None:
        page.limit = "links"
    if page.limit is not None:
        r.add("parse_limit")
    return {
        "type": "html", "charset": detected.encoding, "charset_source": detected.source,
        "replaced": replaced or None, "title": page.title or None, "noindex": noindex,
        "nofollow": nofollow, "canonical": canonical, "base": em.base if page.base else None,
        "error": page.error, "parse_limit": page.limit, "parse_limit_at": page.limit_at,
    }


def sitemap_priority(text: str | None) -> float | None:
    """A sitemap entry's ``<priority>`` (0.0 .. 1.0), or None if absent or invalid."""
    if not text:
        return None
    try:
        value = float(text)
    except ValueError:
        return None
    return value if 0.0 <= value <= 1.0 else None  # also rules out nan


def sitemap_step(sp: float | None) -> int:
    """Priority steps for a sitemap priority: 0.8+ one up, 0.2 or less one down."""
    if sp is None:
        return 0
    return -1 if sp >= SITEMAP_UP else (1 if sp <= SITEMAP_DOWN else 0)


def _parse_sitemap(sm: sitemap.Sitemap, em: _Emitter) -> dict[str, Any]:
    r = em.result
    source = _SOURCES[sm.kind]
    r.add("pages_feed" if source == "feed" else "pages_sitemap")
    rel = (source,) if source == "feed" else ("sitemap",)
    for i, e in enumerate(sm.entries):
        extra: dict[str, Any] = {
            k: v for k, v in (("lastmod", e.lastmod), ("changefreq", e.changefreq)) if v}
        sp = sitemap_priority(e.priority)
        if sp is not None:
            extra["sitemap_priority"] = sp
        elif e.priority:
            r.add("bad_sitemap_priority")
        em.emit(e.loc, source, rel, i, False, sitemap_step(sp), None, extra)
    if sm.cut:
        r.add("links_cut", sm.cut)
    return {"type": sm.kind, "error": sm.error}


def parse_body(url: str, headers: list[tuple[str, str]], body: bytes, *,
               content_type: str | None = None, parent: Record | None = None,
               config: ParseConfig | None = None, now: float | None = None) -> PageResult:
    """Links of one response. Never raises on content.

    ``content_type`` is the full Content-Type value (charset included); it is
    taken from ``headers`` when not given. ``parent`` is the fetch record
    (depth, priority, duplicate_of are read from it).
    """
    cfg = config or ParseConfig()
    parent = parent or {}
    result = PageResult()
    full_ctype = content_type
    if full_ctype is None:
        values = header_values(headers, "content-type")
        full_ctype = values[0] if values else ""
    mime = _mime(full_ctype)
    em = _Emitter(url, url, parent, cfg, result)
    summary: dict[str, Any]
    sm = None
    if mime not in _HTML_TYPES:
        sm = sitemap.parse(body, cfg.max_sitemap_urls) or feed.parse(body, cfg.max_sitemap_urls)
    if sm is not None:
        summary = _parse_sitemap(sm, em)
    elif mime in _HTML_TYPES or (mime in _SNIFF_TYPES and _looks_like_html(body)):
        summary = _parse_html(url, headers, body, full_ctype, em, cfg)
    else:
        result.add("pages_other")
        summary = {"type": "other"}
    counts = result.counts
    summary.setdefault("cut", counts.get("links_cut") or None)
    result.page = _page_event(
        url, parent, now, content_type=mime or None, bytes=len(body),
        links=counts.get("links", 0), **summary,
        invalid=counts.get("invalid_hrefs") or None,
        nofollow_links=counts.get("nofollow_links") or None,
        traps=(counts.get("trap_dropped", 0) + counts.get("trap_demoted", 0)) or None,
    )
    return result


def parse_page(fetch_record: Record, response: Response,
               config: ParseConfig | None = None) -> list[Record]:
    """Link records (and reject records with ``config.rejects``) of one stored page."""
    res = parse_body(response.url or fetch_record["url"], response.headers, response.body,
                     parent=fetch_record, config=config)
    return res.links + res.rejects


def parse_redirect(fetch_record: Record, config: ParseConfig | None = None) -> PageResult:
    """A redirect's ``location`` as one link (rel ["redirect"], same depth, one hop more).

    A redirect keeps the depth, so only ``hops`` bounds a chain: after
    ``records.MAX_REDIRECTS`` in a row (or when fetch already said
    ``redirect-limit``) the target is not followed, only counted.
    """
    cfg = config or ParseConfig()
    result = PageResult()
    result.add("redirects")
    em = _Emitter(fetch_record["url"], fetch_record["url"], fetch_record, cfg, result)
    location = fetch_record.get("location")
    if not isinstance(location, str) or not location:
        result.add("invalid_hrefs")
        em.reject(str(location or ""), "redirect without a location", "redirect", None)
        return result
    hops = _int_field(fetch_record.get("hops"), 0)
    if hops >= records.MAX_REDIRECTS or fetch_record.get("outcome") == "redirect-limit":
        result.add("redirect_limit")
        em.reject(location, f"redirect-limit: {hops} redirects in a row already", "redirect", None)
        return result
    em.emit(location, "redirect", ("redirect",), None, same_depth=True, extra={"hops": hops + 1})
    return result


def parse_fetch(fetch_record: Record, read: Callable[[Record], Response],
                config: ParseConfig | None = None, now: float | None = None) -> PageResult:
    """Dispatch one fetch record by outcome; ``read`` fetches its stored body.

    ``read`` may raise (a missing or damaged WARC): that page counts as
    ``unreadable``, with a reject record when rejects are on, and the
    stage carries on.
    """
    if not isinstance(fetch_record.get("url"), str):
        result = PageResult()
        result.add("bad_records")
        result.error = f"fetch record without a URL string: {str(fetch_record)[:200]}"
        return result
    outcome = fetch_record.get("outcome")
    if outcome == "redirect" or (fetch_record.get("location") and outcome != "ok"):
        return parse_redirect(fetch_record, config)
    result = PageResult()
    if outcome == "not-modified" and isinstance(fetch_record.get("refers_to"), dict):
        # A 304's page is the stored copy it refers to. Parsing it again costs
        # little and closes a crash window: a page stored just before a crash
        # comes back as a 304 on the retry, and its links must not be lost.
        fetch_record = {**fetch_record, "warc": fetch_record["refers_to"]}
        result.add("not_modified_parsed")
    elif outcome != "ok":
        result.add("not_parsed")
        return result
    if not isinstance(fetch_record.get("warc"), dict):
        result.add("no_body")
        return result
    try:
        resp = read(fetch_record)
    except Exception as exc:  # any failure to read one body is that page's, not the run's
        result.add("unreadable")
        result.error = f"{fetch_record['url']}: cannot read the stored body: {exc}"
        cfg = config or ParseConfig()
        if cfg.rejects:
            result.rejects.append(records.make(
                "reject", input=fetch_record["url"], error=f"unreadable body: {exc}",
                warc=fetch_record["warc"]))
        return result
    try:
        ctype_values = header_values(resp.headers, "content-type")
        return parse_body(resp.url or fetch_record["url"], resp.headers, resp.body,
                          content_type=ctype_values[0] if ctype_values else resp.content_type,
                          parent=fetch_record, config=config, now=now)
    except Exception as exc:  # a bug on one page must not stop the crawl; say it loudly
        result.add("parse_failures")
        result.error = f"{fetch_record['url']}: parse failed ({type(exc).__name__}: {exc})"
        return result
