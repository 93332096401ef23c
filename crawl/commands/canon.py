"""crawl canon: URLs or URL records in, canonical URL records (or rejects) out."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import click

from crawl.canon import CANON_VERSION, DEFAULT, CanonConfig, CanonError, canonicalize
from crawl.core import Record, Report, records, run_stage

from ._common import io_options, stage_io


def canon_records(recs: list[Record], base: str | None, config: CanonConfig,
                  explain: bool, report: Report) -> Iterator[Record]:
    """One output record per input: canonical (kind kept) or a reject."""
    for rec in recs:
        url = rec["url"]
        rec_base = rec.get("base")
        use_base = rec_base if isinstance(rec_base, str) and rec_base else base
        trace: list[dict[str, object]] | None = [] if explain else None
        try:
            c = canonicalize(url, use_base, config, trace=trace)
        except CanonError as exc:
            report.add("rejected")
            report.add(f"rejected/{exc.reason}")
            out = records.derive(rec, "reject", input=url, error=exc.reason, detail=exc.detail,
                                 canon_v=CANON_VERSION)
            for stale in ("url", "fp", "surt", "host"):
                out.pop(stale, None)
        else:
            report.add("changed" if c.url != url else "unchanged")
            out = records.derive(rec, rec["kind"], url=c.url, fp=f"{c.fp:016x}", surt=c.surt,
                                 host=c.host, canon_v=CANON_VERSION)
        if trace is not None:
            out["explain"] = trace
        yield out


@click.command(name="canon")
@io_options
@click.option("--base", metavar="URL",
              help="Resolve relative references against URL (a record's own 'base' field wins).")
@click.option("--explain", is_flag=True,
              help="Add an 'explain' list to each record: which rule changed what "
                   "({rule, before, after}; the parse step also has 'notes').")
@click.option("--strip-param", "strip", multiple=True, metavar="NAME",
              help="Also strip query parameter NAME (case-insensitive; 'NAME*' strips a "
                   "prefix). Repeatable; adds to the built-in tracking list.")
@click.option("--keep-query-order", is_flag=True,
              help="Do not sort query parameters (for sites where their order matters).")
@click.option("--keep-userinfo", is_flag=True, help="Keep user:password@ in URLs.")
@click.option("--max-length", type=click.IntRange(min=16), default=DEFAULT.max_length,
              show_default=True, help="Reject canonical URLs longer than this many bytes.")
def command(input_: str, output: str, strict: bool, stats_file: Path | None,
            base: str | None, explain: bool, strip: tuple[str, ...],
            keep_query_order: bool, keep_userinfo: bool, max_length: int) -> None:
    """Canonicalise URLs: one output record per input, in input order.

    Reads plain URL lines or url/link records. A URL that canonicalises
    keeps every field and its kind and gets `url` (canonical), `fp` (XXH3-64
    of the canonical URL, 16 hex digits), `surt` (host-reversed key),
    `host` (host[:port], the politeness key) and `canon_v` (rule-set
    version). A URL that cannot becomes a `reject`
    record with `input`, `error` (a stable code: unsupported-scheme,
    invalid-host, invalid-port, too-long, relative-without-base,
    invalid-base, invalid-url, not-unicode) and `detail`, and no `url`.

    The rules, in order: WHATWG parsing (lowercase scheme and host, IDNA,
    IPv4/IPv6 forms, default port, dot segments, empty path to /,
    percent-encoding), then root dot of the host, userinfo, fragment,
    percent-escapes (unreserved decoded, hex upper-cased), ;jsessionid=
    path parameters, tracking parameters (utm_*, gclid, fbclid, mc_eid,
    ...), session parameters (jsessionid, phpsessid, sid, ...), empty
    query, stable sort of the query by parameter name.

    \b
    Example:
        $ echo 'HTTP://Example.COM:80/a/../b?utm_source=x&b=2&a=1#top' | crawl canon
        {"kind":"url","v":1,"url":"http://example.com/b?a=1&b=2","fp":"...",...}
        $ crawl canon --explain <<< 'http://EXAMPLE.com/?gclid=1#x'
        $ crawl canon --base https://example.com/docs/ < hrefs.txt
        $ crawl canon --strip-param ref --strip-param 'pk_*' -i links.ndjson
    """
    config = DEFAULT.with_strip(strip) if strip else DEFAULT
    if keep_query_order or keep_userinfo or max_length != config.max_length:
        config = replace(config, sort_query=not keep_query_order,
                         strip_userinfo=not keep_userinfo, max_length=max_length)
    with stage_io("canon", records.URL_KINDS, input_, output, strict, stats_file) as io:
        run_stage(io.source, io.sink,
                  lambda batch: canon_records(batch, base, config, explain, io.report),
                  io.report)
