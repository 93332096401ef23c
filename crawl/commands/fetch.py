"""crawl fetch: fetch leased URLs into WARC files and emit fetch results."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click

from crawl.fetch import ACCEPTS, run_fetch

from ._common import DURATION, dir_option, io_options, stage_io
from ._common import crawl_dir as open_crawl_dir
from ._fetchopts import fetch_config_from, fetch_options, raise_open_files


@click.command(name="fetch")
@dir_option()
@io_options
@fetch_options
@click.option("--host-delay", type=DURATION, default=1.0, show_default=True,
              help="Time between robots.txt redirect hops, and between robots.txt and the page "
                   "for plain URL input (a lease is answered 'deferred' instead).")
def command(crawl_dir: Path, input_: str, output: str, strict: bool, stats_file: Path | None,
            host_delay: float, **kw: Any) -> None:
    """Fetch leased URLs politely into WARC files; emit one fetch result each.

    Reads lease records (or plain URLs) and writes one `fetch` record per
    input, with an `outcome`: ok, not-modified, redirect, redirect-limit,
    http-error, robots-disallowed, robots-unreachable, timeout,
    connect-error, dns-error, too-large, skipped-content-type,
    private-address, invalid-url, protocol-error or deferred (the lease was
    spent fetching robots.txt; lease it again).
    A result is written only after its response is fsynced into
    DIR/warc/*.warc.gz; its `warc` field ({file, offset, length}) points at
    it. Redirects are not followed: `location` goes back to the frontier,
    and a lease whose `hops` says 5 redirects led to it gets redirect-limit
    instead (stored, not followed).
    robots.txt is fetched per origin (cached 24 h in DIR/fetchstate) with
    the RFC 9309 rules: 4xx allow all, 5xx/unreachable disallow all; an
    unreachable one gives robots-unreachable with `retry_after` (the next
    check, see --robots-retry), and the frontier keeps the URL queued.

    \b
    Example (the bundled test web lives on 127.0.0.0/8, hence --allow-private):
        crawl frontier next --dir D -n 100 \\
          | crawl fetch --dir D --resolve-file WEB/hosts --allow-private \\
          | crawl frontier complete --dir D
        echo https://example.com/ | crawl fetch --dir D
    """
    raise_open_files()
    cfg, net = fetch_config_from(kw, host_delay=host_delay)
    cdir = open_crawl_dir(crawl_dir)
    with stage_io("fetch", ACCEPTS, input_, output, strict, stats_file) as sio:
        run_fetch(sio.source, sio.sink, sio.report, cdir, cfg, overrides=net["overrides"],
                  fallback=net["resolve_fallback"], policy=net["address_policy"], store=net["store"])
