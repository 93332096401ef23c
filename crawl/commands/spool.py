"""crawl spool: feed, drain and inspect the durable queues between stages."""

from __future__ import annotations

import sys
import time
from pathlib import Path

import click
import orjson

from crawl.core import Report, Spool, StreamSink, StreamSource, open_sink, records

from ._common import finish

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
@click.option("-o", "--output", default="-", show_default=True, help="Where to write: '-', a file, or spool:DIR.")
def take_cmd(spool: Path, limit: int, batch: int, follow: bool, output: str) -> None:
    """Move records from SPOOL to stdout (or -o), acknowledging each batch
    only after it was written."""
    sink = open_sink(output)
    done = 0
    with Spool(spool) as sp:
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


@command.command(name="stats")
@spool_dir
def stats_cmd(spool: Path) -> None:
    """Print how many records SPOOL holds (queued and claimed) as JSON."""
    if not spool.exists():
        raise click.UsageError(f"no spool at {spool}")
    with Spool(spool) as sp:
        c = sp.counts()
    click.echo(records.encode(records.make("stats", spool=str(spool), **c)).decode(), nl=False)
