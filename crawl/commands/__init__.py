"""The ``crawl`` command group and the one error boundary.

Subcommands are listed here explicitly (name -> module, one-line purpose) and
imported only when run, so ``crawl --help`` is fast and a broken optional
stage cannot break the others.
"""

from __future__ import annotations

import importlib
import os
import signal
import sys
import threading
from typing import NoReturn


def _interrupted_while_starting(signum: int, frame: object) -> NoReturn:
    """Ctrl-C before the error boundary is up (the imports take a second on a loaded
    machine) ends the command quietly with the usual 130, not an import traceback."""
    raise SystemExit(128 + signum)


_interrupted_while_starting.crawl_starting = True  # type: ignore[attr-defined]  # see crawl/__main__.py


def _starting(handler: object) -> bool:
    """Whether ``handler`` is one of the start-up handlers (here or crawl/__main__.py's)."""
    return bool(getattr(handler, "crawl_starting", False))


def _started_as_the_command() -> bool:
    main_file = str(getattr(sys.modules.get("__main__"), "__file__", "") or "")
    return main_file.endswith(("/crawl", "/crawl/__main__.py"))


# Only as the program's entry point: a library user's or a test's handler is left alone.
if (_started_as_the_command() and threading.current_thread() is threading.main_thread()
        and signal.getsignal(signal.SIGINT) is signal.default_int_handler):
    signal.signal(signal.SIGINT, _interrupted_while_starting)

import click  # noqa: E402 -- after the handler: click's import is the slow part

from crawl import __version__  # noqa: E402

# name: (module under crawl.commands, one-line purpose)
COMMANDS: dict[str, tuple[str, str]] = {
    "canon": ("canon", "Canonicalise URLs: one reviewable rule set, fingerprints, SURT keys."),
    "frontier": ("frontier", "The durable frontier: add URLs, lease them politely, complete them."),
    "fetch": ("fetch", "Fetch leased URLs politely into WARC files; emit fetch results."),
    "robots": ("robots", "Explain robots.txt decisions for URLs (live or from a local file)."),
    "parse": ("parse", "Extract links from fetched pages (HTML and sitemaps)."),
    "seen": ("seen", "Pass through only URLs never seen before (Bloom filter + exact set)."),
    "dedupe": ("dedupe", "Flag exact and near-duplicate pages (64-bit simhash)."),
    "recrawl": ("recrawl", "Emit URLs due for a re-fetch from their change history."),
    "run": ("run", "Run the whole crawl loop with progress, budgets and resume."),
    "stats": ("stats", "Show what a crawl directory holds and how the crawl is going."),
    "report": ("report", "Audit a crawl: broken links and their referrers, redirects, duplicates."),
    "why": ("why", "Explain why a URL is or is not fetched, or why a host waits."),
    "index": ("index", "Build or query the CDXJ index of the WARC files."),
    "check": ("check", "Verify a crawl directory and repair what can be repaired (an fsck)."),
    "spool": ("spool", "Inspect and feed durable spools (LMDB queues between stages)."),
    "cluster": ("cluster", "Share one crawl between nodes over NATS JetStream (dev, init, status, drain)."),
    "testweb": ("testweb", "Serve the bundled synthetic web on loopback and audit politeness."),
}


def _available(name: str) -> bool:
    mod = COMMANDS[name][0]
    spec = importlib.util.find_spec(f"{__name__}.{mod}")
    return spec is not None


class LazyGroup(click.Group):
    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted(n for n in COMMANDS if _available(n))

    def get_command(self, ctx: click.Context, name: str) -> click.Command | None:
        if name not in COMMANDS or not _available(name):
            return None
        mod = importlib.import_module(f"{__name__}.{COMMANDS[name][0]}")
        cmd: click.Command = mod.command
        return cmd

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        rows = [(n, COMMANDS[n][1]) for n in self.list_commands(ctx)]
        if rows:
            with formatter.section("Commands"):
                formatter.write_dl(rows)


@click.group(cls=LazyGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="crawl")
@click.option("--traceback", is_flag=True, envvar="CRAWL_TRACEBACK", help="Show Python tracebacks on errors.")
@click.pass_context
def cli(ctx: click.Context, traceback: bool) -> None:
    """A polite, durable web crawler made of small Unix commands.

    Stages exchange newline-delimited JSON through pipes or spools. One
    round of the loop by hand (fetch results go back to the frontier, which
    completes their leases, and to the parser, which finds new links):

    \b
        crawl frontier add --dir D < seeds.txt
        crawl frontier next --dir D -n 100 | crawl fetch --dir D > fetched.ndjson
        crawl frontier complete --dir D < fetched.ndjson > /dev/null
        crawl parse --dir D < fetched.ndjson | crawl seen --dir D \\
          | crawl frontier add --dir D

    Repeat the last three until `frontier next` prints nothing; a first
    round mostly fetches robots.txt (each page waits for its host's next
    turn: outcome `deferred`). Or run the whole loop with `crawl run --dir
    D --seeds seeds.txt`. One `crawl run` per directory: a second is refused
    (exit 2) naming the first. Every command has its own --help and man page
    (man crawl-NAME; from a checkout, man -l man/crawl-NAME.1).

    Name yourself to the sites you crawl: --user-agent 'NAME/1.0
    (+https://your.site/bot)' or CRAWL_USER_AGENT (fetch and run warn once
    while the placeholder contact is in use).
    """
    ctx.obj = {"traceback": traceback}


def one_blas_thread(environ: dict[str, str] | os._Environ[str] = os.environ) -> None:
    """Ask numpy's OpenBLAS for no thread pool, unless the operator chose a size.

    OpenBLAS starts a worker thread per core when numpy is imported, and that
    thread spins before it sleeps: ~50-90 ms of CPU in each of ``crawl run``'s
    two processes (issue 19, CPU per page), for nothing: no stage calls a BLAS
    routine (the seen set, the dedupe index and boilerplate counts are plain
    array arithmetic). Read by OpenBLAS when it loads, so set before numpy is
    imported; a parse process inherits it (crawl/run/spawn.py sets it too).
    """
    environ.setdefault("OPENBLAS_NUM_THREADS", "1")


def main(argv: list[str] | None = None) -> NoReturn:
    """Entry point: the one place where errors become messages and exit codes
    (:mod:`._boundary`)."""
    from . import _boundary

    one_blas_thread()
    if _starting(signal.getsignal(signal.SIGINT)):
        signal.signal(signal.SIGINT, signal.default_int_handler)  # the boundary takes it from here
    args = list(sys.argv[1:] if argv is None else argv)

    def invoke() -> None:
        with cli.make_context("crawl", list(args)) as ctx:
            cli.invoke(ctx)

    sys.exit(_boundary.run(invoke, args))
