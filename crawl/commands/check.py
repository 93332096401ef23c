"""crawl check: verify a crawl directory and repair what can be repaired (an fsck)."""

from __future__ import annotations

import sys
from pathlib import Path

import click

from crawl.core import ExitStatus, UsageError
from crawl.run import CheckReport, check_dir, check_ndjson

from ._common import dir_option

_MARK = {"ok": "ok", "notice": "note"}


@click.command(name="check")
@dir_option()
@click.option("--repair", is_flag=True,
              help="Repair what was found: queue lost pages again, cut torn tails, set damaged "
                   "LMDB environments aside (never deletes what can still be read). Refused "
                   "while a crawl run uses the directory.")
@click.option("--json", "as_json", is_flag=True,
              help="One JSON record per part checked, then a summary record, on stdout.")
@click.option("-q", "--quiet", is_flag=True, help="Print only what is wrong, and the summary.")
def command(crawl_dir: Path, repair: bool, as_json: bool, quiet: bool) -> None:
    """Verify a crawl directory, and with --repair repair it (what operators expect of fsck).

    Checks every LMDB environment with py-lmdb's offline verifier (plain
    reads, never the memory map: a damaged file is reported, not crashed
    on), every WARC file record by record, the CDXJ sidecars and index
    against the records, and the crawl log frame by frame; then every page
    the log says was stored (its newest copy) against the WARC files and the
    frontier. A page the frontier has as done whose record is gone is lost:
    --repair queues it again (validators dropped, so the next fetch is
    whole) and the next `crawl run` fetches it.

    --repair also cuts a torn WARC or log tail off (a crash mid-write; the
    sidecar lines past it go too, index.cdxj is rebuilt), rewrites a log file
    with overwritten frames from its whole ones (the original is kept as
    .damaged), and moves a damaged LMDB environment aside as
    NAME.damaged-TIMESTAMP: the next run starts that part afresh (a damaged
    frontier restarts from the seeds in D/seeds.txt, with a new seen set).

    Read-only without --repair, so safe while a crawl runs (a file being
    written may show a torn tail). `crawl run` itself checks the tail of the
    WARC files it last wrote when it resumes.

    \b
        crawl check --dir D                 # what is wrong, and what --repair would do
        crawl check --dir D --repair && crawl run --dir D
        crawl check --dir D --json | jq 'select(.status != "ok")'

    Exit status: 0 nothing wrong (notes such as a torn tail after a crash
    do not count), or everything found was repaired; 1 problems remain
    (run --repair, or restore from a backup); 2 usage error.
    """
    if not crawl_dir.is_dir():
        raise UsageError(f"no crawl directory at {crawl_dir}")
    rep = check_dir(crawl_dir, repair=repair)
    if as_json:
        sys.stdout.buffer.write(check_ndjson(rep))
        sys.stdout.flush()
    else:
        _print(rep, crawl_dir, quiet)
    if rep.problems:
        sys.exit(ExitStatus.ERROR)


def _print(rep: CheckReport, crawl_dir: Path, quiet: bool) -> None:
    out = []
    width = max((len(f.path) for f in rep.findings), default=0)
    for f in rep.findings:
        if quiet and f.status == "ok":
            continue
        mark = _MARK.get(f.status, "FIXED" if f.repaired else f.status.upper())
        line = f"{mark:>7}  {f.part:<5}  {f.path:<{width}}  {f.detail}"
        if f.repair and f.status != "ok":
            line += f"\n{'':>7}  {'':<5}  {'':<{width}}  {'repaired: ' if f.repaired else '--repair: '}{f.repair}"
        out.append(line)
    if rep.problems:
        tail = f"{rep.problems} problem(s) left"
        tail += "" if rep.repair else f": `crawl check --dir {crawl_dir} --repair` repairs them"
    elif rep.repaired:
        tail = f"{rep.repaired} repaired; the directory is ready for `crawl run`"
    else:
        tail = "nothing wrong"
    out.append(f"crawl check: {crawl_dir}: {tail} ({rep.seconds:.1f} s)")
    click.echo("\n".join(out))
