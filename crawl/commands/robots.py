"""crawl robots: explain robots.txt decisions, from a local file or live."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import click

from crawl.core import (
    AGENT_TOKEN,
    DEFAULT_USER_AGENT,
    BadRecord,
    ExitStatus,
    Record,
    Report,
    UsageError,
    open_source,
    records,
)
from crawl.robots import (
    MAX_BYTES,
    Robots,
    RobotsSource,
    agent_token,
    decision_record,
    format_text,
    parse,
)

from ._common import check_source, finish

_ACCEPT = records.URL_KINDS | {"fetch", "lease"}


def _urls(urls: tuple[str, ...], input_: str, report: Report) -> Iterator[tuple[str, Record]]:
    """(where, record) for each URL: "argument N" or "line N" names it in a message."""
    if urls:
        yield from ((f"argument {i}", records.make("url", url=u)) for i, u in enumerate(urls, 1))
        return
    if input_ == "-" and sys.stdin.isatty():
        report.warn("reading URLs from standard input (Ctrl-D to end)")
    n = 0
    for batch in open_source(input_, _ACCEPT, report).batches(100):
        for rec in batch.records:
            n += 1
            yield f"record {n}", rec
        batch.ack()


def _invalid(url: object, local: bool) -> str | None:
    """Why ``url`` cannot be decided, or None. Every stage validates URLs with the
    canonicaliser; a robots.txt answers only for http(s) URLs with a host (a bare
    path is a URL on the file's own site, with --robots-file)."""
    if not isinstance(url, str) or not url:
        return 'no "url" string'
    if url.startswith("/") and not url.startswith("//"):
        return None if local else ("not an absolute URL: live mode needs scheme and host (or give "
                                   "--robots-file to test a local file with bare paths)")
    from crawl.canon import CanonError, canonicalize

    try:
        canonicalize(url)
    except CanonError as exc:
        return str(exc)
    return None


@click.command(name="robots")
@click.argument("urls", nargs=-1, metavar="[URL]...")
@click.option("-i", "--input", "input_", default="-", show_default=True, metavar="SRC", callback=check_source,
              help="Without URL arguments, read URLs from SRC: '-' (stdin), a file or spool:DIR "
                   "(a spool is consumed, as by any stage).")
@click.option("--strict", is_flag=True, help="Exit with status 3 if any input line was malformed.")
@click.option("-A", "--agent", default=None, metavar="AGENT",
              help="Product token (or full User-Agent string) whose group applies. Default: the "
                   "token of --user-agent, as the crawl would use it (crawl).")
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
              help="The full User-Agent header (as for crawl fetch and crawl run): sent with the "
                   "live robots.txt request, and its product token picks the group unless -A is "
                   "given. Default: crawl's.")
def command(urls: tuple[str, ...], input_: str, strict: bool, agent: str | None, robots_file: Path | None, as_json: bool,
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

    A URL that cannot be crawled at all (another scheme, a bad port,
    `http://[::1`) is bad input: one message on stderr, counted, skipped
    (exit 3 with --strict). Exit status 1 means a robots.txt could not be
    consulted (unreachable, 5xx: the URL is answered disallowed, as RFC
    9309 says) or, with --fail-disallowed, that a URL is disallowed.
    """
    if agent is None:  # the group the crawl itself would get with this User-Agent
        agent = agent_token(user_agent or DEFAULT_USER_AGENT) or AGENT_TOKEN
    source = RobotsSource(_load(robots_file, urls) if robots_file else None, robots_file,
                          dict(crawl_dir=crawl_dir, resolve_file=resolve_file,
                               allow_private=allow_private, user_agent=user_agent))
    out = sys.stdout.buffer
    report = Report("robots")
    for where, rec in _urls(urls, input_, report):
        why = _invalid(rec.get("url"), robots_file is not None)
        if why is not None:  # bad input: said, counted, skipped (exit 3 with --strict)
            report.bad(BadRecord(0, f"{where}: {str(rec.get('url'))[:200]!r}: {why}"))
            continue
        out_rec = decision_record(rec, agent, source, explain)
        verdict = (out_rec.get("robots_txt") or {}).get("verdict")
        report.add({True: "allowed", False: "disallowed"}.get(out_rec["allowed"], "errors"))
        if out_rec["allowed"] is not None and verdict == "unreachable":
            report.add("not_consulted")  # decided by RFC 9309's rule for a missing answer
        out.write(records.encode(out_rec) if as_json else format_text(out_rec, explain).encode())
        out.flush()
    finish(report, strict, None)
    c = report.counts
    if c.get("errors") or c.get("not_consulted") or (fail_disallowed and c.get("disallowed")):
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
