"""crawl parse: fetch results in, canonical link records out."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

import click

from crawl.core import AGENT_TOKEN, DEFAULT_USER_AGENT, CrawlDir, Record, open_sink, run_stage
from crawl.parse import LinkGraph, ParseConfig, Response, parse_fetch, traps
from crawl.robots import agent_token
from crawl.store import read_response

from ._common import dir_option, io_options, stage_io


def _reader(warc_dir: Path | None) -> Callable[[Record], Response]:
    """Without a WARC directory, the pointers' file names are read as paths as given."""
    def read(rec: Record) -> Response:
        return read_response(warc_dir, rec.get("warc"))

    return read


@click.command(name="parse")
@dir_option(required=False)
@click.option("--warc-dir", type=click.Path(file_okay=False, path_type=Path),
              help="Where the WARC files are (default: DIR/warc with --dir, else the "
                   "fetch records' warc.file paths as given).")
@io_options
@click.option("--rejects", is_flag=True,
              help="Also emit a reject record per invalid href, dropped trap or unreadable body.")
@click.option("--pages", "pages", metavar="DST",
              help="Write one page event per parsed page (title, charset, noindex, nofollow, "
                   "canonical, counts) to DST; '-' mixes them into the output.")
@click.option("--max-links", type=click.IntRange(min=0), default=10_000, show_default=True,
              help="Links emitted per HTML page; the rest are counted as links_cut.")
@click.option("--max-sitemap-urls", type=click.IntRange(min=0), default=50_000,
              show_default=True, help="Entries read per sitemap or feed (the sitemap protocol's limit).")
@click.option("--max-url-length", type=click.IntRange(min=16), default=2048, show_default=True,
              help="Longer canonical URLs are rejected (too-long).")
@click.option("--user-agent", "agent", default=DEFAULT_USER_AGENT, show_default=True,
              help="The full User-Agent header, as for crawl fetch and crawl run; its product "
                   "token (crawl) is matched against <meta name=TOKEN> and 'TOKEN:' X-Robots-Tag.")
@click.option("--follow-nofollow", is_flag=True,
              help="Emit nofollow links (one priority step lower) instead of dropping them.")
@click.option("--traps", "trap_mode", type=click.Choice(["default", "demote", "off"]),
              default="default", show_default=True,
              help="Trap heuristics: drop or demote per rule, demote only, or off.")
def command(crawl_dir: Path | None, warc_dir: Path | None, input_: str, output: str,
            strict: bool, stats_file: Path | None, rejects: bool, pages: str | None,
            max_links: int, max_sitemap_urls: int, max_url_length: int, agent: str,
            follow_nofollow: bool, trap_mode: str) -> None:
    """Extract links from fetched pages (HTML, XML sitemaps, RSS/Atom feeds).

    Reads fetch records; reads each "ok" page's body back from its WARC
    record; detects the charset (BOM > Content-Type > <meta> > UTF-8);
    extracts links from a, area, link, iframe, frame and meta refresh (or
    the entries of a sitemap, sitemap index, RSS or Atom feed, with their
    lastmod, changefreq and sitemap_priority: a sitemap <priority> of 0.8 or
    more raises the link's priority hint a step, 0.2 or less lowers it);
    honours
    <base href>, rel=nofollow, meta robots and X-Robots-Tag; canonicalises
    every URL and writes one link record per URL (depth, position,
    priority hint, rel, anchor, source, trap). A page's rel=canonical is
    emitted as a link with rel ["canonical"]; a "redirect" result becomes
    one link with rel ["redirect"]; both keep the parent's depth.

    Duplicates within a page are dropped; across pages that is `crawl
    seen`'s job. Trap heuristics (path deeper than 15, repeated segments,
    calendars, more than 5 query parameters, link depth over 15) drop or
    demote a URL, naming the rule in the record's "trap" field.

    \b
    Example:
        crawl parse --dir D < results.ndjson | crawl seen --dir D
        crawl parse --dir D -i results.ndjson --pages pages.ndjson --rejects
        crawl parse --warc-dir D/warc --max-links 500 < results.ndjson
    """
    if warc_dir is None and crawl_dir is not None:
        warc_dir = CrawlDir(crawl_dir).warc
    token = agent_token(agent) or AGENT_TOKEN
    cfg = ParseConfig(
        max_links=max_links, max_sitemap_urls=max_sitemap_urls, agent=token,
        follow_nofollow=follow_nofollow, rejects=rejects,
        traps=traps.TrapPolicy(mode=trap_mode),
    ).with_max_url_length(max_url_length)
    read = _reader(warc_dir)
    with stage_io("parse", frozenset({"fetch"}), input_, output, strict, stats_file) as sio:
        page_sink = open_sink(pages) if pages and pages != "-" else None
        warned = [0]  # per-page problems printed (then only counted)
        # with --dir, each page's out-links go to DIR/graph for crawl report and crawl why
        graph = LinkGraph(CrawlDir(crawl_dir).graph) if crawl_dir is not None else None

        def batch(recs: list[Record]) -> list[Record]:
            out: list[Record] = []
            events: list[Record] = []
            edges: list[tuple[str, list[Record]]] = []
            now = time.time()
            for rec in recs:
                res = parse_fetch(rec, read, cfg, now)
                out += res.links
                if graph is not None and (res.page is not None or res.links):
                    edges.append((rec["url"], res.links))
                out += res.rejects
                if res.error:
                    warned[0] += 1
                    if warned[0] <= 100:
                        sio.report.warn(res.error)
                if res.page is not None:
                    events.append(res.page)
                for key, n in res.counts.items():
                    sio.report.add(key, n)
            if edges:
                graph.record(edges)  # type: ignore[union-attr]
            if page_sink is not None:
                page_sink.write(events)
            elif pages == "-":
                out += events
            return out

        try:
            run_stage(sio.source, sio.sink, batch, sio.report, batch=200)
        finally:
            if graph is not None:
                graph.close()
