"""crawl robots: explain robots.txt decisions, from a local file or live."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import click

from crawl.core import ExitStatus, Record, Report, UsageError, open_source, records
from crawl.robots import MAX_BYTES, Robots, RobotsSource, decision_record, format_text, parse

from ._common import finish

_ACCEPT = records.URL_KINDS | {"fetch", "lease"}


def _urls(urls: tuple[str, ...], input_: str, report: Report) -> Iterator[Record]:
    if urls:
        yield from (records.make("url", url=u) for u in urls)
        return
    if input_ == "-" and sys.stdin.isatty():
        report.warn("reading URLs from standard input (Ctrl-D to end)")
    for batch in open_source(input_, _ACCEPT, report).batches(100):
        yield from batch.records
        batch.ack()


@click.command(name="robots")
@click.argument("urls", nargs=-1, metavar="[URL]...")
@click.option("-i", "--input", "input_", default="-", show_default=True, metavar="SRC",
              help="Without URL arguments, read URLs from SRC: '-' (stdin), a file or spool:DIR "
                   "(a spool is consumed, as by any stage).")
@click.option("--strict", is_flag=True, help="Exit with status 3 if any input line was malformed.")
@click.option("-A", "--agent", default="crawl", show_default=True, metavar="AGENT",
              help="Product token (or full User-Agent string) whose group applies.")
@click.option("-f", "--robots-file", type=click.Path(dir_okay=False, allow_dash=True, path_type=Path),
              help="Evaluate this local robots.txt ('-' for stdin) instead of fetching; "
                   "bare paths are accepted as URLs.")
@click.option("--json", "as_json", is_flag=True,
              help="One JSON record per URL: the input fields plus allowed, rule, line, group, "
                   "agent and robots_txt (where the rules came from).")
@click.option("--explain", is_flag=True,
              help="Also show the normalised path, the group chosen and every matching rule.")
@click.option("--fail-disallowed", is_flag=True,
              help="Exit with status 1 if any URL is disallowed (for CI checks of a robots.txt).")
@click.option("--dir", "crawl_dir", type=click.Path(file_okay=False, path_type=Path),
              help="Live mode: read and update this crawl's robots cache (answers as the crawl would).")
@click.option("--resolve-file", type=click.Path(dir_okay=False, exists=True, path_type=Path),
              help="Live mode: hosts-file lines 'IP NAME' mapping host names to addresses.")
@click.option("--allow-private", is_flag=True,
              help="Live mode: allow loopback and private addresses (test webs, staging sites).")
@click.option("--user-agent", default=None, metavar="UA",
              help="Live mode: User-Agent header of the robots.txt request (default: crawl's).")
def command(urls: tuple[str, ...], input_: str, strict: bool, agent: str, robots_file: Path | None, as_json: bool,
            explain: bool, fail_disallowed: bool, crawl_dir: Path | None,
            resolve_file: Path | None, allow_private: bool, user_agent: str | None) -> None:
    """Show whether robots.txt lets AGENT fetch each URL, and which rule decided.

    URLs come from the arguments or, when there are none, from standard
    input (plain lines or url/link/fetch records). With --robots-file the
    rules come from a local file and nothing is fetched, so a robots.txt
    can be tested before it is deployed. Without it robots.txt is fetched
    live from each URL's origin with the same rules as `crawl fetch`
    (RFC 9309: 4xx allows everything, 5xx and network errors disallow
    everything, at most 5 redirects, 500 KiB parsed).

    Matching follows RFC 9309: the group of the agent's product token
    (case-insensitive), else the '*' group; the longest matching rule wins
    and Allow wins a tie; '*' and a final '$' are wildcards.

    \b
    Example:
        $ cat robots.txt
        User-agent: *
        Disallow: /private
        $ crawl robots -f robots.txt /private/x /public
        disallowed  /private/x  Disallow: /private  (line 2, group *)
        allowed     /public  no rule matched  (group *)
        $ crawl robots -f robots.txt --agent Googlebot --explain '/search?q=1'
        $ crawl robots -f new-robots.txt --fail-disallowed < must-stay-open.txt
        $ crawl robots --resolve-file WEB/hosts --allow-private --json URL
        $ crawl robots --dir D http://example.com/a   # as crawl D would decide

    Exit status: 0; 1 when a URL could not be decided (its robots.txt
    could not be consulted) or, with --fail-disallowed, when a URL is
    disallowed; 2 on a usage error; 3 with --strict after malformed input.
    """
    source = RobotsSource(_load(robots_file, urls) if robots_file else None, robots_file,
                          dict(crawl_dir=crawl_dir, resolve_file=resolve_file,
                               allow_private=allow_private, user_agent=user_agent))
    out = sys.stdout.buffer
    report = Report("robots")
    for rec in _urls(urls, input_, report):
        out_rec = decision_record(rec, agent, source, explain)
        report.add({True: "allowed", False: "disallowed"}.get(out_rec["allowed"], "errors"))
        out.write(records.encode(out_rec) if as_json else format_text(out_rec, explain).encode())
        out.flush()
    finish(report, strict, None)
    if report.counts.get("errors") or (fail_disallowed and report.counts.get("disallowed")):
        sys.exit(ExitStatus.ERROR)


def _load(path: Path, urls: tuple[str, ...]) -> Robots:
    if str(path) == "-":
        if not urls:
            raise UsageError("--robots-file - reads the file from stdin: give the URLs as arguments")
        data = sys.stdin.buffer.read()
    else:
        try:
            data = path.read_bytes()
        except OSError as exc:
            raise UsageError(f"cannot read --robots-file {path}: {exc.strerror}") from None
    robots = parse(data)
    if robots.truncated:
        click.echo(f"crawl robots: {path} is {len(data):,} bytes; only the first "
                   f"{MAX_BYTES:,} are parsed (RFC 9309 section 2.5)", err=True)
    return robots
