"""warcio's own checker (the `warcio check` command), for tests that write WARC files."""

from __future__ import annotations

from pathlib import Path

from warcio.checker import Checker


def warcio_check(paths: list[Path]) -> int:
    """Run ``warcio check`` on the files; 0 when every record's digests verify."""

    class Cmd:
        inputs = [str(p) for p in paths]
        verbose = False

    return Checker(Cmd).process_all()
