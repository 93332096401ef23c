"""The one error boundary: every failure a user can cause becomes one line.

Library code raises (a :class:`~crawl.core.CrawlError` that says what to do,
an ``OSError`` from a path that cannot be used, a ``CanonError`` for a URL
given on the command line); click raises its usage errors. Here, and only
here, each becomes ``crawl: error: ...`` on stderr and the exit status that
crawl(1) documents. A Python traceback is shown only when asked for
(``CRAWL_TRACEBACK=1`` or ``crawl --traceback``), because to an operator it
is noise that hides the one sentence that matters; to a developer it is
still there.

Exit statuses (the table in crawl(1) is generated from :data:`STATUSES`):
0 done (also when the reader of stdout went away, ``| head``: git and grep
die of SIGPIPE there, status 141, which fails a ``set -o pipefail``
script; crawl does not), 1 error, 2 usage error (bad flags, or a file,
directory or spool that must exist does not), 3 ``--strict`` with
malformed input, 130 interrupted by Ctrl-C (SIGINT), in ``crawl run`` too,
after its clean stop. SIGTERM asks ``crawl run`` to stop cleanly, and that
ends with 0 (what service managers expect of a requested stop).
"""

from __future__ import annotations

import errno
import os
import sys
import traceback
from collections.abc import Callable

import click

from crawl.core import CrawlError, ExitStatus

# status -> (meaning in crawl(1), who can return it: "all", or "strict")
STATUSES: dict[int, tuple[str, str]] = {
    ExitStatus.OK: ("success; also when the reader of stdout goes away early (| head), so "
                    "set -o pipefail scripts can cut a stream short", "all"),
    ExitStatus.ERROR: ("error: one line on stderr says what went wrong and what to do", "all"),
    ExitStatus.USAGE: ("usage error: bad flags or arguments, or a crawl directory, spool or "
                       "file that must exist does not (nothing was created)", "all"),
    ExitStatus.BAD_INPUT: ("--strict was given and at least one input record was "
                           "malformed (each was reported and skipped)", "strict"),
    ExitStatus.INTERRUPTED: ("interrupted by Ctrl-C (SIGINT); what was done so far is committed",
                             "all"),
}

# What a status means for one command besides the general meaning (its man page
# lists only the statuses it can return; 3 only where there is a --strict).
COMMAND_NOTES: dict[str, dict[int, str]] = {
    "canon": {ExitStatus.BAD_INPUT: "a URL that cannot be canonicalised is output as a reject "
                                    "record, not malformed input"},
    "index": {ExitStatus.ERROR: "--check found a torn or damaged WARC file",
              ExitStatus.USAGE: "also a --url with no capture"},
    "robots": {ExitStatus.ERROR: "a robots.txt could not be consulted (unreachable, 5xx: the URL "
                                 "is answered disallowed, as RFC 9309 says), or, with "
                                 "--fail-disallowed, a URL is disallowed",
               ExitStatus.BAD_INPUT: "also a URL that cannot be crawled (another scheme, a bad "
                                     "port): it is reported and skipped"},
    "run": {ExitStatus.OK: "finished, stopped by a budget (--max-pages, --duration, --idle-exit), "
                           "or stopped by SIGTERM",
            ExitStatus.USAGE: "also when another crawl run (or a repair) holds the crawl directory: "
                              "one line names it (pid, host, start time, command line)",
            ExitStatus.INTERRUPTED: "Ctrl-C stops leasing, lets in-flight fetches finish, commits, "
                                    "then exits 130 (SIGTERM does the same and exits 0); a second "
                                    "signal stops at once"},
    "frontier": {ExitStatus.USAGE: "also crawl frontier next while a crawl run holds the crawl "
                                   "directory (it names the run)"},
    "check": {ExitStatus.USAGE: "also --repair while a crawl run holds the crawl directory (it names "
                                "the run)"},
    "testweb": {ExitStatus.ERROR: "crawl testweb audit found a politeness violation"},
}

_FALSE = {"", "0", "false", "no", "off"}


def traceback_wanted(args: list[str]) -> bool:
    """CRAWL_TRACEBACK=1 (any value but empty, 0, false, no, off) or ``crawl --traceback``."""
    env = os.environ.get("CRAWL_TRACEBACK", "").strip().lower()
    return env not in _FALSE or "--traceback" in args


def run(invoke: Callable[[], object], args: list[str]) -> int:
    """Call ``invoke`` (the click group) and turn whatever it raises into an exit status."""
    try:
        invoke()
    except SystemExit as exc:  # a command's own sys.exit(N): its status, as is
        code = exc.code
        return code if isinstance(code, int) else (0 if code is None else ExitStatus.ERROR)
    except BaseException as exc:  # noqa: BLE001 - this is the boundary
        return handle(exc, args)
    return ExitStatus.OK


def handle(exc: BaseException, args: list[str]) -> int:
    """Report ``exc`` in one line (a traceback first if wanted); return the exit status."""
    exc = _leaf(exc)
    if isinstance(exc, click.exceptions.Exit):  # --help, --version, ctx.exit(n)
        return int(exc.exit_code)
    if isinstance(exc, SystemExit):
        code = exc.code
        return code if isinstance(code, int) else (0 if code is None else ExitStatus.ERROR)
    if isinstance(exc, KeyboardInterrupt | click.exceptions.Abort):
        sys.stderr.write("crawl: interrupted\n")
        return ExitStatus.INTERRUPTED
    if _broken_pipe(exc):
        quiet_stdout()
        return ExitStatus.OK
    message, status = describe(exc)
    if traceback_wanted(args):
        traceback.print_exception(exc)
    sys.stderr.write(f"crawl: error: {message}\n")
    sys.stderr.flush()
    return status


def describe(exc: BaseException) -> tuple[str, int]:
    """The one-line message and exit status for an exception."""
    if isinstance(exc, click.ClickException):
        msg = _one_line(exc.format_message())
        ctx = getattr(exc, "ctx", None)
        if isinstance(exc, click.UsageError):
            where = ctx.command_path if ctx is not None else "crawl"
            return f"{msg} (see '{where} --help')", ExitStatus.USAGE
        return msg, exc.exit_code
    if isinstance(exc, CrawlError):
        return _one_line(str(exc)), int(exc.exit_status)
    from crawl.canon import CanonError

    if isinstance(exc, CanonError):
        return f"invalid URL: {exc.reason}: {exc.detail}", ExitStatus.USAGE
    if isinstance(exc, OSError):
        return _os_message(exc), ExitStatus.ERROR
    import lmdb

    if isinstance(exc, lmdb.Error):
        return (f"the crawl state cannot be used: {_one_line(str(exc))}; is the disk full, "
                f"or is --dir damaged?"), ExitStatus.ERROR
    return (f"internal error ({type(exc).__name__}: {_one_line(str(exc))}); this is a bug: "
            f"run again with CRAWL_TRACEBACK=1 and report the traceback"), ExitStatus.ERROR


def _os_message(exc: OSError) -> str:
    name = exc.filename
    what = exc.strerror or str(exc)
    if name is None:
        return f"{what} (errno {exc.errno})" if exc.errno else what
    if isinstance(exc, FileExistsError) or exc.errno in (errno.ENOTDIR, errno.EEXIST):
        return (f"{name}: {what}: a file is where a directory must be; give --dir (or the "
                f"path) a directory of its own")
    if isinstance(exc, PermissionError):
        return f"{name}: {what}: choose a path you may write to, or fix its permissions"
    if isinstance(exc, FileNotFoundError):
        return f"{name}: {what}: check the path (its parent directory must exist and be writable)"
    if exc.errno == errno.ENOSPC:
        return f"{name}: {what}: free some space; the state written so far is safe"
    return f"{name}: {what}"


def _one_line(text: str) -> str:
    return " ".join(text.split())


def _leaf(exc: BaseException) -> BaseException:
    """The first real error inside (nested) exception groups, as trio raises them."""
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        inner = [e for e in exc.exceptions if type(e).__name__ != "Cancelled"]
        exc = (inner or list(exc.exceptions))[0]
    return exc


def _broken_pipe(exc: BaseException) -> bool:
    return isinstance(exc, BrokenPipeError) or (isinstance(exc, OSError) and exc.errno == errno.EPIPE)


def quiet_stdout() -> None:
    """The reader went away (``| head``): nothing more to say, and no complaint at exit
    when Python flushes stdout again."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError):
        pass
