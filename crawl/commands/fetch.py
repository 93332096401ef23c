"""crawl fetch: fetch leased URLs into WARC files and emit fetch results."""

from __future__ import annotations

import contextlib
import resource
from pathlib import Path

import click

from ..dns import AddressPolicy, load_hosts
from ..exchange import Limits
from ..fetch import ACCEPTS, DEFAULT_TYPES, DEFAULT_USER_AGENT, FetchConfig, StoreOptions, run_fetch
from ..robots_parse import agent_token
from ._common import crawl_dir as open_crawl_dir
from ._common import dir_option, io_options, stage_io


@click.command(name="fetch")
@dir_option()
@io_options
@click.option("--resolve-file", type=click.Path(dir_okay=False, exists=True, path_type=Path),
              help="Hosts-format file ('ADDRESS NAME [NAME...]', # comments) that maps names to "
                   "addresses. Names not in it fail with dns-error unless --resolve-fallback.")
@click.option("--resolve-fallback", is_flag=True,
              help="With --resolve-file: resolve names not in the file with the system resolver.")
@click.option("--allow-private", is_flag=True,
              help="Allow private, loopback and link-local addresses (needed for the test web).")
@click.option("--allow-cidr", multiple=True, metavar="CIDR",
              help="Allow this special-purpose range only (repeatable), e.g. 10.1.0.0/16.")
@click.option("--user-agent", default=DEFAULT_USER_AGENT, show_default=True,
              help="User-Agent header; include a contact URL. Its product token (before '/') "
                   "selects the robots.txt group.")
@click.option("-c", "--concurrency", type=click.IntRange(1, 4096), default=256, show_default=True,
              help="Requests in flight at once (across hosts; the frontier keeps one per host).")
@click.option("--connect-timeout", type=float, default=10.0, show_default=True, help="Seconds to connect.")
@click.option("--timeout", type=float, default=30.0, show_default=True,
              help="Seconds for the whole exchange (headers and body).")
@click.option("--max-body", type=int, default=5_000_000, show_default=True,
              help="Body bytes kept; a longer body is stored truncated (outcome too-large).")
@click.option("--max-decoded", type=int, default=50_000_000, show_default=True,
              help="Decompressed bytes allowed (gzip/deflate/br bomb cap; ratio cap 100:1).")
@click.option("--content-type", "content_types", multiple=True, metavar="MIME",
              help="Content types whose body is read (repeatable; '*/*' for all). Default: "
                   + ", ".join(DEFAULT_TYPES) + " and */*+xml.")
@click.option("--host-delay", type=float, default=1.0, show_default=True,
              help="Seconds between robots.txt redirect hops, and between robots.txt and the page "
                   "for plain URL input (a lease is answered 'deferred' instead).")
@click.option("--ignore-robots", is_flag=True, help="Do not fetch or obey robots.txt (your own sites only).")
@click.option("--no-conditional", is_flag=True, help="Never send If-None-Match / If-Modified-Since.")
@click.option("--warc-compression", type=click.Choice(["gzip", "zstd", "none"]), default="gzip",
              show_default=True, help="Per-record gzip (default) or zstd (.warc.zst, IIPC proposal).")
@click.option("--warc-size", type=int, default=1 << 30, show_default=True,
              help="Start a new WARC file after this many bytes.")
@click.option("--warc-prefix", default="crawl", show_default=True, help="WARC file name prefix.")
def command(crawl_dir: Path, input_: str, output: str, strict: bool, stats_file: Path | None,
            resolve_file: Path | None, resolve_fallback: bool, allow_private: bool,
            allow_cidr: tuple[str, ...], user_agent: str, concurrency: int, connect_timeout: float,
            timeout: float, max_body: int, max_decoded: int, content_types: tuple[str, ...], host_delay: float,
            ignore_robots: bool, no_conditional: bool, warc_compression: str, warc_size: int,
            warc_prefix: str) -> None:
    """Fetch leased URLs politely into WARC files; emit one fetch result each.

    Reads lease records (or plain URLs) and writes one `fetch` record per
    input, with an `outcome`: ok, not-modified, redirect, http-error,
    robots-disallowed, timeout, connect-error, dns-error, too-large,
    skipped-content-type, private-address, invalid-url, protocol-error or
    deferred (the lease was spent fetching robots.txt; lease it again).
    A result is written only after its response is fsynced into
    DIR/warc/*.warc.gz; its `warc` field ({file, offset, length}) points at
    it. Redirects are not followed: `location` goes back to the frontier.
    robots.txt is fetched per origin (cached 24 h in DIR/fetchstate) with
    the RFC 9309 rules: 4xx allow all, 5xx/unreachable disallow all.

    \b
    Example (the bundled test web lives on 127.0.0.0/8, hence --allow-private):
        crawl frontier next --dir D -n 100 \\
          | crawl fetch --dir D --resolve-file WEB/hosts --allow-private \\
          | crawl frontier complete --dir D
        echo https://example.com/ | crawl fetch --dir D
    """
    _raise_open_files()
    cfg = FetchConfig(
        user_agent=user_agent, agent_token=agent_token(user_agent) or "crawl",
        limits=Limits(connect=connect_timeout, total=timeout, max_body=max_body, max_decoded=max_decoded),
        content_types=tuple(c.lower() for c in content_types) or DEFAULT_TYPES,
        robots=not ignore_robots, conditional=not no_conditional, concurrency=concurrency,
        host_delay=host_delay)
    overrides = load_hosts(resolve_file) if resolve_file else {}
    policy = AddressPolicy.from_cidrs(allow_cidr, allow_private)
    cdir = open_crawl_dir(crawl_dir)
    with stage_io("fetch", ACCEPTS, input_, output, strict, stats_file) as sio:
        run_fetch(sio.source, sio.sink, sio.report, cdir, cfg, overrides=overrides,
                  fallback=resolve_file is None or resolve_fallback, policy=policy,
                  store=StoreOptions(warc_compression, warc_size, warc_prefix))


def _raise_open_files() -> None:
    """Hundreds of connections need more than the common 1024 descriptors."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    want = hard if hard != resource.RLIM_INFINITY else 65536
    if soft != resource.RLIM_INFINITY and soft < min(want, 65536):
        with contextlib.suppress(ValueError, OSError):
            resource.setrlimit(resource.RLIMIT_NOFILE, (min(want, 65536), hard))
