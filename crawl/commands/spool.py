"""crawl spool: feed, drain and inspect the durable queues between stages."""

from __future__ import annotations

import sys
import time
from pathlib import Path

import click
import orjson

from crawl.core import Report, Spool, StreamSink, StreamSource, existing_spool, open_sink, records

from ._common import check_sink, finish

spool_dir = click.argument("spool", type=click.Path(file_okay=False, path_type=Path))


@click.group(name="spool")
def command() -> None:
    """Feed, drain and inspect spools: LMDB-backed durable queues.

    Any stage reads a spool with `-i spool:DIR` and writes one with
    `-o spool:DIR`. A record read from a spool is acknowledged only after
    the stage has written its output, so a stage killed mid-batch re-reads
    what it had not finished (at-least-once; only that batch can repeat).

    \b
        crawl spool put D/spool/urls < seeds.txt
        crawl seen --dir D -i spool:D/spool/urls -o spool:D/spool/new
        crawl spool stats D/spool/new
        crawl spool peek D/spool/new -n 5     # look without taking
    """


@command.command(name="put")
@spool_dir
@click.option("--strict", is_flag=True, help="Exit 3 if any input line was malformed.")
def put_cmd(spool: Path, strict: bool) -> None:
    """Append records from stdin to SPOOL (created if missing).

    Plain URL lines are accepted and stored as url records. Each batch is
    committed durably before the next is read.
    """
    report = Report("spool put")
    with Spool(spool) as sp:
        for batch in StreamSource(sys.stdin.buffer, None, report).batches(1000):
            report.add("in", sp.put(batch.records))
    finish(report, strict, None)


@command.command(name="take")
@spool_dir
@click.option("-n", "--max", "limit", type=int, default=0, help="Stop after N records (0: all).")
@click.option("--batch", type=int, default=500, show_default=True, help="Records per claim.")
@click.option("--follow", is_flag=True, help="Keep waiting for new records instead of ending when empty.")
@click.option("-o", "--output", default="-", show_default=True, callback=check_sink,
              help="Where to write: '-', a file, or spool:DIR.")
def take_cmd(spool: Path, limit: int, batch: int, follow: bool, output: str) -> None:
    """Move records from SPOOL to stdout (or -o), acknowledging each batch
    only after it was written.

    This consumes them: to look at a spool without emptying it, use
    `crawl spool peek`. SPOOL must exist (a mistyped path is an error,
    never a new empty spool).
    """
    with existing_spool(spool) as sp:
        sink = open_sink(output)
        done = 0
        try:
            while True:
                want = batch if not limit else min(batch, limit - done)
                if want <= 0:
                    break
                claimed = sp.claim(want)
                if not claimed:
                    if not follow:
                        break
                    time.sleep(0.2)
                    continue
                if isinstance(sink, StreamSink):
                    sink.stream.write(b"".join(d + b"\n" for _, d in claimed))
                    sink.stream.flush()
                else:
                    sink.write([orjson.loads(d) for _, d in claimed])
                sp.ack(k for k, _ in claimed)
                done += len(claimed)
        except KeyboardInterrupt:
            sp.release()
            raise


@command.command(name="peek")
@spool_dir
@click.option("-n", "--max", "limit", type=click.IntRange(min=0), default=10, show_default=True,
              help="Records to show (0: all).")
@click.option("--claimed", is_flag=True, help="Also show records a consumer has claimed but not acknowledged.")
def peek_cmd(spool: Path, limit: int, claimed: bool) -> None:
    """Print the first records of SPOOL, oldest first, without taking them.

    Reads one snapshot: nothing is claimed, acknowledged or moved, so a
    consumer running at the same time is not disturbed, and the records
    are still there for it.

    \b
        crawl spool peek D/spool/new | jq -c .url
        crawl spool peek D/spool/fetched -n 0 --claimed | wc -l
    """
    with existing_spool(spool) as sp:
        out = sys.stdout.buffer
        for data in sp.peek(limit, claimed=claimed):
            out.write(data + b"\n")
        out.flush()


@command.command(name="stats")
@spool_dir
def stats_cmd(spool: Path) -> None:
    """Print how many records SPOOL holds (queued and claimed) as JSON."""
    with existing_spool(spool) as sp:
        c = sp.counts()
    click.echo(records.encode(records.make("stats", spool=str(spool), **c)).decode(), nl=False)
