"""Names an operator gives for files that a command creates inside the crawl directory.

A flag or config value such as ``--warc-prefix`` becomes part of a file name
under ``--dir``. Anything but a plain name breaks the promise that a crawl
directory holds everything a crawl knows: ``../../x`` writes the WARC files
outside it, where the readers (which refuse any path leaving the WARC
directory) never find them again, so the pages and their links would be lost
without a word. A name is therefore checked once, here, before anything is
written, and refused with exit status 2.
"""

from __future__ import annotations

from .errors import UsageError

MAX_NAME_BYTES = 100  # leaves room for what is appended (the WARC name adds ~45 bytes of 255)


def check_file_name(value: object, what: str, *, max_bytes: int = MAX_NAME_BYTES) -> str:
    """``value`` if it is a plain file name, else a UsageError naming ``what`` (the flag).

    Plain: a non-empty string of printable characters without whitespace, no
    ``/`` or ``\\``, not starting with ``.`` (``..``, hidden files) or ``-``
    (read as an option by the tools that take the files), at most
    ``max_bytes`` bytes of UTF-8.
    """
    problem = _problem(value, max_bytes)
    if problem is None:
        assert isinstance(value, str)
        return value
    shown = repr(value) if not isinstance(value, str) or len(value) <= 60 else repr(value[:60]) + "..."
    raise UsageError(f"{what} {shown} is not a plain file name: {problem}; give a name such as "
                     f"'crawl' (printable, no spaces, no '/' or '\\', not starting with '.' or '-', "
                     f"at most {max_bytes} bytes)")


def _problem(value: object, max_bytes: int) -> str | None:
    if not isinstance(value, str):
        return f"it is of type {type(value).__name__}, not a string"
    if not value:
        return "it is empty"
    for sep in ("/", "\\"):
        if sep in value:
            return f"it contains {sep!r}"
    if value.startswith("."):
        return "it starts with '.'"
    if value.startswith("-"):
        return "it starts with '-'"
    odd = next((c for c in value if not c.isprintable() or c.isspace()), None)
    if odd is not None:
        return f"it contains the character {odd!r}"
    size = len(value.encode("utf-8", "surrogatepass"))
    if size > max_bytes:
        return f"it is {size} bytes long"
    return None
