"""crawl recrawl: emit URLs due for a re-fetch; learn from fetch results; pings."""

from __future__ import annotations

import itertools
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import click

from crawl.core import CrawlDir, UsageError, dumps_pretty, open_sink, records, run_stage
from crawl.recrawl import Recrawler, parse_budget
from crawl.run import read_log

from . import _common
from ._common import POSITIVE_DURATION, check_sink, dir_option, io_options, stage_io


def _conv(parse: Callable[[str], float]) -> Callable[[click.Context, click.Parameter, str | None], float | None]:
    def convert(ctx: click.Context, param: click.Parameter, value: str | None) -> float | None:
        try:
            return None if value is None else parse(value)
        except ValueError as exc:
            raise click.BadParameter(str(exc)) from None
    return convert


def _open(ctx: click.Context, crawl_dir: Path | None, *, create: bool = True,
          needs: tuple[str, ...] = ()) -> Recrawler:
    """The model of --dir; a subcommand that only reads needs it there already."""
    d = crawl_dir or ctx.obj.get("recrawl_dir")
    if d is None:
        raise click.UsageError("no crawl directory: give --dir DIR (or set CRAWL_DIR)")
    cdir = _common.crawl_dir(d) if create else _common.existing_dir(
        d, *needs, hint="crawl run, or crawl recrawl observe, builds the freshness model")
    return ctx.with_resource(Recrawler(cdir))


def _canonical_urls(urls: list[str], where: str) -> list[str]:
    """Pages are keyed by their canonical URL (as the frontier and fetch results spell it)."""
    from crawl.canon import CanonError, canonicalize

    out, bad = [], []
    for i, u in enumerate(urls, 1):
        try:
            out.append(canonicalize(u).url)
        except CanonError as exc:
            bad.append(f"{where} {i} {u[:200]!r}: {exc}")
    if bad:
        raise UsageError("not a URL that can be crawled: " + "; ".join(bad[:3])
                         + (f"; and {len(bad) - 3} more" if len(bad) > 3 else "")
                         + " (nothing was pinged)")
    return out


def rc_dir(ctx: click.Context, crawl_dir: Path | None) -> CrawlDir:
    return _common.crawl_dir(crawl_dir or ctx.obj["recrawl_dir"])


@click.group(name="recrawl", invoke_without_command=True)
@dir_option(required=False)
@click.option("--budget", callback=_conv(parse_budget), metavar="N/s",
              help="Total fetch capacity (5/s, 300/m, 1000/h); re-crawls get --share of it. Saved.")
@click.option("--share", type=click.FloatRange(0, 1), help="Fraction of --budget for re-crawls (default 0.5). Saved.")
@click.option("--min-interval", type=POSITIVE_DURATION, metavar="T",
              help="Shortest revisit interval (default 1h; 90s, 30m, 1h30m, 2d). Saved.")
@click.option("--max-interval", type=POSITIVE_DURATION, metavar="T",
              help="Longest revisit interval (default 90d). Saved.")
@click.option("--c", "c", type=click.FloatRange(min=1e-6), help="Without --budget: changes a weekly-changing "
              "page of importance 1 may miss between visits (optimal), or changes x importance tolerated "
              "(proportional); default 0.5. Saved.")
@click.option("--policy", type=click.Choice(["optimal", "proportional"]), help="How intervals follow rates "
              "(default optimal). Saved.")
@click.option("-o", "--output", default="-", show_default=True, metavar="DST", callback=check_sink,
              help="Where due URL records go: '-', a file, or spool:DIR.")
@click.option("--limit", type=click.IntRange(min=0), help="Emit at most this many URLs (default: what the budget "
              "allows since the last run, else all that are due).")
@click.option("--enqueue", is_flag=True, help="Also queue them in DIR's frontier (re-admitting finished URLs).")
@click.option("--from-log", is_flag=True, help="First catch up from DIR's crawl log (idempotent).")
@click.option("--now", type=float, hidden=True, help="Unix time to use instead of the clock (tests).")
@click.pass_context
def command(ctx: click.Context, crawl_dir: Path | None, budget: float | None, share: float | None,
            min_interval: float | None, max_interval: float | None, c: float | None, policy: str | None, output: str,
            limit: int | None, enqueue: bool, from_log: bool, now: float | None) -> None:
    """Emit URL records due for a re-fetch, from each page's change history.

    Each page's change rate is estimated as a Poisson process from its
    fetch history (changed or not by the boilerplate-free simhash, else the
    payload digest; a 304 is unchanged) with Cho and Garcia-Molina's
    estimator for irregular visits; new pages start from their host's
    average. Importance comes from in-links, home-page links, depth and
    sitemap priority. The next visit is set by --policy: `optimal` (the
    default) maximises importance-weighted freshness for the budget, which
    visits pages that change faster than they can be kept fresh less, not
    more; `proportional` is the literal now + c / (rate x importance). Both
    are clamped to [--min-interval, --max-interval]. Pings and sitemap/feed
    lastmod hints go first (priority 0). With --budget the policy is tuned
    so planned re-crawls fill --share of it, and each run emits only what
    the budget allowed since the previous run (a token bucket holding 60 s);
    the rest waits as backlog (`crawl recrawl stats`). Settings are saved in
    DIR/recrawl. Emitted URLs carry etag/last_modified for a conditional GET
    and reason ping, hint or recrawl. `crawl frontier add` ignores URLs
    already done in the current cycle: use --enqueue (re-admits them to
    DIR's frontier) or start a new cycle.

    \b
    Examples:
        crawl fetch --dir D < leases | crawl recrawl observe --dir D | crawl parse --dir D
        crawl recrawl --dir D --budget 10/s --share 0.3 --enqueue
        crawl recrawl --dir D --enqueue --from-log > /dev/null   # cron: catch up, queue what is due
        crawl recrawl ping --dir D https://example.com/news/
        crawl recrawl stats --dir D
    """
    ctx.ensure_object(dict)
    ctx.obj["recrawl_dir"] = crawl_dir
    if ctx.invoked_subcommand is not None:
        if any(v is not None for v in (budget, share, min_interval, max_interval, c, policy)):
            _open(ctx, crawl_dir).configure(budget=budget, share=share, min_interval=min_interval,
                                            max_interval=max_interval, c=c, policy=policy)
        return
    now = time.time() if now is None else now
    acts = enqueue or from_log
    settings = dict(budget=budget, share=share, min_interval=min_interval, max_interval=max_interval, c=c,
                    policy=policy)
    # Only --enqueue (and --from-log, --budget and the other saved settings) change
    # the model; a bare run is a dry run, so it needs the model to be there already.
    changed = any(v is not None for v in settings.values())
    rc = _open(ctx, crawl_dir, create=False, needs=() if acts or changed else ("recrawl",))
    cfg = rc.configure(**settings) if changed else rc.cfg
    if from_log:  # a transaction per 5,000 events keeps a long log's catch-up bounded
        events = (e for e in read_log(rc_dir(ctx, crawl_dir).log) if e.get("event") == "fetch")
        while chunk := list(itertools.islice(events, 5000)):
            rc.observe(chunk, now)
    if limit is None:
        limit = rc.allowance(now, cfg.budget * cfg.share, spend=enqueue) if cfg.budget > 0 else 1 << 62
    sink = open_sink(output)
    due = rc.due(now, limit, dry_run=not enqueue)
    if enqueue and due:
        from crawl.frontier import Frontier, readd

        with Frontier(rc_dir(ctx, crawl_dir).frontier) as fr:
            got = readd(fr, due, now)
        click.echo(f"crawl recrawl: {got['added']} queued in the frontier, {got['known']} already there", err=True)
    elif not enqueue:
        click.echo(f"crawl recrawl: dry run: {len(due)} URL(s) due; nothing changed (--enqueue queues "
                   "them and counts them as emitted)", err=True)
    sink.write(due)


@command.command(name="observe")
@dir_option(required=False)
@io_options
@click.option("--now", type=float, hidden=True)
@click.pass_context
def observe(ctx: click.Context, crawl_dir: Path | None, input_: str, output: str, strict: bool,
            stats_file: Path | None, now: float | None) -> None:
    """Learn from fetch results, crawl-log events and links; pass them on.

    fetch records (and `event` lines of the crawl log) update change
    history and the schedule; url/link records teach importance and carry
    sitemap/feed hints. Every record is passed through unchanged, so this
    can sit in a pipe.

    \b
        crawl fetch --dir D < leases | crawl recrawl observe --dir D | crawl parse --dir D
    """
    rc = _open(ctx, crawl_dir)
    with stage_io("recrawl", None, input_, output, strict, stats_file) as sio:
        def learn(recs: list[records.Record]) -> list[records.Record]:
            t = time.time() if now is None else now
            fetches = [r for r in recs if r["kind"] == "fetch" or r.get("event") == "fetch"]
            for k, v in rc.observe(fetches, t).items():
                sio.report.add(k, v)
            rc.observe_links([r for r in recs if r["kind"] in records.URL_KINDS], t)
            return recs
        run_stage(sio.source, sio.sink, learn, sio.report)


@command.command(name="ping")
@dir_option(required=False)
@click.argument("urls", nargs=-1, required=True)
@click.option("--now", type=float, hidden=True)
@click.pass_context
def ping(ctx: click.Context, crawl_dir: Path | None, urls: tuple[str, ...], now: float | None) -> None:
    """Enqueue URLs ahead of the model (a publisher says they changed); '-' reads stdin.

    \b
        crawl recrawl ping --dir D https://example.com/news/ https://example.com/
    """
    given = _canonical_urls([u for u in urls if u != "-"], "argument")
    if "-" in urls:
        given += _canonical_urls([ln.strip() for ln in sys.stdin.read().splitlines() if ln.strip()],
                                 "line")
    n = _open(ctx, crawl_dir).ping(given, time.time() if now is None else now)
    click.echo(f"crawl recrawl: {n} URL(s) pinged", err=True)


@command.command(name="stats")
@dir_option(required=False)
@click.option("--url", help="Show one URL's history and schedule instead.")
@click.option("--json", "as_json", is_flag=True, help="The raw record (unix times, stored field names).")
@click.option("--now", type=float, hidden=True)
@click.pass_context
def stats(ctx: click.Context, crawl_dir: Path | None, url: str | None, as_json: bool,
          now: float | None) -> None:
    """Pages known, scheduled, the backlog (due but not emitted), pings, c.

    \b
        crawl recrawl stats --dir D
        crawl recrawl stats --dir D --url https://example.com/
        crawl recrawl stats --dir D --json | jq .backlog
    """
    now = time.time() if now is None else now
    rc = _open(ctx, crawl_dir, create=False, needs=("recrawl",))
    if url:
        page = rc.get(_canonical_urls([url], "--url")[0])
        if page is None:
            raise UsageError(f"{url} is not in the freshness model of this crawl (it learns a page "
                             "from its first successful fetch, or a ping)")
        click.echo(dumps_pretty(page) if as_json else "\n".join(_page_rows(page, now)))
        return
    st = rc.stats(now)
    if as_json:
        click.echo(dumps_pretty(st))
        return
    from ._human import echo_rows, number

    echo_rows([("pages known", number(st["pages"])), ("scheduled", number(st["scheduled"])),
               ("backlog (due, not emitted)", number(st["backlog"])),
               ("pings waiting", number(st["pings"])), ("sitemap/feed hints waiting", number(st["hints"])),
               ("policy", st["policy"]),
               *([("c (proportional policy)", number(st["c"]))] if "c" in st else []),
               *([("mu (optimal policy's multiplier)", number(st["mu"]))] if "mu" in st else [])])


_CLASS = {0: "ping", 1: "sitemap/feed hint", 2: "model"}


def _page_rows(page: dict[str, Any], now: float) -> list[str]:
    """One page's model state under names an operator can read."""
    from ._human import iso, number, seconds

    rate = page.get("rate")
    slot = page.get("slot")
    obs = page.get("obs") or []
    rows = [
        ("url", page.get("url")),
        ("host", page.get("host")),
        ("depth", number(page.get("depth"))),
        ("last fetched", iso(page.get("last"), now)),
        ("fetches observed", number(page.get("n"))),
        ("changes seen", number(page.get("changes"))),
        ("change rate", f"about once every {seconds(1 / rate)}" if rate else "not estimated yet"),
        ("importance", number(page.get("imp"))),
        ("in-links", number(len(page.get("in") or []))),
        ("linked from a home page", number(bool(page.get("home")))),
        ("sitemap priority", number(page.get("sp"))),
        ("sitemap changefreq", page.get("cf") or "-"),
        ("next visit", iso(page.get("next"), now)),
        ("scheduled as", f"{_CLASS.get(slot[0], slot[0])}, due {iso(slot[1] / 1000, now)}"
                         if slot else "not scheduled"),
        ("etag", page.get("etag") or "-"),
        ("last-modified", page.get("lm") or "-"),
        ("simhash then", page.get("hs") or "-"),
        ("payload digest then", page.get("hd") or "-"),
        ("recent visits", ", ".join(f"{seconds(t)} {'changed' if ch else 'same'}" for t, ch in obs[-8:])
         + (f" (and {len(obs) - 8} earlier)" if len(obs) > 8 else "") if obs else "-"),
    ]
    width = max(len(k) for k, _ in rows)
    return [f"{k:<{width}}  {v}" for k, v in rows]
