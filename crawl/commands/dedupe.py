"""crawl dedupe: flag exact and near-duplicate pages."""

from __future__ import annotations

from functools import partial
from pathlib import Path
from typing import Any

import click

from crawl.core import (
    CrawlError,
    Report,
    Sink,
    Source,
    UsageError,
    dumps_pretty,
    records,
    run_stage,
    run_stage_pooled,
)
from crawl.dedupe import (
    MAX_DISTANCE,
    RELEARN_EVERY,
    REPEATED_BLOCK_PAGES,
    ROUND_PAGES,
    Deduper,
    Fingerprint,
    Prints,
    explain,
    fingerprint_pages,
)

from . import _common
from ._common import dir_option, io_options, stage_io


def _body(warc_dir: Path, rec: records.Record) -> tuple[bytes, str]:
    from crawl.store import read_response

    ptr = rec.get("warc")
    if not isinstance(ptr, dict):
        raise CrawlError("fetch record has no warc pointer to read the page from")
    resp = read_response(warc_dir, ptr)
    return resp.body, resp.content_type or str(rec.get("content_type") or "")


def _prepare(warc_dir: Path, recs: list[records.Record]) -> Prints:
    """A worker's half of a batch (``--jobs``): read the bodies back and fingerprint them."""
    return fingerprint_pages(recs, partial(_body, warc_dir))


def run_checks(dd: Deduper, warc_dir: Path, source: Source, sink: Sink, report: Report, jobs: int) -> None:
    """The command's loop (scripts/bench_dedupe.py times it): batches of 200, pages fingerprinted
    here or, with ``jobs`` > 1, in that many worker processes."""
    said = [0]

    def record(recs: list[records.Record], prints: Prints) -> list[records.Record]:
        # a page whose body cannot be read (a malformed warc pointer, a missing or damaged
        # WARC file) is said here and counted as unreadable; its record passes on with
        # dedupe_error, and the stage goes on
        for i, fp in prints:
            if isinstance(fp, str):
                said[0] += 1
                if said[0] <= _MAX_SAID:
                    report.warn(f"{str(recs[i].get('url'))[:300]}: cannot read the stored body: {fp}")
                elif said[0] == _MAX_SAID + 1:
                    report.warn("more unreadable pages; only counting from now on")
        return dd.record(recs, prints)

    if jobs > 1:
        run_stage_pooled(source, sink, partial(_prepare, warc_dir), record, report, batch=200, jobs=jobs)
    else:
        run_stage(source, sink, lambda recs: record(recs, _prepare(warc_dir, recs)), report, batch=200)


_MAX_SAID = 100  # unreadable pages named on stderr before only the count goes on


def _from_warc(warc_dir: Path, url: str) -> Fingerprint:
    from crawl.store import cdxj

    cdxj.build(warc_dir)  # the index may predate the newest WARC records
    caps = [c for c in cdxj.lookup(warc_dir, url) if str(c.get("status")) == "200"]
    if not caps:
        raise UsageError(f"{url} is not in {warc_dir}; fetch it first or pass -f FILE")
    body, ctype = _body(warc_dir, {"warc": cdxj.capture_pointer(caps[-1])})
    return Fingerprint(url, body, ctype)


@click.command(name="dedupe")
@dir_option(required=False)
@io_options
@click.option("--max-distance", type=click.IntRange(0, 15), default=MAX_DISTANCE, show_default=True,
              help="Simhash bits two pages may differ in and still be near-duplicates.")
@click.option("--repeated-block-pages", type=click.IntRange(2, ROUND_PAGES), default=REPEATED_BLOCK_PAGES,
              show_default=True,
              help=f"Drop a text block as boilerplate once it was on this many pages of a host's "
                   f"learning round (its first {ROUND_PAGES} original pages, and {ROUND_PAGES} more "
                   f"after every {RELEARN_EVERY:,}).")
@click.option("--jobs", "-j", type=click.IntRange(1, 64), default=1, show_default=True,
              help="Worker processes that read and fingerprint the pages (the tables stay in this "
                   "one). For bulk runs: output lags input by up to 2N+1 batches of 200 records.")
@click.option("--explain", is_flag=True,
              help="Print the fingerprints of URL_A and URL_B (or of two -f files), their "
                   "distance and the verdict, then exit.")
@click.option("-f", "--file", "files", multiple=True, type=click.Path(exists=True, dir_okay=False,
              path_type=Path), help="With --explain: read the pages from local HTML files "
              "(give two, in order) instead of the crawl's WARC files.")
@click.argument("urls", nargs=-1, metavar="[URL_A URL_B]")
def command(crawl_dir: Path | None, input_: str, output: str, strict: bool,
            stats_file: Path | None, max_distance: int, repeated_block_pages: int,
            jobs: int, explain: bool, files: tuple[Path, ...], urls: tuple[str, ...]) -> None:
    """Flag exact and near-duplicate pages in fetch results.

    Reads fetch records; for each stored page (outcome ok) reads the body
    from the WARC files and adds `simhash` (64 bits, hex) and, for a copy,
    `duplicate_of`, `distance` (bits) and `dup_kind` (exact or near).
    Exact copies share the payload digest; near copies have a simhash of
    4-word shingles of the visible text (nav, header, footer, aside,
    script and style removed, and blocks repeated on many pages of the host
    ignored, as learned from rounds of its pages) within --max-distance
    bits, found through permuted block tables in DIR/dedupe: a few prefix
    lookups, never a scan. The original
    is the page seen first, or the one a page names with rel=canonical.
    Other records pass through; `crawl parse` lowers the priority of a
    duplicate's links. The per-byte and per-word work (visible text,
    folding, hashing, the bit vote) runs compiled (crawl/text/_compiled.c) where
    the install found a C compiler, else in Python with the same results.

    \b
    Examples:
        crawl fetch --dir D < urls.txt | crawl dedupe --dir D | crawl parse --dir D
        crawl dedupe --dir D --explain http://a.test/news/1 http://a.test/print/news/1
        crawl dedupe --explain -f page.html -f copy.html
    """
    if explain or files or urls:
        if not explain:
            raise UsageError("URL arguments and -f are only used with --explain")
        _explain(crawl_dir, urls, files, max_distance)
        return
    if crawl_dir is None:
        raise UsageError("--dir (or CRAWL_DIR) is required to check pages")
    cdir = _common.crawl_dir(crawl_dir)
    with Deduper(cdir.dedupe, max_distance=max_distance,
                 repeated_block_pages=repeated_block_pages) as dd, \
            stage_io("dedupe", None, input_, output, strict, stats_file) as sio:
        try:
            run_checks(dd, cdir.warc, sio.source, sio.sink, sio.report, jobs)
        finally:
            for key, n in dd.counts.items():
                sio.report.add(key, n)


def _explain(crawl_dir: Path | None, urls: tuple[str, ...], files: tuple[Path, ...],
             max_distance: int) -> None:
    names = list(urls) if urls else [str(f) for f in files]
    if len(names) != 2 or (urls and files):
        raise UsageError("--explain compares two pages: give URL_A URL_B, or -f FILE -f FILE")
    if files:
        fps = [Fingerprint(n, f.read_bytes(), "text/html") for n, f in zip(names, files, strict=True)]
    else:
        if crawl_dir is None:
            raise UsageError("--explain URL_A URL_B reads the crawl's WARC files: give --dir, "
                             "or -f FILE -f FILE for local files")
        warc = _common.existing_dir(crawl_dir, hint="--explain URL_A URL_B reads its WARC files").warc
        fps = [_from_warc(warc, u) for u in names]
    out: dict[str, Any] = explain(fps[0], fps[1], max_distance)
    click.echo(dumps_pretty(out))
