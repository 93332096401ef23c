"""crawl stats: the state of a crawl directory, also while a crawl runs."""

from __future__ import annotations

import sys
import time
from typing import Any

import click

from crawl.core import records
from crawl.run import gather, outcome_counts

from ._common import dir_option
from ._human import iso, stat_row


@click.command(name="stats")
@dir_option()
@click.option("--json", "as_json", is_flag=True, help="One JSON object on stdout.")
@click.option("--outcomes", is_flag=True, help="Also count fetch outcomes from the crawl log (reads the whole log).")
@click.option("--format", "fmt", type=click.Choice(["table", "json", "openmetrics"]), default="table",
              show_default=True,
              help="openmetrics: per-crawl and per-host gauges in the Prometheus text format, for "
                   "node_exporter's textfile collector (README, Monitoring); json is --json.")
def command(crawl_dir, as_json: bool, outcomes: bool, fmt: str) -> None:
    """Show what a crawl directory holds and how its crawl is going.

    Frontier (queued, hosts ready, in flight, parked, backlog, idle
    fraction), the seen set, WARC and log sizes, and the latest progress of
    a running or finished `crawl run`, with whether it is alive: running
    (it holds the crawl directory's lock; on another host: its heartbeat
    is fresh), finished, or stopped (killed: the process is gone), in
    which case no rate or time left is shown. --json has run.alive and
    run.state; openmetrics has crawl_run_alive. Hosts whose robots.txt answers 5xx
    or times out are listed with the URLs they hold (queued, not dropped)
    and when robots.txt is checked again. Safe to run while a crawl is
    going: it only reads snapshots.

    \b
        crawl stats --dir D
        crawl stats --dir D --json | jq .frontier.backlog
        crawl stats --dir D --format openmetrics > crawl.prom.tmp && mv crawl.prom.tmp crawl.prom
    """
    if not crawl_dir.is_dir():
        raise click.UsageError(f"no crawl directory at {crawl_dir}: check --dir (or CRAWL_DIR)")
    if fmt == "openmetrics":
        from crawl.report import openmetrics

        click.echo(openmetrics(crawl_dir, time.time()), nl=False)
        return
    as_json = as_json or fmt == "json"
    st = gather(crawl_dir, time.time())
    if outcomes:
        st["outcomes"] = outcome_counts(crawl_dir)
    if as_json:
        click.echo(records.encode(st).decode(), nl=False)
        return
    from rich.console import Console
    from rich.table import Table
    from rich.text import Text

    from crawl.frontier import describe_wait

    table = Table(title=f"crawl {crawl_dir}", show_header=False)
    now = time.time()
    for section, value in st.items():
        if isinstance(value, dict) and section != "robots_waiting":
            if section == "run":
                value = _run_rows(table, value, now)
            for k, v in value.items():
                if not isinstance(v, dict | list) and (row := stat_row(section, str(k), v, now)):
                    table.add_row(*row)  # named figures, ISO times: --json keeps the raw fields
    waiting = st.get("robots_waiting") or {}
    for w in waiting.get("list", []):
        table.add_row("robots wait", w["host"], Text(describe_wait(w, now).split(": ", 1)[1]))
    if waiting.get("hosts", 0) > len(waiting.get("list", [])):
        table.add_row("robots wait", "...", f"{waiting['hosts'] - len(waiting['list']):,} more hosts (--json)")
    # Not a terminal (a pipe, cron mail): no wrap at 80 columns, so each row stays one line for grep.
    Console(width=None if sys.stdout.isatty() else 1000).print(table)


# Who wrote the run's figures: shown first, in words, not as figures.
_WHO = ("alive", "state", "state_text", "pid", "host", "cmd", "heartbeat", "started", "ended")
# Figures that are about a live run only: a killed or finished run has no rate and no ETA.
_LIVE_ONLY = ("rate", "avg_rate", "time_left", "pages_left", "stopping")


def _run_rows(table: Any, run: dict[str, Any], now: float) -> dict[str, Any]:
    """Add the run's state (running, finished, stopped: the process is gone) and who
    it is; return the figures left to show as rows."""
    table.add_row("run", "state", str(run.get("state_text") or "-"))
    if run.get("cmd"):
        table.add_row("run", "command", str(run["cmd"]))
    if run.get("started"):
        table.add_row("run", "started", iso(run["started"], now))
    live = bool(run.get("alive"))
    return {k: v for k, v in run.items() if k not in _WHO and (live or k not in _LIVE_ONLY)}
