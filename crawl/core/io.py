"""Where records come from and go to: NDJSON streams and spools.

A :class:`Source` yields :class:`Batch` es of checked records; a batch is
acknowledged only after the stage has written its output durably, which is
what makes a spool-to-spool stage at-least-once. Over stdin the ack is a
no-op: a pipe cannot be re-read.

Malformed lines are reported through :class:`Report` (one message on stderr
with the line number, counted in the summary) and skipped; with ``strict``
the command exits non-zero at the end. Nothing malformed ever reaches a
stage function.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any, Protocol

import orjson

from . import records
from .errors import BadRecord, UsageError
from .lifeline import Lifeline, hold_lifeline
from .records import Record
from .spool import Spool

MAX_LINE = 16 << 20  # a record longer than 16 MiB is malformed, not buffered forever
_MAX_MESSAGES = 200


@dataclass
class Report:
    """Counts for a command's summary, and the voice for bad-input messages."""

    command: str
    err: IO[str] = field(default_factory=lambda: sys.stderr)
    counts: dict[str, int] = field(default_factory=dict)
    messages: int = 0

    def add(self, key: str, n: int = 1) -> None:
        self.counts[key] = self.counts.get(key, 0) + n

    def bad(self, exc: BadRecord) -> None:
        self.add("bad_records")
        self.messages += 1
        if self.messages <= _MAX_MESSAGES:
            self.err.write(f"crawl {self.command}: {exc}\n")
        elif self.messages == _MAX_MESSAGES + 1:
            self.err.write(f"crawl {self.command}: more bad lines; only counting from now on\n")
        self.err.flush()

    def warn(self, text: str) -> None:
        self.err.write(f"crawl {self.command}: {text}\n")
        self.err.flush()

    def summary(self) -> Record:
        return records.make("stats", command=self.command, **self.counts)


@dataclass
class Batch:
    records: list[Record]
    ack: Callable[[], None] = lambda: None


class Source(Protocol):
    def batches(self, size: int) -> Iterator[Batch]: ...


class Sink(Protocol):
    def write(self, recs: list[Record]) -> None: ...


class StreamSource:
    """NDJSON (or plain URL lines) from a binary stream.

    Reads whatever is available (``read1``), so records flow through a pipe
    as they arrive instead of waiting for a full buffer.
    """

    def __init__(
        self, stream: IO[bytes], accept: frozenset[str] | None, report: Report
    ) -> None:
        self.stream = stream
        self.accept = accept
        self.report = report
        self.lineno = 0

    def _decode_into(self, line: bytes, out: list[Record]) -> None:
        self.lineno += 1
        if line.endswith(b"\r"):
            line = line[:-1]
        try:
            out.append(records.decode(line, self.accept, self.lineno))
        except BadRecord as exc:
            if line.strip():
                self.report.bad(exc)
            else:
                self.report.add("blank_lines")

    def _overlong(self) -> None:
        self.lineno += 1
        self.report.bad(BadRecord(self.lineno, f"line longer than {MAX_LINE} bytes"))

    def batches(self, size: int = 1000) -> Iterator[Batch]:
        """Records in batches of at most ``size``, as the lines arrive.

        Only each new chunk is split; a line that spans many reads is kept in
        pieces and joined once (re-splitting the whole pending line on every
        read made one long line cost O(reads^2)). A line over MAX_LINE is
        reported and skipped to its end, without being held.
        """
        read = getattr(self.stream, "read1", self.stream.read)
        parts: list[bytes] = []  # the line in progress, in pieces
        held = 0  # its length so far
        skipping = False  # inside an overlong line: drop bytes until its newline
        out: list[Record] = []
        while True:
            chunk = read(1 << 16)
            if not chunk:
                break
            pieces = chunk.split(b"\n")
            if len(pieces) == 1:  # no newline: the line goes on
                if not skipping:
                    held += len(chunk)
                    if held > MAX_LINE:
                        self._overlong()
                        parts, held, skipping = [], 0, True
                    else:
                        parts.append(chunk)
                continue
            first = pieces[0]
            if skipping:
                skipping = False
            elif held + len(first) > MAX_LINE:
                self._overlong()
            else:
                self._decode_into(b"".join((*parts, first)) if parts else first, out)
            for line in pieces[1:-1]:
                if len(line) > MAX_LINE:
                    self._overlong()
                else:
                    self._decode_into(line, out)
                if len(out) >= size:
                    yield Batch(out)
                    out = []
            last = pieces[-1]
            parts, held = ([last] if last else []), len(last)
            if held > MAX_LINE:
                self._overlong()
                parts, held, skipping = [], 0, True
            if out:
                yield Batch(out)
                out = []
        if parts and not skipping:
            self._decode_into(b"".join(parts), out)
        if out:
            yield Batch(out)


class SpoolSource:
    """Records claimed from a spool; each batch is acked by the caller."""

    def __init__(self, spool: Spool, accept: frozenset[str] | None, report: Report) -> None:
        self.spool = spool
        self.accept = accept
        self.report = report

    def batches(self, size: int = 1000) -> Iterator[Batch]:
        for claimed in self.spool.drain(size):
            out: list[Record] = []
            for key, data in claimed:
                try:
                    out.append(records.decode(data, self.accept))
                except BadRecord as exc:
                    self.report.bad(BadRecord(0, f"spool record {key.hex()}: {exc.reason}"))
            keys = [k for k, _ in claimed]
            yield Batch(out, ack=lambda keys=keys: self.spool.ack(keys))


class StreamSink:
    """Compact NDJSON, flushed after every batch so pipes stay live."""

    def __init__(self, stream: IO[bytes]) -> None:
        self.stream = stream

    def write(self, recs: list[Record]) -> None:
        if recs:
            self.stream.write(records.encode_many(recs))
            self.stream.flush()


class SpoolSink:
    def __init__(self, spool: Spool) -> None:
        self.spool = spool

    def write(self, recs: list[Record]) -> None:
        if recs:
            self.spool.put(recs)


def _spool_path(spec: str) -> Path | None:
    """``spool:DIR`` names a spool; nothing else does. A bare directory used to
    be taken for one, and ``-o DIR`` then filled a directory with LMDB files
    nobody asked for."""
    if spec.startswith("spool:"):
        return Path(spec[len("spool:") :])
    return None


def spool_exists(path: Path) -> bool:
    """Whether ``path`` holds a spool already (reading one must never create it)."""
    return (path / "data.mdb").is_file()


def existing_spool(path: Path) -> Spool:
    """Open a spool that must already exist (a reader's): a mistyped path is a usage error."""
    if not spool_exists(path):
        raise UsageError(f"no spool at {path}: check the path (crawl spool put, or a stage's "
                         f"-o spool:{path}, creates one)")
    return Spool(path)


def open_source(
    spec: str, accept: frozenset[str] | None, report: Report, stdin: IO[bytes] | None = None
) -> Source:
    """``-`` is stdin, ``spool:DIR`` an existing spool (consumed), else a file."""
    if spec == "-":
        return StreamSource(stdin or sys.stdin.buffer, accept, report)
    sp = _spool_path(spec)
    if sp is not None:
        return SpoolSource(existing_spool(sp), accept, report)
    if Path(spec).is_dir():
        raise UsageError(f"input {spec!r} is a directory: read a spool with -i spool:{spec}")
    try:
        return StreamSource(open(spec, "rb"), accept, report)  # noqa: SIM115
    except OSError as exc:
        raise UsageError(f"cannot read input {spec!r}: {exc.strerror}") from exc


def open_sink(spec: str, stdout: IO[bytes] | None = None) -> Sink:
    """``-`` is stdout, ``spool:DIR`` a spool (created if missing), else a file (appended)."""
    if spec == "-":
        return StreamSink(stdout or sys.stdout.buffer)
    sp = _spool_path(spec)
    if sp is not None:
        return SpoolSink(Spool(sp))
    if Path(spec).is_dir():
        raise UsageError(f"output {spec!r} is a directory: write a spool with -o spool:{spec}, "
                         "or give a file name")
    try:
        return StreamSink(open(spec, "ab"))  # noqa: SIM115
    except OSError as exc:
        raise UsageError(f"cannot write output {spec!r}: {exc.strerror}") from exc


def run_stage(
    source: Source,
    sink: Sink,
    fn: Callable[[list[Record]], Iterable[Record]],
    report: Report,
    *,
    batch: int = 1000,
) -> None:
    """Drive a batch function: read, transform, write durably, then ack."""
    for b in source.batches(batch):
        report.add("in", len(b.records))
        out = list(fn(b.records))
        sink.write(out)
        report.add("out", len(out))
        b.ack()


def run_stage_pooled(
    source: Source,
    sink: Sink,
    prepare: Callable[[list[Record]], Any],
    finish: Callable[[list[Record], Any], Iterable[Record]],
    report: Report,
    *,
    batch: int = 1000,
    jobs: int = 2,
) -> None:
    """:func:`run_stage` with the pure half of the work in ``jobs`` worker processes.

    ``prepare(records)`` (picklable: a module-level function or a partial of
    one) runs in a worker; ``finish(records, prepared)`` runs here, batch by
    batch in input order, and each batch is written and acked as before. Up
    to ``2 * jobs + 1`` batches are read ahead, so every worker has the next
    batch queued while this process finishes one; output lags input by that
    much until the input ends.
    """
    import multiprocessing
    from collections import deque
    from concurrent.futures import Future, ProcessPoolExecutor

    pending: deque[tuple[Batch, Future[Any]]] = deque()

    def write_oldest() -> None:
        b, fut = pending.popleft()
        out = list(finish(b.records, fut.result()))
        sink.write(out)
        report.add("out", len(out))
        b.ack()

    # The workers hold a lifeline to this process (the forkserver that forks
    # them exits by itself when this process does): a SIGKILLed parent leaves
    # no worker behind, and with the workers gone the resource tracker exits too.
    line = Lifeline()
    pool = ProcessPoolExecutor(jobs, mp_context=multiprocessing.get_context("forkserver"),
                               initializer=_worker_start, initargs=(line.reader,))
    try:
        for b in source.batches(batch):
            report.add("in", len(b.records))
            pending.append((b, pool.submit(prepare, b.records)))
            if len(pending) > 2 * jobs:
                write_oldest()
        while pending:
            write_oldest()
    finally:
        pool.shutdown(cancel_futures=True)
        line.close()


def _worker_start(line: Any) -> None:
    """Workers leave Ctrl-C to the parent, which stops them (no traceback per worker),
    and leave at once when the parent is gone."""
    import signal

    signal.signal(signal.SIGINT, signal.SIG_IGN)
    hold_lifeline(line)


def dumps_pretty(obj: Any) -> str:
    return orjson.dumps(obj, option=orjson.OPT_INDENT_2 | orjson.OPT_SORT_KEYS).decode()


def ensure_inside(root: Path, candidate: Path) -> Path:
    """Resolve ``candidate`` and refuse it unless it stays under ``root``.

    Every file name derived from a URL, a header or a record goes through
    here: nothing from the network may write outside the crawl directory.
    """
    r = root.resolve()
    c = (r / candidate).resolve()
    if c != r and r not in c.parents:
        raise UsageError(f"path {str(candidate)!r} escapes the crawl directory {r}")
    return c


__all__ = [
    "Batch",
    "Report",
    "Sink",
    "Source",
    "SpoolSink",
    "SpoolSource",
    "StreamSink",
    "StreamSource",
    "ensure_inside",
    "existing_spool",
    "open_sink",
    "open_source",
    "run_stage",
    "run_stage_pooled",
    "spool_exists",
]
