from __future__ import annotations

from pathlib import Path

from crawl.run import read_log
from crawl.run.crawllog import CrawlLog, event_of


def test_events_round_trip_and_rotate(tmp_path: Path) -> None:
    log = CrawlLog(tmp_path, rotate_bytes=200)
    for i in range(20):
        log.write([event_of({"url": f"http://a.test/{i}", "outcome": "ok", "status": 200,
                             "timings": {"total": 0.1}}, now=1000.0 + i)])
    files = sorted(tmp_path.glob("crawl-*.ndjson.zst"))
    assert len(files) > 1
    got = list(read_log(tmp_path))
    assert [e["url"] for e in got] == [f"http://a.test/{i}" for i in range(20)]
    assert got[0]["seconds"] == 0.1 and got[0]["kind"] == "event"


def test_torn_last_frame_keeps_earlier_events(tmp_path: Path) -> None:
    log = CrawlLog(tmp_path)
    log.write([{"kind": "event", "ts": 1, "event": "fetch", "url": "http://a.test/1"}])
    log.write([{"kind": "event", "ts": 2, "event": "fetch", "url": "http://a.test/2"}])
    path = log.current
    data = path.read_bytes()
    path.write_bytes(data[:-5])  # a crash mid-write
    warnings: list[str] = []
    got = list(read_log(tmp_path, warn=warnings.append))
    assert got[0]["url"] == "http://a.test/1"
    assert len(got) <= 2
    # resuming appends after the torn frame; the reader still sees the first event
    CrawlLog(tmp_path).write([{"kind": "event", "ts": 3, "event": "fetch", "url": "http://a.test/3"}])
    assert warnings
    urls = [e["url"] for e in read_log(tmp_path)]
    assert urls == ["http://a.test/1", "http://a.test/3"]
