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

import pytest

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


def _crawl_a_test_1(fr: Frontier) -> None:
    """Queue, lease and complete http://a.test/1 (fetched at T0, answered at T0 + 1)."""
    fr.add([{"kind": "url", "v": 1, "url": "http://a.test/1"}], T0)
    [lease] = fr.next(1, 600, T0)
    fr.complete([{"kind": "fetch", "v": 1, "url": lease["url"], "lease": lease["lease"], "outcome": "ok",
                  "status": 200, "ended_at": T0 + 1}], T0 + 1)

def test_a_transaction_that_wrote_nothing_does_not_vouch_for_its_host_states(tmp_path: Path) -> None:
    path = tmp_path / "frontier"
    with Frontier(path, Politeness(default_delay=1.0)) as fr:
        _crawl_a_test_1(fr)  # a.test's queue is empty now
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


def test_a_transaction_that_only_read_host_states_does_not_vouch_for_them(tmp_path: Path) -> None:
    # an add of URLs already done reads their hosts' states and writes nothing: its commit takes no
    # transaction id, so the next writer's commit (another process) takes the one it would vouch with
    path = tmp_path / "frontier"
    with Frontier(path, Politeness(default_delay=1.0)) as fr:
        _crawl_a_test_1(fr)  # a.test's queue is empty now
        assert fr.add([{"kind": "url", "v": 1, "url": "http://a.test/1"}], T0 + 1)["known"] == 1  # reads a.test
        _other_process(path, f"fr.add([{{'kind': 'url', 'v': 1, 'url': 'http://a.test/2'}}], {T0 + 2})\nout = 0")
        [nxt] = fr.next(1, 600, T0 + 10)  # this process sees the host as the other one left it
        assert nxt["url"] == "http://a.test/2"
        assert fr.dump("a.test", T0 + 10)["queued"] == 0
        fr.complete([{"kind": "fetch", "v": 1, "url": nxt["url"], "lease": nxt["lease"], "outcome": "ok",
                      "status": 200}], T0 + 10)
        assert fr.stats(T0 + 10)["queued"] == 0 and fr.stats(T0 + 10)["done"] == 2


def test_release_leases_counts_the_urls_it_drops(tmp_path: Path) -> None:
    # a crawl run that finds its predecessor's leases: what went back and what ran out of attempts
    with Frontier(tmp_path / "frontier", Politeness(default_delay=1.0, max_leases=2)) as fr:
        fr.add([{"kind": "url", "v": 1, "url": f"http://h{i}.test/1"} for i in range(3)], T0)
        assert len(fr.next(10, 600, T0)) == 3
        assert fr.release_leases(T0 + 1, T0 - 1) == {"released": 3, "dropped": 0, "kept": 0, "kept_until": None}
        again = fr.next(10, 600, T0 + 10)
        assert sorted(x["attempt"] for x in again) == [2, 2, 2]
        assert fr.release_leases(T0 + 11, T0 + 5) == {"released": 0, "dropped": 3, "kept": 0, "kept_until": None}
        assert fr.stats(T0 + 11)["dropped"] == 3


@pytest.mark.parametrize("why", ["cap", "too-long"])
def test_a_host_whose_first_urls_were_all_refused_takes_urls_later(tmp_path: Path, why: str) -> None:
    # the host's id is created before its first URL is refused (the per-host cap, a URL too long):
    # the host must still be whole, for this process and for the next one with other settings
    path = tmp_path / "frontier"
    cap = 0 if why == "cap" else 100
    url = "http://a.test/1" if why == "cap" else "http://a.test/" + "x" * 40_000
    with Frontier(path, Politeness(default_delay=1.0, host_queue_cap=cap)) as fr:
        counts = fr.add([{"kind": "url", "v": 1, "url": url}], T0, [])
        assert counts["added"] == 0 and counts["dropped_host_cap" if why == "cap" else "rejected"] == 1
        assert fr.dump("a.test", T0)["queued"] == 0
    with Frontier(path, Politeness(default_delay=1.0)) as fr:
        assert fr.add([{"kind": "url", "v": 1, "url": "http://a.test/2"}], T0)["added"] == 1
        [lease] = fr.next(1, 600, T0)
        assert lease["url"] == "http://a.test/2" and fr.stats(T0)["hosts"] == 1


def test_next_due_is_the_soonest_of_every_priority_and_of_the_delayed_urls(tmp_path: Path) -> None:
    # what `next --wait` sleeps until: the first host due at any priority, or a delayed URL's due time
    with Frontier(tmp_path / "frontier", Politeness(default_delay=5.0, response_factor=0)) as fr:
        assert fr.next_due(T0) is None  # nothing queued
        fr.add([{"kind": "url", "v": 1, "url": "http://a.test/1", "priority": 2},
                {"kind": "url", "v": 1, "url": "http://a.test/2", "priority": 2},
                {"kind": "url", "v": 1, "url": "http://b.test/1", "priority": 7},
                {"kind": "url", "v": 1, "url": "http://b.test/2", "priority": 7}], T0)
        assert fr.next_due(T0 - 10) == T0 - 10  # new hosts are due at once: now, never before it
        assert fr.next_due(T0 + 3) == T0 + 3
        leases = {x["host"]: x for x in fr.next(10, 600, T0)}
        assert fr.next_due(T0) is None  # both hosts leased, nothing else
        fr.complete([{"kind": "fetch", "v": 1, "url": leases["b.test"]["url"], "lease": leases["b.test"]["lease"],
                      "outcome": "ok", "status": 200, "ended_at": T0 + 1}], T0 + 1)
        assert fr.next_due(T0 + 1) == T0 + 6  # b.test at priority 7: 5 s after its answer
        fr.complete([{"kind": "fetch", "v": 1, "url": leases["a.test"]["url"], "lease": leases["a.test"]["lease"],
                      "outcome": "ok", "status": 200, "ended_at": T0 + 2}], T0 + 2)
        assert fr.next_due(T0 + 2) == T0 + 6  # a.test (priority 2) is due later, at T0 + 7: the soonest wins
        fr.add([{"kind": "url", "v": 1, "url": "http://c.test/1", "due": T0 + 4.5}], T0 + 2)
        assert fr.next_due(T0 + 2) == T0 + 4.5  # a delayed URL due sooner than any host
        fr.add([{"kind": "url", "v": 1, "url": "http://d.test/1", "due": T0 + 20, "priority": 0}], T0 + 2)
        assert fr.next_due(T0 + 2) == T0 + 4.5


def _ok(lease: dict, **fields: object) -> dict:
    return {"kind": "fetch", "v": 1, "url": lease["url"], "lease": lease["lease"], "outcome": "ok", "status": 200,
            **fields}


def test_release_leases_keeps_the_leases_taken_before_the_dead_run_started(tmp_path: Path) -> None:
    with Frontier(tmp_path / "frontier", Politeness(default_delay=1.0)) as fr:
        fr.add([{"kind": "url", "v": 1, "url": f"http://h{i}.test/1"} for i in range(3)], T0)
        old = fr.next(1, 600, T0)  # taken before the dead run started: someone else's, kept
        new = fr.next(5, 600, T0 + 10)
        assert len(old) == 1 and len(new) == 2
        assert fr.release_leases(T0 + 20, T0 + 5) == {"released": 2, "dropped": 0, "kept": 1,
                                                       "kept_until": T0 + 600}
        assert fr.stats(T0 + 20)["in_flight"] == 1


def test_a_done_url_refused_in_a_new_cycle_stays_done(tmp_path: Path) -> None:
    # queued in one step when new; a URL known from an earlier cycle that is then refused (the host's cap)
    # gets its old state back, not "queued" (it is not) nor nothing (it was fetched)
    with Frontier(tmp_path / "frontier", Politeness(default_delay=1.0, host_queue_cap=1)) as fr:
        fr.add([{"kind": "url", "v": 1, "url": "http://a.test/1"}], T0)
        [lease] = fr.next(1, 600, T0)
        fr.complete([_ok(lease)], T0)
        fr.new_cycle()
        assert fr.add([{"kind": "url", "v": 1, "url": "http://a.test/2"}], T0)["added"] == 1  # the cap is full
        assert fr.add([{"kind": "url", "v": 1, "url": "http://a.test/1"}], T0)["dropped_host_cap"] == 1
        assert fr.state_of("http://a.test/1") == "done"
        assert fr.stats(T0)["queued"] == 1


def test_a_host_whose_queue_is_damaged_leases_nothing_of_another_host(tmp_path: Path) -> None:
    # the host state says a URL is queued but its queue entries are gone (damage): the host is healed
    # (nothing leased, taken off the schedule), never given the next host's URL
    from crawl.frontier import hostqueue as hq

    with Frontier(tmp_path / "frontier", Politeness(default_delay=1.0)) as fr:
        fr.add([{"kind": "url", "v": 1, "url": "http://a.test/1"}, {"kind": "url", "v": 1, "url": "http://b.test/1"}],
               T0)
        with fr.env.begin(write=True) as txn:
            hid = int.from_bytes(txn.get(b"a.test", db=fr.db["hostid"]), "big")
            cur = txn.cursor(db=fr.db["queue"])
            assert cur.set_range(hq.hid_key(hid)) and cur.key()[:4] == hq.hid_key(hid)
            cur.delete()
        got = fr.next(10, 600, T0)
        assert [x["url"] for x in got] == ["http://b.test/1"] and got[0]["host"] == "b.test"
        assert fr.dump("a.test", T0)["scheduled"] is None
        assert fr.next(10, 600, T0 + 10) == []


def test_a_host_waiting_for_its_address_leaves_the_list_when_an_old_lease_of_it_expires(tmp_path: Path) -> None:
    # x's lease L1 was released early (the hand-off) and never completed; x then waits for its address.
    # When L1 expires its URL goes back and x is scheduled again: off the waiting list, not on it twice
    ip = "10.0.0.1"
    with Frontier(tmp_path / "frontier", Politeness(per_ip=1, default_delay=0.1, response_factor=0)) as fr:
        fr.add([{"kind": "url", "v": 1, "url": f"http://{h}.test/{j}"} for h in ("x", "y") for j in range(3)], T0)
        first = fr.next(10, 600, T0)
        fr.complete([_ok(x, ip=ip, ended_at=T0) for x in first], T0)  # both on one address now
        t1 = T0 + 10
        [l1] = fr.next(10, 60, t1)  # one slot: x or y; the other waits
        assert fr.stats(t1)["hosts_waiting_ip"] == 1
        released, _ = fr.handoff(_ok(l1, ip=ip, ended_at=t1 + 0.05), t1 + 0.05)
        assert released and fr.stats(t1)["hosts_waiting_ip"] == 0  # the waiter was woken
        [l2] = fr.next(10, 60, t1 + 0.2)  # the woken one (due first); l1's host now waits
        assert l2["host"] != l1["host"] and fr.stats(t1)["hosts_waiting_ip"] == 1
        assert fr.requeue_expired(t1 + 60.1) == 1  # l1 expires, l2 (deadline t1 + 60.2) not
        assert fr.stats(t1 + 60.1)["hosts_waiting_ip"] == 0
        assert fr.dump(l1["host"], t1 + 60.1)["scheduled"] == "priority 1"
        fr.complete([_ok(l2)], t1 + 61)
        got = fr.next(10, 60, t1 + 62)
        assert len(got) == 1 and got[0]["host"] == l1["host"] and fr.stats(t1 + 62)["hosts_waiting_ip"] == 1


def _drain(fr: Frontier, t: float) -> list[str]:
    """Every URL the frontier hands out, in order, leasing and completing one at a time (delay 0)."""
    out: list[str] = []
    while True:
        got = fr.next(1, 600, t)
        if not got:
            return out
        out.append(got[0]["url"])
        fr.complete([_ok(got[0])], t)


def test_a_hosts_urls_are_packed_into_blocks_and_come_out_in_order(tmp_path: Path) -> None:
    # ~45-byte URLs, 1 KiB blocks: added one by one (one transaction each), in batches, and at two
    # priorities in turn, they fill blocks (not one block per URL) and come out FIFO within a priority
    with Frontier(tmp_path / "frontier", Politeness(default_delay=0.0, response_factor=0)) as fr:
        def url(prio: int, i: int) -> str:
            return f"http://a.test/p{prio}/{i:04d}/" + "x" * 20

        want = {1: [], 3: []}
        for i in range(40):  # one URL an add, alternating priorities: the tail block is the other one's
            prio = 1 if i % 2 else 3
            fr.add([{"kind": "url", "v": 1, "url": url(prio, i), "priority": prio}], T0)
            want[prio].append(url(prio, i))
        for lo in range(40, 160, 30):  # batches of 30 on one priority, then the other
            for prio in (3, 1):
                batch = [url(prio, i) for i in range(lo, lo + 30)]
                fr.add([{"kind": "url", "v": 1, "url": u, "priority": prio} for u in batch], T0)
                want[prio] += batch
        total = sum(len(u) for us in want.values() for u in us)
        blocks = _entries(fr, "queue")
        assert blocks <= total // 900 + 4, (blocks, total)  # packed: ~1 KiB a block
        assert _drain(fr, T0) == want[1] + want[3]
        assert _entries(fr, "queue") == 0


def test_the_lease_record_and_the_counters_of_leases_and_expiries(tmp_path: Path) -> None:
    with Frontier(tmp_path / "frontier", Politeness(default_delay=1.0)) as fr:
        fr.add([{"kind": "url", "v": 1, "url": f"http://h{i}.test/1"} for i in range(3)], T0)
        got = fr.next(10, 60, T0)
        assert [x["v"] for x in got] == [1, 1, 1] and all(x["kind"] == "lease" for x in got)
        assert fr.stats(T0)["leased"] == 3
        assert fr.requeue_expired(T0 + 61) == 3
        st = fr.stats(T0 + 61)
        assert st["expired"] == 3 and st["in_flight"] == 0 and st["queued"] == 3


def test_next_due_sees_a_host_at_priority_9(tmp_path: Path) -> None:
    with Frontier(tmp_path / "frontier", Politeness(default_delay=5.0, response_factor=0)) as fr:
        fr.add([{"kind": "url", "v": 1, "url": f"http://a.test/{i}", "priority": 9} for i in range(2)], T0)
        [lease] = fr.next(1, 600, T0)
        fr.complete([_ok(lease, ended_at=T0 + 1)], T0 + 1)
        assert fr.next_due(T0 + 1) == T0 + 6


def test_the_known_state_follows_what_an_add_did(tmp_path: Path) -> None:
    with Frontier(tmp_path / "frontier", Politeness(default_delay=0.0, response_factor=0, host_queue_cap=1)) as fr:
        fr.add([{"kind": "url", "v": 1, "url": "http://a.test/1"}], T0)
        assert fr.add([{"kind": "url", "v": 1, "url": "http://a.test/2"}], T0)["dropped_host_cap"] == 1
        assert fr.state_of("http://a.test/2") is None  # refused: not "queued"
        assert _drain(fr, T0) == ["http://a.test/1"]
        assert fr.add([{"kind": "url", "v": 1, "url": "http://a.test/2"}], T0)["added"] == 1  # now it can be
        assert _drain(fr, T0) == ["http://a.test/2"]
        fr.new_cycle()
        assert fr.add([{"kind": "url", "v": 1, "url": "http://a.test/1"}], T0)["added"] == 1
        assert fr.state_of("http://a.test/1") == "queued"
        assert fr.add([{"kind": "url", "v": 1, "url": "http://a.test/1"}], T0)["known"] == 1


def test_a_host_handed_away_and_back_is_leased_again(tmp_path: Path) -> None:
    # a shard that leaves (take_hosts) and comes back (its host record, then its URLs): the host left
    # the schedule and must be put back on it, at the same priority and the same time as before
    from crawl.frontier import merge_host_state, take_hosts

    with Frontier(tmp_path / "frontier", Politeness(default_delay=2.0, response_factor=0)) as fr:
        fr.add([{"kind": "url", "v": 1, "url": f"http://a.test/{i}"} for i in range(3)], T0)
        [lease] = fr.next(1, 600, T0)
        fr.complete([_ok(lease, ended_at=T0 + 1)], T0 + 1)  # a.test scheduled at T0 + 3, priority 1
        out: list[dict] = []
        assert take_hosts(fr, ["a.test"], T0 + 1, out.extend)["hosts"] == 1
        assert fr.next_due(T0 + 1) is None
        host = next(r for r in out if r["kind"] == "host")
        assert host["next_allowed"] == T0 + 3
        assert merge_host_state(fr, [host], T0 + 2) == 1
        assert fr.add([r for r in out if r["kind"] == "url"], T0 + 2)["added"] == 2
        assert fr.next_due(T0 + 2) == T0 + 3
        assert fr.next(5, 600, T0 + 2.5) == []
        assert [x["url"] for x in fr.next(5, 600, T0 + 3)] == ["http://a.test/1"]


def test_a_scheduled_host_whose_next_allowed_time_moves_later_moves_on_the_schedule(tmp_path: Path) -> None:
    # a host's state taken over from another node (merge_host_state) moves its time on the schedule;
    # next_due (what `next --wait` sleeps until) tells where it is
    from crawl.frontier import merge_host_state

    with Frontier(tmp_path / "frontier", Politeness(default_delay=2.0, response_factor=0)) as fr:
        fr.add([{"kind": "url", "v": 1, "url": f"http://a.test/{i}"} for i in range(2)], T0)
        [lease] = fr.next(1, 600, T0)
        fr.complete([_ok(lease, ended_at=T0 + 1)], T0 + 1)
        assert fr.next_due(T0 + 1) == T0 + 3
        assert merge_host_state(fr, [{"kind": "host", "v": 1, "host": "a.test", "next_allowed": T0 + 50}],
                                T0 + 1) == 1
        assert fr.next_due(T0 + 1) == T0 + 50
        assert fr.next(5, 600, T0 + 49) == []
        assert [x["url"] for x in fr.next(5, 600, T0 + 50)] == ["http://a.test/1"]


def test_blocks_stay_within_1_kib_whatever_the_batch_sizes(tmp_path: Path) -> None:
    # a host's queue is blocks of ~1 KiB (a lease rewrites one block): adds of one URL, pairs, batches
    # of 60 and of 3 each top up the tail block and start new ones, never past BLOCK, never one a URL
    from crawl.frontier import hostqueue as hq

    with Frontier(tmp_path / "frontier", Politeness(default_delay=0.0, response_factor=0)) as fr:
        want: list[str] = []
        for size in [1] * 10 + [2] * 30 + [60] * 3 + [1] * 5 + [3] * 10:
            batch = [f"http://a.test/{len(want) + j:04d}/" + "x" * 20 for j in range(size)]
            fr.add([{"kind": "url", "v": 1, "url": u} for u in batch], T0)
            want += batch
        with fr.env.begin() as txn:
            sizes = [len(v) for _, v in txn.cursor(db=fr.db["queue"])]
        assert max(sizes) <= hq.BLOCK
        assert len(sizes) <= sum(sizes) // 900 + 2, sizes
        assert _drain(fr, T0) == want


def test_a_more_urgent_url_moves_its_scheduled_host_up(tmp_path: Path) -> None:
    # a.test is scheduled at priority 5, b.test at 3; a URL of priority 0 for a.test puts a.test first
    with Frontier(tmp_path / "frontier", Politeness(default_delay=0.0, response_factor=0)) as fr:
        fr.add([{"kind": "url", "v": 1, "url": "http://a.test/late", "priority": 5},
                {"kind": "url", "v": 1, "url": "http://b.test/1", "priority": 3}], T0)
        fr.add([{"kind": "url", "v": 1, "url": "http://a.test/urgent", "priority": 0}], T0)
        assert fr.dump("a.test", T0)["scheduled"] == "priority 0"
        assert [x["url"] for x in fr.next(1, 600, T0)] == ["http://a.test/urgent"]


@pytest.mark.parametrize("url", [5, ["http://a.test/1"], ""])
def test_a_record_whose_url_is_not_a_string_is_rejected(tmp_path: Path, url: object) -> None:
    with Frontier(tmp_path / "frontier", Politeness(default_delay=1.0)) as fr:
        rejects: list[dict] = []
        counts = fr.add([{"kind": "url", "v": 1, "url": url}, {"kind": "url", "v": 1, "url": "http://b.test/1"}],
                        T0, rejects)
        assert counts["rejected"] == 1 and counts["added"] == 1
        assert [(r["input"], r["error"]) for r in rejects] == [(url, 'no "url" string')]


def test_a_url_too_long_to_queue_is_rejected_each_time_and_never_known(tmp_path: Path) -> None:
    long_url = "http://a.test/" + "x" * 40_000
    with Frontier(tmp_path / "frontier", Politeness(default_delay=1.0)) as fr:
        for _ in range(2):  # refused, so not "known" the second time either
            rejects: list[dict] = []
            counts = fr.add([{"kind": "url", "v": 1, "url": long_url}], T0, rejects)
            assert counts["rejected"] == 1 and counts["known"] == 0
            assert [r["input"] for r in rejects] == [long_url] and rejects[0]["error"]
        assert fr.state_of(long_url) is None


def test_a_delayed_url_joins_its_queue_at_its_own_priority(tmp_path: Path) -> None:
    with Frontier(tmp_path / "frontier", Politeness(default_delay=0.0, response_factor=0)) as fr:
        fr.add([{"kind": "url", "v": 1, "url": "http://b.test/1", "priority": 3},
                {"kind": "url", "v": 1, "url": "http://a.test/1", "priority": 7, "due": T0 + 5}], T0)
        fr.add([{"kind": "url", "v": 1, "url": "http://c.test/1", "priority": 0, "due": T0 + 5}], T0)
        assert [x["url"] for x in fr.next(1, 600, T0)] == ["http://b.test/1"]
        assert [x["url"] for x in fr.next(1, 600, T0 + 5)] == ["http://c.test/1"]  # priority 0 first
        assert fr.dump("a.test", T0 + 5)["scheduled"] == "priority 7"


def test_a_big_lease_batch_checks_the_map_budget_while_it_runs(tmp_path: Path) -> None:
    # the resident map is trimmed inside a batch of leases (at every 100th), not only after it: a budget of
    # one byte is exceeded at every check, so each check trims (real madvise on the real map)
    with Frontier(tmp_path / "frontier", Politeness(default_delay=1.0), map_budget=1) as fr:
        fr.add([{"kind": "url", "v": 1, "url": f"http://h{i}.test/1"} for i in range(298)], T0)
        for n in (100, 198):
            before = fr.trimmer.trims
            assert len(fr.next(n, 600, T0)) == n
            assert fr.trimmer.trims - before == 2  # at the 100th lease, and after the transaction


def test_a_handoff_without_the_last_transactions_states_leases_the_next_url(tmp_path: Path) -> None:
    # the process that hands off is not the one that leased (nothing carried): it reads the host from
    # LMDB once, releases it and leases its next URL from that same state
    path = tmp_path / "frontier"
    with Frontier(path, Politeness(default_delay=0.0, response_factor=0)) as fr:
        fr.add([{"kind": "url", "v": 1, "url": f"http://a.test/{i}"} for i in range(3)], T0)
        [a] = fr.next(10, 60, T0)
    with Frontier(path, Politeness(default_delay=0.0, response_factor=0)) as fr:
        released, b = fr.handoff(_ok(a, ended_at=T0 + 0.5), T0 + 0.5, 60)
        assert released and b is not None and b["url"] == "http://a.test/1"
        assert fr.pending()["in_flight"] == 2 and fr.next(10, 60, T0 + 1) == []


def test_a_handoff_that_leases_nothing_counts_no_lease(tmp_path: Path) -> None:
    # x is due at the end of its answer, but its address was slowed meanwhile (y's 429): nothing leased
    ip = "10.0.0.1"
    with Frontier(tmp_path / "frontier", Politeness(default_delay=0.0, response_factor=0)) as fr:
        fr.add([{"kind": "url", "v": 1, "url": f"http://{h}.test/{j}"} for h in ("x", "y") for j in range(3)], T0)
        fr.complete([_ok(x, ip=ip, ended_at=T0) for x in fr.next(10, 60, T0)], T0)  # both on one address
        second = {x["host"]: x for x in fr.next(10, 60, T0 + 1)}
        fr.complete([{**_ok(second["y.test"], ip=ip, ended_at=T0 + 1), "outcome": "http-error", "status": 429,
                      "retry_after": "100"}], T0 + 1)
        released, b = fr.handoff(_ok(second["x.test"], ip=ip, ended_at=T0 + 1.5), T0 + 1.5, 60)
        assert released and b is None
        st = fr.stats(T0 + 1.5)
        assert st["leased"] == 4 and st["queued"] == 3  # x's and y's first two leases; x/2, y/1, y/2


def test_a_host_due_on_a_slowed_address_is_rescheduled_when_the_address_may_be_asked(tmp_path: Path) -> None:
    # x's 429 slows its address (everyone on that machine waits); y, due earlier on the same address,
    # is not leased and moves to the address's time: next_due (what `next --wait` sleeps until) says so
    ip = "10.0.0.1"
    with Frontier(tmp_path / "frontier", Politeness(default_delay=1.0, response_factor=0)) as fr:
        fr.add([{"kind": "url", "v": 1, "url": f"http://{h}.test/{j}"} for h in ("x", "y") for j in range(3)], T0)
        fr.complete([_ok(x, ip=ip, ended_at=T0) for x in fr.next(10, 60, T0)], T0)  # both on one address
        second = {x["host"]: x for x in fr.next(10, 60, T0 + 1)}
        fr.complete([_ok(second["y.test"], ip=ip, ended_at=T0 + 1)], T0 + 1)  # y due at T0 + 2
        fr.complete([{**_ok(second["x.test"], ip=ip, ended_at=T0 + 1), "outcome": "http-error", "status": 429,
                      "retry_after": "100"}], T0 + 1)  # the address is slowed until T0 + 101
        assert fr.next(10, 60, T0 + 5) == []
        assert fr.next_due(T0 + 5) == T0 + 101
        assert fr.dump("y.test", T0 + 5)["next_allowed"] >= T0 + 101 - 1e-3


def test_a_host_stays_at_its_priority_when_a_lease_uses_up_a_block(tmp_path: Path) -> None:
    # a.test's 60 URLs at priority 5 fill two blocks; when a lease takes the last URL of the first one,
    # the host's next URL is still of priority 5 (from the next block's key), not more urgent
    with Frontier(tmp_path / "frontier", Politeness(default_delay=0.0, response_factor=0)) as fr:
        fr.add([{"kind": "url", "v": 1, "url": f"http://a.test/{i:04d}/" + "x" * 20, "priority": 5}
                for i in range(60)], T0)
        assert _entries(fr, "queue") >= 2
        for _ in range(59):
            [lease] = fr.next(1, 600, T0)
            fr.complete([_ok(lease)], T0)
            assert fr.dump("a.test", T0)["scheduled"] == "priority 5"


def test_a_deadline_whose_lease_is_gone_is_dropped_quietly(tmp_path: Path) -> None:
    # damage (or an older frontier): a deadline entry with no lease behind it expires without harm
    from crawl.frontier import hostqueue as hq

    with Frontier(tmp_path / "frontier", Politeness(default_delay=1.0)) as fr:
        fr.add([{"kind": "url", "v": 1, "url": f"http://h{i}.test/1"} for i in range(2)], T0)
        leases = fr.next(10, 60, T0)
        with fr.env.begin(write=True) as txn:
            assert txn.delete(hq.u64(int(leases[0]["lease"], 16)), db=fr.db["leases"])
        assert fr.requeue_expired(T0 + 61) == 2  # both deadlines passed; one lease is there to expire
        assert _entries(fr, "deadlines") == 0
        assert [x["url"] for x in fr.next(10, 60, T0 + 70)] == [leases[1]["url"]]


def test_an_expired_lease_waits_the_hosts_crawl_delay(tmp_path: Path) -> None:
    # robots.txt's Crawl-delay (30 s, learned from a result) holds after an expiry as after an answer
    with Frontier(tmp_path / "frontier", Politeness(default_delay=1.0, response_factor=0)) as fr:
        fr.add([{"kind": "url", "v": 1, "url": f"http://a.test/{i}"} for i in range(2)], T0)
        [first] = fr.next(1, 60, T0)
        fr.complete([_ok(first, ended_at=T0 + 1, crawl_delay=30)], T0 + 1)
        [second] = fr.next(1, 60, T0 + 31)  # never completed: expires at T0 + 91
        assert fr.requeue_expired(T0 + 91) == 1
        assert fr.next(1, 60, T0 + 120.9) == []
        [again] = fr.next(1, 60, T0 + 121)
        assert again["url"] == second["url"]


def test_next_due_sees_the_soonest_host_at_neighbouring_priorities_and_at_priority_0(tmp_path: Path) -> None:
    with Frontier(tmp_path / "frontier", Politeness(default_delay=5.0, response_factor=0)) as fr:
        fr.add([{"kind": "url", "v": 1, "url": f"http://{h}.test/{i}", "priority": p}
                for h, p in (("a", 2), ("b", 3), ("c", 0)) for i in range(2)], T0)
        leases = {x["host"]: x for x in fr.next(10, 600, T0)}
        fr.complete([_ok(leases["a.test"], ended_at=T0 + 2)], T0 + 2)  # a (priority 2) due at T0 + 7
        fr.complete([_ok(leases["b.test"], ended_at=T0 + 1)], T0 + 2)  # b (priority 3) due at T0 + 6
        assert fr.next_due(T0 + 2) == T0 + 6
        fr.complete([_ok(leases["c.test"], ended_at=T0 + 0.5)], T0 + 2)  # c (priority 0) due at T0 + 5.5
        assert fr.next_due(T0 + 2) == T0 + 5.5


def test_a_host_the_lease_filter_refuses_is_looked_at_again_a_second_later_and_once(tmp_path: Path) -> None:
    # crawl/cluster: a host not this node's to lease now goes back on the schedule FILTER_RECHECK_MS
    # later (not at once: `next --wait` would spin), and only once, whatever is added to it meanwhile
    with Frontier(tmp_path / "frontier", Politeness(default_delay=0.0, response_factor=0)) as fr:
        fr.add([{"kind": "url", "v": 1, "url": "http://a.test/1"}], T0)
        fr.lease_filter = lambda host: host != "a.test"
        assert fr.next(10, 60, T0) == []
        assert fr.next_due(T0) == T0 + 1.0
        fr.lease_filter = None
        fr.add([{"kind": "url", "v": 1, "url": "http://a.test/0", "priority": 0}], T0)  # more urgent
        assert _entries(fr, "sched") == 1
        assert [x["url"] for x in fr.next(10, 60, T0 + 1)] == ["http://a.test/0"]  # one lease per host


def test_a_healed_host_takes_its_priority_from_what_is_added_later(tmp_path: Path) -> None:
    # a.test's queue lost its only (priority 1) block: the lease that finds out heals the host (no URL
    # ready); URLs added later at priority 3 schedule it at 3, also after one of them was leased
    from crawl.frontier import hostqueue as hq

    with Frontier(tmp_path / "frontier", Politeness(default_delay=0.0, response_factor=0)) as fr:
        fr.add([{"kind": "url", "v": 1, "url": "http://a.test/1"}], T0)
        with fr.env.begin(write=True) as txn:
            hid = int.from_bytes(txn.get(b"a.test", db=fr.db["hostid"]), "big")
            cur = txn.cursor(db=fr.db["queue"])
            assert cur.set_range(hq.hid_key(hid)) and cur.delete()
        assert fr.next(10, 60, T0) == []
        fr.add([{"kind": "url", "v": 1, "url": f"http://a.test/p3/{i}", "priority": 3} for i in range(2)], T0)
        [lease] = fr.next(10, 60, T0)
        fr.complete([_ok(lease)], T0)
        assert fr.dump("a.test", T0)["scheduled"] == "priority 3"


@pytest.mark.parametrize(("fields", "wait"), [({"timings": {"total": 0.5}}, 2.5),  # 5 x a 0.5 s answer
                                              ({"crawl_delay": 0.5}, 0.5)])  # a Crawl-delay under a second
def test_an_expired_lease_waits_a_delay_under_a_second_too(tmp_path: Path, fields: dict, wait: float) -> None:
    with Frontier(tmp_path / "frontier",
                  Politeness(default_delay=0.1, response_factor=5.0 if "timings" in fields else 0)) as fr:
        fr.add([{"kind": "url", "v": 1, "url": f"http://a.test/{i}"} for i in range(2)], T0)
        [first] = fr.next(1, 60, T0)
        fr.complete([_ok(first, ended_at=T0 + 1, **fields)], T0 + 1)
        [second] = fr.next(1, 60, T0 + 10)  # never completed: expires at T0 + 70
        assert fr.requeue_expired(T0 + 70) == 1
        assert fr.next(1, 60, T0 + 70 + wait - 0.01) == []
        [again] = fr.next(1, 60, T0 + 70 + wait)
        assert again["url"] == second["url"]


def test_a_host_not_yet_due_is_not_shown_to_the_lease_filter(tmp_path: Path) -> None:
    # a.test is due at T0 + 0.5; `next` at T0 must not take it off the schedule early: the filter
    # (another node's host) would put it back a second after T0, not at its own time
    with Frontier(tmp_path / "frontier", Politeness(default_delay=0.5, response_factor=0)) as fr:
        fr.add([{"kind": "url", "v": 1, "url": f"http://a.test/{i}"} for i in range(2)], T0 - 1)
        [lease] = fr.next(1, 60, T0 - 1)
        fr.complete([_ok(lease, ended_at=T0)], T0)
        fr.lease_filter = lambda host: host != "a.test"
        assert fr.next(10, 60, T0) == []
        assert fr.next_due(T0) == T0 + 0.5


def test_a_handoff_does_not_show_a_host_not_yet_due_to_the_lease_filter(tmp_path: Path) -> None:
    # released at the end of its answer but due only 0.3 s later: the hand-off leases nothing and
    # leaves the host at its own time, not a second later where the filter would put it back
    with Frontier(tmp_path / "frontier", Politeness(default_delay=0.3, response_factor=0)) as fr:
        fr.add([{"kind": "url", "v": 1, "url": f"http://a.test/{i}"} for i in range(2)], T0)
        [a] = fr.next(10, 60, T0)
        fr.lease_filter = lambda host: host != "a.test"
        released, b = fr.handoff(_ok(a, ended_at=T0 + 1.0), T0 + 1.0, 60)
        assert released and b is None
        assert fr.next_due(T0 + 1.0) == T0 + 1.3


def test_a_hosts_tail_block_is_found_between_neighbouring_priorities_and_hosts(tmp_path: Path) -> None:
    # a.test's adds alternate priorities 1 and 2 (each add misses the last-used block, so the tail is
    # searched for), with b.test's blocks after a.test's in the queue: the tails are still topped up
    with Frontier(tmp_path / "frontier", Politeness(default_delay=0.0, response_factor=0)) as fr:
        fr.add([{"kind": "url", "v": 1, "url": "http://a.test/first"}, {"kind": "url", "v": 1, "url": "http://b.test/1"}],
               T0)
        want: dict[int, list[str]] = {1: ["http://a.test/first"], 2: []}
        for i in range(200):
            prio = 1 + i % 2
            url = f"http://a.test/p{prio}/{i:04d}/" + "x" * 20
            fr.add([{"kind": "url", "v": 1, "url": url, "priority": prio}], T0)
            want[prio].append(url)
        parts: dict[bytes, list[int]] = {}  # (host, priority) -> its block sizes, in queue order
        with fr.env.begin() as txn:
            for key, value in txn.cursor(db=fr.db["queue"]):
                parts.setdefault(bytes(key[:5]), []).append(len(value))
        for sizes in parts.values():  # every block but the last of its host and priority is full
            assert all(n > 900 for n in sizes[:-1]), parts
        got = _drain(fr, T0)
        assert [u for u in got if "a.test" in u] == want[1] + want[2]
