"""The audit's reference point: the end of an answer as the server sent it.

The test web stamps ``end`` when an answer's last byte went to the kernel
(never after: an end stamped after a drip's last pause, or after a
descheduled write, made a polite crawler look 60 ms early in ``make demo``),
and every wait the audit checks (delay, Crawl-delay, Retry-After, backoff)
runs from that ``end`` to the next request's ``start``. Checked against a
raw socket client that notes when it read each byte, and on synthetic logs.
"""

from __future__ import annotations

import re
import socket
import time
from pathlib import Path

import pytest
from conftest import TESTWEB_CLOCK, TestWeb, start_testweb

from crawl.testweb.audit import TOLERANCE, audit

S = 1_000_000_000


def _get(addr: str, port: int, host: str, path: str, *, rcvbuf: int = 0, pause: float = 0.0) -> dict[str, int]:
    """GET over a raw socket; monotonic ns when sent, when the head and the last byte were read."""
    s = socket.socket()
    if rcvbuf:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, rcvbuf)
    s.settimeout(20)
    s.connect((addr, port))
    try:
        req = f"GET {path} HTTP/1.1\r\nHost: {host}\r\nUser-Agent: crawl/0.1\r\nConnection: close\r\n\r\n"
        sent = time.monotonic_ns()
        s.sendall(req.encode())
        if pause:
            time.sleep(pause)
        resumed = time.monotonic_ns()
        first, total, head, want = b"", 0, 0, -1
        while total != want and (chunk := s.recv(1 << 20)):  # to Content-Length (the huge page keeps the connection)
            total += len(chunk)
            if not head:
                first += chunk
                if b"\r\n\r\n" in first:
                    head = time.monotonic_ns()
                    top, _, _ = first.partition(b"\r\n\r\n")
                    length = re.search(rb"(?im)^content-length:\s*(\d+)", top)
                    want = len(top) + 4 + int(length.group(1)) if length else -1
            last = time.monotonic_ns()
    finally:
        s.close()
    assert first.startswith(b"HTTP/1.1 200")
    return {"sent": sent, "resumed": resumed, "head": head, "last": last, "bytes": total}


def _logged(web: TestWeb, since: int, n: int) -> list[dict]:
    """The server's next ``n`` records (an answer is logged once it has ended, a moment after)."""
    deadline = time.monotonic() + 20
    while len(got := web.requests(since)) < n and time.monotonic() < deadline:
        time.sleep(0.05)
    return got


def test_end_is_the_last_byte_of_a_dripped_body_not_later(tmp_path: Path) -> None:
    """Headers at once, the body dripped 1 KiB per 50 ms over a second or more:
    end falls after the head and no later than the client read the last byte
    (it used to be one drip pause later)."""
    with start_testweb(tmp_path, hosts=2, seed=7, pages=6, mix="slow", latency=0, drip=0.05,
                       clock=TESTWEB_CLOCK) as web:
        [slow] = web.with_behaviour("slow")
        before = len(web.requests())
        got = _get(web.address(slow), web.port, slow, "/docs/alpha-alpha-5.html")  # ~2 KiB: 3 chunks
        big = _get(web.address(slow), web.port, slow, "/")  # ~52 KB: ~50 chunks
        one, two = _logged(web, before, 2)
    for c, r in ((got, one), (big, two)):
        assert c["sent"] <= r["start"] <= c["head"] < r["end"] <= c["last"], (c, r)
    assert (big["last"] - big["head"]) / S > 1.0  # the body really was dripped


def test_end_of_a_large_answer_waits_for_its_buffered_bytes(tmp_path: Path) -> None:
    """32 MB to a client that reads nothing for half a second (more than the
    kernel's buffers hold): the answer ends when its last buffered byte went
    out, after the client read again and before it read that byte."""
    with start_testweb(tmp_path, hosts=2, seed=7, pages=3, mix="huge", huge_bytes=32 << 20,
                       clock=TESTWEB_CLOCK) as web:
        [host] = web.with_behaviour("huge")
        before = len(web.requests())
        c = _get(web.address(host), web.port, host, "/huge.html", pause=0.5)
        [r] = _logged(web, before, 1)
    assert c["bytes"] > 32 << 20 and r["bytes"] == 32 << 20
    assert c["sent"] <= r["start"] and c["resumed"] < r["end"] <= c["last"], (c, r)


def _req(start: float, end: float, path: str = "/", status: int = 200, **extra: object) -> dict:
    return {"host": "a.test", "start": int(start * S), "end": int(end * S), "path": path, "addr": "127.0.1.1",
            "conn": 1, "status": status, "ua": "crawl/0.1", **extra}


HOSTS = {"a.test": {"robots": {"rules": []}}}
SLOW = {"a.test": {"robots": {"rules": [], "crawl_delay": 2.0}}}


@pytest.mark.parametrize(
    ("log", "hosts", "found"),
    [
        # a body dripped for 1 s; asked again 1.5 s after the request began but 0.5 s after it ended
        ([_req(0, 1.0), _req(1.5, 1.6, "/next")], HOSTS, ["gap"]),
        ([_req(0, 1.0), _req(2.0, 2.1, "/next")], HOSTS, []),
        # the tolerance: loopback skew, not a second delay
        ([_req(0, 1.0), _req(2.0 - TOLERANCE / 2, 2.1, "/next")], HOSTS, []),
        ([_req(0, 1.0), _req(2.0 - TOLERANCE * 2, 2.1, "/next")], HOSTS, ["gap"]),
        # Crawl-delay 2 from the end of a 1 s answer, not from its start
        ([_req(0, 1.0), _req(2.5, 2.6, "/next")], SLOW, ["gap"]),
        ([_req(0, 1.0), _req(3.0, 3.1, "/next")], SLOW, []),
        # Retry-After 3 on a 429 that took 2 s to send: 3 s from its end
        ([_req(0, 2.0, "/busy", 429, retry_after=3.0), _req(4.0, 4.1, "/next")], HOSTS, ["retry-after"]),
        ([_req(0, 2.0, "/busy", 429, retry_after=3.0), _req(5.0, 5.1, "/next")], HOSTS, []),
        # no Retry-After: the backoff (twice the delay) from the end of the 503
        ([_req(0, 2.0, "/busy", 503), _req(3.5, 3.6, "/next")], HOSTS, ["backoff"]),
        ([_req(0, 2.0, "/busy", 503), _req(4.0, 4.1, "/next")], HOSTS, []),
    ],
)
def test_every_wait_counts_from_the_end_of_the_previous_answer(log: list[dict], hosts: dict,
                                                               found: list[str]) -> None:
    assert sorted(v["rule"] for v in audit(log, hosts, delay=1.0)) == found


def test_a_schedule_that_counts_the_delay_from_the_request_is_flagged() -> None:
    """A client that waits its delay from each request's start (or its headers):
    polite for fast answers, early after every slow body, and the audit says so."""
    log, t = [], 0.0
    for n, body in enumerate([0.002, 1.2, 0.002, 0.8, 2.0, 0.002]):
        log.append(_req(t, t + body, f"/p{n}"))
        t += 1.01  # the delay (and a little) from the start
        t = max(t, log[-1]["end"] / S + 0.01)  # never overlapping: only the gap rule can see it
    flagged = [v["requests"][0]["path"] for v in audit(log, HOSTS, delay=1.0)]
    assert flagged == ["/p1", "/p3", "/p4"]
    assert all(v["rule"] == "gap" for v in audit(log, HOSTS, delay=1.0))
