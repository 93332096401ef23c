"""Options and plumbing shared by every command (the thin layer's thin layer)."""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import click

from crawl.core import (
    CrawlDir,
    ExitStatus,
    Report,
    Sink,
    Source,
    StateError,
    UsageError,
    open_sink,
    open_source,
    parse_duration,
    records,
    spool_exists,
)


class Duration(click.ParamType):
    """A time flag: the one grammar of :func:`crawl.core.parse_duration` (30, 0.5s, 5m, 1h30m, 2d)."""

    name = "duration"

    def __init__(self, positive: bool = False) -> None:
        self.positive = positive

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> float:
        try:
            return parse_duration(value, positive=self.positive)
        except ValueError as exc:
            self.fail(str(exc), param, ctx)


DURATION = Duration()
POSITIVE_DURATION = Duration(positive=True)


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


def check_source(ctx: click.Context | None, param: click.Parameter | None, spec: str) -> str:
    """``-i``: checked before the command opens anything, so a mistyped spool or a
    directory given without ``spool:`` fails (exit 2) before any state is created."""
    if spec.startswith("spool:"):
        if not spool_exists(Path(spec[len("spool:"):])):
            raise click.BadParameter(f"no spool at {spec[len('spool:'):]} (crawl spool put, or a "
                                     "stage's -o spool:DIR, creates one)", ctx, param)
    elif spec != "-" and Path(spec).is_dir():
        raise click.BadParameter(f"{spec} is a directory: read a spool with spool:{spec}", ctx, param)
    return spec


def check_sink(ctx: click.Context | None, param: click.Parameter | None, spec: str) -> str:
    """``-o``: a directory is refused unless named ``spool:DIR`` (it used to become one)."""
    if spec != "-" and not spec.startswith("spool:") and Path(spec).is_dir():
        raise click.BadParameter(f"{spec} is a directory: write a spool with spool:{spec}, or give "
                                 "a file name", ctx, param)
    return spec


def io_options(f: Callable[..., Any]) -> Callable[..., Any]:
    """``-i``/``-o``/``--strict``/``--stats``: where records come from and go."""
    opts = [
        click.option(
            "-i", "--input", "input_", default="-", show_default=True, metavar="SRC",
            callback=check_source,
            help="Read records from SRC: '-' (stdin), a file, or spool:DIR (an existing spool).",
        ),
        click.option(
            "-o", "--output", default="-", show_default=True, metavar="DST", callback=check_sink,
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
    """The crawl directory of a command that writes state: created if missing."""
    try:
        path.mkdir(parents=True, exist_ok=True)
    except FileExistsError:
        raise StateError(f"--dir {path} is a file, not a directory: give a directory for the "
                         "crawl's state") from None
    except OSError as exc:
        raise StateError(f"cannot create the crawl directory {path}: {exc.strerror}; give --dir "
                         "a path you may write to") from None
    return CrawlDir(path)


def existing_dir(path: Path, *needs: str, hint: str = "") -> CrawlDir:
    """The crawl directory of a command that only reads (or continues) state.

    A mistyped --dir must not leave an empty crawl directory behind and
    answer "nothing there" (exit 0): it is a usage error, and nothing is
    created. ``needs`` are the parts (``frontier``, ``seen``, ...) that must
    be there already; ``hint`` says which command makes them.
    """
    if not path.is_dir():
        raise UsageError(f"no crawl directory at {path}: check --dir (or CRAWL_DIR)"
                         + (f"; {hint}" if hint else ""))
    cdir = CrawlDir(path)
    for part in needs:
        if not (cdir.sub(part) / "data.mdb").is_file():
            raise UsageError(f"{path} has no {part} yet: check --dir (or CRAWL_DIR)"
                             + (f"; {hint}" if hint else ""))
    return cdir
