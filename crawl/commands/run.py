"""crawl run: the whole loop with progress, budgets, scope and resume."""

from __future__ import annotations

import os
import signal
import sys
import time
import tomllib
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from crawl.core import BadRecord, CrawlDir, ExitStatus, Report, UsageError, limit_arenas, records
from crawl.run import CYCLE_MODES, MODES  # light: the loop's modules load in command()

from ._cluster import cluster_run_options, cluster_settings
from ._common import dir_option
from ._fetchopts import fetch_config_from, fetch_options, raise_open_files
from ._politeness import DURATION, politeness_from, politeness_options

if TYPE_CHECKING:
    from crawl.run import Crawl


def _apply_config(ctx: click.Context, path: Path | None) -> None:
    """Fill every flag the user did not give from the TOML file (flags win).

    Keys are the long flag names without dashes (``max-pages = 500``,
    ``delay = "2s"``, ``deny = ["/logout"]``).
    """
    if path is None:
        return
    try:
        data = tomllib.loads(path.read_text())
    except (OSError, tomllib.TOMLDecodeError) as exc:
        raise UsageError(f"cannot read config {path}: {exc}") from exc
    data = data.get("run", data)
    by_key = {p.opts[0].lstrip("-"): p for p in ctx.command.params if p.opts and p.opts[0].startswith("--")}
    unknown = sorted(set(data) - set(by_key))
    if unknown:
        raise UsageError(f"{path}: unknown setting(s) {', '.join(unknown)}; use long flag names, "
                         f"e.g. max-pages, delay, scope")
    for key, value in data.items():
        param = by_key[key]
        if ctx.get_parameter_source(param.name) == click.core.ParameterSource.DEFAULT:
            ctx.params[param.name] = param.type_cast_value(ctx, value)


def default_parse_procs() -> int:
    """One parse process when a second core is there to run it (measured faster and
    cheaper per page than one process: README, "Throughput")."""
    return 1 if len(os.sched_getaffinity(0)) >= 2 else 0


@click.command(name="run")
@dir_option()
@click.argument("seeds", nargs=-1)
@click.option("--seeds", "seeds_file", type=click.Path(dir_okay=False, exists=True, path_type=Path),
              help="File of seed URLs (one per line, or URL records).")
@click.option("--config", "config_file", type=click.Path(dir_okay=False, exists=True, path_type=Path),
              help="TOML file of settings named like the long flags; flags win over it.")
@click.option("--max-pages", type=click.IntRange(min=0), default=0,
              help="Stop once this run has stored N pages (200, 304; never more: leases are counted "
                   "against it). Per run: earlier runs in --dir do not count (0: no limit).")
@click.option("--max-per-host", type=click.IntRange(min=0), default=0,
              help="Admit at most N distinct URLs per host over the crawl dir's life; re-visits in "
                   "later cycles do not count again (0: no limit).")
@click.option("--max-depth", type=click.IntRange(min=0), default=None, help="Do not follow links deeper than N hops from a seed.")
@click.option("--duration", type=DURATION, default=0.0,
              help="Stop leasing after this long (e.g. 60s, 30m, 2h); fetches still in flight get "
                   "the same few seconds as after Ctrl-C.")
@click.option("--cycle", type=click.Choice(CYCLE_MODES), default="auto", show_default=True,
              help="auto: a run given seeds starts a new cycle once the previous one has finished "
                   "(seeds fetched again, pages the freshness model says are due re-visited with "
                   "conditional requests); new: start one now; continue: never.")
@click.option("--idle-exit", type=DURATION, default=60.0, show_default=True,
              help="End when nothing has been due for this long (the rest stays queued).")
@click.option("--scope", type=click.Choice(MODES), default="domain", show_default=True,
              help="Follow links on the seeds' hosts, their registered domains, or anywhere.")
@click.option("--allow", multiple=True, metavar="REGEX", help="Only follow URLs matching one of these (repeatable).")
@click.option("--deny", multiple=True, metavar="REGEX", help="Never follow URLs matching this (repeatable).")
@click.option("--lease", type=DURATION, default=0.0, help="Lease time (default: 2 x --timeout + --connect-timeout + 30 s).")
@click.option("--progress", type=click.Choice(["auto", "rich", "plain", "none"]), default="auto", show_default=True,
              help="Live panel on a terminal, one line per --interval otherwise.")
@click.option("--interval", type=DURATION, default=10.0, show_default=True, help="Seconds between plain progress lines.")
@click.option("--json", "as_json", is_flag=True, help="Print the final summary as JSON on stdout.")
@click.option("--recrawl", is_flag=True,
              help="Run continuously: besides discovery, re-fetch pages when the freshness model "
                   "(crawl recrawl) says they are due. Ends on --duration or a signal.")
@click.option("--recrawl-share", type=click.FloatRange(0, 1), default=0.5, show_default=True,
              help="Share of lease capacity kept for re-crawl when discovery also has work.")
@click.option("--recrawl-budget", type=float, default=0.0,
              help="Re-crawl fetches per second (0: --recrawl-share of each lease batch).")
@click.option("--parse-procs", type=click.IntRange(0, 64), default=None,
              help="Run dedupe, parse and seen in N child processes (0: in this process), so "
                   "the fetch side keeps a core to itself. Default: 1 on a machine with two or "
                   "more cores, else 0.")
@cluster_run_options
@politeness_options
@fetch_options
@click.pass_context
def command(ctx: click.Context, crawl_dir: Path, seeds: tuple[str, ...], seeds_file: Path | None,
            config_file: Path | None, **kw: Any) -> None:
    """Run the whole crawl loop with progress, budgets, scope and resume.

    Frontier, fetch, dedupe, parse and seen, wired together with the same
    library functions as the separate commands and a durable spool between
    fetching and parsing, so a crash anywhere loses nothing. Running the same
    command again on the same --dir resumes where it stopped, and once that
    cycle has finished starts the next (--cycle): the seeds again and what
    the freshness model says is due, fetched with conditional requests.
    Budgets are per run: --max-pages counts this run's pages (exactly:
    never more), --duration this run's time. One run per directory: a second
    crawl run on the same --dir exits 2 with one line naming the first (pid,
    host, start time, command line). A run resumed after a kill returns the
    killed run's leases to the queue at once and says how many, and how
    many fetch results it recovered from the spool. A resumed run first checks the tails of the
    WARC files the last run wrote: a file cut short since is said on stderr
    and its pages are fetched again (`crawl check` checks everything). A
    full disk stops the run with one line naming the file (exit status 1);
    run again once there is room. Fetching never runs more than 1,000 results
    ahead of parsing (leasing pauses until the parse side catches up), so
    links reach the frontier promptly and a --duration run ends on time.

    Ctrl-C or SIGTERM stops leasing, lets in-flight fetches finish (a few
    seconds) and commits (also while seeds are still being admitted); then
    the run exits 130 after Ctrl-C, as interrupted commands do, and 0 after
    SIGTERM, a requested stop. A second signal stops at once. Progress goes
    to stderr; `crawl stats --dir D` shows it from another terminal.

    Seeds (arguments and --seeds lines: URLs or url records, # comments)
    are checked like any input: a line that is not JSON, or a URL that
    cannot be crawled, gets one message with its line number, is counted
    and skipped; the others are crawled.

    \b
        crawl run --dir D --seeds seeds.txt --max-pages 10000 --duration 30m
        crawl run --dir D https://example.com/ --scope host --deny '/calendar/'
        crawl run --dir D --config nightly.toml     # flags win over the file
    """
    early = _EarlySignals()
    signal.signal(signal.SIGINT, early)
    signal.signal(signal.SIGTERM, early)
    _apply_config(ctx, config_file)
    kw = {k: ctx.params[k] for k in kw}
    parse_procs = default_parse_procs() if kw["parse_procs"] is None else kw["parse_procs"]
    children = None
    if parse_procs:  # first: their imports run beside this process's (crawl/run/spawn.py)
        from crawl.run import Children  # crawl.run's face loads only crawl/run/spawn.py for it

        children = Children(parse_procs)
        ctx.call_on_close(children.close)  # killed unless the loop gave them their work
    from crawl.core import Report

    report = Report("run")
    urls = _check_seeds([(f"argument {i}", u) for i, u in enumerate(seeds, 1)], report)
    if seeds_file:
        urls += _read_seeds(seeds_file, report)
    if report.counts.get("bad_records"):
        report.warn(f"{report.counts['bad_records']} seed(s) skipped (above); "
                    f"{len(urls)} seed(s) to crawl")
    # Here, not at the top: `crawl run --help` needs none of the loop (crawl.core.lazy).
    from crawl.parse import ParseConfig
    from crawl.run import Budgets, Crawl, RunOptions, Scope, make_display, run_crawl, summary

    politeness = politeness_from(kw)
    fetch_cfg, net = fetch_config_from(kw, host_delay=politeness.default_delay)
    raise_open_files()
    opts = RunOptions(
        budgets=Budgets(max_pages=kw["max_pages"], max_per_host=kw["max_per_host"],
                        duration=kw["duration"], idle_exit=kw["idle_exit"]),
        scope=Scope(kw["scope"], tuple(kw["allow"]), tuple(kw["deny"]), kw["max_depth"]),
        politeness=politeness, fetch=fetch_cfg,
        parse=ParseConfig(agent=fetch_cfg.agent_token), lease_seconds=kw["lease"],
        parse_procs=parse_procs,
        recrawl=kw["recrawl"], recrawl_share=kw["recrawl_share"],
        recrawl_budget=kw["recrawl_budget"], cycle=kw["cycle"], **net,
    )
    for key, value in cluster_settings(kw).items():  # --cluster: one node of a shared crawl
        setattr(opts, key, value)
    cdir = CrawlDir(crawl_dir)
    cdir.root.mkdir(parents=True, exist_ok=True)
    limit_arenas()  # before the worker threads: they would each keep an arena of freed memory
    crawl = Crawl(cdir, opts)  # the directory's one run: a second one stops here (exit 2)
    early.attach(crawl)
    display = make_display(kw["progress"], kw["interval"])
    crawl.heartbeat = display.interval
    try:
        for line in crawl.resume():  # a killed run's leases back at once, its results parsed first
            crawl.notify(line)
        for line in crawl.check_last_files():  # a WARC file cut short since: its pages go back
            report.warn(line)
        reseed = _cycle(crawl, urls, report)
        _remember_seeds(crawl, urls, reseed)
        if crawl.finished() and not crawl.stopping and not opts.cluster and not (urls and opts.recrawl):
            raise UsageError("nothing to crawl: " + (
                "every seed is done in this cycle; --cycle auto (the default) or new starts the next"
                if urls else "give seed URLs (arguments or --seeds FILE)"))
        import trio

        final = trio.run(run_crawl, crawl, display, report, children)
        final["ended"] = round(time.time(), 3)  # crawl stats: finished, not killed
        crawl.write_status(final)
    finally:
        display.close()
        crawl.close()
    summary(final, where=cdir)
    if kw["as_json"]:
        click.echo(records.encode(final).decode(), nl=False)
    if crawl.stopping == "signal SIGINT":
        sys.exit(ExitStatus.INTERRUPTED)  # stopped cleanly, but a Ctrl-C all the same


def _read_seeds(path: Path, report: Report) -> list[str]:
    """URLs of a seed file: one per line, or url records; blank lines and # comments skipped."""
    found = []
    for lineno, raw in enumerate(path.read_bytes().split(b"\n"), 1):
        line = raw.strip()
        if not line or line.startswith(b"#"):
            continue
        try:
            url = records.decode(line, records.URL_KINDS)["url"]
        except BadRecord as exc:
            report.bad(BadRecord(0, f"{path} line {lineno}: {exc.reason}"))
            continue
        found.append((f"{path} line {lineno}", url))
    return _check_seeds(found, report)


def _check_seeds(found: list[tuple[str, str]], report: Report) -> list[str]:
    """The seeds that can be crawled; each other one is said (where it was), counted, skipped."""
    from crawl.canon import CanonError, canonicalize

    out = []
    for where, url in found:
        try:
            canonicalize(url)
        except CanonError as exc:
            report.bad(BadRecord(0, f"{where}: {url[:200]!r}: {exc}"))
            continue
        out.append(url)
    return out


def _cycle(crawl: Crawl, urls: list[str], report: Report) -> bool:
    """Start a new cycle if this run should (``--cycle``), and say what happens
    either way; True when the seeds are to be admitted again (seen or not)."""
    if crawl.stopping:
        return False
    if not crawl.wants_new_cycle(bool(urls)):
        if urls and crawl.opts.cycle == "auto" and len(crawl.seen):
            p = crawl.frontier.pending()
            report.warn(f"continuing the current cycle ({p['queued']:,} URLs queued, {p['in_flight']:,} "
                        f"leased, {crawl.backlog():,} fetched and not parsed yet); a new one starts "
                        "on the first run after it has finished")
        return False
    got = crawl.start_cycle(time.time())
    report.warn(f"cycle {got['cycle']} starts: the seeds are fetched again and {got['due']:,} URL(s) "
                "the freshness model says are due are queued (conditional requests: an unchanged "
                "page costs a 304)")
    return True


def _remember_seeds(crawl: Crawl, urls: list[str], reseed: bool = False) -> None:
    """Seeds define the scope on every run, so they are kept in the crawl dir.

    They are admitted in chunks, so a signal during a long seed list stops it
    within a chunk; the next run admits the rest (admission is idempotent).
    ``reseed`` (a new cycle) admits them even though they were seen before,
    the kept ones too when the run was given none (``--cycle new``).
    """
    path = crawl.cdir.root / "seeds.txt"
    old = path.read_text().split() if path.exists() else []
    new = [u for u in urls if u not in set(old)]
    if new:
        with path.open("a") as f:
            f.write("".join(u + "\n" for u in new))
    crawl.opts.scope.add_seeds(old)
    if reseed and not urls:
        urls = old
    for lo in range(0, len(urls), _SEED_CHUNK):
        if crawl.stopping:
            break
        crawl.seed(urls[lo:lo + _SEED_CHUNK], reseed=reseed)


_SEED_CHUNK = 10_000


class _EarlySignals:
    """Ctrl-C or SIGTERM before the loop's own signal watcher is up (reading the
    config, opening the crawl dir, admitting seeds): the first one makes the run
    stop cleanly, as it would later (nothing leased, exit 0); a second stops at
    once. The loop's watcher takes over while it runs (trio puts this back after)."""

    def __init__(self) -> None:
        self.crawl: Crawl | None = None
        self.got: str | None = None

    def attach(self, crawl: Crawl) -> None:
        self.crawl = crawl
        if self.got:
            crawl.stopping = f"signal {self.got}"

    def __call__(self, signum: int, frame: object) -> None:
        if self.got:
            raise KeyboardInterrupt
        self.got = signal.Signals(signum).name
        if self.crawl is not None:
            self.crawl.stopping = f"signal {self.got}"

