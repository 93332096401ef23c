"""crawl frontier: add URLs, lease them politely, complete them."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import click

from crawl.canon import CanonError
from crawl.core import Report, dumps_pretty, note_stage_leases, open_sink, records, share_dir
from crawl.frontier import Frontier, plural, wait_notice
from crawl.seen import canonical

from ._cluster import route_to_owners
from ._common import check_sink, crawl_dir, dir_option, existing_dir, io_options, stage_io
from ._politeness import DURATION, politeness_from, politeness_options


def _open(path: Path, kw: dict[str, Any], *, create: bool = False) -> Frontier:
    """Only `add` creates a frontier: every other subcommand on a mistyped --dir is a
    usage error, not an empty frontier made on the spot."""
    cdir = crawl_dir(path) if create else existing_dir(
        path, "frontier", hint=f"crawl frontier add --dir {path} (or crawl run) creates it")
    return Frontier(cdir.frontier, politeness_from(kw))


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
@click.option("--cluster", "routed", is_flag=True,
              help="D is a node of a shared crawl: send each URL to its shard's owner (through D's "
                   "outbox and bridge) instead of D's frontier.")
def add_cmd(crawl_dir: Path, input_: str, output: str, strict: bool, stats_file: Path | None, routed: bool,
            **kw: Any) -> None:
    """Queue url/link records (or plain URL lines); print nothing.

    Optional fields: priority (0 high .. 9 low, default 1; lowered by depth
    and many query parameters) and due (unix seconds). A URL already queued,
    leased, or done in this cycle is a no-op; beyond --host-queue-cap it is
    dropped and counted. Unusable URLs are reported on stderr.

    \b
        crawl frontier add --dir D < seeds.txt
        crawl parse --dir D < fetched.ndjson | crawl seen --dir D | crawl frontier add --dir D
        crawl frontier add --dir D --cluster < seeds.txt    # a shared crawl: to the owners
    """
    if routed:
        with stage_io("frontier add", records.URL_KINDS, input_, output, strict, stats_file) as io:
            route_to_owners(crawl_dir, io, _canonical)
        return
    with stage_io("frontier add", records.URL_KINDS, input_, output, strict, stats_file) as io, \
            _open(crawl_dir, kw, create=True) as fr:
        for batch in io.source.batches(5000):
            rejects: list[records.Record] = []
            for key, n in fr.add(_canonical(batch.records, io.report), time.time(), rejects).items():
                io.report.add(key, n)
            for r in rejects:
                io.report.warn(f"rejected {r['input']!r}: {r['error']}")
            batch.ack()


def _canonical(recs: list[records.Record], report: Report) -> list[records.Record]:
    """URLs in canonical form, as the frontier keys them (DESIGN invariant 3); one that
    `crawl canon` refuses (a bad port, another scheme) is reported and not queued.
    Records from `crawl seen` or `crawl parse` carry their fingerprint and pass as they are."""
    out = []
    for rec in recs:
        try:
            out.append(canonical(rec)[0])
        except CanonError as exc:
            report.add("rejected")
            report.warn(f"rejected {rec.get('url')!r}: {exc}")
    return out


@command.command(name="next")
@dir_option()
@click.option("-n", "count", type=int, default=100, show_default=True, help="Leases per batch (many hosts).")
@click.option("--lease", "lease_s", type=DURATION, default=60.0, show_default=True, help="Lease duration.")
@click.option("--wait", is_flag=True, help="Block until a lease is due; end quietly when nothing is queued or leased "
              "(or all that is queued waits on an unreachable robots.txt).")
@click.option("--follow", is_flag=True, help="With --wait: keep leasing until the frontier is empty and idle.")
@click.option("-o", "--output", default="-", show_default=True, callback=check_sink,
              help="'-', a file, or spool:DIR.")
@politeness_options
def next_cmd(crawl_dir: Path, count: int, lease_s: float, wait: bool, follow: bool, output: str, **kw: Any) -> None:
    """Print lease records: lease, url, host, attempt, deadline (+ url fields).

    Expired leases go back to their queues first. Without --wait an empty
    result is not an error: nothing is due right now. With --wait, URLs of
    hosts whose robots.txt cannot be read (re-checked minutes apart) do not
    keep it waiting: when nothing else is queued or leased it ends, says so
    on stderr, and leaves them queued for the next run.

    \b
        crawl frontier next --dir D -n 500 --lease 2m | crawl fetch --dir D
        crawl frontier next --dir D --wait --follow -o spool:D/spool/leases
    """
    with _open(crawl_dir, kw) as fr:
        # Never beside a crawl run (exit 2 naming it), and each lease time noted
        # before the leases are printed, so a run started later keeps them
        # (it returns only the leases of dead runs: crawl/run/resume.py).
        hold = share_dir(crawl_dir)
        try:
            sink = open_sink(output)
            while True:
                now = time.time()
                leases = fr.next(count, lease_s, now)
                if leases:
                    note_stage_leases(crawl_dir, now)
                sink.write(leases)
                if leases and not follow or not (wait or follow):
                    return
                pending = fr.pending()
                if not leases and pending["in_flight"] == 0:
                    if pending["queued"] == 0:
                        return
                    waiting = fr.robots_waiting(time.time(), limit=0)
                    if waiting["urls"] >= pending["queued"]:
                        click.echo(f"crawl frontier next: all that is left waits on an unreachable robots.txt "
                                   f"({plural(waiting['hosts'], 'host')}, {plural(waiting['urls'], 'URL')}, kept "
                                   "queued); run again later to check it again", err=True)
                        return
                due = fr.next_due(time.time())
                # Another process may add or complete at any time: poll at least every 0.5 s.
                time.sleep(0.5 if due is None else min(max(due - time.time(), 0.005), 0.5))
        finally:
            hold.release()


@command.command(name="complete")
@dir_option()
@io_options
@politeness_options
def complete_cmd(crawl_dir: Path, input_: str, output: str, strict: bool, stats_file: Path | None,
                 **kw: Any) -> None:
    """Read fetch records; release hosts; print one event per record.

    Event "frontier.complete" has the disposition (done, retry, backoff,
    dropped, deferred, robots-wait) and the host's next-allowed time. A
    robots-unreachable result keeps its URL queued (robots-wait) until the
    host's robots.txt is checked again; stderr says when a host starts and
    stops waiting, with the URLs it holds. An unknown or expired lease or a
    malformed result prints an event with "error", warns on stderr and
    changes nothing.

    \b
        crawl fetch --dir D < leases.ndjson | crawl frontier complete --dir D >> events.ndjson
    """
    with _open(crawl_dir, kw) as fr, \
            stage_io("frontier complete", frozenset({"fetch"}), input_, output, strict, stats_file) as io:
        for batch in io.source.batches(1000):
            now = time.time()
            events = fr.complete(batch.records, now)
            io.sink.write(events)
            for e in events:
                io.report.add(e.get("disposition") or e["event"].removeprefix("frontier."))
                if "error" in e:
                    io.report.warn(f"{e['event']}: {e.get('url')}: {e['error']}")
                elif "robots_wait" in e or "robots_resumed" in e:
                    text = wait_notice(e, now)
                    if text:
                        io.report.warn(text)
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
        from ._human import number, seconds, size

        for key, value in s.items():
            shown = size(value) if "bytes" in key else seconds(value) if key.endswith("_seconds") \
                else number(value)
            click.echo(f"{key.replace('_', ' '):>20}  {shown}")


@command.command(name="dump")
@dir_option()
@click.option("--host", required=True,
              help="Host as in lease records (host[:port]); the host alone finds its one port.")
@click.option("--limit", type=click.IntRange(min=0), default=1000, show_default=True,
              help="Queue entries (and delayed URLs) to show.")
@click.option("--json", "as_json", is_flag=True, help="The raw record (unix times) instead of a view.")
def dump_cmd(crawl_dir: Path, host: str, limit: int, as_json: bool) -> None:
    """Show one host's state (next-allowed, backoff, parking, IP), queue and lease.

    The first question when a URL is not fetched: is its host parked, backed
    off, waiting for its IP, or busy with a lease?

    \b
        crawl frontier dump --dir D --host example.com:8080 --limit 20
        crawl frontier dump --dir D --host example.com --json | jq .queue
    """
    now = time.time()
    with _open(crawl_dir, {}) as fr:
        d = fr.dump(host, now, limit)
    if as_json:
        click.echo(dumps_pretty(d))
        return
    _show_dump(d, now)


def _robots_wait(w: dict[str, Any] | None, now: float) -> str:
    from ._human import iso

    if not w:
        return "not waiting"
    why = w.get("error") or (f"status {w['status']}" if w.get("status") else "unreachable")
    return (f"unreachable since {iso(w.get('since'), now)} ({why}); next check "
            f"{iso(w.get('next_check'), now)}")


def _show_dump(d: dict[str, Any], now: float) -> None:
    from ._human import echo_rows, iso, number, seconds

    if not d.get("known"):
        click.echo(f"{d['host']}: not in this frontier (never added, or another port?)")
        return
    lease = d.get("lease")
    echo_rows([
        ("host", d["host"]),
        ("ready now", number(d.get("ready_now"))),
        ("next allowed", iso(d["next_allowed"], now) if (d.get("next_allowed") or 0) > now else "now"),
        ("parked until", iso(d.get("parked_until"), now) if d.get("parked_until") else "not parked"),
        ("scheduled", d.get("scheduled") or "no"),
        ("queued URLs", number(d.get("queued"))),
        ("backoff level", number(d.get("backoff_level"))),
        ("failures in a row", number(d.get("consecutive_failures"))),
        ("robots crawl-delay", seconds(d.get("crawl_delay"))),
        ("last response time", seconds(d.get("last_response_time"))),
        ("address", d.get("ip") or "-"),
        ("robots.txt", _robots_wait(d.get("robots_wait"), now)),
        ("in flight", f"{lease['url']} (lease {lease['lease']}, attempt {lease['attempt']}, leased "
                      f"{iso(lease['leased_at'], now)}, deadline {iso(lease['deadline'], now)})"
         if lease else "nothing"),
    ])
    queue, delayed = d.get("queue") or [], d.get("delayed") or []
    click.echo(f"queue ({len(queue)} shown, in lease order):" if queue else "queue: empty")
    for e in queue:
        click.echo(f"  p{e['priority']}  {e['url']}  attempts {e['attempts']}, failures {e['failures']}")
    if delayed:
        click.echo(f"delayed ({len(delayed)} shown):")
        for e in delayed:
            click.echo(f"  p{e['priority']}  {e['url']}  due {iso(e['due'], now)}, failures {e['failures']}")


@command.command(name="new-cycle")
@dir_option()
def new_cycle_cmd(crawl_dir: Path) -> None:
    """Start a new crawl cycle: URLs done or dropped earlier may be added again.

    Within one cycle a completed URL is never leased again; `crawl recrawl`
    output is added after a new cycle begins.
    """
    with _open(crawl_dir, {}) as fr:
        click.echo(f"cycle {fr.new_cycle()}", err=True)
