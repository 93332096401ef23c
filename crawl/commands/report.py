"""crawl report: a site audit from a crawl directory (terminal, CSV, NDJSON or one HTML page)."""

from __future__ import annotations

from pathlib import Path

import click

from ._common import dir_option


@click.command(name="report")
@dir_option()
@click.option("--format", "fmt", type=click.Choice(["terminal", "csv", "ndjson", "html"]),
              default="terminal", show_default=True,
              help="terminal: a summary; csv/ndjson: one file per section in --out DIR; "
                   "html: one self-contained page at --out FILE.")
@click.option("--out", "out", type=click.Path(path_type=Path),
              help="Where csv/ndjson files (a directory) or the html page (a file) go.")
@click.option("--top", type=click.IntRange(min=1), default=100, show_default=True,
              help="Rows kept in the slowest- and largest-pages sections.")
def command(crawl_dir: Path, fmt: str, out: Path | None, top: int) -> None:
    """Audit what a crawl found: broken links with every page that links to them,
    redirect chains, duplicate clusters, per-host health and more.

    Sections: overview, hosts (status mix, error rate, latency, bytes,
    duplicates, trap flags), broken links (4xx, 5xx, DNS, timeout, connect;
    each with its referring pages and anchors), redirect chains (hops,
    cross-host, loops, final target), duplicate clusters, rel=canonical
    conflicts, URLs blocked by robots.txt by rule, trap-flagged URLs,
    slowest and largest pages, non-HTML, depth distribution, and URLs in
    sitemaps that no page links to. Everything comes from the crawl
    directory alone (the crawl log and the link graph that `crawl run`
    and `crawl parse --dir` keep); it only reads, so it works while a
    crawl runs and on a copy of a crawl directory.

    \b
        crawl report --dir D
        crawl report --dir D --format csv --out audit/      # audit/broken.csv, ...
        crawl report --dir D --format html --out report.html
    """
    from crawl.report import gather, terminal, write_files, write_html

    if not crawl_dir.is_dir():
        raise click.UsageError(f"no crawl directory at {crawl_dir}")
    if fmt != "terminal" and out is None:
        raise click.UsageError(f"--format {fmt} needs --out ({'a file' if fmt == 'html' else 'a directory'})")
    report = gather(crawl_dir, top=top)
    if fmt == "terminal":
        terminal(report)
    elif fmt == "html":
        assert out is not None
        if out.is_dir():
            raise click.UsageError(f"--out {out} is a directory; give the HTML file's name")
        write_html(report, out)
        click.echo(f"crawl report: wrote {out}", err=True)
    else:
        assert out is not None
        paths = write_files(report, out, fmt)
        click.echo(f"crawl report: wrote {len(paths)} files in {out}", err=True)
