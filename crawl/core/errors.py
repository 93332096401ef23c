"""Errors that reach the user, and the exit statuses they map to.

The library raises these; only ``crawl.commands`` turns them into a message on
stderr and an exit status (one boundary, as httpie does). Their text is shown
to the operator as is, so it says what went wrong *and* what to do about it.

    CrawlError                 exit 1: the run cannot go on
     ├── UsageError            exit 2: the flags or arguments are wrong
     ├── StateError            exit 1: the crawl directory is unusable
     │    ├── DamagedState     a state file is cut short or overwritten
     │    └── NoSpace          the disk filled up while writing a file
     └── BadRecord             one malformed input line (counted, not fatal
                               unless --strict)

A failure that belongs to one URL (a timeout, a 404, a robots disallow) is
never an exception: it is an ``outcome`` field in that URL's record.
"""

from __future__ import annotations

import enum


class ExitStatus(enum.IntEnum):
    """Exit codes shared by every command (documented in crawl(1))."""

    OK = 0
    ERROR = 1
    USAGE = 2
    BAD_INPUT = 3  # --strict and at least one malformed record
    INTERRUPTED = 130  # 128 + SIGINT, as shells report a Ctrl-C


class CrawlError(Exception):
    """An error whose message is shown to the user as is."""

    exit_status = ExitStatus.ERROR


class UsageError(CrawlError):
    exit_status = ExitStatus.USAGE


class StateError(CrawlError):
    """The crawl directory or a spool cannot be opened or is damaged."""


class DamagedState(StateError):
    """A state file is not what was written (cut short, overwritten), found before
    LMDB could crash on it. ``path`` is the environment, ``why`` the finding."""

    def __init__(self, message: str, *, path: object = None, why: str = "") -> None:
        super().__init__(message)
        self.path = path
        self.why = why


class NoSpace(StateError):
    """The file system filled up while ``path`` was being written. Whatever was
    being written is undone (the commit aborted, the partial tail cut off), so
    the same command run again after space is freed resumes with nothing lost."""

    def __init__(self, message: str, *, path: object = None) -> None:
        super().__init__(message)
        self.path = path


class BadRecord(CrawlError):
    """One input line that is not a usable record.

    Args:
        lineno: 1-based line number in the input stream (0 if unknown).
        reason: what is wrong with it, in words an operator can act on.
    """

    exit_status = ExitStatus.BAD_INPUT

    def __init__(self, lineno: int, reason: str) -> None:
        super().__init__(f"line {lineno}: {reason}" if lineno else reason)
        self.lineno = lineno
        self.reason = reason
