"""The report for people (a terminal summary) and for tools (CSV or NDJSON, one file per section).

Nested values (every referrer of a broken link, every member of a
duplicate cluster, every hop of a redirect chain) stay nested in NDJSON; in
CSV they are flattened to one row per item, which is what a spreadsheet
filter wants ("every page that links to this 404").
"""

from __future__ import annotations

import csv
import datetime as dt
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson
from rich.console import Console
from rich.table import Table

from .model import Report, Section

TERMINAL_ROWS = 10
# What fits a terminal: the columns that answer each section's question (files have them all).
TERMINAL_COLUMNS = {
    "hosts": ["host", "urls", "4xx", "5xx", "error_rate", "p95_s"],
    "broken": ["url", "kind", "referrers", "linked_from"],
    "redirects": ["start", "hops", "final_outcome", "cross_host"],
    "duplicates": ["canonical", "size", "near"],
    "canonicals": ["page", "problem"],
    "robots": ["host", "rule", "urls"],
    "traps": ["heuristic", "url"],
    "slow": ["url", "seconds"],
    "large": ["url", "bytes"],
    "non_html": ["url", "content_type"],
}
# How each section's first rows are chosen for the terminal: the worst first.
_TERMINAL_ORDER = {
    "hosts": lambda r: (-(r.get("error_rate") or 0), -r["urls"]),
    "broken": lambda r: (-r["referrers"], r["url"]),
}


def _fmt(v: Any) -> str:
    if v is None:
        return ""
    if isinstance(v, bool):
        return "yes" if v else ""
    if isinstance(v, float):
        return f"{v:,.4g}" if abs(v) < 1e6 else f"{v:,.0f}"
    if isinstance(v, int):
        return f"{v:,}"
    if isinstance(v, list):
        if v and isinstance(v[0], dict):
            first = next(iter(v[0].values()))
            return f"{len(v)} ({first}{', ...' if len(v) > 1 else ''})"
        return " -> ".join(str(x) for x in v) if len(v) <= 4 else f"{v[0]} -> ... -> {v[-1]} ({len(v)})"
    return str(v)


def _when(ts: float | None) -> str:
    if ts is None:
        return ""
    return dt.datetime.fromtimestamp(ts, dt.UTC).strftime("%Y-%m-%d %H:%M:%S UTC")


def terminal(report: Report, console: Console | None = None) -> None:
    """A summary: the overview, then the first rows of every section that has any."""
    con = console or Console(stderr=False, highlight=False)
    o = report.overview
    con.print(f"[bold]crawl report[/bold]  {o['dir']}")
    con.print(f"  {o['urls']:,} URLs on {o['hosts']:,} hosts, {o['pages_ok']:,} pages stored, "
              f"{o['bytes'] / 1e6:,.1f} MB, from {_when(o['first'])} to {_when(o['last'])}"
              + (f", cycle {o['cycle']}" if o.get("cycle") is not None else ""))
    con.print("  outcomes: " + ", ".join(f"{k} {v:,}" for k, v in o["outcomes"].items()))
    for name, sec in report.sections.items():
        if name == "overview":
            continue
        count = sec.total if sec.total is not None else len(sec.rows)
        con.print()
        if not sec.rows:
            con.print(f"[bold]{sec.title}[/bold]: none")
            continue
        table = Table(title=f"{sec.title}: {count:,}" + (f" ({sec.note})" if sec.note else ""),
                      title_justify="left", show_edge=False, pad_edge=False)
        cols = TERMINAL_COLUMNS.get(name, sec.columns)
        for col in cols:
            table.add_column(col.replace("_", " "), overflow="fold",
                             ratio=3 if col in ("url", "host", "start", "page", "canonical", "linked_from") else 1)
        order = _TERMINAL_ORDER.get(name)
        rows = sorted(sec.rows, key=order)[:TERMINAL_ROWS] if order else sec.rows[:TERMINAL_ROWS]
        for row in rows:
            table.add_row(*(_fmt(row.get(c)) for c in cols))
        con.print(table)
        if len(sec.rows) > TERMINAL_ROWS:
            con.print(f"  ... {len(sec.rows) - TERMINAL_ROWS:,} more (--format csv|ndjson|html for all)")


def flat_rows(sec: Section) -> tuple[list[str], Iterator[dict[str, Any]]]:
    """Columns and rows with list-of-dict columns unrolled into one row per item."""
    nested = [c for c in sec.columns if sec.rows and isinstance(sec.rows[0].get(c), list)
              and any(r.get(c) and isinstance(r[c][0], dict) for r in sec.rows[:100])]
    plain = [c for c in sec.columns if c not in nested]
    if not nested:
        def rows() -> Iterator[dict[str, Any]]:
            for r in sec.rows:
                yield {c: (" -> ".join(map(str, r[c])) if isinstance(r.get(c), list) else r.get(c))
                       for c in plain}
        return plain, rows()
    key = nested[0]
    sub = sorted({k for r in sec.rows for item in (r.get(key) or []) for k in item})
    cols = plain + [f"{key}.{k}" for k in sub]

    def unrolled() -> Iterator[dict[str, Any]]:
        for r in sec.rows:
            base = {c: (" -> ".join(map(str, r[c])) if isinstance(r.get(c), list) else r.get(c)) for c in plain}
            items = r.get(key) or [{}]
            for item in items:
                yield {**base, **{f"{key}.{k}": item.get(k) for k in sub}}
    return cols, unrolled()


def write_files(report: Report, out: Path, fmt: str) -> list[Path]:
    """One file per section in ``out`` (created); returns the paths written."""
    out.mkdir(parents=True, exist_ok=True)
    paths = []
    for name, sec in report.sections.items():
        path = out / f"{name}.{fmt}"
        tmp = path.with_name(path.name + ".tmp")
        with open(tmp, "w" if fmt == "csv" else "wb", **({"newline": ""} if fmt == "csv" else {})) as fh:
            if fmt == "csv":
                cols, rows = flat_rows(sec)
                w = csv.DictWriter(fh, fieldnames=cols, extrasaction="ignore")
                w.writeheader()
                for row in rows:
                    w.writerow({k: ("" if v is None else v) for k, v in row.items()})
            else:
                for row in sec.rows:
                    fh.write(orjson.dumps(row, option=orjson.OPT_APPEND_NEWLINE))  # type: ignore[arg-type]
        tmp.replace(path)
        paths.append(path)
    return paths
