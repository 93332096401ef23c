"""crawl index: build or query the CDXJ index of a crawl's WARC files."""

from __future__ import annotations

import sys
from pathlib import Path

import click
import orjson

from crawl import store
from crawl.core import CrawlDir, ExitStatus, UsageError
from crawl.store import cdxj

from ._common import dir_option


@click.command(name="index")
@dir_option()
@click.option("--url", "url", metavar="URL", help="Print the captures of URL (JSON lines), oldest first.")
@click.option("--prefix", is_flag=True, help="With --url: every URL under it (a host, a path).")
@click.option("--body", is_flag=True, help="With --url: write the newest capture's decoded body to stdout.")
@click.option("--rescan", is_flag=True, help="Rebuild from the WARC files, ignoring the .cdxj sidecars.")
@click.option("--check", is_flag=True, help="Read every record of every WARC file; report torn or damaged files.")
def command(crawl_dir: Path, url: str | None, prefix: bool, body: bool, rescan: bool, check: bool) -> None:
    """Build or query the CDXJ index of the WARC files in DIR/warc.

    Without --url, (re)builds DIR/warc/index.cdxj: one sorted line per
    response or revisit record, `SURT TIMESTAMP {json}` (the pywb /
    cdxj-indexer format) with the url, mime, status, digest and the
    filename, offset and length that point at the record. `crawl fetch`
    writes a `.cdxj` sidecar per WARC file as it goes, so building is a merge.

    \b
    Examples:
        crawl index --dir D                           # build D/warc/index.cdxj
        crawl index --dir D --url http://h.test/a     # captures of one URL
        crawl index --dir D --url http://h.test/a --body > a.html
        crawl index --dir D --url http://h.test/ --prefix
        crawl index --dir D --check                   # find torn records

    Exit status: 0; 1 when --check finds a torn or damaged file; 2 on a
    usage error (including a URL with no capture).
    """
    warc_dir = CrawlDir(crawl_dir).warc
    if not warc_dir.is_dir():
        raise UsageError(f"no WARC directory at {warc_dir}; run crawl fetch --dir {crawl_dir} first")
    out = sys.stdout.buffer
    if check:
        bad = 0
        for f in cdxj.warc_files(warc_dir):
            res = store.scan(f)
            line = {"file": f.name, "records": res.records, "torn_at": res.torn_at, "error": res.error or None}
            bad += res.torn_at is not None
            out.write(orjson.dumps(line) + b"\n")
        out.flush()
        if bad:
            sys.exit(ExitStatus.ERROR)
        return
    if url is None:
        path, n = cdxj.build(warc_dir, rescan=rescan)
        click.echo(f"crawl index: {n} captures indexed in {path}", err=True)
        return
    if rescan:
        cdxj.build(warc_dir, rescan=True)
    hits = cdxj.lookup(warc_dir, url, prefix=prefix)
    if not hits:
        raise UsageError(f"no capture of {url} in {warc_dir}/{cdxj.INDEX_NAME} (run crawl index --dir first?)")
    if body:
        out.write(store.read_response(warc_dir, cdxj.capture_pointer(hits[-1])).body)
    else:
        out.write(b"".join(orjson.dumps(h) + b"\n" for h in hits))
    out.flush()
