"""crawl seen: pass through only URLs never seen before."""

from __future__ import annotations

import sys
from pathlib import Path

import click

from crawl.core import dumps_pretty, records, run_stage
from crawl.seen import SeenSet

from . import _common
from ._common import dir_option, io_options, stage_io


@click.command(name="seen")
@dir_option()
@io_options
@click.option("--expected", type=click.IntRange(min=1), default=1_000_000, show_default=True,
              help="URLs the Bloom filter is sized for (it grows 2x when outgrown).")
@click.option("--fp-rate", type=click.FloatRange(0.001, 0.5), default=0.01, show_default=True,
              help="Target false-positive rate of the Bloom filter at --expected URLs "
                   "(about 12 bits per URL at 1%, 24 at 0.1%).")
@click.option("--batch", type=click.IntRange(min=1), default=5000, show_default=True,
              help="Records per LMDB transaction.")
@click.option("--fetched", is_flag=True,
              help="Read fetch records instead: mark their URLs fetched in --cycle and pass "
                   "them on, adding refetch=true to a URL already fetched in that cycle.")
@click.option("--cycle", default="default", show_default=True, metavar="NAME",
              help="Crawl cycle whose fetched-URL bitmap --fetched and --summary use.")
@click.option("--summary", is_flag=True,
              help="Print the seen set's figures (URLs, filter size and expected "
                   "false-positive rate, fetched/unfetched in --cycle) and exit.")
def command(crawl_dir: Path, input_: str, output: str, strict: bool, stats_file: Path | None,
            expected: int, fp_rate: float, batch: int, fetched: bool, cycle: str,
            summary: bool) -> None:
    """Pass through only URLs never seen before, marking them seen.

    Reads url/link records or plain URL lines. Each URL is canonicalised
    (the rules of `crawl canon`; a record that already carries `fp` and a
    matching `canon_v` is trusted) and checked against two layers: an
    in-memory Bloom filter that answers "definitely new" and an exact LMDB
    set of 64-bit fingerprints that confirms its "maybe". A new URL is
    written to the set (one fsynced transaction per batch) before it is
    emitted, with its canonical url, fp, surt, host and canon_v; the first
    occurrence in the input wins and order is kept. A URL that cannot be
    canonicalised comes out as a `reject` record. Other record kinds pass
    through untouched.

    The filter is saved in DIR/seen/bloom.bin on exit and rebuilt from the
    exact set when it is missing or stale, so losing it costs time, never
    correctness.

    \b
    Examples:
        cat seeds.txt | crawl seen --dir D | crawl frontier add --dir D
        crawl parse --dir D < fetched.ndjson | crawl seen --dir D -o spool:D/spool/new
        crawl seen --dir D --fetched --cycle 2026-11-29 < fetched.ndjson > /dev/null
        crawl seen --dir D --summary --cycle 2026-11-29
    """
    if summary:  # only reads: a mistyped --dir must not become an empty seen set
        cdir = _common.existing_dir(crawl_dir, "seen", hint=f"crawl seen --dir {crawl_dir} creates it")
    else:
        cdir = _common.crawl_dir(crawl_dir)
    with SeenSet(cdir.seen, expected=expected, fp_rate=fp_rate) as seen:
        if summary:
            click.echo(dumps_pretty(seen.stats(cycle)))
            return
        accept = frozenset({"fetch"}) if fetched else None
        with stage_io("seen", accept, input_, output, strict, stats_file) as sio:

            def mark(recs: list[records.Record]) -> list[records.Record]:
                fps = []
                from crawl.canon import CanonError, canonicalize

                for r in recs:
                    try:
                        fps.append(canonicalize(r["url"]).fp)
                    except CanonError:
                        fps.append(-1)
                firsts = seen.mark_fetched([f for f in fps if f >= 0], cycle)
                it = iter(firsts)
                out = []
                for r, f in zip(recs, fps, strict=True):
                    if f >= 0 and not next(it):
                        sio.report.add("refetched_in_cycle")
                        r = records.derive(r, r["kind"], refetch=True)
                    out.append(r)
                return out

            try:
                run_stage(sio.source, sio.sink, mark if fetched else seen.unseen, sio.report,
                          batch=batch)
            finally:
                for key, n in seen.counts.items():
                    sio.report.add(key, n)
    sys.stdout.flush()
