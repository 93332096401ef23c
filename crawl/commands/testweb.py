"""``crawl testweb``: serve the synthetic web on loopback; audit a crawl's politeness."""

from __future__ import annotations

import sys
from pathlib import Path

import click
import orjson

from crawl.core import UsageError

from ._common import DURATION

_DIR = click.Path(file_okay=False, path_type=Path)


@click.group("testweb")
def command() -> None:
    """The bundled synthetic web: many hosts on 127.0.0.0/8, robots variants,
    traps, slow and failing hosts, near-duplicates, with a ground-truth manifest.

    \b
        crawl testweb serve --out web --hosts 40 &
        crawl run --dir D --seeds web/seeds.txt --resolve-file web/hosts --allow-private
        crawl testweb audit web
    """


@command.command("serve")
@click.option("--out", "out", required=True, type=_DIR, help="Directory for hosts, seeds.txt, manifest.json, manifest.ndjson, requests.log.")
@click.option("--hosts", default=40, show_default=True, type=click.IntRange(1, 1_000_000), help="Number of hosts.")
@click.option("--seed", default=0, show_default=True, help="Seed: the same seed and knobs serve byte-identical webs.")
@click.option("--port", default=0, show_default=True, type=click.IntRange(0, 65535), help="Port on every address (0: an ephemeral one, printed when ready).")
@click.option("--pages", default=20, show_default=True, type=click.IntRange(2, 50_000), help="Ordinary pages per host (one sitemap lists them all: at most 50,000).")
@click.option("--links", default=8, show_default=True, type=click.IntRange(0, 1000), help="Body links per page (besides navigation).")
@click.option("--cross", default=0.1, show_default=True, type=click.FloatRange(0, 1), help="Fraction of body links that point to other hosts.")
@click.option("--addresses", default=16, show_default=True, type=click.IntRange(1, 63_500), help="Loopback addresses (127.0.1.1 ...) the hosts share.")
@click.option("--agent", default="crawl", show_default=True, help="Product token the robots.txt groups address.")
@click.option("--mix", default="default", show_default=True, help="'default' (every behaviour on the first hosts, then mostly ordinary), 'plain', or a comma list of behaviours / robots variants.")
@click.option("--clock", "clock", type=float, default=None, help="Start a simulated clock at this unix time (moved only through the admin host).")
@click.option("--latency", default=0.3, type=DURATION, show_default=True, help="Seconds before each answer of a slow host.")
@click.option("--drip", default=0.05, type=DURATION, show_default=True, help="Seconds between 1 KiB chunks of a slow host.")
@click.option("--busy", default=1, show_default=True, help="Times a busy page answers 429/503 before 200.")
@click.option("--hang", default=60.0, type=DURATION, show_default=True, help="Seconds a timing-out robots.txt holds the connection.")
@click.option("--robots-recover", default=0, show_default=True, type=click.IntRange(min=0), help="The 500 and timeout robots.txt variants fail this many times per host, then answer 200 with 'Disallow: /private/' (0: they never recover).")
@click.option("--huge-bytes", default=500_000_000, show_default=True, help="Length of the huge HTML stream.")
@click.option("--bomb-bytes", default=1 << 30, show_default=True, help="Inflated size of the gzip bomb.")
@click.option("--profile", default="synthetic", show_default=True, type=click.Choice(["synthetic", "realistic"]), help="Page shapes: 'synthetic' (2-200 KB, a dozen links) or 'realistic' (sized like documentation and news sites: median ~25 KB, p99 ~550 KB, up to 2 MB; 50-3,000 links, most in a sidebar every page of a host repeats; some pages mostly code or tables). --links applies to synthetic only.")
@click.option("--news", default=0, show_default=True, type=click.IntRange(0, 1000), help="A home page that changes links to the articles of its newest N revisions (/latest/R.html), so every revision brings new URLs (not in the manifest; 0: off).")
@click.option("--full-manifest-limit", default=500, show_default=True, help="List every page in manifest.ndjson only up to this many hosts.")
def serve_cmd(out: Path, hosts: int, seed: int, port: int, pages: int, links: int, cross: float,
              addresses: int, agent: str, mix: str, clock: float | None, latency: float, drip: float,
              busy: int, hang: float, robots_recover: int, huge_bytes: int, bomb_bytes: int,
              profile: str, full_manifest_limit: int, news: int = 0) -> None:
    """Generate a deterministic web and serve it until interrupted.

    Writes OUT/hosts ("ADDRESS NAME" lines for the crawler's DNS override),
    OUT/seeds.txt (every home page), OUT/manifest.json (summary; written
    last, so its presence means ready), OUT/manifest.ndjson (ground truth:
    a host record per host, a page record per URL) and OUT/requests.log (one
    NDJSON line per request, flushed every 100 ms). When listening it prints
    one JSON line on stdout: {"kind": "testweb", "port": P, "dir": ...}.

    The admin host admin.testweb.test (any address, same port) answers
    /clock?set=T or /clock?advance=S (simulated time) and /flush (write the
    log now); its requests are not logged.

    \b
    Behaviours (--mix): plain near-dups mirror traps redirects busy slow
      reset endless huge gzip-bomb content-type charset gzip-multi
      gzip-trailing;
    robots variants: simple rules 404 500 timeout oversize redirect
    (each is described in the README, "The test web").

    \b
        crawl testweb serve --out web --hosts 40 --port 8080
        crawl testweb serve --out web --hosts 200 --pages 50 --profile realistic
        curl -H 'Host: h0000.test' http://127.0.1.1:8080/
    """
    from ..testweb import Clock, WebConfig
    from ..testweb.serve import serve

    try:
        config = WebConfig(seed=seed, hosts=hosts, pages=pages, links=links, cross=cross,
                           addresses=addresses, agent=agent, mix=mix, latency=latency, drip=drip,
                           busy=busy, hang=hang, robots_recover=robots_recover, huge_bytes=huge_bytes,
                           bomb_bytes=bomb_bytes, news=news, profile=profile)
    except ValueError as exc:
        raise UsageError(str(exc)) from exc

    def ready(summary: dict) -> None:
        line = {"kind": "testweb", "port": summary["port"], "dir": str(out.resolve()),
                "hosts": hosts, "addresses": summary["addresses"]}
        sys.stdout.buffer.write(orjson.dumps(line) + b"\n")
        sys.stdout.flush()
        click.echo(f"crawl testweb: {hosts} hosts on {len(summary['addresses'])} addresses, "
                   f"port {summary['port']}; files in {out}", err=True)

    serve(config, out, port, Clock(clock), ready, full_manifest_limit)


@command.command("manifest")
@click.argument("web_dir", type=click.Path(exists=True, file_okay=False, path_type=Path))
@click.option("--host", "hosts", multiple=True, help="Only this host (repeatable); default: every host.")
@click.option("--at", "at", type=float, default=None, help="Unix time for page versions (default: when the web started).")
def manifest_cmd(web_dir: Path, hosts: tuple[str, ...], at: float | None) -> None:
    """Print the ground truth (host and page records, NDJSON) of a served web.

    Webs above --full-manifest-limit hosts list only host records in
    manifest.ndjson; this computes the page records of any host on demand,
    from the same functions the server uses.

    \b
        crawl testweb manifest web --host h0042.test | jq -c 'select(.disallowed)'
    """
    from ..testweb.manifest import records_for

    try:
        for rec in records_for(web_dir, list(hosts) or None, at):
            sys.stdout.buffer.write(orjson.dumps(rec) + b"\n")
    except KeyError as exc:
        raise UsageError(f"no host {exc.args[0]!r} in the web of {web_dir}") from None


@command.command("audit")
@click.argument("web_dir", type=click.Path(exists=True, file_okay=False, path_type=Path))
@click.option("--delay", default=1.0, type=DURATION, show_default=True, help="Minimum seconds between requests to one host (raised by a robots Crawl-delay).")
@click.option("--per-ip", default=4, show_default=True, help="Most requests allowed in flight to one address.")
@click.option("--agent", default=None, help="Only audit requests whose User-Agent product token is this (e.g. crawl; default: all).")
@click.option("--log", "log_file", type=click.Path(exists=True, dir_okay=False, path_type=Path), help="Audit this log instead of WEB_DIR/requests.log.")
@click.option("--tolerance", default=0.005, type=DURATION, show_default=True, help="Seconds of slack on each wait, for loopback clock skew (every wait counts from the end of the previous answer as the server sent it).")
@click.option("--backoff", type=DURATION, default=None, help="Least seconds before asking a host again after a 429/503 without Retry-After (default: twice --delay).")
@click.option("--json", "as_json", is_flag=True, help="Print violations as NDJSON records, then a summary record.")
def audit_cmd(web_dir: Path, delay: float, per_ip: int, agent: str | None, log_file: Path | None, tolerance: float, backoff: float | None, as_json: bool) -> None:
    """Check a test web's request log against the politeness rules.

    Reports overlapping requests to one host, gaps shorter than the host's
    required delay (max of --delay and its robots Crawl-delay), more than
    --per-ip requests in flight to one address, fetches of paths the
    host's robots.txt disallows, requests sooner than a 429/503 answer's
    Retry-After asked (the server logs the wait it sent), and requests
    sooner than --backoff after a 429/503 that named no wait. Exits 1 if
    there is any violation.

    \b
        crawl testweb audit web --delay 1 --per-ip 4
        crawl testweb audit web --json | jq -c 'select(.rule=="gap")'
    """
    from ..testweb.audit import audit_dir

    violations, summary = audit_dir(web_dir, delay=delay, per_ip=per_ip, agent=agent, log=log_file,
                                     tolerance=tolerance, backoff=backoff)
    for v in violations:
        if as_json:
            sys.stdout.buffer.write(orjson.dumps(v) + b"\n")
        else:
            click.echo(f"{v['rule']}: {v['host']}: {v['detail']}")
    if as_json:
        sys.stdout.buffer.write(orjson.dumps(summary) + b"\n")
    click.echo(f"crawl testweb audit: {summary['requests']} requests, "
               f"{len(violations)} violation(s)", err=True)
    sys.exit(1 if violations else 0)
