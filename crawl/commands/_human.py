"""Views for people: ISO times, named figures, units; ``--json`` keeps the raw record.

A unix time such as ``1796150172.19`` or an internal field name such as
``hd`` answers nothing for the operator reading it at 3 a.m.; the same
value as ``2026-11-29 12:36:12 UTC (4 min ago)`` under a label does.
Machines get every raw field with ``--json``; these helpers are only for
the terminal.
"""

from __future__ import annotations

import datetime as _dt
import math
from collections.abc import Iterable
from typing import Any

import click

from crawl.core import format_duration


def iso(ts: Any, now: float | None = None) -> str:
    """``2026-11-29 12:36:12 UTC``, with "(in 3s)" / "(4m ago)" when ``now`` is given."""
    if ts is None or not isinstance(ts, int | float) or isinstance(ts, bool) or not math.isfinite(ts):
        return "-"
    if ts <= 0:
        return "never"
    text = _dt.datetime.fromtimestamp(ts, _dt.UTC).strftime("%Y-%m-%d %H:%M:%S UTC")
    if now is None:
        return text
    delta = ts - now
    if abs(delta) < 0.5:
        return f"{text} (now)"
    span = _coarse(abs(delta))
    return f"{text} ({'in ' + span if delta > 0 else span + ' ago'})"


def _coarse(s: float) -> str:
    """The two largest units are enough to say how far off a time is: 4d3h, 12m5s, 3.2s."""
    if s < 60:
        return f"{s:.1f}s" if s < 10 else f"{s:.0f}s"
    parts = []
    for unit, size_ in (("d", 86400), ("h", 3600), ("m", 60), ("s", 1)):
        n, s = divmod(s, size_)
        if n or parts:
            parts.append(f"{int(n)}{unit}")
        if len(parts) == 2:
            break
    return "".join(p for p in parts if not p.startswith("0")) or "0s"


def seconds(value: Any) -> str:
    """A duration in the flags' grammar (``1h30m``, ``250ms``), ``-`` when absent."""
    if value is None or not isinstance(value, int | float) or not math.isfinite(value):
        return "-"
    return format_duration(max(float(value), 0.0))


def number(value: Any) -> str:
    """Integers with thousands separators, floats to a sensible precision."""
    if value is None:
        return "-"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, int):
        return f"{value:,}"
    if isinstance(value, float):
        if not math.isfinite(value):
            return str(value)
        if value != 0 and abs(value) < 0.001:
            return f"{value:.3g}"
        return f"{value:,.3f}".rstrip("0").rstrip(".")
    return str(value)


def size(n: Any) -> str:
    if not isinstance(n, int | float):
        return "-"
    for unit in ("B", "KB", "MB", "GB", "TB"):
        if n < 1000 or unit == "TB":
            return f"{n:,.0f} {unit}" if unit == "B" else f"{n:,.1f} {unit}"
        n /= 1000
    return str(n)


def echo_rows(rows: Iterable[tuple[str, str]], indent: int = 0) -> None:
    """``label  value`` lines, labels padded to one column."""
    rows = list(rows)
    width = max((len(k) for k, _ in rows), default=0)
    pad = " " * indent
    for k, v in rows:
        click.echo(f"{pad}{k:<{width}}  {v}")


# crawl stats: stored names -> what an operator calls them (None: not shown)
_LABELS: dict[str, str | None] = {
    "kind": None, "v": None, "command": None, "dir": "directory",
    "ts": "updated", "elapsed": "elapsed", "rate": "fetches/s, last 10 s",
    "avg_rate": "fetches/s, whole run", "fetched": "fetched (every outcome)",
    "pages": "pages this run (200, 304)", "pages_total": "pages in this crawl dir",
    "error_rate": "failed fetches (4xx/5xx, network)",
    "bytes": "size", "time_left": "time left (--duration)", "pages_left": "pages left (--max-pages)",
    "unparsed": "fetched, not parsed yet", "parse_wait": "fetching paused for parsing",
    "stopping": "stopped by", "idle_fraction": "idle (no host ready)", "idle_seconds": "idle time",
    "mu": "mu (optimal policy)", "c": "c (proportional policy)",
    "backlog": "backlog (due, not leased)", "urls": "URLs seen", "files": "files",
}


def stat_row(section: str, key: str, value: Any, now: float) -> tuple[str, str, str] | None:
    """One ``crawl stats`` row (section, label, value) for people, or None to leave it out."""
    label = _LABELS.get(key, key.replace("_", " "))
    if label is None:
        return None
    if section == "recrawl":
        label = {"backlog": "backlog (due, not emitted)", "pages": "pages known",
                 "pings": "pings waiting", "hints": "sitemap/feed hints waiting"}.get(key, label)
    if section == "run" and key == "bytes":
        label = "downloaded"
    if key == "ts":
        shown = iso(value, now)
    elif key in ("elapsed", "time_left", "parse_wait", "idle_seconds"):
        shown = seconds(value)
    elif key == "pages_left":
        shown = number(max(0, value)) if isinstance(value, int | float) else "-"
    elif key in ("error_rate", "idle_fraction"):
        shown = f"{100 * value:.1f}%" if isinstance(value, int | float) else "-"
    elif "bytes" in key:
        shown = size(value)
    elif key == "stopping":
        shown = str(value) if value else "-"
    else:
        shown = number(value)
    return section, label, shown
