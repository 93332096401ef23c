"""crawl why: every decision about one URL or one host, with its cause."""

from __future__ import annotations

from pathlib import Path

import click

from crawl.core import records

from ._common import dir_option


@click.command(name="why")
@dir_option()
@click.argument("url", required=False)
@click.option("--host", "host", metavar="HOST",
              help="Explain a host instead of a URL: HOST or HOST:PORT, as the frontier keys it.")
@click.option("--json", "as_json", is_flag=True, help="One JSON object on stdout, with every field.")
@click.option("--referrers", type=click.IntRange(min=0), default=10, show_default=True,
              help="Stop scanning the link graph after this many pages that link to the URL.")
@click.option("--history", type=click.IntRange(min=1), default=50, show_default=True,
              help="With --host: delay changes and recent results shown.")
def command(crawl_dir: Path, url: str | None, host: str | None, as_json: bool, referrers: int,
            history: int) -> None:
    """Explain why a URL is (or is not) fetched, or why a host is busy or idle.

    For a URL, in the order the crawl decides: its canonical form and the
    rules that changed it; the scope verdict and the rule that decided
    (host, domain, --allow, --deny, --max-depth, from the settings the
    last `crawl run` recorded); the robots.txt verdict (matched group and
    rule, when the file was fetched and is checked next); trap heuristics;
    whether it is in the seen set; its frontier state (queued with its
    priority and place, leased, not due yet, done, dropped; attempts);
    when its host may be asked next and why (base delay, Crawl-delay, k x
    response time, Retry-After, backoff after errors, per-IP cap, parked,
    robots.txt unreachable); every fetch attempt (time, outcome, status,
    bytes, seconds, WARC record); the dedupe verdict (duplicate of which
    URL at which distance); and the pages that link to it, with anchors.

    For a host (--host): its politeness state and the cause of its current
    delay, its delay changes replayed from the crawl log with their causes
    and the gap the crawl actually left, its robots.txt, queue depth,
    in-flight lease and recent results.

    Everything is read from the crawl directory without writing or
    locking, so it works while a crawl runs and on a copy of its
    directory.

    \b
        crawl why --dir D 'https://example.com/a?utm_source=x'
        crawl why --dir D --host example.com
        crawl why --dir D URL --json | jq .scope
    """
    if not crawl_dir.is_dir():
        raise click.UsageError(f"no crawl directory at {crawl_dir}: check --dir (or CRAWL_DIR)")
    if (url is None) == (host is None):
        raise click.UsageError("give a URL or --host HOST (one of them)")
    if host is not None and (not host.strip() or "/" in host):
        raise click.UsageError(f"--host {host!r} is not a host name: give HOST or HOST:PORT, not a URL")
    from crawl.report import format_host, format_url, why_host, why_url

    if host is not None:
        got = why_host(crawl_dir, host, history=history)
        if got.get("ambiguous") and not as_json:
            raise click.UsageError(f"--host {host} names {len(got['ambiguous'])} hosts in the frontier "
                                   f"({', '.join(got['ambiguous'][:5])}): give one with its port")
        click.echo(records.encode(got).decode() if as_json else format_host(got), nl=False)
        return
    assert url is not None
    got = why_url(crawl_dir, url, referrers=referrers)
    click.echo(records.encode(got).decode() if as_json else format_url(got), nl=False)
