"""A loopback HTTP server whose routes misbehave on purpose (scrapy mockserver style).

Raw sockets, not http.server, so each route controls the exact bytes: broken
framing, huge headers, trickling bodies, bombs. One server on 127.0.0.1
plays many hosts: the robots.txt behaviour is picked by the Host header
(``r500.test``, ``rbig.test``...), so tests map names to it with the
crawler's own DNS override (``hosts_text``).

Run it by hand: ``python tests/hostile.py`` prints its port and serves.
"""

from __future__ import annotations

import gzip
import socket
import socketserver
import threading
import time
import zlib
from dataclasses import dataclass, field
from typing import Any

import brotli

HTML = b"<!doctype html><html><head><title>ok</title></head><body><a href='/ok2'>x</a></body></html>"

ROBOTS_HOSTS = {
    "allow.test": b"User-agent: *\nDisallow: /private\n",
    "delay.test": b"User-agent: crawl\nCrawl-delay: 7\nDisallow: /no\n",
}


def read_head(sock: socket.socket, buf: bytes) -> tuple[bytes, bytes] | None:
    """The next request head on ``sock`` (``buf``: bytes already read) and what follows
    it, or None when the client hung up first."""
    while b"\r\n\r\n" not in buf:
        data = sock.recv(65536)
        if not data:
            return None
        buf += data
    head, _, rest = buf.partition(b"\r\n\r\n")
    return head, rest


@dataclass
class State:
    """What the server saw, and switches a test can flip."""

    log: list[dict[str, Any]] = field(default_factory=list)
    robots_mode: dict[str, str] = field(default_factory=dict)  # host -> "ok" | "503" | "503-retry" | "cut"
    lock: threading.Lock = field(default_factory=threading.Lock)

    def requests(self, host: str | None = None, path: str | None = None) -> list[dict[str, Any]]:
        with self.lock:
            return [r for r in self.log if (host is None or r["host"] == host)
                    and (path is None or r["path"] == path)]


_BOMBS: dict[str, bytes] = {}


def bomb(kind: str) -> bytes:
    """200 MB of zeros, compressed (~200 KB gzip, far less br): built once."""
    if kind not in _BOMBS:
        zeros = bytes(1 << 20)
        if kind == "gzip":
            c = zlib.compressobj(9, zlib.DEFLATED, 31)
            _BOMBS[kind] = b"".join(c.compress(zeros) for _ in range(200)) + c.flush()
        else:
            _BOMBS[kind] = brotli.compress(zeros * 200, quality=1)
    return _BOMBS[kind]


def _resp(status: str, headers: list[tuple[str, str]], body: bytes = b"", length: bool = True) -> bytes:
    h = [f"HTTP/1.1 {status}"] + [f"{k}: {v}" for k, v in headers]
    if length:
        h.append(f"Content-Length: {len(body)}")
    return ("\r\n".join(h) + "\r\n\r\n").encode("latin-1") + body


class Handler(socketserver.BaseRequestHandler):
    server: Server

    def handle(self) -> None:
        sock: socket.socket = self.request
        sock.settimeout(10)
        buf = b""
        try:
            while True:
                got = read_head(sock, buf)
                if got is None:
                    return
                head, buf = got
                lines = head.decode("latin-1").split("\r\n")
                method, path, _ = lines[0].split(" ", 2)
                hdrs = {k.strip().lower(): v.strip() for k, _, v in (ln.partition(":") for ln in lines[1:])}
                host = hdrs.get("host", "").split(":")[0]
                with self.server.state.lock:
                    self.server.state.log.append({"host": host, "path": path, "headers": hdrs,
                                                  "t": time.time()})
                if not self.route(sock, host, path, hdrs):
                    return
        except OSError:
            return

    def route(self, sock: socket.socket, host: str, path: str, hdrs: dict[str, str]) -> bool:
        """Send the response; return False to close the connection."""
        send = sock.sendall
        st = self.server.state
        if path == "/robots.txt" or path.startswith("/robots-hop"):
            return self.robots(sock, host, path)
        if path.startswith("/ok"):
            send(_resp("200 OK", [("Content-Type", "text/html; charset=utf-8")], HTML))
        elif path == "/gzip":
            send(_resp("200 OK", [("Content-Type", "text/html"), ("Content-Encoding", "gzip")],
                       gzip.compress(HTML * 50)))
        elif path == "/chunked":
            send(b"HTTP/1.1 200 OK\r\nContent-Type: text/html\r\nTransfer-Encoding: chunked\r\n\r\n")
            for part in (HTML[:20], HTML[20:]):
                send(b"%x\r\n%s\r\n" % (len(part), part))
            send(b"0\r\n\r\n")
        elif path == "/etag":
            if hdrs.get("if-none-match") == '"v1"':
                send(_resp("304 Not Modified", [("ETag", '"v1"')], length=False))
            else:
                send(_resp("200 OK", [("Content-Type", "text/html"), ("ETag", '"v1"'),
                                      ("Last-Modified", "Wed, 01 Jan 2025 00:00:00 GMT")], HTML))
        elif path == "/redirect":
            send(_resp("301 Moved Permanently", [("Location", "/ok-target")], b"moved"))
        elif path == "/cross-redirect":
            send(_resp("302 Found", [("Location", "http://other.test/ok")], b""))
        elif path == "/retry":
            send(_resp("503 Service Unavailable", [("Retry-After", "120")], b"busy"))
        elif path == "/notfound":
            send(_resp("404 Not Found", [("Content-Type", "text/html")], b"nope"))
        elif path == "/image":
            send(_resp("200 OK", [("Content-Type", "image/png")], b"\x89PNG" + bytes(2_000_000)))
        elif path == "/huge":  # 20 MB advertised and sent
            send(b"HTTP/1.1 200 OK\r\nContent-Type: text/html\r\nContent-Length: 20000000\r\n\r\n")
            block = b"x" * 65536
            for _ in range(20_000_000 // 65536):
                send(block)
        elif path == "/endless":  # chunked, never ends
            send(b"HTTP/1.1 200 OK\r\nContent-Type: text/html\r\nTransfer-Encoding: chunked\r\n\r\n")
            block = b"y" * 65536
            while True:
                send(b"%x\r\n%s\r\n" % (len(block), block))
        elif path in ("/gzip-bomb", "/br-bomb"):
            kind = "gzip" if path == "/gzip-bomb" else "br"
            send(_resp("200 OK", [("Content-Type", "text/html"), ("Content-Encoding", kind)], bomb(kind)))
        elif path == "/slow-headers":
            time.sleep(self.server.delay)
            send(_resp("200 OK", [("Content-Type", "text/html")], HTML))
        elif path.startswith("/slowish"):  # a normal page that takes 0.2 s
            time.sleep(0.2)
            send(_resp("200 OK", [("Content-Type", "text/html")], HTML + path.encode() * 200))
        elif path == "/trickle":
            send(b"HTTP/1.1 200 OK\r\nContent-Type: text/html\r\nContent-Length: 100000\r\n\r\n")
            for _ in range(100000):
                send(b"z")
                time.sleep(0.05)
        elif path == "/big-headers":
            send(b"HTTP/1.1 200 OK\r\n" + b"".join(b"X-Pad-%d: %s\r\n" % (i, b"p" * 1000)
                                                  for i in range(300)) + b"\r\nbody")
            return False
        elif path == "/drop":
            return False
        elif path == "/partial":
            send(b"HTTP/1.1 200 OK\r\nContent-Type: text/html\r\nContent-Length: 10000\r\n\r\n" + HTML)
            return False
        elif path == "/garbage":
            send(b"SPEAK FRIEND AND ENTER\r\n\r\n")
            return False
        else:
            send(_resp("404 Not Found", [("Content-Type", "text/plain")], b"no route"))
        del st
        return True

    def robots(self, sock: socket.socket, host: str, path: str) -> bool:
        send = sock.sendall
        mode = self.server.state.robots_mode.get(host, "ok")
        if mode == "503" or host == "r500.test":
            send(_resp("500 Internal Server Error", [], b"oops"))
        elif mode == "503-retry":  # unreachable, and says when to come back
            send(_resp("503 Service Unavailable", [("Retry-After", "7")], b"later"))
        elif mode == "cut":  # 200, then the connection drops inside the body: half a file
            whole = b"User-agent: *\nDisallow: /private\nDisallow: /ok\n"
            head = _resp("200 OK", [("Content-Type", "text/plain")], whole)
            send(head[: len(head) - len(whole) + 30])  # up to "Disallow: /priv"
            return False
        elif host == "r404.test" or host == "other.test":
            send(_resp("404 Not Found", [], b""))
        elif host == "r401.test":
            send(_resp("401 Unauthorized", [], b""))
        elif host == "rtimeout.test":
            time.sleep(self.server.delay)
            send(_resp("200 OK", [("Content-Type", "text/plain")], b"User-agent: *\nDisallow:\n"))
        elif host == "rdrop.test":
            return False
        elif host in ("rredir.test", "rredir6.test"):
            hops = 2 if host == "rredir.test" else 6
            n = 0 if path == "/robots.txt" else int(path.rsplit("-", 1)[1])
            if n < hops:
                send(_resp("301 Moved", [("Location", f"/robots-hop-{n + 1}")], b""))
            else:
                send(_resp("200 OK", [("Content-Type", "text/plain")], b"User-agent: *\nDisallow: /\n"))
        elif host == "rbig.test":  # 600 KiB: a rule early, a rule past 500 KiB
            filler = b"# " + b"f" * 1000 + b"\n"
            body = b"User-agent: *\nDisallow: /early\n" + filler * 600 + b"Disallow: /late\n"
            send(_resp("200 OK", [("Content-Type", "text/plain")], body))
        elif host == "stale.test" or host in ROBOTS_HOSTS:
            body = ROBOTS_HOSTS.get(host, b"User-agent: *\nDisallow: /private\n")
            send(_resp("200 OK", [("Content-Type", "text/plain")], body))
        else:
            send(_resp("404 Not Found", [], b""))
        return True


class Server(socketserver.ThreadingTCPServer):
    daemon_threads = True
    allow_reuse_address = True
    request_queue_size = 256

    def __init__(self, delay: float = 3.0) -> None:
        super().__init__(("127.0.0.1", 0), Handler)
        self.state = State()
        self.delay = delay  # how long "slow" routes stall (tests use a shorter client timeout)
        self.port = self.server_address[1]
        self._thread = threading.Thread(target=self.serve_forever, daemon=True)

    def start(self) -> Server:
        self._thread.start()
        return self

    def stop(self) -> None:
        self.shutdown()
        self.server_close()

    def url(self, host: str, path: str) -> str:
        return f"http://{host}:{self.port}{path}"


HOSTS = ["allow.test", "delay.test", "other.test", "stale.test", "r404.test", "r401.test",
         "r500.test", "rtimeout.test", "rdrop.test", "rredir.test", "rredir6.test", "rbig.test"]


def hosts_text(addr: str = "127.0.0.1") -> str:
    return "# hostile test server\n" + "".join(f"{addr} {h}\n" for h in HOSTS)


if __name__ == "__main__":
    srv = Server().start()
    print(f"hostile server on 127.0.0.1:{srv.port}; hosts:\n{hosts_text()}", flush=True)
    try:
        while True:
            time.sleep(3600)
    except KeyboardInterrupt:
        srv.stop()
