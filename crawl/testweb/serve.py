"""Start a web: bind, write the files of ``--out``, serve until stopped."""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Callable
from pathlib import Path
from typing import Any

from . import content, manifest
from .generator import Web, WebConfig
from .router import Clock, Router
from .server import RequestLog, Server, run


def warm(web: Web) -> None:
    """Build the text pools pages are cut from before saying ready: the first page
    would otherwise take ~0.3 s (seconds on a loaded machine), and a crawler that
    paces itself on response times would slow down for the whole run."""
    content.page_html(web, 0, 1, 0)
    if web.config.profile == "realistic":
        from .realistic import _code_pool, _table_pool

        _code_pool(), _table_pool()


def serve(
    config: WebConfig,
    out: Path,
    port: int = 0,
    clock: Clock | None = None,
    ready: Callable[[dict[str, Any]], None] | None = None,
    full_limit: int = manifest.FULL_LIMIT,
    stop: asyncio.Event | None = None,
) -> None:
    """Serve ``config`` on its loopback addresses until SIGINT/SIGTERM.

    ``ready`` is called with the manifest summary once every file in
    ``out`` is written and the sockets are listening.
    """
    clock = clock or Clock()
    out.mkdir(parents=True, exist_ok=True)
    (out / "manifest.json").unlink(missing_ok=True)
    (out / "requests.log").write_bytes(b"")
    addresses = Web(config).addresses()

    def make_server(bound: int) -> Server:
        web = Web(dataclasses.replace(config, port=bound))
        return Server(Router(web, clock), RequestLog(out / "requests.log"), clock)

    def on_ready(server: Server, bound: int) -> None:
        warm(server.router.web)
        summ = manifest.write_all(server.router.web, out, clock.now(), full_limit)
        if ready is not None:
            ready(summ)

    asyncio.run(run(make_server, addresses, port, on_ready, stop))
