"""Options and plumbing shared by every command (the thin layer's thin layer)."""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import click

from crawl.core import CrawlDir, ExitStatus, Report, Sink, Source, open_sink, open_source, records


def dir_option(required: bool = True) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """``--dir``: the crawl directory (or CRAWL_DIR)."""
    return click.option(
        "--dir",
        "crawl_dir",
        envvar="CRAWL_DIR",
        required=required,
        type=click.Path(file_okay=False, path_type=Path),
        help="Crawl directory holding all state (env: CRAWL_DIR).",
    )


def io_options(f: Callable[..., Any]) -> Callable[..., Any]:
    """``-i``/``-o``/``--strict``/``--stats``: where records come from and go."""
    opts = [
        click.option(
            "-i", "--input", "input_", default="-", show_default=True, metavar="SRC",
            help="Read records from SRC: '-' (stdin), a file, or spool:DIR.",
        ),
        click.option(
            "-o", "--output", default="-", show_default=True, metavar="DST",
            help="Write records to DST: '-' (stdout), a file (appended), or spool:DIR.",
        ),
        click.option(
            "--strict", is_flag=True,
            help="Exit with status 3 if any input line was malformed.",
        ),
        click.option(
            "--stats", "stats_file", type=click.Path(dir_okay=False, path_type=Path),
            help="Also write the summary record (JSON) to this file.",
        ),
    ]
    for opt in reversed(opts):
        f = opt(f)
    return f


@dataclass
class StageIO:
    source: Source
    sink: Sink
    report: Report


@contextlib.contextmanager
def stage_io(
    command: str,
    accept: frozenset[str] | None,
    input_: str,
    output: str,
    strict: bool,
    stats_file: Path | None,
) -> Iterator[StageIO]:
    """Open a command's source and sink; report and exit status on the way out."""
    report = Report(command)
    source = open_source(input_, accept, report)
    sink = open_sink(output)
    try:
        yield StageIO(source, sink, report)
    finally:
        finish(report, strict, stats_file)


def finish(report: Report, strict: bool, stats_file: Path | None) -> None:
    """Print the summary where it is wanted; exit 3 under --strict with bad input."""
    summary = report.summary()
    if stats_file is not None:
        stats_file.write_bytes(records.encode(summary))
    bad = report.counts.get("bad_records", 0)
    if bad or sys.stderr.isatty():
        counts = ", ".join(f"{k.replace('_', ' ')} {v}" for k, v in report.counts.items())
        report.warn(f"summary: {counts}")
    if strict and bad:
        report.warn(f"--strict: {bad} malformed record(s); exiting with status 3")
        sys.exit(ExitStatus.BAD_INPUT)


def crawl_dir(path: Path) -> CrawlDir:
    path.mkdir(parents=True, exist_ok=True)
    return CrawlDir(path)
