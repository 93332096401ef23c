"""What a mutation run (issue 21) found untested in the robots fetcher's memory:
a parsed copy is used until its entry expires and never after (the file is
asked for again), and the per-origin locks do not pile up. A real HTTP server on
loopback; the fetcher's clock is a plain number the test moves."""

from __future__ import annotations

import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import lmdb
import pytest
import trio

from crawl.net import AddressPolicy, Resolver, make_transport
from crawl.robots.fetch import GIVE_UP_UNREACHABLE, ROBOTS_TTL, RobotsCache, RobotsFetcher


def _first_fetch(handler: type) -> object:
    """What a new RobotsFetcher makes of http://a.test/x's robots.txt served by ``handler``
    on a loopback HTTPServer (the clock fixed at 1000)."""
    srv = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    port = srv.server_address[1]

    async def main() -> object:
        transport = make_transport(Resolver(overrides={"a.test": ["127.0.0.1"]}, fallback=False),
                                   AddressPolicy(allow_private=True))
        fetcher = RobotsFetcher(transport, None, user_agent="crawl", clock=lambda: 1000.0)
        try:
            return (await fetcher.get(f"http://a.test:{port}/x"))[0]
        finally:
            await transport.aclose()

    try:
        return trio.run(main)
    finally:
        srv.shutdown()
        srv.server_close()


class _Robots(BaseHTTPRequestHandler):
    hits: list[str] = []

    def do_GET(self) -> None:  # noqa: N802 - the http.server name
        type(self).hits.append(self.headers["Host"] + self.path)
        body = b"User-agent: *\nDisallow: /private\n"
        self.send_response(200)
        self.send_header("Content-Type", "text/plain")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        pass


def test_a_remembered_copy_lasts_until_its_entry_expires_and_locks_do_not_pile_up() -> None:
    _Robots.hits = []
    srv = ThreadingHTTPServer(("127.0.0.1", 0), _Robots)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    port = srv.server_address[1]
    now = [1000.0]
    names = ["a.test", "b.test", "c.test"]

    async def main() -> list[bool]:
        transport = make_transport(Resolver(overrides={n: ["127.0.0.1"] for n in names}, fallback=False),
                                   AddressPolicy(allow_private=True))
        fetcher = RobotsFetcher(transport, None, user_agent="crawl", ttl=100.0, clock=lambda: now[0])
        out = []
        try:
            for t, name in [(1000.0, "a.test"), (1050.0, "a.test"), (1099.0, "a.test"), (1101.0, "a.test"),
                            (1102.0, "b.test"), (1103.0, "c.test"), (1150.0, "b.test")]:
                now[0] = t
                info, _ = await fetcher.get(f"http://{name}:{port}/private/x")
                out.append(info.robots.allowed(f"http://{name}:{port}/private/x", "crawl"))
            assert fetcher._locks == {}  # one per origin while it is asked, none left after
        finally:
            await transport.aclose()
        return out

    try:
        answers = trio.run(main)
    finally:
        srv.shutdown()
        srv.server_close()
    assert answers == [False] * 7
    # a.test asked at 1000 and again once its copy expired at 1100; b and c once each
    assert [h.split(":")[0] for h in _Robots.hits] == ["a.test", "a.test", "b.test", "c.test"]


def test_the_cache_keeps_failed_commits_for_the_last_64_batches_only(tmp_path: Path) -> None:
    # a failed group commit is remembered for the puts it carried (they raise it), and only for the
    # last 64 batches: a crawl whose disk is full for hours does not grow this without bound
    env = lmdb.open(str(tmp_path / "state"), max_dbs=4, map_size=1 << 20)  # real LMDB, 1 MiB: full soon
    try:
        cache = RobotsCache(env)
        entry = {"verdict": "parsed", "status": 200, "fetched_at": 1.0, "error": "", "expires": 2.0}
        cache.put("http://a.test", entry, b"x" * (600 << 10))
        for i in range(70):
            with pytest.raises(lmdb.MapFullError):
                cache.put(f"http://b{i}.test", entry, b"x" * (600 << 10))
        last = cache._done  # the 70th failed batch
        assert set(range(last - 64, last + 1)) <= set(cache._failed)
        assert len(cache._failed) == 65
    finally:
        env.close()


class _SlowRobots(_Robots):
    """Answers after 0.2 s, counting the requests in flight at once."""

    lock = threading.Lock()
    now = 0
    most = 0

    def do_GET(self) -> None:  # noqa: N802 - the http.server name
        cls = type(self)
        with cls.lock:
            cls.now += 1
            cls.most = max(cls.most, cls.now)
        time.sleep(0.2)
        try:
            super().do_GET()
        finally:
            with cls.lock:
                cls.now -= 1


def test_one_robots_fetch_per_origin_at_a_time_while_the_lock_is_handed_on() -> None:
    # nothing is remembered (ttl 0): A fetches, B waits for A's lock and gets it when A is done; C
    # asks while B fetches and must wait for B, on the same lock (never a second fetch at once)
    _Robots.hits = []
    _SlowRobots.now = _SlowRobots.most = 0
    srv = ThreadingHTTPServer(("127.0.0.1", 0), _SlowRobots)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    port = srv.server_address[1]

    async def main() -> None:
        transport = make_transport(Resolver(overrides={"a.test": ["127.0.0.1"]}, fallback=False),
                                   AddressPolicy(allow_private=True))
        fetcher = RobotsFetcher(transport, None, user_agent="crawl", ttl=0.0, clock=lambda: 1000.0)

        async def ask(after: float) -> None:
            await trio.sleep(after)
            await fetcher.get(f"http://a.test:{port}/x")

        try:
            async with trio.open_nursery() as nursery:
                for after in (0.0, 0.05, 0.3):
                    nursery.start_soon(ask, after)
        finally:
            await transport.aclose()

    try:
        trio.run(main)
    finally:
        srv.shutdown()
        srv.server_close()
    assert len(_Robots.hits) == 3 and _SlowRobots.most == 1


class _Flaky(_Robots):
    """robots.txt answers 200 until ``failing`` is set, then 503."""

    failing = False

    def do_GET(self) -> None:  # noqa: N802 - the http.server name
        if not type(self).failing:
            super().do_GET()
            return
        type(self).hits.append(self.headers["Host"] + self.path)
        self.send_response(503)
        self.send_header("Content-Length", "0")
        self.end_headers()


def _with_flaky_server(tmp_path: Path, steps: list[tuple[float, bool]], fresh: int = -1) -> list[object]:
    """get() at each (time, failing) step with a real LMDB cache, on one fetcher (from step ``fresh`` on,
    a new one: another process, nothing in memory); the RobotsInfo of each."""
    _Robots.hits = []
    srv = ThreadingHTTPServer(("127.0.0.1", 0), _Flaky)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    port = srv.server_address[1]
    now = [0.0]
    env = lmdb.open(str(tmp_path / "state"), max_dbs=4)

    async def main() -> list[object]:
        transport = make_transport(Resolver(overrides={"a.test": ["127.0.0.1"]}, fallback=False),
                                   AddressPolicy(allow_private=True))
        fetcher = RobotsFetcher(transport, RobotsCache(env), user_agent="crawl", clock=lambda: now[0])
        out = []
        try:
            for i, (t, failing) in enumerate(steps):
                if i == fresh:
                    fetcher = RobotsFetcher(transport, RobotsCache(env), user_agent="crawl", clock=lambda: now[0])
                now[0], _Flaky.failing = t, failing
                out.append((await fetcher.get(f"http://a.test:{port}/private/x"))[0])
        finally:
            await transport.aclose()
        return out

    try:
        return trio.run(main)
    finally:
        srv.shutdown()
        srv.server_close()
        env.close()


def test_a_good_copy_used_while_unreachable_keeps_saying_why_in_the_same_process(tmp_path: Path) -> None:
    # RFC 9309 2.4: the good copy applies while robots.txt fails; asked again before the next check,
    # the copy in memory still carries the failure (the fetch records say why the copy is stale)
    t0 = 1_800_000_000.0
    first, stale, again, other = _with_flaky_server(tmp_path, [(t0, False), (t0 + ROBOTS_TTL + 1, True),
                                                               (t0 + ROBOTS_TTL + 2, True),
                                                               (t0 + ROBOTS_TTL + 3, True)], fresh=3)
    assert first.verdict == stale.verdict == again.verdict == other.verdict == "parsed"
    assert first.fetched_at == t0  # what the fetch records report
    assert "503" in stale.error and again.error == stale.error
    # the next check is on disk too: another process waits for it as well (no request before it)
    assert other.source == "cache" and other.expires == stale.expires > t0 + ROBOTS_TTL + 3
    assert len(_Robots.hits) == 2


def test_a_robots_txt_unreachable_for_30_days_counts_as_unavailable(tmp_path: Path) -> None:
    # RFC 9309 2.3.1.4: unreachable for 30 days (never read before): crawled as if there were none
    t0 = 1_800_000_000.0
    first, month = _with_flaky_server(tmp_path, [(t0, True), (t0 + GIVE_UP_UNREACHABLE + 1, True)])
    assert first.verdict == "unreachable" and not first.robots.allowed("http://a.test/x", "crawl")
    assert first.since == t0 and first.checks == 1  # what the fetch record reports (unreachable_since)
    assert month.verdict == "unavailable" and month.robots.allowed("http://a.test/private/x", "crawl")


def test_a_task_that_waited_for_the_lock_uses_the_copy_just_fetched() -> None:
    # B asks while A fetches (no LMDB cache): B waits for A's lock, then takes A's copy, no second fetch
    _Robots.hits = []
    _SlowRobots.now = _SlowRobots.most = 0
    srv = ThreadingHTTPServer(("127.0.0.1", 0), _SlowRobots)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    port = srv.server_address[1]

    async def main() -> list[bool]:
        transport = make_transport(Resolver(overrides={"a.test": ["127.0.0.1"]}, fallback=False),
                                   AddressPolicy(allow_private=True))
        fetcher = RobotsFetcher(transport, None, user_agent="crawl", ttl=100.0, clock=lambda: 1000.0)
        out: list[bool] = []

        async def ask(after: float) -> None:
            await trio.sleep(after)
            info, _ = await fetcher.get(f"http://a.test:{port}/private/x")
            out.append(info.robots.allowed(f"http://a.test:{port}/private/x", "crawl"))

        try:
            async with trio.open_nursery() as nursery:
                for after in (0.0, 0.05):
                    nursery.start_soon(ask, after)
        finally:
            await transport.aclose()
        return out

    try:
        assert trio.run(main) == [False, False]
    finally:
        srv.shutdown()
        srv.server_close()
    assert len(_Robots.hits) == 1


def test_at_most_4096_parsed_copies_are_kept_in_memory(tmp_path: Path) -> None:
    # 4,097 origins read from the LMDB cache: the oldest copy in memory gives way (LMDB keeps them all)
    env = lmdb.open(str(tmp_path / "state"), max_dbs=4, sync=False)  # real LMDB; no fsync per put
    try:
        cache = RobotsCache(env)
        entry = {"verdict": "parsed", "status": 200, "fetched_at": 1.0, "error": "", "expires": 5000.0}
        for i in range(4097):
            cache.put(f"http://h{i}.test", entry, b"User-agent: *\nDisallow: /private\n")

        async def main() -> tuple[int, bool]:
            transport = make_transport(Resolver(overrides={}, fallback=False), AddressPolicy())
            fetcher = RobotsFetcher(transport, cache, user_agent="crawl", clock=lambda: 1000.0)
            try:
                for i in range(4097):
                    info, exchanges = await fetcher.get(f"http://h{i}.test/private/x")
                    assert exchanges == [] and not info.robots.allowed(f"http://h{i}.test/private/x", "crawl")
            finally:
                await transport.aclose()
            return len(fetcher._parsed), "http://h0.test" in fetcher._parsed

        assert trio.run(main) == (4096, False)
    finally:
        env.close()


class _ToFtp(_Robots):
    def do_GET(self) -> None:  # noqa: N802 - the http.server name
        type(self).hits.append(self.headers["Host"] + self.path)
        self.send_response(301)
        self.send_header("Location", "ftp://a.test/robots.txt")
        self.send_header("Content-Length", "0")
        self.end_headers()


def test_a_robots_txt_redirected_to_another_scheme_is_not_followed() -> None:
    # a redirect to ftp: is a redirect without a usable Location (RFC 9309 2.3.1.2): the file is
    # unavailable (crawl as if there were none), not an unreachable one that blocks the host
    _Robots.hits = []
    srv = ThreadingHTTPServer(("127.0.0.1", 0), _ToFtp)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    port = srv.server_address[1]

    async def main() -> object:
        transport = make_transport(Resolver(overrides={"a.test": ["127.0.0.1"]}, fallback=False),
                                   AddressPolicy(allow_private=True))
        fetcher = RobotsFetcher(transport, None, user_agent="crawl", clock=lambda: 1000.0, hop_delay=0.0)
        try:
            info, exchanges = await fetcher.get(f"http://a.test:{port}/x")
            assert len(exchanges) == 1
            return info
        finally:
            await transport.aclose()

    try:
        info = trio.run(main)
    finally:
        srv.shutdown()
        srv.server_close()
    assert info.verdict == "unavailable" and info.status == 301  # type: ignore[attr-defined]
    assert len(_Robots.hits) == 1


class _CutShort299(_Robots):
    status = 299

    def do_GET(self) -> None:  # noqa: N802 - the http.server name
        type(self).hits.append(self.headers["Host"] + self.path)
        self.send_response(type(self).status)  # 299, an unusual 2xx: a success whose body must come whole
        self.send_header("Content-Length", "1000")
        self.end_headers()
        self.wfile.write(b"User-agent: *\n")
        self.wfile.flush()
        self.close_connection = True


@pytest.mark.parametrize(("status", "verdict"), [(299, "unreachable"), (300, "unavailable")])
def test_a_2xx_robots_txt_cut_short_is_unreachable_up_to_299(status: int, verdict: str) -> None:
    # a 300's body is not the file: cut short or not, it is a redirect without a Location (unavailable)
    _Robots.hits = []
    _CutShort299.status = status
    info = _first_fetch(_CutShort299)
    assert info.verdict == verdict and info.status == status  # type: ignore[attr-defined]


class _Located299(_Robots):
    status = 299

    def do_GET(self) -> None:  # noqa: N802 - the http.server name
        if self.path != "/robots.txt":
            super().do_GET()  # Disallow: /private
            return
        type(self).hits.append(self.headers["Host"] + self.path)
        body = b"User-agent: *\nDisallow: /private\n" if type(self).status == 299 else b""
        self.send_response(type(self).status)  # 299: a success that carries a Location, not a redirect
        self.send_header("Location", "/elsewhere.txt")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


@pytest.mark.parametrize("status", [299, 300, 399, 400])
def test_a_2xx_with_a_location_is_the_file_and_a_3xx_from_300_to_399_a_redirect(status: int) -> None:
    _Robots.hits = []
    _Located299.status = status
    srv = ThreadingHTTPServer(("127.0.0.1", 0), _Located299)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    port = srv.server_address[1]

    async def main() -> bool:
        transport = make_transport(Resolver(overrides={"a.test": ["127.0.0.1"]}, fallback=False),
                                   AddressPolicy(allow_private=True))
        fetcher = RobotsFetcher(transport, None, user_agent="crawl", clock=lambda: 1000.0, hop_delay=0.0)
        try:
            info, _ = await fetcher.get(f"http://a.test:{port}/x")
            return info.robots.allowed(f"http://a.test:{port}/private/x", "crawl")
        finally:
            await transport.aclose()

    try:
        assert trio.run(main) is (status == 400)  # a 400 is unavailable: no rules
    finally:
        srv.shutdown()
        srv.server_close()
    want = ["/robots.txt"] + (["/elsewhere.txt"] if 300 <= status < 400 else [])
    assert [h.split(":", 1)[1].removeprefix(str(port)) for h in _Robots.hits] == want


class _Status(_Robots):
    status = 400

    def do_GET(self) -> None:  # noqa: N802 - the http.server name
        type(self).hits.append(self.headers["Host"] + self.path)
        self.send_response(type(self).status)  # no Location
        self.send_header("Content-Length", "0")
        self.end_headers()


@pytest.mark.parametrize(("status", "error"), [
    (300, "more than 5 redirects (or a redirect without a usable Location)"),
    (399, "more than 5 redirects (or a redirect without a usable Location)"),
    (400, "robots.txt returned 400")])
def test_what_a_robots_txt_that_gave_no_file_is_said_to_have_done(status: int, error: str) -> None:
    _Status.status = status
    info = _first_fetch(_Status)
    assert info.verdict == "unavailable" and info.error == error  # type: ignore[attr-defined]
