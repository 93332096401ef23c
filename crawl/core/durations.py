"""How long, written the one way every time flag and config key accepts.

A crawl is configured in several places (politeness, fetch timeouts, run
budgets, the freshness model's intervals, the test web), and an operator
should not have to remember which of them takes ``30s`` and which only
``30``. So there is one grammar and one error message:

* a bare number is seconds: ``30``, ``0.5``, ``.25``;
* or one or more parts ``NUMBER UNIT``, largest unit first, each unit at
  most once: ``30s``, ``250ms``, ``5m``, ``1h30m``, ``2d12h``, ``1m0.5s``.

Units are ``d`` (86,400 s), ``h``, ``m``, ``s`` and ``ms``; upper case is
accepted too. Negative, infinite and not-a-number values are refused.
"""

from __future__ import annotations

import math
import re

UNITS = {"d": 86400.0, "h": 3600.0, "m": 60.0, "s": 1.0, "ms": 0.001}
_ORDER = ("d", "h", "m", "s", "ms")
_NUMBER = r"(?:\d+(?:\.\d*)?|\.\d+)"
_PART = re.compile(rf"({_NUMBER})(ms|d|h|m|s)")
_BARE = re.compile(rf"{_NUMBER}\Z")
EXAMPLES = "30, 0.5, 30s, 250ms, 5m, 1h30m, 2d"


def duration_error(text: object, why: str = "") -> str:
    """The one message for a value that is not a duration (flags and config files alike)."""
    return (f"{str(text)!r} is not a duration{f' ({why})' if why else ''}: expected seconds "
            f"or d/h/m/s/ms parts, largest first (e.g. {EXAMPLES})")


def parse_duration(text: str | float, *, positive: bool = False) -> float:
    """Seconds in ``text`` (see the module docstring for the grammar).

    ``positive`` refuses 0 as well, for settings where zero would mean
    "never" or divide by zero (a revisit interval).

    Raises:
        ValueError: with :func:`duration_error`'s message.
    """
    if isinstance(text, bool):
        raise ValueError(duration_error(text))
    if isinstance(text, int | float):
        value = float(text)
    else:
        t = str(text).strip().lower()
        if _BARE.match(t):
            value = float(t)
        else:
            value, pos, last = 0.0, 0, -1
            for m in _PART.finditer(t):
                if m.start() != pos:
                    break
                rank = _ORDER.index(m.group(2))
                if rank <= last:
                    raise ValueError(duration_error(text, "each unit once, largest first"))
                value += float(m.group(1)) * UNITS[m.group(2)]
                pos, last = m.end(), rank
            if pos == 0 or pos != len(t):
                raise ValueError(duration_error(text))
    if math.isnan(value) or math.isinf(value) or value < 0:
        raise ValueError(duration_error(text))
    if positive and value <= 0:
        raise ValueError(duration_error(text, "it must be more than 0"))
    return value


def format_duration(seconds: float) -> str:
    """``5400`` -> ``1h30m``: the same grammar back, for people (help, summaries)."""
    if seconds < 1:
        return f"{seconds * 1000:g}ms" if seconds else "0s"
    out, rest = [], round(seconds, 3)
    for unit in ("d", "h", "m"):
        n, rest = divmod(rest, UNITS[unit])
        if n:
            out.append(f"{int(n)}{unit}")
    if rest or not out:
        out.append(f"{round(rest, 3):g}s")
    return "".join(out)
