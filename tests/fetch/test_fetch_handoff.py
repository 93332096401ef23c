"""fetch_all and a source's hand-off (issue 19): a lease the source hands back at
the end of an answer is fetched by the same worker, its result released like
any other, and the input batch acknowledged once all of its own results are
written. Real fetcher, real test web, real WARC files; ordering from the
server's log, never timing."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import trio
from conftest import start_testweb
from fetchutil import FAST

from crawl.core import Batch, CrawlDir, Report
from crawl.fetch import FetchConfig, fetch_all, open_fetcher
from crawl.net import AddressPolicy
from crawl.net.dns import parse_hosts


def test_handed_leases_are_fetched_in_turn_and_every_result_released(tmp_path: Path) -> None:
    with start_testweb(tmp_path / "w", hosts=1, seed=2, pages=8, mix="plain") as web:
        host = web.host(0)
        urls = sorted({p["url"] for p in web.pages_of(host) if p["status"] == 200})[:5]
        assert len(urls) == 5
        acked: list[int] = []
        handed: list[str] = []
        released: list[dict[str, Any]] = []
        threads: set[int] = set()

        class Source:
            def batches(self, size: int) -> Iterator[Batch]:
                yield Batch([{"kind": "url", "v": 1, "url": urls[0]}], ack=lambda: acked.append(len(released)))

            def handoff(self, rec: dict[str, Any]) -> dict[str, Any] | None:
                threads.add(threading.get_ident())
                i = urls.index(rec["url"]) + 1
                if i == len(urls):
                    return None
                handed.append(urls[i])
                return {"kind": "url", "v": 1, "url": urls[i]}

        class Sink:
            def write(self, recs: list[dict[str, Any]]) -> None:
                released.extend(recs)

        async def main() -> None:
            async with open_fetcher(CrawlDir(tmp_path / "c"), FetchConfig(limits=FAST, robots=False),
                                    overrides=parse_hosts(web.hosts_file.read_text()), fallback=False,
                                    policy=AddressPolicy(allow_private=True)) as (fetcher, writer):
                await fetch_all(Source(), Sink(), fetcher, writer, Report("fetch"), batch=1, group=4)

        trio.run(main)
        assert handed == urls[1:]
        # on trio's own thread (here the main one): no worker-thread call on the path
        # from an answer to the next request to its host (issue 19)
        assert threads == {threading.get_ident()}
        assert sorted(r["url"] for r in released) == sorted(urls)
        assert all(r["outcome"] == "ok" and r["warc"]["length"] > 0 for r in released)
        assert len(acked) == 1 and acked[0] >= 1  # the seed batch: after its own result was released
        reqs = sorted((r for r in web.requests() if r["host"] == host), key=lambda r: r["start"])
        assert [r["path"] for r in reqs] == ["/" + u.split("/", 3)[3] for u in urls]  # in turn, one at a time
        assert all(b["start"] >= a["end"] for a, b in zip(reqs, reqs[1:], strict=False))


def test_a_group_is_archived_and_released_in_one_worker_thread_call(tmp_path: Path, monkeypatch: Any) -> None:
    # Issue 19: a group's store and its release were two worker-thread calls, and each
    # busy worker thread is one more taking the GIL from the others at every blocking
    # call. One call now does both, in order: a result reaches the sink only once its
    # page is in the WARC store (DESIGN invariant 1), read back here as the sink sees it.
    from crawl.store import read_response

    calls: list[str] = []
    real = trio.to_thread.run_sync

    async def counted(fn: Any, *args: Any, **kw: Any) -> Any:
        calls.append(getattr(fn, "__name__", repr(fn)))
        return await real(fn, *args, **kw)

    monkeypatch.setattr(trio.to_thread, "run_sync", counted)
    with start_testweb(tmp_path / "w", hosts=1, seed=2, pages=8, mix="plain") as web:
        urls = sorted({p["url"] for p in web.pages_of(web.host(0)) if p["status"] == 200})[:5]
        cdir = CrawlDir(tmp_path / "c")
        writes: list[int] = []
        bodies: list[bytes] = []

        class Source:
            def batches(self, size: int) -> Iterator[Batch]:
                for u in urls:  # one at a time: a group each
                    yield Batch([{"kind": "url", "v": 1, "url": u}])

        class Sink:
            def write(self, recs: list[dict[str, Any]]) -> None:
                writes.append(len(recs))
                bodies.extend(read_response(cdir.warc, r["warc"]).body for r in recs)

        async def main() -> None:
            async with open_fetcher(cdir, FetchConfig(limits=FAST, robots=False, concurrency=1),
                                    overrides=parse_hosts(web.hosts_file.read_text()), fallback=False,
                                    policy=AddressPolicy(allow_private=True)) as (fetcher, writer):
                await fetch_all(Source(), Sink(), fetcher, writer, Report("fetch"), batch=1, group=64)

        trio.run(main)
    assert sum(writes) == 5 and all(bodies)
    assert calls.count("store_and_release") == len(writes)  # one call a group ...
    assert "release" not in calls and "store_group" not in calls  # ... not two


@pytest.mark.parametrize(("group", "groups"), [(64, [5]), (2, [2, 2, 1])])
def test_results_arriving_within_the_window_are_stored_together_up_to_the_group_size(
        tmp_path: Path, group: int, groups: list[int]) -> None:
    # Issue 19: one host at delay 0 sends a result every ~2 ms, and the writer stored each
    # alone (a WARC fsync and two LMDB commits apiece). Results arriving within the window
    # of a group's first are stored with it, at most ``group`` of them; the hand-off still
    # leases each next URL at the answer's end, so the requests go out in turn without
    # waiting on any store. A long window here, so the grouping does not depend on timing:
    # a group ends when it is full or the last worker is done, not when the window is.
    with start_testweb(tmp_path / "w", hosts=1, seed=2, pages=8, mix="plain") as web:
        host = web.host(0)
        urls = sorted({p["url"] for p in web.pages_of(host) if p["status"] == 200})[:5]
        writes: list[int] = []
        acked: list[int] = []

        class Source:
            def batches(self, size: int) -> Iterator[Batch]:
                yield Batch([{"kind": "url", "v": 1, "url": urls[0]}], ack=lambda: acked.append(sum(writes)))

            def handoff(self, rec: dict[str, Any]) -> dict[str, Any] | None:
                i = urls.index(rec["url"]) + 1
                return {"kind": "url", "v": 1, "url": urls[i]} if i < len(urls) else None

        class Sink:
            def write(self, recs: list[dict[str, Any]]) -> None:
                writes.append(len(recs))

        async def main() -> None:
            async with open_fetcher(CrawlDir(tmp_path / "c"), FetchConfig(limits=FAST, robots=False),
                                    overrides=parse_hosts(web.hosts_file.read_text()), fallback=False,
                                    policy=AddressPolicy(allow_private=True)) as (fetcher, writer):
                await fetch_all(Source(), Sink(), fetcher, writer, Report("fetch"), batch=1, group=group,
                                window=600.0)

        trio.run(main)
        assert writes == groups  # one fsync and one release a group
        assert acked == [groups[0]]  # the input batch once its result was written
        reqs = sorted((r for r in web.requests() if r["host"] == host), key=lambda r: r["start"])
        assert [r["path"] for r in reqs] == ["/" + u.split("/", 3)[3] for u in urls]


def test_a_group_gathered_when_the_run_is_cancelled_is_still_stored(tmp_path: Path) -> None:
    # The window holds fetched results while a fetch is under way; a cancellation then
    # (the grace after a signal is over, a second Ctrl-C) must not drop them: they are
    # stored and released, and only then does the cancellation go on. The last hand-off
    # goes to a server that never answers, so a fetch is still under way at the cancel.
    import socket

    import trio.testing

    silent = socket.create_server(("127.0.0.1", 0))
    held: list[socket.socket] = []
    threading.Thread(target=lambda: held.append(silent.accept()[0]), daemon=True).start()
    hang = f"http://127.0.0.1:{silent.getsockname()[1]}/never"
    with start_testweb(tmp_path / "w", hosts=1, seed=2, pages=8, mix="plain") as web:
        urls = sorted({p["url"] for p in web.pages_of(web.host(0)) if p["status"] == 200})[:4]
        writes: list[int] = []
        hung = trio.Event()

        class Source:
            def batches(self, size: int) -> Iterator[Batch]:
                yield Batch([{"kind": "url", "v": 1, "url": urls[0]}])

            def handoff(self, rec: dict[str, Any]) -> dict[str, Any] | None:
                if rec["url"] == hang:
                    return None
                i = urls.index(rec["url"]) + 1
                if i == len(urls):
                    hung.set()
                return {"kind": "url", "v": 1, "url": urls[i] if i < len(urls) else hang}

        class Sink:
            def write(self, recs: list[dict[str, Any]]) -> None:
                writes.append(len(recs))

        report = Report("fetch")

        async def main() -> None:
            async with open_fetcher(CrawlDir(tmp_path / "c"), FetchConfig(limits=FAST, robots=False),
                                    overrides=parse_hosts(web.hosts_file.read_text()), fallback=False,
                                    policy=AddressPolicy(allow_private=True)) as (fetcher, writer):
                with trio.CancelScope() as scope:
                    async with trio.open_nursery() as nursery:
                        nursery.start_soon(lambda: fetch_all(Source(), Sink(), fetcher, writer, report,
                                                             batch=1, group=64, window=600.0))
                        await hung.wait()
                        await trio.testing.wait_all_tasks_blocked()  # the writer holds four, one fetch waits
                        assert writes == []
                        scope.cancel()
                assert scope.cancelled_caught

        try:
            trio.run(main)
        finally:
            silent.close()
            for c in held:
                c.close()
        assert writes == [4]
        assert report.counts.get("out") == 4  # counted, though the run was cancelled


def test_with_no_fetch_under_way_a_group_is_stored_at_once(tmp_path: Path) -> None:
    # Without a hand-off (crawl fetch, a shared crawl's node, an answer not released
    # early) the next lease waits on the release of the last result: the writer must
    # not wait out its window then, or every page would wait that long. A long window,
    # so a writer that waited would trip the bound.
    with start_testweb(tmp_path / "w", hosts=1, seed=2, pages=8, mix="plain") as web:
        urls = sorted({p["url"] for p in web.pages_of(web.host(0)) if p["status"] == 200})[:4]
        writes: list[int] = []
        released = threading.Semaphore(0)

        class Source:
            def batches(self, size: int) -> Iterator[Batch]:
                for u in urls:  # the next one only once the one before is released
                    yield Batch([{"kind": "url", "v": 1, "url": u}])
                    released.acquire()

        class Sink:
            def write(self, recs: list[dict[str, Any]]) -> None:
                writes.append(len(recs))
                released.release()

        async def main() -> None:
            async with open_fetcher(CrawlDir(tmp_path / "c"), FetchConfig(limits=FAST, robots=False),
                                    overrides=parse_hosts(web.hosts_file.read_text()), fallback=False,
                                    policy=AddressPolicy(allow_private=True)) as (fetcher, writer):
                with trio.fail_after(120):  # a hang bound, far under 4 windows
                    await fetch_all(Source(), Sink(), fetcher, writer, Report("fetch"), batch=1, group=64,
                                    window=600.0)

        trio.run(main)
        assert writes == [1, 1, 1, 1]
