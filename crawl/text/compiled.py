"""Whether dedupe's hot loops run compiled (crawl/text/_compiled.c) or in Python and numpy.

The C module is optional: setup.py builds it where the install finds a C
compiler, and crawl.text and crawl.dedupe.simhash fall back to their Python
versions, which give the same bytes and fingerprints, 2-2.5x more slowly
on a text-heavy page. Each of those modules hands its constants and tag
lists to the C module at import (one definition of each), and reads
``active`` on every call, so the tests and the benchmark can run both.
"""

from __future__ import annotations

from types import ModuleType

built: ModuleType | None
try:
    from . import _compiled as built
except ImportError:  # pragma: no cover - installed without a C compiler
    built = None

active: ModuleType | None = built


def use(on: bool) -> bool:
    """Run the compiled loops (``on``) or the Python ones; returns whether compiled ones now run
    (False when they were asked for but never built)."""
    global active
    active = built if on else None
    return active is not None
