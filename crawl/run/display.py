"""Progress for ``crawl run`` on stderr: a live rich panel on a terminal, one
plain line per interval otherwise (cron mails stay readable), or nothing."""

from __future__ import annotations

import sys
from typing import IO, Any

from crawl.core import CrawlDir, Record
from crawl.frontier import describe_wait, plural


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
        # transient: the live table goes when the run ends, and the summary (the same
        # table, final figures) is printed once, not under a copy of itself
        self.live = Live(console=self.console, auto_refresh=False, transient=True)
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
        ("fetched (every outcome)", _num(st["fetched"])),
        ("pages this run (200, 304)", _num(st["pages"])),
        *_stored_kinds(st),
        *([("pages in this crawl dir", _num(st["pages_total"]))] if "pages_total" in st else []),
        *([("cycle", _num(st["cycle"]))] if st.get("cycle") is not None else []),
        ("queued", _num(st["queued"])),
        ("hosts", _num(st["hosts"])),
        ("hosts ready", _num(st["hosts_ready"])),
        ("in flight", _num(st["in_flight"])),
        ("backlog (due, not fetched)", _num(st["backlog"])),
        ("fetched, not parsed yet", _num(st.get("unparsed", 0))),
        ("fetching paused for parsing", f"{st.get('parse_wait', 0.0):.1f} s"),
        *_error_rows(st),
        *([("waiting on robots.txt", f"{plural(st['hosts_waiting_robots'], 'host')}, "
                                      f"{plural(st.get('urls_waiting_robots', 0), 'URL')}")]
          if st.get("hosts_waiting_robots") else []),
        ("downloaded", _bytes(st["bytes"])),
        ("elapsed", f"{st['elapsed']:.1f} s"),
        ("budget", _left(st)),
    ]
    if st.get("stopping"):
        rows.append(("stopped", str(st["stopping"])))
    for k, v in rows:
        t.add_row(k, v)
    return t


_NET_FAILURES = ("timeout", "connect-error", "dns-error", "protocol-error")


def _stored_kinds(st: Record) -> list[tuple[str, str]]:
    """What "pages stored" holds: HTML pages and everything else (sitemaps, feeds, text)."""
    c = st.get("counts") or {}
    if "stored/html" not in c and "stored/other" not in c:
        return []
    return [("  HTML / other types", f"{_num(c.get('stored/html', 0))} / {_num(c.get('stored/other', 0))}")]


def _error_rows(st: Record) -> list[tuple[str, str]]:
    """Failed fetches, split by whose failure: the site's own answers (HTTP 4xx/5xx)
    and the network's (timeouts, refused connections, DNS, broken responses)."""
    c = st.get("counts") or {}
    total = sum(v for k, v in c.items() if k.startswith("outcome/"))
    if not total:
        return [("errors", f"{100 * st['error_rate']:.1f}%")]
    http = c.get("outcome/http-error", 0)
    net = sum(c.get(f"outcome/{k}", 0) for k in _NET_FAILURES)
    return [("site errors (HTTP 4xx/5xx)", f"{_num(http)} ({100 * http / total:.1f}%)"),
            ("network errors (timeouts, refused, DNS)", f"{_num(net)} ({100 * net / total:.1f}%)")]


def make_display(mode: str, interval: float | None = None) -> Any:
    """``auto``: rich on a terminal, plain lines otherwise."""
    if mode == "auto":
        mode = "rich" if sys.stderr.isatty() else "plain"
    if mode == "rich":
        return RichDisplay()
    if mode == "none":
        return NoDisplay()
    return PlainDisplay(interval=interval or 10.0)


def summary(st: Record, err: IO[str] | None = None, where: CrawlDir | None = None) -> None:
    """The final table (rich renders plain text when stderr is not a terminal), the
    outcomes, and where the results are (``where``: the crawl directory)."""
    from rich.console import Console

    out = err or sys.stderr
    # Not a terminal (cron, a log file): no wrapping at rich's default 80 columns, so
    # every line of the summary stays one line for grep.
    console = Console(file=out, width=None if out.isatty() else 1000)
    console.print(table(st, title="crawl run: summary"))
    outcomes = {k[8:]: v for k, v in st.get("counts", {}).items() if k.startswith("outcome/")}
    if outcomes:
        console.print("outcomes: " + ", ".join(f"{k} {v:,}" for k, v in sorted(outcomes.items())),
                      soft_wrap=True)
    if where is not None:
        for text in results_where(where):
            console.print(text, soft_wrap=True, markup=False, highlight=False)
    waiting = st.get("robots_waiting") or []
    if waiting:
        # Their URLs were not fetched and not dropped: say where they are and when they go.
        n = st.get("hosts_waiting_robots", len(waiting))
        console.print(f"waiting on an unreachable robots.txt ({plural(n, 'host')}, "
                      f"{plural(st.get('urls_waiting_robots', 0), 'URL')}, kept queued: a later run "
                      "fetches them once robots.txt answers):", soft_wrap=True, markup=False)
        for w in waiting:
            console.print(f"  {describe_wait(w, st['ts'])}", soft_wrap=True, markup=False)
        if n > len(waiting):
            console.print(f"  ... and {plural(n - len(waiting), 'more host')} (crawl stats --dir D --json)",
                          markup=False)


def results_where(cdir: CrawlDir) -> list[str]:
    """Where a crawl's results are, for the summary: the WARC files, their index, the log."""
    from .stats import warc_files

    warcs = warc_files(cdir.warc)
    index = cdir.warc / "index.cdxj"
    return [
        f"WARC files: {len(warcs):,} in {cdir.warc}" + (f" (newest {warcs[-1].name})" if warcs else ""),
        f"index: {index}" + ("" if index.exists() else f" (not built yet: crawl index --dir {cdir.root})"),
        f"crawl log: {cdir.log} (zstdcat {cdir.log}/*.zst); figures: crawl stats --dir {cdir.root}",
    ]
