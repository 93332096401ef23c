"""What a mutation run found untested in the frontier's transactions: two
processes on one frontier (real LMDB, the second a real child process).

A process's next transaction reuses the host states its last one committed
only if no other process committed in between (tx.Carry); a transaction that
wrote nothing must not vouch for that, or this process would act on states
another one has since changed. And a host that another process created is
found by its committed id, not created twice.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from crawl.frontier import Frontier, Politeness

T0 = 1_000_000.0


def _other_process(path: Path, code: str) -> object:
    """Run ``code`` (which sets ``out``) on ``fr``, the frontier at ``path``, in a child process."""
    script = ("import json, sys\nfrom crawl.frontier import Frontier, Politeness\n"
              f"with Frontier({str(path)!r}, Politeness(default_delay=1.0)) as fr:\n"
              + "".join(f"    {line}\n" for line in code.splitlines())
              + "print(json.dumps(out))\n")
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def test_a_transaction_that_wrote_nothing_does_not_vouch_for_its_host_states(tmp_path: Path) -> None:
    path = tmp_path / "frontier"
    with Frontier(path, Politeness(default_delay=1.0)) as fr:
        fr.add([{"kind": "url", "v": 1, "url": "http://a.test/1"}], T0)
        [lease] = fr.next(1, 600, T0)
        fr.complete([{"kind": "fetch", "v": 1, "url": lease["url"], "lease": lease["lease"], "outcome": "ok",
                      "status": 200, "ended_at": T0 + 1}], T0 + 1)  # a.test's queue is empty now
        assert fr.complete([], T0 + 1) == []  # a transaction that writes nothing
        # another process gives a.test a URL
        _other_process(path, f"fr.add([{{'kind': 'url', 'v': 1, 'url': 'http://a.test/2'}}], {T0 + 2})\nout = 0")
        [nxt] = fr.next(1, 600, T0 + 10)  # this process sees the host as the other one left it
        assert nxt["url"] == "http://a.test/2"


def test_a_host_created_by_another_process_is_found_by_its_id(tmp_path: Path) -> None:
    path = tmp_path / "frontier"
    with Frontier(path, Politeness(default_delay=1.0)) as fr:
        fr.add([{"kind": "url", "v": 1, "url": "http://a.test/1"}], T0)
    # a new process: its cache of host ids is empty, a.test is only in LMDB
    _other_process(path, f"fr.add([{{'kind': 'url', 'v': 1, 'url': 'http://a.test/2'}}], {T0})\nout = 0")
    with Frontier(path, Politeness(default_delay=1.0)) as fr:
        first = fr.next(5, 600, T0)
        assert len(first) == 1  # one host, one lease at a time
        fr.complete([{"kind": "fetch", "v": 1, "url": first[0]["url"], "lease": first[0]["lease"],
                      "outcome": "ok", "status": 200, "ended_at": T0}], T0)
        second = fr.next(5, 600, T0 + 5)
        assert {first[0]["url"], second[0]["url"]} == {"http://a.test/1", "http://a.test/2"}
        assert fr.next(5, 600, T0 + 10) == []


def _entries(fr: Frontier, name: str) -> int:
    with fr.env.begin() as txn:
        return int(txn.stat(fr.db[name])["entries"])


def test_a_completed_lease_leaves_no_deadline_behind(tmp_path: Path) -> None:
    # the deadline index must not grow with every lease ever taken (a crawl of months)
    with Frontier(tmp_path / "frontier", Politeness(default_delay=1.0)) as fr:
        fr.add([{"kind": "url", "v": 1, "url": f"http://h{i}.test/{j}"} for i in range(3) for j in range(2)], T0)
        for r in range(2):
            leases = fr.next(10, 600, T0 + 10 * r)
            assert len(leases) == 3 and _entries(fr, "deadlines") == 3
            fr.complete([{"kind": "fetch", "v": 1, "url": x["url"], "lease": x["lease"], "outcome": "ok",
                          "status": 200} for x in leases], T0 + 10 * r + 1)
            assert _entries(fr, "deadlines") == 0 and _entries(fr, "leases") == 0


def test_a_rescheduled_host_keeps_one_schedule_entry(tmp_path: Path) -> None:
    # a host moved on the schedule (a more urgent URL, a new due time) leaves no entry where it was
    with Frontier(tmp_path / "frontier", Politeness(default_delay=1.0)) as fr:
        fr.add([{"kind": "url", "v": 1, "url": "http://a.test/late", "priority": 5},
                {"kind": "url", "v": 1, "url": "http://b.test/1"}], T0)
        assert _entries(fr, "sched") == 2
        fr.add([{"kind": "url", "v": 1, "url": "http://a.test/urgent", "priority": 0}], T0)  # another transaction
        assert _entries(fr, "sched") == 2
        fr.add([{"kind": "url", "v": 1, "url": "http://a.test/more", "priority": 0},
                {"kind": "url", "v": 1, "url": "http://c.test/1", "priority": 3},
                {"kind": "url", "v": 1, "url": "http://c.test/2", "priority": 0}], T0)  # moved twice in one
        assert _entries(fr, "sched") == 3
        got = {x["url"] for x in fr.next(10, 600, T0)}
        assert got == {"http://a.test/urgent", "http://b.test/1", "http://c.test/2"}
        assert _entries(fr, "sched") == 0 and fr.next(10, 600, T0) == []


def test_adds_are_counted_and_a_bad_url_is_rejected_with_a_reason(tmp_path: Path) -> None:
    with Frontier(tmp_path / "frontier", Politeness(default_delay=1.0)) as fr:
        assert fr.add([{"kind": "url", "v": 1, "url": f"http://a.test/{i}"} for i in (1, 2)], T0)["added"] == 2
        rejects: list[dict] = []
        counts = fr.add([{"kind": "url", "v": 1, "url": "http://a.test/2"},
                         {"kind": "url", "v": 1, "url": "http://[bad/"},
                         {"kind": "url", "v": 1, "url": "http://b.test/1"}], T0, rejects)
        assert counts == {"added": 1, "known": 1, "dropped_host_cap": 0, "rejected": 1}
        assert [(r["kind"], r["input"]) for r in rejects] == [("reject", "http://[bad/")]
        assert "invalid-host" in rejects[0]["error"]
        assert fr.stats(T0)["added"] == 3 and fr.stats(T0)["queued"] == 3
