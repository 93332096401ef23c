"""warcio's own checker (the `warcio check` command), for tests that write WARC files."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from warcio.checker import Checker


def warcio_check(paths: list[Path]) -> int:
    """Run ``warcio check`` on the files; 0 when every record's digests verify."""

    class Cmd:
        inputs = [str(p) for p in paths]
        verbose = False

    return Checker(Cmd).process_all()


def capture(url: str, body: bytes, *, content_type: str = "text/html; charset=utf-8",
            status: str = "200 OK", encoding: str | None = None,
            extra: tuple[tuple[str, str], ...] = (), request_line: str = "GET /p HTTP/1.1",
            host: str = "example.test", user_agent: str | None = "crawl/0.1",
            ip: str | None = "127.0.0.1", truncated: str | None = None) -> Any:
    """A response capture as the fetcher hands it to the WARC writer, for tests of the
    store that need records without a server (the body fed in 7,000-byte pieces)."""
    from crawl import store

    hdrs = [("Content-Type", content_type), ("Content-Length", str(len(body))), *extra]
    if encoding:
        hdrs.append(("Content-Encoding", encoding))
    resp = store.http_block(f"HTTP/1.1 {status}", hdrs)
    buf = store.BodyBuffer(resp.headers_buff)
    for i in range(0, len(body), 7000):
        buf.write(body[i : i + 7000])
    req_headers = [("Host", host)] + ([("User-Agent", user_agent)] if user_agent else [])
    req = store.http_block(request_line, req_headers)
    return store.Capture(url, "response", time.time(), {"outcome": "ok"}, ip=ip,
                         request=req, response=resp, body=buf, truncated=truncated)
