"""crawl frontier: add URLs, lease them politely, complete them."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import click

from crawl.core import dumps_pretty, open_sink, records
from crawl.frontier import Frontier

from ._common import crawl_dir, dir_option, io_options, stage_io
from ._politeness import DURATION, politeness_from, politeness_options


def _open(path: Path, kw: dict[str, Any]) -> Frontier:
    return Frontier(crawl_dir(path).frontier, politeness_from(kw))


@click.group(name="frontier")
def command() -> None:
    """The durable frontier: per-host queues, a host schedule, leases.

    URLs wait in one queue per host (highest priority first, then FIFO).
    `next` leases at most one URL per host, never before the host's
    next-allowed time and at most --per-ip per address; `complete` reads
    fetch results and sets that time: now + max(Crawl-delay, --delay,
    k x last response time), or a backoff after 429/503 and errors. Every
    call commits to disk before it prints, so a crash loses nothing: a lease
    not completed before its deadline returns to its queue by itself.

    \b
        crawl frontier add --dir D < seeds.txt
        crawl frontier next --dir D -n 100 | crawl fetch --dir D \\
          | crawl frontier complete --dir D
        crawl frontier stats --dir D
    """


@command.command(name="add")
@dir_option()
@io_options
@politeness_options
def add_cmd(crawl_dir: Path, input_: str, output: str, strict: bool, stats_file: Path | None, **kw: Any) -> None:
    """Queue url/link records (or plain URL lines); print nothing.

    Optional fields: priority (0 high .. 9 low, default 1; lowered by depth
    and many query parameters) and due (unix seconds). A URL already queued,
    leased, or done in this cycle is a no-op; beyond --host-queue-cap it is
    dropped and counted. Unusable URLs are reported on stderr.

    \b
        crawl frontier add --dir D < seeds.txt
        crawl parse --dir D < fetched.ndjson | crawl seen --dir D | crawl frontier add --dir D
    """
    with stage_io("frontier add", records.URL_KINDS, input_, output, strict, stats_file) as io, \
            _open(crawl_dir, kw) as fr:
        for batch in io.source.batches(5000):
            rejects: list[records.Record] = []
            for key, n in fr.add(batch.records, time.time(), rejects).items():
                io.report.add(key, n)
            for r in rejects:
                io.report.warn(f"rejected {r['input']!r}: {r['error']}")
            batch.ack()


@command.command(name="next")
@dir_option()
@click.option("-n", "count", type=int, default=100, show_default=True, help="Leases per batch (many hosts).")
@click.option("--lease", "lease_s", type=DURATION, default=60.0, show_default=True, help="Lease duration.")
@click.option("--wait", is_flag=True, help="Block until a lease is due; end quietly when nothing is queued or leased.")
@click.option("--follow", is_flag=True, help="With --wait: keep leasing until the frontier is empty and idle.")
@click.option("-o", "--output", default="-", show_default=True, help="'-', a file, or spool:DIR.")
@politeness_options
def next_cmd(crawl_dir: Path, count: int, lease_s: float, wait: bool, follow: bool, output: str, **kw: Any) -> None:
    """Print lease records: lease, url, host, attempt, deadline (+ url fields).

    Expired leases go back to their queues first. Without --wait an empty
    result is not an error: nothing is due right now.

    \b
        crawl frontier next --dir D -n 500 --lease 2m | crawl fetch --dir D
        crawl frontier next --dir D --wait --follow -o spool:D/spool/leases
    """
    sink = open_sink(output)
    with _open(crawl_dir, kw) as fr:
        while True:
            leases = fr.next(count, lease_s, time.time())
            sink.write(leases)
            if leases and not follow or not (wait or follow):
                return
            pending = fr.pending()
            if not leases and pending["queued"] == 0 and pending["in_flight"] == 0:
                return
            due = fr.next_due(time.time())
            # Another process may add or complete at any time: poll at least every 0.5 s.
            time.sleep(0.5 if due is None else min(max(due - time.time(), 0.005), 0.5))


@command.command(name="complete")
@dir_option()
@io_options
@politeness_options
def complete_cmd(crawl_dir: Path, input_: str, output: str, strict: bool, stats_file: Path | None,
                 **kw: Any) -> None:
    """Read fetch records; release hosts; print one event per record.

    Event "frontier.complete" has the disposition (done, retry, backoff,
    dropped) and the host's next-allowed time. An unknown or expired lease
    or a malformed result prints an event with "error", warns on stderr and
    changes nothing.

    \b
        crawl fetch --dir D < leases.ndjson | crawl frontier complete --dir D >> events.ndjson
    """
    with stage_io("frontier complete", frozenset({"fetch"}), input_, output, strict, stats_file) as io, \
            _open(crawl_dir, kw) as fr:
        for batch in io.source.batches(1000):
            events = fr.complete(batch.records, time.time())
            io.sink.write(events)
            for e in events:
                io.report.add(e.get("disposition") or e["event"].removeprefix("frontier."))
                if "error" in e:
                    io.report.warn(f"{e['event']}: {e.get('url')}: {e['error']}")
            batch.ack()


@command.command(name="requeue-expired")
@dir_option()
def requeue_cmd(crawl_dir: Path) -> None:
    """Return URLs of leases past their deadline to their queues (next does it too)."""
    with _open(crawl_dir, {}) as fr:
        click.echo(f"requeued {fr.requeue_expired(time.time())} expired lease(s)", err=True)


@command.command(name="stats")
@dir_option()
@click.option("--json", "as_json", is_flag=True, help="One JSON object instead of a table.")
def stats_cmd(crawl_dir: Path, as_json: bool) -> None:
    """Queued URLs, hosts, hosts ready now, in flight, parked, backlog, idle fraction.

    idle_fraction is the share of time (seen by `next` calls) when no host
    was ready: near 1, the crawl is waiting on politeness and needs more hosts.

    \b
        crawl frontier stats --dir D
        crawl frontier stats --dir D --json | jq .hosts_ready
    """
    with _open(crawl_dir, {}) as fr:
        s = fr.stats(time.time())
    if as_json:
        click.echo(dumps_pretty(s))
    else:
        for key, value in s.items():
            click.echo(f"{key.replace('_', ' '):>20}  {value}")


@command.command(name="dump")
@dir_option()
@click.option("--host", required=True, help="Host as in lease records: lowercase host[:port].")
@click.option("--limit", type=int, default=1000, show_default=True, help="Queue entries to show.")
def dump_cmd(crawl_dir: Path, host: str, limit: int) -> None:
    """Show one host's state (next-allowed, backoff, parking, IP), queue and lease.

    The first question when a URL is not fetched: is its host parked, backed
    off, waiting for its IP, or busy with a lease?

    \b
        crawl frontier dump --dir D --host example.com:8080 --limit 20
    """
    with _open(crawl_dir, {}) as fr:
        click.echo(dumps_pretty(fr.dump(host, time.time(), limit)))


@command.command(name="new-cycle")
@dir_option()
def new_cycle_cmd(crawl_dir: Path) -> None:
    """Start a new crawl cycle: URLs done or dropped earlier may be added again.

    Within one cycle a completed URL is never leased again; `crawl recrawl`
    output is added after a new cycle begins.
    """
    with _open(crawl_dir, {}) as fr:
        click.echo(f"cycle {fr.new_cycle()}", err=True)
