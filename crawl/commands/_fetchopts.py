"""Fetch flags shared by ``crawl fetch`` and ``crawl run`` (one definition).

Usage in a command::

    @fetch_options
    def cmd(..., **kw):
        cfg, net = fetch_config_from(kw)   # pops the fetch keys from kw
"""

from __future__ import annotations

import contextlib
import resource
from collections.abc import Callable
from pathlib import Path
from typing import Any

import click

from crawl.core import USER_AGENT_ENV, contact_warning
from crawl.fetch import DEFAULT_TYPES, DEFAULT_USER_AGENT, FetchConfig, StoreOptions
from crawl.net import AddressPolicy, Limits, load_hosts
from crawl.robots import agent_token

from ._common import POSITIVE_DURATION

_OPTIONS = [
    click.option("--resolve-file", type=click.Path(dir_okay=False, exists=True, path_type=Path),
                 help="Hosts-format file ('ADDRESS NAME [NAME...]', # comments) that maps names to "
                      "addresses. Names not in it fail with dns-error unless --resolve-fallback."),
    click.option("--resolve-fallback", is_flag=True,
                 help="With --resolve-file: resolve names not in the file with the system resolver."),
    click.option("--allow-private", is_flag=True,
                 help="Allow private, loopback and link-local addresses (needed for the test web)."),
    click.option("--allow-cidr", multiple=True, metavar="CIDR",
                 help="Allow this special-purpose range only (repeatable), e.g. 10.1.0.0/16."),
    click.option("--user-agent", default=DEFAULT_USER_AGENT, show_default=True, envvar=USER_AGENT_ENV,
                 show_envvar=True,
                 help="User-Agent header; include a contact URL (the default has none: a warning "
                      "says so once). Its product token (before '/') selects the robots.txt group."),
    click.option("-c", "--concurrency", type=click.IntRange(1, 4096), default=256, show_default=True,
                 help="Requests in flight at once (across hosts; the frontier keeps one per host)."),
    click.option("--connect-timeout", type=POSITIVE_DURATION, default=10.0, show_default=True,
                 help="Time to connect (30, 5s, 1m: any duration)."),
    click.option("--timeout", type=POSITIVE_DURATION, default=30.0, show_default=True,
                 help="Time for the whole exchange (headers and body)."),
    click.option("--max-body", type=int, default=5_000_000, show_default=True,
                 help="Body bytes kept; a longer body is stored truncated (outcome too-large)."),
    click.option("--max-decoded", type=int, default=50_000_000, show_default=True,
                 help="Decompressed bytes allowed (gzip/deflate/br bomb cap; ratio cap 100:1)."),
    click.option("--content-type", "content_types", multiple=True, metavar="MIME",
                 help="Content types whose body is read (repeatable; '*/*' for all). Default: "
                      + ", ".join(DEFAULT_TYPES) + " and */*+xml."),
    click.option("--ignore-robots", is_flag=True, help="Do not fetch or obey robots.txt (your own sites only)."),
    click.option("--robots-retry", type=POSITIVE_DURATION, default=60.0, show_default=True,
                 help="First wait before asking again for a robots.txt that answered 5xx or timed "
                      "out (meanwhile the host's URLs stay queued); doubled per failed check up to "
                      "30 min. A Retry-After on the answer wins."),
    click.option("--no-conditional", is_flag=True, help="Never send If-None-Match / If-Modified-Since."),
    click.option("--warc-compression", type=click.Choice(["gzip", "zstd", "none"]), default="gzip",
                 show_default=True, help="Per-record gzip (default) or zstd (.warc.zst, IIPC proposal)."),
    click.option("--warc-size", type=int, default=1 << 30, show_default=True,
                 help="Start a new WARC file after this many bytes."),
    click.option("--warc-prefix", default="crawl", show_default=True,
                 help="WARC file name prefix: a plain name (printable, no spaces or '/', not starting "
                      "with '.' or '-', at most 100 bytes), else exit 2."),
]

_KEYS = ("resolve_file", "resolve_fallback", "allow_private", "allow_cidr", "user_agent", "concurrency",
         "connect_timeout", "timeout", "max_body", "max_decoded", "content_types", "ignore_robots", "robots_retry",
         "no_conditional", "warc_compression", "warc_size", "warc_prefix")


def fetch_options(f: Callable[..., Any]) -> Callable[..., Any]:
    for opt in reversed(_OPTIONS):
        f = opt(f)
    return f


def raise_open_files() -> None:
    """Hundreds of connections need more than the common 1024 descriptors."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    want = hard if hard != resource.RLIM_INFINITY else 65536
    if soft != resource.RLIM_INFINITY and soft < min(want, 65536):
        with contextlib.suppress(ValueError, OSError):
            resource.setrlimit(resource.RLIMIT_NOFILE, (min(want, 65536), hard))


def fetch_config_from(kw: dict[str, Any], host_delay: float = 1.0) -> tuple[FetchConfig, dict[str, Any]]:
    """The FetchConfig and the network/store settings, popped from ``kw``.

    The second value's keys match ``RunOptions`` and ``run_fetch`` keyword
    arguments: overrides, resolve_fallback, address_policy, store.
    """
    v = {k: kw.pop(k) for k in _KEYS}
    _warn_no_contact(v["user_agent"])
    cfg = FetchConfig(
        user_agent=v["user_agent"], agent_token=agent_token(v["user_agent"]) or "crawl",
        limits=Limits(connect=v["connect_timeout"], total=v["timeout"], max_body=v["max_body"],
                      max_decoded=v["max_decoded"]),
        content_types=tuple(c.lower() for c in v["content_types"]) or DEFAULT_TYPES,
        robots=not v["ignore_robots"], conditional=not v["no_conditional"], concurrency=v["concurrency"],
        host_delay=host_delay, robots_retry=v["robots_retry"])
    net = {
        "overrides": load_hosts(v["resolve_file"]) if v["resolve_file"] else {},
        "resolve_fallback": v["resolve_file"] is None or v["resolve_fallback"],
        "address_policy": AddressPolicy.from_cidrs(v["allow_cidr"], v["allow_private"]),
        "store": StoreOptions(v["warc_compression"], v["warc_size"], v["warc_prefix"]),
    }
    return cfg, net


_warned: set[str] = set()


def _warn_no_contact(user_agent: str) -> None:
    """Once per process, on stderr: the User-Agent names no one to contact."""
    text = contact_warning(user_agent)
    if text and text not in _warned:
        _warned.add(text)
        ctx = click.get_current_context(silent=True)
        name = ctx.command_path if ctx is not None else "crawl"
        click.echo(f"{name}: {text}", err=True)
