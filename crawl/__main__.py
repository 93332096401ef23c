import signal


def _interrupted_while_starting(signum: int, frame: object) -> None:
    """Ctrl-C from the very first line: the command group installs the same kind of
    handler, but importing it takes long enough for a Ctrl-C to land first (an import
    traceback). crawl.commands.main hands SIGINT to the error boundary (the mark)."""
    raise SystemExit(128 + signum)


_interrupted_while_starting.crawl_starting = True  # type: ignore[attr-defined]
if signal.getsignal(signal.SIGINT) is signal.default_int_handler:
    signal.signal(signal.SIGINT, _interrupted_while_starting)

from .commands import main  # noqa: E402

main()
