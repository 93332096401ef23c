"""Progress for ``crawl run`` on stderr: a live rich panel on a terminal, one
plain line per interval otherwise (cron mails stay readable), or nothing."""

from __future__ import annotations

import sys
from typing import IO, Any

from crawl.core import Record


def _num(n: float) -> str:
    return f"{n:,.0f}"


def _bytes(n: float) -> str:
    for unit in ("B", "KB", "MB", "GB", "TB"):
        if n < 1000 or unit == "TB":
            return f"{n:,.1f} {unit}" if unit != "B" else f"{n:.0f} B"
        n /= 1000
    return str(n)


def _left(st: Record) -> str:
    parts = []
    if st.get("time_left") is not None:
        s = int(st["time_left"])
        parts.append(f"{s // 3600}:{s // 60 % 60:02d}:{s % 60:02d} left")
    if st.get("pages_left") is not None:
        parts.append(f"{_num(max(0, st['pages_left']))} pages left")
    return ", ".join(parts) or "no budget"


def line(st: Record) -> str:
    """The one-line progress format (also used in tests and cron logs)."""
    return (
        f"{st['elapsed']:>7.1f}s {st['rate']:>8.1f} pages/s  fetched {_num(st['fetched'])}"
        f"  queued {_num(st['queued'])}  hosts ready {_num(st['hosts_ready'])}"
        f"  in flight {_num(st['in_flight'])}  errors {100 * st['error_rate']:.1f}%"
        f"  {_bytes(st['bytes'])}  {_left(st)}"
        + (f"  [stopping: {st['stopping']}]" if st.get("stopping") else "")
    )


class PlainDisplay:
    def __init__(self, err: IO[str] | None = None, interval: float = 10.0) -> None:
        self.err = err or sys.stderr
        self.interval = interval

    def update(self, st: Record) -> None:
        self.err.write(f"crawl run: {line(st)}\n")
        self.err.flush()

    def close(self) -> None:
        pass


class NoDisplay(PlainDisplay):
    def __init__(self) -> None:
        super().__init__(interval=2.0)

    def update(self, st: Record) -> None:
        pass


class RichDisplay:
    """A live table, redrawn twice a second."""

    interval = 0.5

    def __init__(self) -> None:
        from rich.console import Console
        from rich.live import Live

        self.console = Console(stderr=True)
        self.live = Live(console=self.console, auto_refresh=False, transient=False)
        self.live.start()

    def update(self, st: Record) -> None:
        self.live.update(table(st), refresh=True)

    def close(self) -> None:
        self.live.stop()


def table(st: Record, title: str = "crawl run") -> Any:
    from rich.table import Table

    t = Table(title=title, show_header=False, box=None, pad_edge=False)
    t.add_column(style="bold")
    t.add_column(justify="right")
    rows = [
        ("pages/s, whole run", f"{st.get('avg_rate', st['rate']):.1f}"),
        ("pages/s, last 10 s", f"{st['rate']:.1f}"),
        ("fetched", _num(st["fetched"])),
        ("pages stored", _num(st["pages"])),
        ("queued", _num(st["queued"])),
        ("hosts", _num(st["hosts"])),
        ("hosts ready", _num(st["hosts_ready"])),
        ("in flight", _num(st["in_flight"])),
        ("backlog (due, not fetched)", _num(st["backlog"])),
        ("fetched, not parsed yet", _num(st.get("unparsed", 0))),
        ("fetching paused for parsing", f"{st.get('parse_wait', 0.0):.1f} s"),
        ("errors", f"{100 * st['error_rate']:.1f}%"),
        ("downloaded", _bytes(st["bytes"])),
        ("elapsed", f"{st['elapsed']:.1f} s"),
        ("budget", _left(st)),
    ]
    if st.get("stopping"):
        rows.append(("stopped", str(st["stopping"])))
    for k, v in rows:
        t.add_row(k, v)
    return t


def make_display(mode: str, interval: float | None = None) -> Any:
    """``auto``: rich on a terminal, plain lines otherwise."""
    if mode == "auto":
        mode = "rich" if sys.stderr.isatty() else "plain"
    if mode == "rich":
        return RichDisplay()
    if mode == "none":
        return NoDisplay()
    return PlainDisplay(interval=interval or 10.0)


def summary(st: Record, err: IO[str] | None = None) -> None:
    """The final table (rich renders plain text when stderr is not a terminal)."""
    from rich.console import Console

    console = Console(file=err or sys.stderr)
    console.print(table(st, title="crawl run: summary"))
    outcomes = {k[8:]: v for k, v in st.get("counts", {}).items() if k.startswith("outcome/")}
    if outcomes:
        console.print("outcomes: " + ", ".join(f"{k} {v:,}" for k, v in sorted(outcomes.items())))
