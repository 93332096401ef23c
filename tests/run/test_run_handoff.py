"""crawl run hands a host its next URL at the end of an answer (issue 19,
crawl/frontier/handoff.py): on one host at delay 0 the next request follows
the answer without waiting for the answer's WARC record, spool entry, log
line and completion. Checked by counting what the loop did and by the
server's own log (one request at a time, the delay kept, every page once),
never by timing it; and SIGKILL at any moment still loses nothing."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

from conftest import TestWeb, start_testweb

from crawl.run import read_log
from crawl.testweb.audit import audit

CRAWL = [sys.executable, "-m", "crawl"]


def args(web: TestWeb, d: Path, delay: str, *extra: str) -> list[str]:
    return [*CRAWL, "run", "--dir", str(d), "--seeds", str(web.seeds_file), "--resolve-file",
            str(web.hosts_file), "--allow-private", "--scope", "host", "--delay", delay,
            "--response-factor", "0", "--idle-exit", "2s", "--progress", "none", "--json", *extra]


def run(web: TestWeb, d: Path, delay: str, *extra: str) -> dict[str, Any]:
    res = subprocess.run(args(web, d, delay, *extra), capture_output=True, text=True, timeout=180)
    assert res.returncode == 0, res.stderr[-3000:]
    return json.loads(res.stdout.splitlines()[-1])


def crawler_requests(web: TestWeb, since: int = 0) -> list[dict[str, Any]]:
    return [r for r in web.requests(since) if r.get("ua", "").startswith("crawl/")]


def stored(d: Path) -> Counter[str]:
    return Counter(e["url"] for e in read_log(d / "log") if e.get("outcome") in ("ok", "not-modified"))


def test_one_host_at_delay_0_is_fed_by_hand_offs_one_request_at_a_time(tmp_path: Path) -> None:
    with start_testweb(tmp_path / "w", hosts=1, seed=7, pages=40, links=6, mix="plain") as web:
        st = run(web, tmp_path / "c", "0", "--parse-procs", "0")
        counts = st["counts"]
        assert st["pages"] >= 30, st
        # Nearly every next request came from the hand-off at the end of the answer
        # before it; the lease loop leased the seed, and a URL whenever the
        # queue was empty at an answer's end (the seed's links not admitted yet).
        assert counts.get("lease/handoff", 0) >= st["fetched"] * 3 // 4, counts
        reqs = crawler_requests(web)
        assert audit(reqs, web.hosts, delay=0.0, per_ip=1, agent="crawl") == []
        ordered = sorted(reqs, key=lambda r: r["start"])
        assert all(b["start"] >= a["end"] for a, b in zip(ordered, ordered[1:], strict=False))
        paths = Counter(r["path"] for r in reqs)
        assert max(paths.values()) == 1, paths.most_common(3)  # every URL once


def test_a_delay_still_runs_from_the_end_of_the_answer(tmp_path: Path) -> None:
    with start_testweb(tmp_path / "w", hosts=1, seed=8, pages=8, links=4, mix="plain") as web:
        st = run(web, tmp_path / "c", "0.3")
        counts = st["counts"]
        assert st["pages"] >= 6, st
        # released at each answer's end, but never leased there: not due for 0.3 s
        assert counts.get("lease/handoff", 0) == 0, counts
        assert counts.get("lease/released", 0) >= st["pages"] - 1, counts
        assert audit(crawler_requests(web), web.hosts, delay=0.3, per_ip=4, agent="crawl") == []
        # at 1 s the completion releases the host: no hand-off at all
        st = run(web, tmp_path / "c1", "1")
        assert st["pages"] >= 2 and not st["counts"].get("lease/released"), st["counts"]


def test_sigkill_during_hand_offs_loses_nothing(tmp_path: Path) -> None:
    with start_testweb(tmp_path / "w", hosts=1, seed=9, pages=60, links=6, mix="plain") as web:
        ref = tmp_path / "ref"
        run(web, ref, "0")
        want = set(stored(ref))
        assert len(want) >= 40
        mark = len(web.requests())
        d = tmp_path / "killed"
        kills = 0
        for _ in range(8):
            before = len(web.requests())
            proc = subprocess.Popen(args(web, d, "0"), stdout=subprocess.DEVNULL,
                                    stderr=subprocess.DEVNULL, start_new_session=True)
            # SIGKILL once this run has made a few requests: mid-crawl, hand-offs under way
            while proc.poll() is None and len(web.requests()) < before + 6:
                time.sleep(0.05)
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGKILL)
                kills += 1
            proc.wait()
        run(web, d, "0")  # resume to the end
        got = stored(d)
        assert kills >= 3
        assert set(got) == want, (sorted(want - set(got))[:5], sorted(set(got) - want)[:5])
        reqs = crawler_requests(web, mark)
        assert audit(reqs, web.hosts, delay=0.0, per_ip=1, agent="crawl") == []
