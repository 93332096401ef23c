"""Mutation testing of the modules that hold crawl's invariants (``make mutate``).

A test suite that passes says little until it is shown to fail when the rule
it guards is broken. This script breaks the rules one small change at a time
(a *mutant*), runs the tests that cover the changed module, and reports the
mutants no test noticed (*survivors*): each is either a missing test or a
change that makes no difference (an *equivalent* mutant, listed with its
reason in ``EQUIVALENT`` below and in the README).

Operators, applied inside function bodies only (module and class constants
are settings, not rules; docstrings, asserts, annotations, decorators and
f-strings are left alone):

``compare``   flip a comparison: ``<`` and ``>=``, ``<=`` and ``>``, ``==`` and
              ``!=``, ``in`` and ``not in``, ``is`` and ``is not``;
``number``    an int constant n becomes n + 1 and n - 1; a float c becomes
              0.0 and 2c; True and False swap;
``boolop``    ``and`` becomes ``or`` and back;
``not``       ``not x`` becomes ``x``;
``minmax``    ``min(...)`` becomes ``max(...)`` and back;
``drop``      a statement (assignment, call, raise, continue, break, or an
              ``if`` without ``else``) becomes ``pass``;
``return``    a function that returns nothing returns at once.

Every mutant is run in a throwaway copy of the tree (the files git knows
about plus untracked ones, and the built C module) under /tmp, never in the
checkout: other people work there; the copies are removed at the end.

Which tests a mutant runs (what mutmut and cosmic-ray do): the covering test
files of the modules (the ``TARGETS`` map) are first run once, unmutated,
under coverage.py, child processes included (``crawl`` run as a command is
most of what the invariant tests do), each line recorded with the test that
executed it. A mutant then runs only the tests that reach its line, fastest
first, with ``pytest -x`` and a timeout of three times their unmutated time
plus 30 s; a failing or timed-out run kills it. A mutant whose line no test
reaches survives at once ("no test reaches it": a finding, not a verdict of
equivalence). Lines reached while a fixture was set up or torn down count for
every test of that file (a module fixture serves them all); lines reached
outside any test (imports) fall back to all the covering tests.
``--whole-files`` is the old way: every mutant runs its module's test files.

    python scripts/mutate.py --list --module politeness      # the mutants, nothing run
    python scripts/mutate.py --module politeness --sample 10  # 10 random mutants, minutes
    python scripts/mutate.py --sample 5 --jobs 2              # 5 per module, two copies
    python scripts/mutate.py --rev HEAD --sample 5            # the last commit, not the work tree
    python scripts/mutate.py --jobs 2                         # everything: hours
    python scripts/mutate.py --only 'tx.py::Tx.lease_host' --whole-files  # just those mutants
"""

from __future__ import annotations

import argparse
import ast
import hashlib
import io
import json
import os
import random
import shutil
import signal
import subprocess
import sys
import tarfile
import tempfile
import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

FRONTIER_TESTS = ("tests/frontier/test_mutants_politeness.py", "tests/frontier/test_mutants_tx.py",
                  "tests/frontier/test_mutants_ipslots.py", "tests/frontier/test_mutants_complete.py",
                  "tests/frontier/test_frontier_expiry.py", "tests/frontier/test_retry_after.py",
                  "tests/frontier/test_ip_wait.py", "tests/frontier/test_delays.py", "tests/frontier/test_handoff.py",
                  "tests/frontier/test_slices.py", "tests/frontier/test_frontier.py",
                  "tests/frontier/test_frontier_property.py",
                  "tests/frontier/test_frontier_cli.py", "tests/frontier/test_frontier_kill.py")


@dataclass(frozen=True)
class Target:
    """A module that holds an invariant, the tests that guard it (fastest first:
    ``-x`` stops at the first failure), and which of its functions are the rule
    (qualified names; empty: every function of the module)."""

    tests: tuple[str, ...]
    scope: tuple[str, ...] = ()


TARGETS: dict[str, Target] = {
    "crawl/frontier/politeness.py": Target(FRONTIER_TESTS),
    "crawl/frontier/tx.py": Target(FRONTIER_TESTS),
    "crawl/frontier/complete.py": Target(FRONTIER_TESTS),
    "crawl/frontier/ipslots.py": Target(FRONTIER_TESTS),
    "crawl/robots/fetch.py": Target(
        ("tests/robots/test_mutants_robots.py", "tests/robots/test_mutants_fetcher.py",
         "tests/robots/test_robots_batch.py", "tests/fetch/test_fetch_safety.py", "tests/fetch/test_fetch_robots.py",
         "tests/fetch/test_fetch_testweb.py", "tests/robots/test_robots.py"),
        ("origin_of", "RobotsCache", "_info_from", "_info_async", "RobotsFetcher")),
    "crawl/robots/policy.py": Target(
        ("tests/robots/test_mutants_policy.py", "tests/robots/test_robots.py",
         "tests/fetch/test_fetch_robots.py"),
        ("for_status", "Robots._group", "Robots.decide", "Robots.allowed", "_Group.first_match", "_names",
         "_merge")),
    "crawl/net/dns.py": Target(
        ("tests/net/test_mutants_dns.py", "tests/net/test_address_policy.py", "tests/net/test_dns.py",
         "tests/fetch/test_fetch_safety.py", "tests/net/test_fetch_exchange.py"),
        ("is_special", "_is_special", "AddressPolicy", "_permits")),
    "crawl/net/backend.py": Target(
        ("tests/net/test_mutants_backend.py", "tests/fetch/test_fetch_safety.py",
         "tests/net/test_fetch_exchange.py", "tests/net/test_http1.py"),
        ("Dialer", "_tcp")),
    "crawl/seen/seenset.py": Target(("tests/seen/test_seen.py", "tests/seen/test_bloom.py",
                                     "tests/seen/test_mutants_seen.py")),
    "crawl/seen/bloom.py": Target(("tests/seen/test_bloom.py", "tests/seen/test_seen.py",
                                   "tests/seen/test_mutants_seen.py")),
    "crawl/core/spool.py": Target(
        ("tests/core/test_spool.py", "tests/core/test_mutants_spool.py"),
        ("_alive", "Spool.put", "Spool._recover", "Spool.claim", "Spool.ack", "Spool.release")),
    "crawl/store/warc.py": Target(
        ("tests/store/test_mutants_warc.py", "tests/store/test_store.py", "tests/fetch/test_fetch_cli.py"),
        ("_Framer", "WarcWriter._open", "WarcWriter._appended", "WarcWriter.sync", "WarcWriter.discard",
         "WarcWriter.rotate", "WarcWriter.close")),
}

# Survivors judged equivalent (or unobservable by any test), by mutant key, with
# the reason; they are reported apart and left out of the kill rate's denominator.
EQUIVALENT: dict[str, str] = {
    "crawl/robots/fetch.py::_info_from::number::0 -> (-1) #2":
        "the default of a cache entry's failed-check count: every unreachable entry is written with "
        "its count, and the count of any other verdict is never reported or used",
    "crawl/robots/fetch.py::_info_from::number::0 -> (1)":
        "the default of a cache entry's status: every entry is written with its status (RobotsFetcher._get)",
    "crawl/robots/fetch.py::_info_from::number::0 -> (-1)":
        "as above",
    "crawl/robots/fetch.py::_info_from::number::0.0 -> (1.0)":
        "the default of fetched_at: every entry is written with it",
    "crawl/robots/fetch.py::_info_from::number::0.0 -> (1.0) #2":
        "the default of expires: every entry is written with it",
    "crawl/robots/fetch.py::_info_from::number::0 -> (1) #2":
        "the default of the failed-check count, as its -1 below",
    "crawl/robots/fetch.py::_info_from::number::0.0 -> (1.0) #3":
        "the default of unreachable_since: every unreachable entry is written with it, and no other "
        "verdict reports or uses it",
    "crawl/robots/fetch.py::RobotsCache.get::drop::raw = bytes(raw) -> pass":
        "py-lmdb's get returns bytes (buffers are off): bytes(raw) is a copy of the same bytes",
    "crawl/robots/fetch.py::_info_async::drop::if len(body) > 32 << 10 -> pass": "where robots.txt is parsed (a worker thread or the event loop), not what it gives",
    "crawl/robots/fetch.py::_info_async::compare::len(body) > 32 << 10 -> (len(body) <= 32 << 10)": "where robots.txt is parsed (a worker thread or the event loop), not what it gives",
    "crawl/robots/fetch.py::_info_async::number::32 -> (33)": "where robots.txt is parsed (a worker thread or the event loop), not what it gives",
    "crawl/robots/fetch.py::_info_async::number::32 -> (31)": "where robots.txt is parsed (a worker thread or the event loop), not what it gives",
    "crawl/robots/fetch.py::_info_async::number::10 -> (11)": "where robots.txt is parsed (a worker thread or the event loop), not what it gives",
    "crawl/robots/fetch.py::_info_async::number::10 -> (9)": "where robots.txt is parsed (a worker thread or the event loop), not what it gives",
    "crawl/robots/fetch.py::RobotsFetcher.fetch::number::32 -> (33)":
        "the size above which robots.txt is parsed in a worker thread (32 or 33 KiB): where, not what",
    "crawl/store/warc.py::_Framer._start::number::3 -> (4)":
        "the zstd compression level: another level writes equally valid frames of the same records",
    "crawl/store/warc.py::_Framer._start::number::3 -> (2)":
        "the zstd compression level: another level writes equally valid frames of the same records",
    "crawl/store/warc.py::_Framer._start::number::16 -> (15)":
        "a gzip window of 2^14 bytes for 2^15 (wbits 30 for 31): equally valid gzip members of the same "
        "records, a little larger",
    "crawl/store/warc.py::WarcWriter._open::number::0 -> (1) #2":
        "the sidecar's synced end is read only when the file's is not 0, and the first sync sets both",
    "crawl/store/warc.py::WarcWriter._open::number::0 -> (-1) #2":
        "as above",
    "crawl/store/warc.py::WarcWriter.discard::boolop::self._fh is None or self._cdxj is None -> (self._fh is None and self._cdxj is None)":
        "the file and its sidecar are opened and closed together: both are set or neither",
    "crawl/store/warc.py::WarcWriter._open::number::1 -> (2)":
        "file sequence numbers that step by 2: names need only be new (the open is exclusive) and grow",
    "crawl/store/warc.py::WarcWriter.sync::boolop::self._fh is not None and self._cdxj is not None -> "
    "(self._fh is not None or self._cdxj is not None)":
        "the file and its sidecar are opened and closed together: both are set or neither",
    "crawl/net/dns.py::AddressPolicy._judge::number::1 -> (2)":
        "address.split('%', 2)[0] is address.split('%', 1)[0]: the zone id is cut either way",
    "crawl/net/backend.py::Dialer.dial::drop::last: Exception | None = None -> pass":
        "the loop over at least one allowed address sets it before it is read (the line is for the "
        "type checker)",
    "crawl/frontier/politeness.py::effective_priority::compare::0 <= priority <= MAX_PRIORITY -> "
    "(0 <= priority > MAX_PRIORITY)":
        "an in-range priority sent down the clamping branch comes out unchanged",
    "crawl/frontier/politeness.py::effective_priority::number::0 -> (1)":
        "priority 0 sent down the clamping branch comes out 0",
    "crawl/frontier/politeness.py::effective_priority::number::0 -> (1) #2":
        "depth > 1 for depth > 0: a depth of 1 adds 1 // 3 = 0 levels",
    "crawl/frontier/politeness.py::effective_priority::number::0 -> (-1) #2":
        "depth > -1 for depth > 0: a depth of 0 adds 0 // 3 = 0 levels",
    "crawl/frontier/politeness.py::effective_priority::number::0 -> (-1) #3":
        "q >= -1 for q >= 0: without a '?' (q = -1) the count of '&' from the last character is at most 1, "
        "2 parameters, which lower nothing",
    "crawl/frontier/tx.py::Tx.__init__::drop::if carry is not None and carry.txn_id + 1 == self.txn_id -> pass":
        "speed only: the carry is the previous transaction's host states, a cache; without it every "
        "state is read from LMDB, the same answers",
    "crawl/frontier/tx.py::Tx.__init__::drop::self.prev_hosts, self.prev_ips = (carry.hosts, carry.ips) -> pass":
        "speed only, as above: the carry is never used",
    "crawl/frontier/tx.py::Tx.__init__::number::1 -> (0)":
        "speed only, as above: transaction ids grow, so txn_id + 0 never matches and the carry is never used",
    "crawl/frontier/tx.py::Tx.__init__::drop::self.lease_id = 0 -> pass":
        "its only reader (lease_host) runs after lease() or next() has set it from the lease counter",
    "crawl/frontier/tx.py::Tx.flush_known::drop::puts.sort(key=_first) -> pass":
        "speed only: unsorted, the puts go in the order they were made, so of two states of one URL the "
        "later still wins",
    "crawl/frontier/tx.py::_first::number::0 -> (1)":
        "the known-state puts sorted by value instead of key: the same distinct keys written by one "
        "putmulti; the order decides only between two states of one URL in one transaction, and none "
        "was found that writes one twice (as far as checked: complete, expiry drops, slice imports)",
    "crawl/frontier/tx.py::_first::number::0 -> (-1)":
        "pair[-1] is pair[1]: as above",
    "crawl/frontier/tx.py::Tx.host_id::drop::if hid is not None -> pass":
        "speed only: past the process's cache of ids, the same committed id is read from LMDB",
    "crawl/frontier/tx.py::Tx.host_id::drop::if hid is not None -> pass #2":
        "speed only: an id this transaction created is read back from its own uncommitted write",
    "crawl/frontier/tx.py::Tx.host_id::drop::hid = self.hids.get(name) -> pass":
        "speed only, as above (hid is still None from the cache miss)",
    "crawl/frontier/tx.py::Tx.robots_waiting::number::0 -> (-1)":
        "speed only: every host's robots wait is looked up even when none waits; none is found",
    "crawl/frontier/tx.py::Tx.flush::drop::self.dirty.clear() -> pass":
        "after the last step of a transaction: every transaction flushes once, at its end, and carry() "
        "does not read it",
    "crawl/frontier/tx.py::Tx.flush::drop::self.delta.clear() -> pass":
        "after the last step of a transaction, as above",
    "crawl/frontier/tx.py::Tx.flush::drop::self.counters.clear() -> pass":
        "after the last step of a transaction, as above",
    "crawl/frontier/tx.py::Tx.flush::drop::self.wrote = self.wrote or bool(self.dirty or self.delta) -> pass":
        "speed only: a transaction that wrote hosts or counters but not addresses gives no carry, and "
        "the next one reads every state from LMDB",
    "crawl/frontier/tx.py::Tx.flush::boolop::self.wrote or bool(self.dirty or self.delta) -> (self.wrote and bool(self.dirty or self.delta))":
        "speed only, as above: fewer carries",
    "crawl/frontier/tx.py::Tx.flush::boolop::self.dirty or self.delta -> (self.dirty and self.delta)":
        "speed only, as above: fewer carries",
    "crawl/frontier/tx.py::Tx.lease_host::drop::self._waiters = True -> pass":
        "the flag is read only by releases later in the same transaction, and no transaction "
        "releases a slot after it has leased (expiries are requeued before leasing)",
    "crawl/frontier/ipslots.py::IpSlots.host::drop::raise NotImplementedError -> pass":
        "the protocol stub of a method Tx always provides",
    "crawl/frontier/ipslots.py::IpSlots.host::return::def host(...) -> return at once":
        "the protocol stub of a method Tx always provides (Tx overrides it; IpSlots is only its mixin)",
    "crawl/frontier/ipslots.py::IpSlots.cursor::drop::raise NotImplementedError -> pass":
        "the protocol stub of a method Tx always provides (Tx overrides it; IpSlots is only its mixin)",
    "crawl/frontier/ipslots.py::IpSlots.cursor::return::def cursor(...) -> return at once":
        "the protocol stub of a method Tx always provides (Tx overrides it; IpSlots is only its mixin)",
    "crawl/frontier/ipslots.py::IpSlots.reschedule::drop::raise NotImplementedError -> pass":
        "the protocol stub of a method Tx always provides (Tx overrides it; IpSlots is only its mixin)",
    "crawl/frontier/ipslots.py::IpSlots.reschedule::return::def reschedule(...) -> return at once":
        "the protocol stub of a method Tx always provides (Tx overrides it; IpSlots is only its mixin)",
    "crawl/frontier/ipslots.py::IpSlots.ip_state::drop::st = self.prev_ips.get(ip) -> pass":
        "speed only: the carried address states are the ones the previous transaction committed "
        "(tx.Carry); without them the same states are read from LMDB",
    "crawl/frontier/ipslots.py::IpSlots.ip_state::drop::self.ips[ip] = st -> pass":
        "speed only: an address read and not changed is read again, unchanged (every change goes "
        "through put_ip, which caches it); it is just not carried to the next transaction",
    "crawl/frontier/ipslots.py::IpSlots.put_ip::number::0 -> (-1) #2":
        "for an int count, > -1 and > 0 differ only at 0, which is stored as 0 either way",
    "crawl/frontier/ipslots.py::IpSlots.flush_ips::drop::self.dirty_ips.clear() -> pass":
        "after the last step of a transaction: every Tx flushes once, at its end, and carry() does "
        "not read it",
    "crawl/frontier/ipslots.py::IpSlots.flush_ips::drop::self.wrote = True -> pass":
        "every address change comes with a host change (lease_host, complete_one, an expiry, "
        "release_early: each dirties the host), so Tx.flush sets wrote anyway; and fewer carries "
        "would be speed only",
    "crawl/frontier/ipslots.py::IpSlots.flush_ips::number::True -> False":
        "as above",
    "crawl/frontier/ipslots.py::IpSlots.has_waiters::number::0 -> (-1)":
        "speed only: with no host waiting, release_ip searches the empty waiting list and finds nobody",
    "crawl/frontier/ipslots.py::IpSlots.release_ip::drop::h.sched = hq.NOT_SCHEDULED -> pass":
        "reschedule sets it: a waiting host has no lease, so it reaches unschedule (directly or from "
        "schedule), which takes a WAITING_IP host off the list (its entry, already deleted) and sets "
        "NOT_SCHEDULED",
    "crawl/frontier/ipslots.py::IpSlots.wake_stranded::drop::h.sched = hq.NOT_SCHEDULED -> pass":
        "as above",
    "crawl/frontier/ipslots.py::IpSlots.wake_stranded::number::4 -> (5)":
        "int.from_bytes(key[-5:]) reads the 0 separator before the id too: the same id",
    "crawl/frontier/ipslots.py::IpSlots.flush_ips::drop::ips[ip] = _NONE -> pass":
        "an address with nothing in flight and its slow-down in the past reads the same as _NONE "
        "(times only move forward)",
    "crawl/frontier/complete.py::complete_one::boolop::status is None or (type(status) is int and 100 <= status <= 999) -> (status is None and (type(status) is int and 100 <= status <= 999))":
        "speed only: the quick test then fails for every record and _check, the exact one, judges each "
        "(it passes every record the quick test passes: tests/frontier/test_mutants_complete.py)",
    "crawl/frontier/complete.py::complete_one::number::100 -> (101)":
        "speed only: a status of 100 fails the quick test and _check, the exact one, passes it",
    "crawl/frontier/complete.py::complete_one::number::999 -> (998)":
        "speed only: a status of 999 fails the quick test and _check, the exact one, passes it",
    "crawl/frontier/complete.py::complete_one::number::0 -> (-1)":
        "speed only: backing_off true at level 0 too deletes a noted cause that is not there (every note "
        "comes with a backoff level of 1 or more, and the level goes to 0 only where the note is cleared)",
    "crawl/frontier/complete.py::complete_one::number::0 -> (-1) #2":
        "the stored -1 of 'no Crawl-delay known' passed for None: release_delay ignores a Crawl-delay <= 0",
    "crawl/frontier/complete.py::complete_one::number::0 -> (1) #3":
        "the else of 'attempts - 1 if attempts else 0': a lease's attempt count is 1..255 (lease_host "
        "sets the entry's + 1, lease_value_of caps it), so the branch is never taken",
    "crawl/frontier/complete.py::complete_one::number::0 -> (-1) #3":
        "as above",
    "crawl/frontier/tx.py::Tx.find_tail::number::255 -> (254)":
        "priorities are 0..9 (effective_priority clamps them): prio < 254 and prio < 255 agree",
    "crawl/frontier/ipslots.py::IpSlots.release_ip::number::0 -> (-1)":
        "put_ip stores a negative count as 0",
    "crawl/robots/policy.py::Robots._group::number::64 -> (63)":
        "the bound of a per-agent memo: 63 or 64 agents remembered, the same answers",
    "crawl/seen/bloom.py::_best_load::number::0.001 -> (0.0)":
        "the floor of a bisection: no size is ever chosen below 0.001 keys a block, and rates that "
        "need one are refused either way",
    "crawl/core/spool.py::Spool.put::number::0 -> (1) #2":
        "the first sequence number of an empty spool: keys need only grow",
    "crawl/seen/seenset.py::SeenSet._run_list::number::1 -> (2)":
        "reshape(-2, 2) is reshape(-1, 2) to numpy: any negative size is the one inferred",
    "crawl/seen/seenset.py::SeenSet.__init__::number::1 -> (0)":
        "expected clamped at 0 instead of 1: the filter's sizing clamps its count at 1 too (size_for: max(n, 1))",
    "crawl/seen/seenset.py::SeenSet.__init__::number::1 -> (0) #2":
        "delta_max clamped at 0 instead of 1: only a batch with a new URL reaches the flush test, so recent + new >= 0 and >= 1 agree",
    "crawl/seen/seenset.py::SeenSet.__len__::number::True -> False":
        "buffers=False: the same entry counts, read as copies",
    "crawl/seen/seenset.py::SeenSet.rebuild::number::True -> False":
        "buffers=False: the runs read as bytes copies instead of views of the map, the same fingerprints",
    "crawl/seen/seenset.py::SeenSet._locate::drop::if len(q) < _FEW -> pass":
        "speed only: the indexed search finds the same keys at the same positions; it differs only in the position of a key not found, which no caller reads",
    "crawl/seen/seenset.py::SeenSet._locate::compare::len(q) < _FEW -> (len(q) >= _FEW)":
        "speed only, as above",
    "crawl/seen/seenset.py::SeenSet._locate::number::2 -> (1)":
        "a first bisection step of 512 reaches the next block's first key, above q (the index chose the block by it), or, clipped, the run's last key, which steps of 256..1 reach too: the same last key <= q",
    "crawl/seen/seenset.py::SeenSet.close::drop::self.env = None -> pass":
        "only a second close() tells: it saves the same filter again and closes a closed environment, which py-lmdb allows",
    "crawl/seen/seenset.py::SeenSet._recent::number::True -> False":
        "py-lmdb's iternext(keys=False, values=False) yields the keys, as keys=True does",
    "crawl/seen/seenset.py::SeenSet._find::drop::where = where[~in_runs[where]] -> pass":
        "speed only: a fingerprint is in a run or in the recent tree, never both (it is inserted only when no run holds it, and a flush empties the tree in the same transaction), so asking the tree for those a run holds finds nothing",
    "crawl/seen/seenset.py::SeenSet._find::boolop::recent and len(where) and txn.stat(self.urls)['entries'] -> (recent or len(where) or txn.stat(self.urls)['entries'])":
        "speed only: the tree is asked when told not to (its answer is thrown away by the one caller that says recent=False), for no keys, or while empty, where it finds nothing",
    "crawl/seen/seenset.py::SeenSet._insert::number::True -> False":
        "zip(strict=False) of the keys and the 4-byte ids of one array: the same lengths",
    "crawl/seen/seenset.py::SeenSet._insert::number::False -> True #2":
        "putmulti(dupdata=True) on a database opened without dupsort: LMDB's NODUPDATA applies only to dupsort databases, overwrite=False decides",
    "crawl/seen/seenset.py::SeenSet._insert::number::True -> False #2":
        "np.isin(assume_unique=False): the same answer (both arrays are unique), found more slowly",
    "crawl/seen/seenset.py::SeenSet._insert::number::8 -> (9)":
        "next_id: a counter stored in 9 (or 7) bytes instead of 8: it is read with int.from_bytes, which takes any width, and never reaches 2**56",
    "crawl/seen/seenset.py::SeenSet._insert::number::8 -> (7)":
        "next_id: a counter stored in 9 (or 7) bytes instead of 8: it is read with int.from_bytes, which takes any width, and never reaches 2**56",
    "crawl/seen/seenset.py::SeenSet._push_run::number::8 -> (9)":
        "next_run: a counter stored in 9 (or 7) bytes instead of 8: it is read with int.from_bytes, which takes any width, and never reaches 2**56",
    "crawl/seen/seenset.py::SeenSet._push_run::number::8 -> (7)":
        "next_run: a counter stored in 9 (or 7) bytes instead of 8: it is read with int.from_bytes, which takes any width, and never reaches 2**56",
    "crawl/seen/seenset.py::SeenSet._push_run::number::0 -> (1)":
        "the first run's id 1 instead of 0: run ids need only be new (next_run only grows)",
    "crawl/seen/seenset.py::SeenSet._push_run::number::1 -> (2) #2":
        "run ids that step by 2: they need only be new (next_run only grows)",
    "crawl/seen/seenset.py::SeenSet._push_run::number::0 -> (1) #2":
        "arrays[-1][1] is the run's ids, exactly as long as its fingerprints arrays[-1][0]",
    "crawl/seen/seenset.py::SeenSet._push_run::number::0 -> (-1) #2":
        "arrays[-1][-1] is the run's ids, exactly as long as its fingerprints arrays[-1][0]",
    "crawl/seen/seenset.py::SeenSet._push_run::drop::del arrays -> pass":
        "the views left in the list are not read again: holding them till the function returns changes nothing (LMDB keeps the map; they are dropped before the transaction ends)",
    "crawl/seen/seenset.py::SeenSet.add_fps::drop::if not len(a) -> pass":
        "speed only: an empty batch goes through an empty write transaction and returns [] all the same",
    "crawl/seen/seenset.py::SeenSet.add_fps::number::True -> False #3":
        "buffers=False: the runs read as bytes copies instead of views of the map, the same fingerprints",
    "crawl/seen/seenset.py::SeenSet.add_fps::number::False -> True":
        "speed only: the untrusted batch's second search also asks the recent tree, and its answer is thrown away (in_runs2, _ = ...)",
    "crawl/seen/seenset.py::SeenSet.contains_fps::drop::if not len(a) -> pass":
        "an empty batch goes through an empty read transaction and returns [] all the same",
    "crawl/seen/seenset.py::SeenSet.contains_fps::number::True -> False #2":
        "buffers=False: the runs read as bytes copies instead of views of the map, the same fingerprints",
    "crawl/seen/seenset.py::SeenSet.unseen::number::True -> False":
        "zip(strict=False) of the slots and their flags: add_fps gives one flag per fingerprint, one fingerprint per slot",
    "crawl/seen/seenset.py::SeenSet._ids::number::1 -> (2)":
        "-2 for -1 as the mark of an id not found in a run: every test of the mark is < 0",
    "crawl/seen/seenset.py::SeenSet._ids::number::0 -> (-1)":
        "a -1 left in the list (i < -1) is set again by the loop that follows: it asks the recent tree for every fingerprint no run holds and writes None or the id",
    "crawl/seen/seenset.py::SeenSet.ids_of::number::True -> False":
        "buffers=False: the same values read as bytes copies instead of views of the map",
    "crawl/seen/seenset.py::SeenSet.mark_fetched::number::True -> False #2":
        "buffers=False: the same values read as bytes copies instead of views of the map",
    "crawl/seen/seenset.py::SeenSet.stats::number::True -> False":
        "buffers=False: the same values read as bytes copies instead of views of the map",
    "crawl/seen/seenset.py::SeenSet.stats::number::1 -> (0)":
        "max(capacity, 0) for max(capacity, 1): the capacity is at least 1 (size_for takes blocks >= n / load for n >= 1)",
    "crawl/seen/bloom.py::patterns::drop::r = 0 -> pass":
        "r is set from the hash before its first read (left starts at 0)",
    "crawl/seen/bloom.py::patterns::number::0 -> (1) #3":
        "as above: r is set before it is read",
    "crawl/seen/bloom.py::patterns::number::0 -> (-1) #3":
        "as above: r is set before it is read",
    "crawl/seen/bloom.py::_block_fp::number::30 -> (31)":
        "the Poisson sum cut a term later or earlier, past load + 11 sd + 29 terms: what is left out is below 1e-20 of the sum, under a double's precision",
    "crawl/seen/bloom.py::_block_fp::number::30 -> (29)":
        "the Poisson sum cut a term later or earlier, past load + 11 sd + 29 terms: what is left out is below 1e-20 of the sum, under a double's precision",
    "crawl/seen/bloom.py::_block_fp::number::12 -> (13)":
        "the Poisson sum cut a term later or earlier, past load + 11 sd + 29 terms: what is left out is below 1e-20 of the sum, under a double's precision",
    "crawl/seen/bloom.py::_block_fp::number::12 -> (11)":
        "the Poisson sum cut a term later or earlier, past load + 11 sd + 29 terms: what is left out is below 1e-20 of the sum, under a double's precision",
    "crawl/seen/bloom.py::false_positive_rate::number::0 -> (-1)":
        "n = 0 sent through the formula: a load of 0 gives a rate of 0.0 for every k, as the early return",
    "crawl/seen/bloom.py::as_fps::drop::if isinstance(fps, np.ndarray) and fps.dtype == np.uint64 -> pass":
        "speed only: np.asarray of a uint64 array is that array",
    "crawl/robots/policy.py::Robots._group::drop::if got is not None -> pass":
        "the per-agent memo: without it (or unbounded) the group is worked out again, the same answer",
    "crawl/robots/policy.py::Robots._group::drop::got = None -> pass":
        "got is None already when the line is reached (the memo had nothing)",
    "crawl/robots/policy.py::Robots._group::drop::if len(self._by_agent) < 64 -> pass":
        "the per-agent memo: without it (or unbounded) the group is worked out again, the same answer",
    "crawl/robots/policy.py::Robots._group::compare::len(self._by_agent) < 64 -> (len(self._by_agent) >= 64)":
        "the per-agent memo: without it (or unbounded) the group is worked out again, the same answer",
    "crawl/robots/policy.py::Robots._group::drop::self._by_agent[agent] = got -> pass":
        "the per-agent memo: without it (or unbounded) the group is worked out again, the same answer",
    "crawl/robots/policy.py::Robots._group::number::64 -> (65)":
        "the bound of a per-agent memo: 64 or 65 agents remembered, the same answers",
    "crawl/robots/policy.py::Robots.allowed::drop::if not group.rules -> pass":
        "speed only: with no rules first_match finds none and the URL is allowed",
    "crawl/robots/policy.py::for_status::number::300 -> (299) #2":
        "a status of 299 has returned at the 2xx test above",
    "crawl/core/spool.py::Spool.put::number::1 -> (2)":
        "sequence numbers that step by 2: keys need only grow",
    "crawl/core/spool.py::Spool.put::number::0 -> (-1) #3":
        "_SEQ.unpack(raw)[-1] is [0] of a one-field tuple",
    "crawl/core/spool.py::Spool.put::number::True -> False #2":
        "speed only: keys only grow, so a plain put lands where put(append=True) would",
    "crawl/core/spool.py::Spool._recover::number::0 -> (1)":
        "the count _recover returns is never read (claim, its one caller, ignores it)",
    "crawl/core/spool.py::Spool._recover::number::0 -> (-1)":
        "the count _recover returns is never read (claim, its one caller, ignores it)",
    "crawl/core/spool.py::Spool._recover::drop::back += 1 -> pass":
        "the count _recover returns is never read (claim, its one caller, ignores it)",
    "crawl/core/spool.py::Spool._recover::number::1 -> (2)":
        "the count _recover returns is never read (claim, its one caller, ignores it)",
    "crawl/core/spool.py::Spool._recover::number::1 -> (0)":
        "the count _recover returns is never read (claim, its one caller, ignores it)",
    "crawl/core/spool.py::Spool.claim::drop::break -> pass":
        "py-lmdb's Cursor.delete returns False only when the cursor is on no record, and the loop has just read one there",
    "crawl/seen/bloom.py::BloomFilter.__init__::number::0 -> (1) #2":
        "a new filter's covers: every filter the seen set uses has it set (rebuild) or read from its file (load) before it is compared",
    "crawl/frontier/tx.py::Tx.__init__::number::0 -> (1)":
        "the first value of lease_id is never read: lease() and lease_this() set it from the lease counter before lease_host, its only reader, runs (as its drop above)",
    "crawl/frontier/tx.py::Tx.__init__::number::0 -> (-1)":
        "as above",
    "crawl/frontier/tx.py::Tx.host_id::drop::self.fr.remember_hid(name, hid) -> pass":
        "speed only: a host id not remembered in the process's cache is read again from LMDB, the same committed id (as host_id's other cache lines above)",
    "crawl/frontier/tx.py::Tx.carry::compare::len(self.hosts) > CARRY_HOSTS -> (len(self.hosts) <= CARRY_HOSTS)":
        "speed and memory only: the carry is used only while valid (no other commit in between, Tx.__init__), whatever its size; without it the same states are read from LMDB",
    "crawl/frontier/tx.py::Tx.flush_deadlines::drop::gone.sort() -> pass":
        "speed only: each gone key is found by set_key in any order (the cur.key() == key test only saves a search)",
    "crawl/frontier/tx.py::Tx.schedule::drop::if h.sched == prio and h.sched_ms == t_ms -> pass":
        "speed only: a host already scheduled at that priority and time is taken off (its entry deleted, or its pending put dropped) and put back at the same key",
    "crawl/frontier/tx.py::Tx.find_tail::number::255 -> (256)":
        "priorities are 0..9 (effective_priority clamps them): prio < 256 and prio < 255 agree",
    "crawl/frontier/tx.py::Tx.find_tail::number::0 -> (1)":
        "no queue key has sequence number 0 (the counter starts at 1): a search from (prio + 1, seq 1) lands where one from (prio + 1, seq 0) does",
    "crawl/frontier/tx.py::Tx.reschedule::drop::self.unschedule(hid, h) -> pass":
        "a no-op wherever it is reached: reschedule meets an empty queue only on a host on no schedule (after a completion, an early release or an expiry: lease_host set NOT_SCHEDULED and nothing schedules a leased host; a woken address waiter is set NOT_SCHEDULED first); merge_done and take_hosts, which empty a scheduled host's queue, unschedule it themselves",
    "crawl/frontier/tx.py::Tx.find_tail::number::False -> True":
        "found = True when prio >= 255: priorities are 0..9 (effective_priority clamps them), the else is never taken",
    "crawl/frontier/tx.py::Tx.find_tail::number::0 -> (1) #2":
        "the prefix of queue_key(hid, prio, 1)[:5] is that of queue_key(hid, prio, 0)[:5]: the sequence number is past byte 5",
    "crawl/frontier/tx.py::Tx.append::drop::if h.tail_prio == prio -> pass":
        "speed only: without the one-get guess of the tail block, find_tail's search finds the same block",
    "crawl/frontier/tx.py::Tx.append::compare::h.tail_prio == prio -> (h.tail_prio != prio)":
        "speed only: the guess reads a block at another priority's sequence number, absent at this one (sequence numbers are unique), or is skipped; find_tail's search finds the same tail",
    "crawl/frontier/tx.py::Tx.append::drop::if block is not None -> pass":
        "speed only: the whole if goes (its body too), so the tail is left to find_tail's search, which finds the same block",
    "crawl/frontier/tx.py::Tx.append::drop::tail = (key, block) -> pass":
        "speed only, as above",
    "crawl/frontier/tx.py::Tx.append::number::1 -> (0)":
        "n == 0 never holds (append is given at least one item); one item then takes the general path, which tops up the tail with it exactly as the one-item path does",
    "crawl/frontier/tx.py::Tx.append::number::0 -> (-1) #2":
        "items[-1] is items[0] on the one-item path (n == 1)",
    "crawl/frontier/tx.py::Tx.append::number::0 -> (-1) #3":
        "items[-1] is items[0] on the one-item path (n == 1)",
    "crawl/frontier/tx.py::Tx.append::number::1 -> (2) #2":
        "i = 2 for i = 1 with n == 1: the new-block loop (while i < n) is skipped either way",
    "crawl/frontier/tx.py::Tx.append::drop::h.tail_prio, h.tail_seq = (prio, seq) -> pass":
        "speed only: tail_prio is then never set (NO_HEAD), so every add finds its tail by find_tail's search, the same block",
    "crawl/frontier/tx.py::Tx.add_many::drop::self.flush_known() -> pass":
        "never reached: add_many's two callers (Frontier.add, recrawl.readd) call it on a fresh Tx, and add_many writes known states itself (never through set_known), so no known put is pending",
    "crawl/frontier/tx.py::Tx.add_many::drop::if self.known_puts -> pass":
        "never reached, as the flush_known under it (the if goes with its body): no known put is pending when add_many starts",
    "crawl/frontier/tx.py::Tx.add_many::drop::h = prev_hosts.get(hid) -> pass":
        "speed only: without the carried state the same committed state is read from LMDB (see Tx.__init__'s carry entries)",
    "crawl/frontier/tx.py::Tx.lease::number::1 -> (2)":
        "range(MAX_PRIORITY + 2) also looks at priority 10, where no host is ever scheduled (effective_priority clamps to 0..9)",
    "crawl/frontier/tx.py::Tx.lease_host::minmax::max(h.next_allowed, h.parked_until) -> (min(h.next_allowed, h.parked_until))":
        "the lease filter sees only due hosts (lease takes due keys, lease_this checks): both times are behind now, so now + FILTER_RECHECK_MS wins either way",
    "crawl/frontier/tx.py::Tx.lease_host::number::1 -> (0) #8":
        "the address's slow-down end replaced by its in-flight count (a unix time of 0..per_ip): a lease is taken only once the slow-down is over (lease_host checks it first), so both are in the past and mean 'not slowed'",
    "crawl/frontier/tx.py::Tx.requeue_expired::drop::if self.gone_deadlines -> pass":
        "never reached with deadlines pending: requeue_expired is the first step of every transaction that calls it (next, complete, requeue-expired, release_leases)",
    "crawl/frontier/tx.py::Tx.requeue_expired::number::0 -> (-1) #2":
        "the stored -1 of 'no answer time known' passed for None: release_delay ignores a response time <= 0",
    "crawl/frontier/tx.py::Tx.requeue_expired::number::0 -> (-1) #3":
        "the stored -1 of 'no Crawl-delay known' passed for None: release_delay ignores a Crawl-delay <= 0",
    "crawl/frontier/tx.py::Tx.back_to_queue::number::0 -> (1)":
        "sequence numbers start at 1 (take('seq') counts before it reads): a search from seq 1 lands on the same first block as one from seq 0",
    "crawl/frontier/tx.py::Tx.next_due::drop::if self.sched_puts -> pass":
        "never reached with puts pending: next_due runs in a read transaction of its own (Frontier.next_due), which has scheduled nothing",
    "crawl/frontier/tx.py::Tx.next_due::number::1 -> (2)":
        "range(MAX_PRIORITY + 2) also looks at priority 10, where no host is ever scheduled (effective_priority clamps to 0..9)",
    "crawl/robots/fetch.py::RobotsCache.__init__::number::1 -> (2)":
        "the group commit's first batch number: batches are only compared (a put waits until _done reaches its batch) and _open starts above _done either way",
    "crawl/robots/fetch.py::RobotsCache.__init__::number::0 -> (-1)":
        "as above: _done starting at -1 is still below the first batch",
    "crawl/frontier/tx.py::Tx.write_leases::drop::self.new_leases, self.new_deadlines = ([], []) -> pass":
        "a second write_leases in one transaction (next's second lease pass after wake_stranded) puts the first pass's leases and deadlines again: the same keys with the same values",
    "crawl/frontier/tx.py::Tx.lease_this::drop::if h is None -> pass":
        "never reached: lease_this runs only right after release_early, which read the host into this transaction's cache (Tx.host)",
    "crawl/frontier/tx.py::Tx.lease_this::drop::h = self.read_host(hid) -> pass":
        "never reached, as above",
    "crawl/frontier/tx.py::Tx.lease_host::compare::h.next_allowed > h.parked_until -> (h.next_allowed <= h.parked_until)":
        "lease_host sees only due hosts (lease takes due keys, lease_this checks): next_allowed and parked_until are both behind now, so not_before > now fails with the smaller as with the larger, and an address's slow-down is compared after either way",
    "crawl/frontier/tx.py::Tx.lease_host::number::True -> False":
        "as the drop of this line: the flag is read only by releases later in the same transaction, and none releases after it has leased",
    "crawl/frontier/tx.py::Tx.requeue_expired::drop::self.flush_deadlines() -> pass":
        "never reached, as its if: requeue_expired is the first step of its transaction",
    "crawl/frontier/tx.py::Tx.observe_idle::number::False -> True":
        "the first sample has no time before it (last = now, so dt = 0): counting it as idle adds 0 s",
    "crawl/frontier/tx.py::Tx.next_due::drop::self.flush_sched() -> pass":
        "never reached, as its if: next_due's read transaction has scheduled nothing",
    "crawl/robots/fetch.py::RobotsFetcher.__init__::number::0 -> (1)":
        "the start of a counter of robots fetches that nothing reads (RobotsFetcher.fetches)",
    "crawl/robots/fetch.py::RobotsFetcher._get::drop::self._remember(origin, cached[0]['expires'], info) -> pass":
        "speed only: a copy read from LMDB and not kept in memory is read and parsed from LMDB again at the next get, the same entry (source 'cache' both ways)",
    "crawl/robots/fetch.py::RobotsFetcher._get::number::0 -> (-1) #6":
        "the default of the failed-check count of an entry with unreachable_since: every such entry is written with its count (1 or more)",
    "crawl/robots/fetch.py::RobotsFetcher._get::drop::body = b'' -> pass":
        "fetch returns an empty body with every unreachable verdict (both its unreachable returns give b'')",
    "crawl/robots/fetch.py::RobotsFetcher._get::number::0 -> (1) #7":
        "the default of info.checks for an entry without a count: only unreachable verdicts report or use the count, and their entries are written with it",
    "crawl/robots/fetch.py::RobotsFetcher.__init__::number::0 -> (-1)":
        "the start of a counter of robots fetches that nothing reads (RobotsFetcher.fetches)",
    "crawl/robots/fetch.py::RobotsFetcher.get::drop::if hot is not None and hot[0] > float(self.clock()) -> pass":
        "speed only: without the lock-free look, _get makes the same check of the copy in memory under the origin's lock",
    "crawl/robots/fetch.py::RobotsFetcher.fetch::number::1 -> (2)":
        "a counter of robots fetches that nothing reads (RobotsFetcher.fetches)",
    "crawl/robots/fetch.py::RobotsFetcher.fetch::number::200 -> (199)":
        "199 for 200 at the bottom of a 2xx range: no final response has a 1xx status (the HTTP layer reads past them, crawl/net/http1.py)",
    "crawl/robots/fetch.py::RobotsFetcher.fetch::number::200 -> (199) #2":
        "199 for 200 at the bottom of a 2xx range: no final response has a 1xx status (the HTTP layer reads past them, crawl/net/http1.py)",
    "crawl/robots/fetch.py::RobotsFetcher.fetch::number::400 -> (399) #2":
        "the body of a 399 not read: a 3xx's body is never used (a redirect is followed, or judged by its status alone)",
    "crawl/robots/fetch.py::RobotsFetcher._get::number::0 -> (1) #6":
        "the default of the failed-check count of an entry with unreachable_since: every such entry is written with its count (1 or more)",
    "crawl/robots/fetch.py::RobotsFetcher._get::number::0 -> (-1) #7":
        "the default of info.checks for an entry without a count: only unreachable verdicts report or use the count, and their entries are written with it",
    "crawl/robots/fetch.py::RobotsFetcher._get::number::0.0 -> (1.0)":
        "the default of info.since for an entry without unreachable_since: only unreachable verdicts report or use it, and their entries are written with it",
    "crawl/robots/fetch.py::RobotsFetcher.fetch::compare::len(body) > 32 << 10 -> (len(body) <= 32 << 10)":
        "where robots.txt is parsed (a worker thread or the event loop), not what it gives",
    "crawl/robots/fetch.py::RobotsFetcher.fetch::number::32 -> (31)":
        "where robots.txt is parsed (a worker thread or the event loop), not what it gives",
    "crawl/robots/fetch.py::RobotsFetcher.fetch::number::10 -> (11)":
        "where robots.txt is parsed (a worker thread or the event loop), not what it gives",
    "crawl/robots/fetch.py::RobotsFetcher.fetch::number::10 -> (9)":
        "where robots.txt is parsed (a worker thread or the event loop), not what it gives",
    "crawl/robots/fetch.py::RobotsFetcher.fetch::drop::self.fetches += 1 -> pass":
        "a counter of robots fetches that nothing reads (RobotsFetcher.fetches)",
    "crawl/robots/fetch.py::RobotsFetcher.fetch::number::300 -> (299) #3":
        "the error line is reached only for a status for_status fixes, never a 2xx (those are parsed above): 299 <= status and 300 <= status agree there",
    "crawl/robots/fetch.py::RobotsFetcher.fetch::number::1 -> (0)":
        "a counter of robots fetches that nothing reads (RobotsFetcher.fetches)",
    "crawl/robots/fetch.py::RobotsFetcher.fetch::number::400 -> (401) #2":
        "the body of a 400 read too: a 4xx is judged by its status alone (for_status: unavailable), its body never used",
    "crawl/store/warc.py::WarcWriter._appended::drop::self.bytes_written += end - start -> pass":
        "a counter nothing reads (WarcWriter.bytes_written: no caller, no report)",
    "crawl/store/warc.py::WarcWriter.close::drop::self._cdxj.close() -> pass":
        "the sidecar's file object has no other reference: the next line (self._cdxj = None) flushes and closes it (CPython's reference counting), as close() would; close() has just flushed it in sync() anyway",
    "crawl/store/warc.py::WarcWriter._open::drop::continue -> pass":
        "the except clause is the last statement of the while loop's body: pass goes round the loop as continue does",
    "crawl/seen/bloom.py::_block_fp::number::1 -> (2) #5":
        "the Poisson sum a term longer, past load + 12 sd + 30 terms: the extra term is below 1e-20 of the sum, under a double's precision",
    "crawl/seen/bloom.py::_block_fp::number::True -> False":
        "zip(strict=False) of powers and q: both are k + 1 long, built from the same range",
    "crawl/seen/bloom.py::_block_fp::number::1 -> (0) #5":
        "the Poisson sum a term shorter, past load + 12 sd + 29 terms: the term left out is below 1e-20 of the sum, under a double's precision",
    "crawl/seen/bloom.py::_best_load::drop::if known is not None and 1 <= k <= len(known) -> pass":
        "speed only: the known loads are _search_load's results bit for bit (tests/seen/test_bloom.py checks it), so searching gives the same load",
    "crawl/seen/bloom.py::_best_load::compare::1 <= k <= len(known) -> (1 <= k > len(known))":
        "speed only: k is 1..16 (size_for), so the table is skipped and _search_load gives the same loads bit for bit",
    "crawl/seen/bloom.py::_best_load::number::1 -> (0)":
        "k is at least 1 (size_for's range(1, 17)): 0 <= k and 1 <= k agree",
    "crawl/seen/bloom.py::_block_fp::number::True -> False #2":
        "zip(strict=False) of signs and powers: both are k + 1 long, built from the same range",
    "crawl/seen/bloom.py::_best_load::compare::1 <= k <= len(known) -> (1 > k <= len(known))":
        "speed only: k is at least 1, so the table is skipped and _search_load gives the same loads bit for bit",
    "crawl/seen/bloom.py::_best_load::number::1 -> (2)":
        "speed only: k = 1 skips the table and _search_load gives the same load bit for bit",
    "crawl/seen/bloom.py::size_for::number::17 -> (18)":
        "a pattern size of 17 is never reached: memory is unimodal in k and the best k is at most 14 for every rate a 64-bit block can give (checked for rates 1e-2 to 1e-7.7), so the loop breaks before 16",
    "crawl/seen/bloom.py::size_for::drop::if best is not None and blocks > best[0] -> pass":
        "speed only: memory is unimodal in k, so the sizes past the optimum are larger and never chosen (checked: the same (blocks, k) for rates 1e-2 to 1e-7 and 1, 1,000 and 1,000,000 keys)",
    "crawl/seen/bloom.py::size_for::drop::break -> pass":
        "speed only, as above",
    "crawl/seen/bloom.py::size_for::number::1 -> (0) #4":
        "max(0, ceil(n / load)) for max(1, ...): n is at least 1 (clamped above) and load positive, so the ceiling is at least 1",
    "crawl/seen/bloom.py::size_for::number::1 -> (0) #3":
        "k = 0 tried first: a pattern of no bits matches every key, its load is 0 (_search_load) and it is skipped",
    "crawl/seen/bloom.py::size_for::number::17 -> (16)":
        "a pattern size of 16 is never chosen nor reached: the best k is at most 14 for every rate a 64-bit block can give and the loop breaks past it (checked for rates 1e-2 to 1e-7.7)",
    "crawl/seen/bloom.py::BloomFilter.load::number::1 -> (2) #2":
        "f.read(2) is non-empty exactly when f.read(1) is: either finds bytes after the filter's words",
    "crawl/seen/seenset.py::canonical::number::0 -> (1)":
        "speed only: the inline fast path sends an int fp of 0 on to _fp_of, which checks the same bounds and returns the same int",
    "crawl/seen/seenset.py::canonical::number::1 -> (0)":
        "speed only: with an upper bound of 0 << 64 every int fp goes on to _fp_of, which checks the same bounds and returns the same int",
    "crawl/seen/seenset.py::canonical::number::64 -> (63)":
        "speed only: int fps from 2**63 up go on to _fp_of, which checks the same bounds and returns the same int",
}

# Survivors that some input tells apart, but no test can give it: not equivalent,
# and not counted as killed (they stay in the kill rate's denominator as survivors).
UNOBSERVABLE: dict[str, str] = {
    "crawl/store/warc.py::WarcWriter.sync::drop::os.fsync(self._fh.fileno()) -> pass":
        "only a power cut shows a missing fsync (README, limits)",
    "crawl/store/warc.py::WarcWriter._open::drop::os.fsync(dfd) -> pass":
        "only a power cut shows a missing fsync (README, limits)",
    "crawl/frontier/politeness.py::release_delay::number::0 -> (-1)":
        "a response time in (-1, 0] times k is never above a default delay >= 0; only a Politeness built "
        "by hand with a negative delay (--delay refuses one) tells them apart",
    "crawl/frontier/politeness.py::release_delay::number::0 -> (-1) #2":
        "the same for a Crawl-delay in (-1, 0] (robots.txt parsing refuses negative delays)",
    "crawl/robots/fetch.py::RobotsFetcher.fetch::drop::await trio.sleep(self.hop_delay) -> pass":
        "the pause between two redirect hops of a robots.txt: only the time between the requests shows it, and no test asserts wall-clock time (trio's MockClock would also move the network timeouts)",
    "crawl/store/warc.py::WarcWriter.rotate::drop::self.close() -> pass":
        "the old file is flushed and closed all the same when _open drops its last reference (CPython), only its fsync is missing: a power cut shows it",
    "crawl/store/warc.py::WarcWriter.close::drop::self.sync() -> pass":
        "the file is still flushed by its close(); only the fsync is missing, which a power cut shows",
    "crawl/seen/bloom.py::BloomFilter.__init__::number::32 -> (31)":
        "a filter of 2**31 to 2**32 - 1 blocks (16 to 32 GiB) refused: only a test that allocates one could tell",
}


# Survivors looked at and neither killed by a test nor shown equivalent: open.
OPEN: dict[str, str] = {
}


# -- mutants ---------------------------------------------------------------------------

_FLIP: dict[type, type] = {ast.Lt: ast.GtE, ast.GtE: ast.Lt, ast.LtE: ast.Gt, ast.Gt: ast.LtE,
                           ast.Eq: ast.NotEq, ast.NotEq: ast.Eq, ast.In: ast.NotIn, ast.NotIn: ast.In,
                           ast.Is: ast.IsNot, ast.IsNot: ast.Is}
_DROPPABLE = (ast.Assign, ast.AugAssign, ast.AnnAssign, ast.Expr, ast.Raise, ast.Continue, ast.Break,
              ast.Delete)


@dataclass
class Mutant:
    path: str  # relative to the tree
    line: int
    qualname: str
    op: str
    before: str
    after: str
    start: int  # character offsets of the replaced span in the source
    end: int
    text: str  # what replaces it
    key: str = ""
    outcome: str = ""  # killed, timeout, survived, error
    seconds: float = 0.0
    detail: str = ""

    def label(self) -> str:
        return f"{self.path}:{self.line} [{self.op}] {self.before} -> {self.after}  ({self.qualname})"


class _Offsets:
    """Character offsets from the AST's (line, UTF-8 byte column) positions."""

    def __init__(self, source: str) -> None:
        self.lines = source.splitlines(keepends=True)
        self.starts = [0]
        for ln in self.lines:
            self.starts.append(self.starts[-1] + len(ln))

    def at(self, line: int, col: int) -> int:
        return self.starts[line - 1] + len(self.lines[line - 1].encode()[:col].decode(errors="replace"))

    def span(self, node: ast.AST) -> tuple[int, int]:
        return (self.at(node.lineno, node.col_offset),  # type: ignore[attr-defined]
                self.at(node.end_lineno, node.end_col_offset))  # type: ignore[attr-defined]


def _short(node: ast.AST, limit: int = 70) -> str:
    text = " ".join(ast.unparse(node).split())
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _skipped_ids(tree: ast.AST) -> set[int]:
    """Nodes never mutated: asserts, annotations, decorators, f-strings, docstrings,
    ``if TYPE_CHECKING`` blocks, default argument values."""
    skip: set[int] = set()

    def mark(node: ast.AST | None) -> None:
        if node is not None:
            skip.update(id(n) for n in ast.walk(node))

    for node in ast.walk(tree):
        if isinstance(node, ast.Assert | ast.JoinedStr):
            mark(node)
        elif isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            mark(node)
        elif isinstance(node, ast.AnnAssign):
            mark(node.annotation)
        elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            for d in node.decorator_list:
                mark(d)
            mark(node.returns)
            for a in node.args.args + node.args.kwonlyargs + node.args.posonlyargs:
                mark(a.annotation)
            for d in node.args.defaults + node.args.kw_defaults:
                mark(d)
            body = node.body
            if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant) \
                    and isinstance(body[0].value.value, str):
                mark(body[0])
        elif isinstance(node, ast.ClassDef):
            for d in node.decorator_list:
                mark(d)
    return skip


def _functions(tree: ast.Module) -> Iterator[tuple[str, ast.FunctionDef | ast.AsyncFunctionDef]]:
    """(qualified name, node) of every function, methods and nested functions included."""

    def walk(body: list[ast.stmt], prefix: str) -> Iterator[tuple[str, ast.FunctionDef | ast.AsyncFunctionDef]]:
        for node in body:
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                name = prefix + node.name
                yield name, node
                yield from walk(node.body, name + ".")
            elif isinstance(node, ast.ClassDef):
                yield from walk(node.body, prefix + node.name + ".")

    yield from walk(tree.body, "")


def _in_scope(qualname: str, scope: tuple[str, ...]) -> bool:
    return not scope or any(qualname == s or qualname.startswith(s + ".") for s in scope)


def _returns_nothing(fn: ast.FunctionDef | ast.AsyncFunctionDef) -> bool:
    """No ``return value`` and no ``yield`` in the function itself (nested ones aside)."""
    todo: list[ast.AST] = list(fn.body)
    while todo:
        node = todo.pop()
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda | ast.ClassDef):
            continue
        if isinstance(node, ast.Return) and node.value is not None:
            return False
        if isinstance(node, ast.Yield | ast.YieldFrom):
            return False
        todo.extend(ast.iter_child_nodes(node))
    return True


def mutants_of(path: str, source: str, scope: tuple[str, ...] = ()) -> list[Mutant]:
    """Every mutant of one module's functions that are in ``scope``."""
    tree = ast.parse(source)
    skip = _skipped_ids(tree)
    off = _Offsets(source)
    out: list[Mutant] = []
    owner: dict[int, str] = {}
    fns = [(q, f) for q, f in _functions(tree) if _in_scope(q, scope)]
    for q, fn in fns:  # innermost function owns a node (nested functions come later)
        for stmt in fn.body:
            for n in ast.walk(stmt):
                owner[id(n)] = q

    def add(node: ast.AST, op: str, replacement: str, before: str | None = None) -> None:
        start, end = off.span(node)
        out.append(Mutant(path, node.lineno, owner[id(node)], op,  # type: ignore[attr-defined]
                          before or _short(node), " ".join(replacement.split())[:70], start, end, replacement))

    for q, fn in fns:
        body_nodes = [n for stmt in fn.body for n in ast.walk(stmt) if owner.get(id(n)) == q]
        for node in body_nodes:
            if id(node) in skip:
                continue
            if isinstance(node, ast.Compare):
                for i, op in enumerate(node.ops):
                    if type(op) in _FLIP:
                        new = ast.Compare(node.left, list(node.ops), list(node.comparators))
                        new.ops[i] = _FLIP[type(op)]()
                        add(node, "compare", f"({ast.unparse(new)})")
            elif isinstance(node, ast.Constant) and type(node.value) in (int, float, bool):
                v = node.value
                if type(v) is bool:
                    alts = [repr(not v)]
                elif type(v) is int:
                    alts = [f"({v + 1})", f"({v - 1})"]
                else:
                    alts = [f"({v * 2!r})", "(0.0)"] if v != 0 else ["(1.0)"]
                for alt in alts:
                    add(node, "number", alt)
            elif isinstance(node, ast.BoolOp):
                new_op = ast.Or() if isinstance(node.op, ast.And) else ast.And()
                add(node, "boolop", f"({ast.unparse(ast.BoolOp(new_op, node.values))})")
            elif isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not):
                add(node, "not", f"({ast.unparse(node.operand)})")
            elif isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in ("min", "max"):
                other = "max" if node.func.id == "min" else "min"
                call = ast.Call(ast.Name(other), node.args, node.keywords)
                add(node, "minmax", f"({ast.unparse(call)})")
            if isinstance(node, ast.stmt) and (isinstance(node, _DROPPABLE)
                                               or (isinstance(node, ast.If) and not node.orelse)):
                if isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant):
                    continue  # a bare string: a comment, not a statement
                head = _short(node.test) if isinstance(node, ast.If) else _short(node)
                add(node, "drop", "pass", before=("if " + head) if isinstance(node, ast.If) else head)
        if _returns_nothing(fn) and fn.body:
            first = fn.body[0]
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant) and len(fn.body) > 1:
                first = fn.body[1]
            if first.lineno > fn.lineno and id(first) not in skip:
                start = off.at(first.lineno, 0)
                indent = off.lines[first.lineno - 1][: len(off.lines[first.lineno - 1])
                                                      - len(off.lines[first.lineno - 1].lstrip())]
                out.append(Mutant(path, first.lineno, q, "return", f"def {fn.name}(...)", "return at once",
                                  start, start, indent + "return\n"))
    seen: dict[str, int] = {}
    for m in out:
        base = f"{m.path}::{m.qualname}::{m.op}::{m.before} -> {m.after}"
        n = seen.get(base, 0)
        seen[base] = n + 1
        m.key = base if n == 0 else f"{base} #{n + 1}"
    return out


def apply(source: str, m: Mutant) -> str:
    return source[: m.start] + m.text + source[m.end:]


# -- the throwaway tree --------------------------------------------------------------------

def make_tree(dest: Path, rev: str | None = None) -> Path:
    """Copy the checkout to ``dest``: what git sees of the work tree (tracked and
    untracked, not ignored), or the commit ``rev``; and the built C modules. The
    checkout itself is only read."""
    dest.mkdir(parents=True)
    if rev is not None:
        archive = subprocess.run(["git", "-C", str(ROOT), "archive", "--format=tar", rev],
                                 check=True, capture_output=True).stdout
        with tarfile.open(fileobj=io.BytesIO(archive)) as tar:
            tar.extractall(dest, filter="data")
    else:
        files = subprocess.run(["git", "-C", str(ROOT), "ls-files", "-z", "--cached", "--others",
                                "--exclude-standard"], check=True, capture_output=True).stdout.split(b"\0")
        for raw in files:
            if not raw:
                continue
            rel = raw.decode()
            src = ROOT / rel
            if not src.is_file():
                continue  # deleted in the work tree
            dst = dest / rel
            dst.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, dst)
    for so in (ROOT / "crawl").rglob("*.so"):
        dst = dest / so.relative_to(ROOT)
        dst.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(so, dst)
    return dest


def _env(tree: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST_")}
    env["PYTHONPATH"] = str(tree)  # the copy's crawl, ahead of the editable install's
    env["PYTHONDONTWRITEBYTECODE"] = "1"  # a mutant of the same size in the same second: no stale .pyc
    return env


def check_tree(tree: Path) -> None:
    out = subprocess.run([sys.executable, "-c", "import crawl; print(crawl.__file__)"], cwd=tree,
                         env=_env(tree), capture_output=True, text=True, timeout=120)
    where = out.stdout.strip()
    if not where.startswith(str(tree)):
        raise SystemExit(f"mutate: error: the copy at {tree} imports crawl from {where or out.stderr!r}; "
                         "refusing to run (a mutant must never be tested against the checkout)")


def run_tests(tree: Path, tests: tuple[str, ...], timeout: float,
              server: ForkServer | None = None) -> tuple[str, float, str]:
    """(outcome, seconds, last lines): passed, failed or timeout."""
    args = ["-x", "-q", "-p", "no:cacheprovider", "--timeout", str(int(timeout)), *tests]
    t0 = time.monotonic()
    if server is not None:
        rc, out = server.run(args, timeout)
    else:
        proc = subprocess.Popen([sys.executable, "-m", "pytest", *args], cwd=tree, env=_env(tree),
                                stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                                start_new_session=True)
        try:
            out, _ = proc.communicate(timeout=timeout)
            rc = proc.returncode
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)  # the test run and every server it started
            proc.communicate()
            rc = None
    took = time.monotonic() - t0
    if rc is None:
        return "timeout", took, ""
    tail = "\n".join(out.strip().splitlines()[-3:])
    if rc == 0:
        return "passed", took, tail
    if rc == 5:
        return "error", took, "no tests ran: " + tail
    return "failed", took, tail


# A process per copy that has imported pytest and every third-party module the tests
# use (never crawl or the tests), and forks a pytest run per mutant: the child imports
# crawl afresh from the copy, mutant included. It saves the 2 s of imports per run.
_FORKSERVER = r'''
import importlib, json, os, sys
sys.dont_write_bytecode = True
for name in json.loads(sys.argv[1]):
    try:
        importlib.import_module(name)
    except BaseException:
        pass
import pytest
import importlib.util
print(json.dumps({"ready": sorted(m for m in sys.modules if m == "crawl" or m.startswith("crawl.")),
                  "crawl": importlib.util.find_spec("crawl").origin}), flush=True)
for line in sys.stdin:
    req = json.loads(line)
    pid = os.fork()
    if pid == 0:
        os.setsid()
        fd = os.open(req["out"], os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        os.dup2(fd, 1)
        os.dup2(fd, 2)
        os.close(0)
        try:
            # plugins imported warm cannot be assertion-rewritten; their own asserts only
            code = pytest.main(["-W", "ignore::pytest.PytestAssertRewriteWarning", *req["args"]])
        except BaseException:
            import traceback
            traceback.print_exc()
            code = 99
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(int(code))
    print(json.dumps({"pid": pid}), flush=True)
    _, status = os.waitpid(pid, 0)
    print(json.dumps({"rc": os.waitstatus_to_exitcode(status)}), flush=True)
'''


def _third_party(tree: Path, tests: list[str]) -> list[str]:
    """The modules a collection of ``tests`` imports, crawl and the tests left out."""
    probe = ("import sys, json, pytest\n"
             "pytest.main(['--co', '-q', '-p', 'no:cacheprovider', *sys.argv[2:]])\n"
             "import os; here = os.getcwd()\n"
             "names = [m for m, mod in list(sys.modules.items()) if m != '__main__'"
             " and not (getattr(mod, '__file__', None) or '').startswith(here)]\n"
             "open(sys.argv[1], 'w').write(json.dumps(sorted(names)))\n")
    out = tree.parent / f"{tree.name}-modules.json"
    subprocess.run([sys.executable, "-c", probe, str(out), *tests], cwd=tree, env=_env(tree),
                   capture_output=True, timeout=600)
    return json.loads(out.read_text()) if out.is_file() else []


class ForkServer:
    """Pytest runs forked from a warm process (see _FORKSERVER)."""

    def __init__(self, tree: Path, modules: list[str]) -> None:
        self.tree = tree
        self.proc = subprocess.Popen([sys.executable, "-c", _FORKSERVER, json.dumps(modules)], cwd=tree,
                                     env=_env(tree), stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
                                     start_new_session=True)
        ready = json.loads(self.proc.stdout.readline() or "{}")  # type: ignore[union-attr]
        if "ready" not in ready or ready["ready"] or not str(ready.get("crawl")).startswith(str(tree)):
            self.close()
            raise RuntimeError(f"fork server not ready (crawl already imported: {ready.get('ready')}, "
                               f"or found outside the copy: {ready.get('crawl')})")

    def run(self, args: list[str], timeout: float) -> tuple[int | None, str]:
        out = self.tree.parent / f"{self.tree.name}-pytest.out"
        self.proc.stdin.write(json.dumps({"args": args, "out": str(out)}) + "\n")  # type: ignore[union-attr]
        self.proc.stdin.flush()  # type: ignore[union-attr]
        pid = json.loads(self.proc.stdout.readline())["pid"]  # type: ignore[union-attr]
        timer = threading.Timer(timeout, lambda: _killpg(pid))
        timer.start()
        try:
            rc = json.loads(self.proc.stdout.readline())["rc"]  # type: ignore[union-attr]
        finally:
            timed_out = not timer.is_alive()
            timer.cancel()
        _killpg(pid)  # servers a test left behind
        text = out.read_text(errors="replace") if out.is_file() else ""
        return (None if timed_out else rc), text

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.stdin.close()  # type: ignore[union-attr]
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                _killpg(self.proc.pid)


def _killpg(pid: int) -> None:
    try:
        os.killpg(pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


class Worker:
    """One copy of the tree; mutants are written into it one at a time and undone."""

    def __init__(self, base: Path, n: int, rev: str | None) -> None:
        self.tree = make_tree(base / f"tree{n}", rev)
        check_tree(self.tree)
        self.lock = threading.Lock()
        self.server: ForkServer | None = None

    def warm(self, modules: list[str]) -> None:
        try:
            self.server = ForkServer(self.tree, modules)
        except (RuntimeError, ValueError, OSError) as exc:
            print(f"mutate: {exc}; running pytest afresh per mutant", flush=True)

    def close(self) -> None:
        if self.server is not None:
            self.server.close()

    def run(self, m: Mutant, tests: tuple[str, ...], timeout: float) -> Mutant:
        path = self.tree / m.path
        original = path.read_text()
        mutated = apply(original, m)
        try:
            compile(mutated, m.path, "exec")
        except SyntaxError as exc:
            m.outcome, m.detail = "error", f"does not compile: {exc}"
            return m
        path.write_text(mutated)
        try:
            result, m.seconds, m.detail = run_tests(self.tree, tests, timeout, self.server)
        finally:
            path.write_text(original)
        m.outcome = {"failed": "killed", "passed": "survived"}.get(result, result)
        return m


# -- test selection by coverage ----------------------------------------------------------------

# A pytest plugin for the coverage pass, written next to the copies: it names the
# coverage context after the test and phase, and hands the name to child processes
# through the environment (their coverage reads it as the static context, see _RC).
_PLUGIN = '''
import json, os, coverage, pytest

_seen = {}

def _switch(label):
    os.environ["CRAWL_MUTATE_TEST"] = label
    cov = coverage.Coverage.current()
    if cov is not None:
        cov.switch_context(label)

@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_setup(item):
    _switch("S:" + item.nodeid)
    yield

@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_call(item):
    _switch("C:" + item.nodeid)
    yield

@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_teardown(item):
    _switch("S:" + item.nodeid)
    yield
    _switch("")

def pytest_runtest_logreport(report):
    entry = _seen.setdefault(report.nodeid, {"seconds": 0.0, "outcome": "passed"})
    entry["seconds"] += report.duration
    if report.failed:
        entry["outcome"] = "failed"
    elif report.skipped and entry["outcome"] == "passed":
        entry["outcome"] = "skipped"

def pytest_sessionfinish(session):
    out = os.environ.get("CRAWL_MUTATE_OUT")
    if out and _seen:
        with open(os.path.join(out, "tests-%d.json" % os.getpid()), "w") as fh:
            json.dump(_seen, fh)
'''

_RC = """[run]
parallel = true
sigterm = true
data_file = {data}
context = ${{CRAWL_MUTATE_TEST-}}
include =
{include}
"""


@dataclass
class Selection:
    """Which tests reach which line of each target module, from one unmutated run
    under coverage: ``lines[path][line]`` is a set of test node ids (``None`` in
    it: reached outside any test, so run them all)."""

    tests: dict[str, dict[str, float | str]]  # node id -> seconds, outcome
    lines: dict[str, dict[int, set[str | None]]]
    statements: dict[str, list[int]]
    files: dict[str, list[str]]  # test file -> its node ids, in file order
    seconds: float = 0.0
    sources: dict[str, str] = field(default_factory=dict)  # module -> sha256 of the source measured

    def passing(self, nodeid: str) -> bool:
        return self.tests.get(nodeid, {}).get("outcome") == "passed"

    def for_mutant(self, m: Mutant, fallback: tuple[str, ...]) -> list[str]:
        """The passing tests that execute the mutant's statement, fastest first
        (grouped by file, so a module fixture is set up once); [] if none."""
        stmts = self.statements.get(m.path, [])
        line = max((s for s in stmts if s <= m.line), default=m.line)
        who = self.lines.get(m.path, {}).get(line, set())
        if None in who:
            chosen = {n for f in fallback for n in self.files.get(f, [])}
        else:
            chosen = set()
            for n in who:
                if n is not None:
                    chosen.add(n)
        chosen = {n for n in chosen if self.passing(n)}
        by_file: dict[str, list[str]] = {}
        for n in chosen:
            by_file.setdefault(n.split("::", 1)[0], []).append(n)
        secs = lambda n: float(self.tests[n]["seconds"])  # noqa: E731
        groups = sorted(by_file.values(), key=lambda g: (min(map(secs, g)), g[0]))
        return [n for g in groups for n in sorted(g, key=secs)]

    def seconds_of(self, nodeids: list[str]) -> float:
        return sum(float(self.tests[n]["seconds"]) for n in nodeids)

    def save(self, path: Path) -> None:
        lines = {m: {str(k): sorted(v, key=lambda n: n or "") for k, v in per.items()}
                 for m, per in self.lines.items()}
        path.write_text(json.dumps({"tests": self.tests, "lines": lines, "statements": self.statements,
                                    "files": self.files, "seconds": self.seconds, "sources": self.sources}))

    @classmethod
    def load(cls, path: Path) -> Selection:
        d = json.loads(path.read_text())
        lines = {m: {int(k): set(v) for k, v in per.items()} for m, per in d["lines"].items()}
        return cls(d["tests"], lines, d["statements"], d["files"], d["seconds"], d.get("sources", {}))


def select_by_coverage(tree: Path, work: Path, modules: list[str], tests: list[str], jobs: int) -> Selection:
    """Run ``tests`` once in ``tree`` under coverage (children too, through
    COVERAGE_PROCESS_START and coverage's .pth) and map every line of ``modules``
    to the tests that executed it."""
    try:
        import coverage  # noqa: F401 - the dev extra; only this mode needs it
    except ImportError:
        raise SystemExit("mutate: error: choosing tests by coverage needs coverage.py: pip install -e '.[dev]' "
                         "(or run every test file per mutant: --whole-files)") from None
    work.mkdir(parents=True, exist_ok=True)
    (work / "mutate_ctx.py").write_text(_PLUGIN)
    rc = work / "coveragerc"
    rc.write_text(_RC.format(data=work / ".coverage", include="\n".join(f"    {tree / m}" for m in modules)))
    env = _env(tree)
    env["PYTHONPATH"] = f"{tree}{os.pathsep}{work}"
    env["COVERAGE_PROCESS_START"] = str(rc)
    env["CRAWL_MUTATE_OUT"] = str(work)
    env.pop("CRAWL_MUTATE_TEST", None)
    cmd = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "mutate_ctx"]
    if jobs > 1:
        cmd += ["-n", str(jobs)]
    t0 = time.monotonic()
    proc = subprocess.run([*cmd, *tests], cwd=tree, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                          text=True, start_new_session=True)
    took = time.monotonic() - t0
    tail = "\n".join(proc.stdout.strip().splitlines()[-3:])
    print(f"mutate: coverage pass over {len(tests)} test files: {took:.0f} s, exit {proc.returncode}: "
          f"{tail.splitlines()[-1] if tail else ''}", flush=True)
    return read_coverage(tree, work, modules, took, f"exit {proc.returncode}:\n{tail}")


def read_coverage(tree: Path, work: Path, modules: list[str], took: float = 0.0, why: str = "") -> Selection:
    """The selection from a coverage pass's files in ``work`` (measured in ``tree``)."""
    import coverage

    results: dict[str, dict[str, float | str]] = {}
    for f in sorted(work.glob("tests-*.json")):  # under xdist, the controller and a worker both report
        for nodeid, entry in json.loads(f.read_text()).items():
            old = results.setdefault(nodeid, dict(entry))
            old["seconds"] = max(float(old["seconds"]), float(entry["seconds"]))
            if entry["outcome"] != "passed" and old["outcome"] != "failed":
                old["outcome"] = entry["outcome"]
    if not results:
        raise SystemExit(f"mutate: error: the coverage pass ran no tests ({why})")
    failing = sorted(n for n, e in results.items() if e["outcome"] == "failed")
    if failing:
        print(f"mutate: {len(failing)} tests fail unmutated and are never used to judge a mutant: "
              + ", ".join(failing[:10]) + (" ..." if len(failing) > 10 else ""), flush=True)
    files: dict[str, list[str]] = {}
    for n in results:  # dict order is run order; under xdist, close enough
        files.setdefault(n.split("::", 1)[0], []).append(n)
    cov = coverage.Coverage(data_file=str(work / ".coverage"), config_file=str(work / "coveragerc"))
    if list(work.glob(".coverage.*")):
        cov.combine(data_paths=[str(work)], keep=False, strict=False)
        cov.save()
    else:
        cov.load()
    data = cov.get_data()
    lines: dict[str, dict[int, set[str | None]]] = {}
    statements: dict[str, list[int]] = {}
    for mod in modules:
        fname = str(tree / mod)
        statements[mod] = sorted(cov.analysis2(fname)[1])
        per: dict[int, set[str | None]] = {}
        for lineno, contexts in (data.contexts_by_lineno(fname) or {}).items():
            who: set[str | None] = set()
            for ctx in contexts:
                for part in ctx.split("|"):
                    if part.startswith("C:"):
                        who.add(part[2:])
                    elif part.startswith("S:"):  # a fixture: every test of its file
                        who.update(files.get(part[2:].split("::", 1)[0], [part[2:]]))
                    elif not part:
                        who.add(None)
            per[lineno] = who
        lines[mod] = per
    sources = {mod: hashlib.sha256((tree / mod).read_bytes()).hexdigest() for mod in modules}
    return Selection(results, lines, statements, files, took, sources)


# -- the run ---------------------------------------------------------------------------------

def _pick(names: list[str]) -> list[str]:
    if not names:
        return list(TARGETS)
    out = []
    for name in names:
        hits = [t for t in TARGETS if name == t or name in t.removesuffix(".py").split("/")
                or t.removesuffix(".py").endswith(name.removesuffix(".py"))]
        if not hits:
            raise SystemExit(f"mutate: error: no module {name!r} among the targets; choose from: "
                             + ", ".join(TARGETS))
        out += [h for h in hits if h not in out]
    return out


@dataclass
class ModuleResult:
    path: str
    total: int
    mutants: list[Mutant] = field(default_factory=list)
    baseline: float = 0.0
    note: str = ""

    def count(self, *outcomes: str) -> int:
        return sum(m.outcome in outcomes for m in self.mutants)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="mutate.py", description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--module", "-m", action="append", default=[],
                    help="a target module (path or short name: politeness, frontier/tx, spool...); repeatable")
    ap.add_argument("--sample", type=int, default=0, help="run N random mutants per module (0: all)")
    ap.add_argument("--seed", type=int, default=0, help="random seed of --sample")
    ap.add_argument("--only", action="append", default=[], metavar="KEY",
                    help="only the mutant with this key (as printed under survivors), or else those whose key "
                         "contains KEY; repeatable")
    ap.add_argument("--jobs", "-j", type=int, default=1, help="mutants run at once, each in its own copy")
    ap.add_argument("--timeout", type=float, default=0.0,
                    help="seconds per mutant (default: 3 x the unmutated time of its tests + 30)")
    ap.add_argument("--whole-files", action="store_true",
                    help="no selection by coverage: every mutant runs all its module's test files (slow)")
    ap.add_argument("--selection", type=Path, metavar="FILE",
                    help="the coverage pass's map of lines to tests: read from FILE if it exists (it must be of "
                         "the same sources: use the same --rev), else computed and written there")
    ap.add_argument("--shard", metavar="K/N", help="only every N-th mutant from the K-th (1-based): split "
                                                    "a module over processes")
    ap.add_argument("--skip", type=Path, nargs="+", default=[], metavar="JSONL",
                    help="leave out the mutants that have a line in these --json files")
    ap.add_argument("--skip-judged", action="store_true",
                    help="do not run the mutants already judged equivalent (the EQUIVALENT list): they are "
                         "reported as 'judged equivalent, not run', never as killed, and stay out of the kill "
                         "rate's denominator as they would if run and survived (a judgement is re-checked only "
                         "by a run without this flag)")
    ap.add_argument("--select-only", action="store_true",
                    help="only the coverage pass: write the --selection FILE and stop (then start the shards)")
    ap.add_argument("--no-fork", action="store_true",
                    help="start pytest afresh for every mutant instead of forking it from a warm process")
    ap.add_argument("--tests", action="append", default=[], metavar="FILE",
                    help="use these test files instead of the TARGETS map's; repeatable")
    ap.add_argument("--list", action="store_true", help="print the mutants and stop")
    ap.add_argument("--json", type=Path, help="also write one JSON line per mutant to this file")
    ap.add_argument("--rev", help="mutate this commit (e.g. HEAD) instead of the work tree as it is "
                                  "(other people's half-done changes included)")
    ap.add_argument("--keep", action="store_true", help="keep the throwaway copies (their path is printed)")
    ap.add_argument("--report", type=Path, nargs="+", metavar="JSONL",
                    help="run nothing: the figures of earlier runs' --json files, a later line for the same "
                         "mutant (a re-run with --only) replacing an earlier one")
    args = ap.parse_args(argv)
    modules = _pick(args.module)
    if args.report:
        return report(merged(args.report, modules, args.rev))
    for t in args.tests:
        if not (ROOT / t.split("::", 1)[0]).is_file():
            raise SystemExit(f"mutate: error: no test file {t!r} (give paths relative to {ROOT})")
    rng = random.Random(args.seed)
    shard = None
    if args.shard:
        try:
            k, n = (int(x) for x in args.shard.split("/"))
            if not 1 <= k <= n:
                raise ValueError
        except ValueError:
            raise SystemExit(f"mutate: error: --shard {args.shard!r} is not K/N with 1 <= K <= N") from None
        shard = (k, n)
    done: set[str] = set()
    for f in args.skip:
        if not f.is_file():
            raise SystemExit(f"mutate: error: no file {str(f)!r} to --skip")
        done |= {json.loads(line)["key"] for line in f.read_text().splitlines() if line.strip()}
    plan: dict[str, tuple[int, list[Mutant]]] = {}
    judged: dict[str, list[Mutant]] = {}  # --skip-judged: left out, reported as not run
    sources: dict[str, bytes] = {}
    for mod in modules:
        src = (subprocess.run(["git", "-C", str(ROOT), "show", f"{args.rev}:{mod}"], check=True,
                              capture_output=True, text=True).stdout if args.rev else (ROOT / mod).read_text())
        target = TARGETS[mod]
        sources[mod] = src.encode()
        found = mutants_of(mod, src, target.scope)
        keys = {m.key for m in found}  # a KEY that is a whole key selects that mutant alone
        pool_ = [m for m in found if any(k == m.key if k in keys else k in m.key for k in args.only)] \
            if args.only else found
        if shard:
            pool_ = pool_[shard[0] - 1::shard[1]]
        pool_ = [m for m in pool_ if m.key not in done]
        if args.skip_judged:
            judged[mod] = [m for m in pool_ if m.key in EQUIVALENT]
            pool_ = [m for m in pool_ if m.key not in EQUIVALENT]
        chosen = sorted(rng.sample(pool_, args.sample), key=lambda m: (m.line, m.start)) \
            if args.sample and args.sample < len(pool_) else pool_
        if chosen or judged.get(mod) or not args.only:
            plan[mod] = (len(found), chosen)
    if not plan:
        raise SystemExit("mutate: error: no mutant's key contains " + " or ".join(map(repr, args.only))
                         + " (see --list)")
    if args.select_only and not args.selection:
        raise SystemExit("mutate: error: --select-only needs --selection FILE")
    if args.list:
        for mod, (total, chosen) in plan.items():
            print(f"== {mod}: {total} mutants" + (f", {len(chosen)} chosen" if len(chosen) < total else ""))
            for m in chosen:
                print("  " + m.label() + f"\n      key: {m.key}")
        return 0

    def tests_of(mod: str) -> tuple[str, ...]:
        return tuple(args.tests) or TARGETS[mod].tests

    def _stop(signum: int, frame: object) -> None:
        raise KeyboardInterrupt  # kill or Ctrl-C: the copies are removed and the figures so far printed

    signal.signal(signal.SIGTERM, _stop)
    base = Path(tempfile.mkdtemp(prefix="crawl-mutate-", dir="/tmp"))
    print(f"mutate: throwaway copies under {base}", flush=True)
    t_start = time.monotonic()
    results: dict[str, ModuleResult] = {}
    jfile = open(args.json, "w") if args.json else None  # noqa: SIM115 - closed below
    workers: list[Worker] = []
    try:
        workers += [Worker(base, n, args.rev) for n in range(max(1, args.jobs))]
        free: list[Worker] = list(workers)
        free_lock = threading.Lock()
        selection = None
        if not args.whole_files:
            every: list[str] = []
            for mod in plan:
                every += [t for t in tests_of(mod) if t not in every]
            if args.selection and args.selection.is_file():
                selection = Selection.load(args.selection)
                missing = [m for m in plan if m not in selection.lines]
                if missing:
                    raise SystemExit(f"mutate: error: {args.selection} has no lines of {', '.join(missing)}")
                stale = [m for m in plan if selection.sources.get(m) != hashlib.sha256(sources[m]).hexdigest()]
                if stale:
                    raise SystemExit(f"mutate: error: {args.selection} was measured on other sources of "
                                     f"{', '.join(stale)}; give another FILE (or the --rev it was made at)")
                print(f"mutate: tests chosen from {args.selection}", flush=True)
            else:
                selection = select_by_coverage(workers[0].tree, base / "coverage", list(plan), every, args.jobs)
                if args.selection:
                    selection.save(args.selection)
            if args.select_only:
                print(f"mutate: the selection is in {args.selection}", flush=True)
                return 0
        if not args.no_fork:
            warm = _third_party(workers[0].tree, sorted({t for mod in plan for t in tests_of(mod)}))
            for w in workers:
                w.warm(warm)
        for mod, (total, chosen) in plan.items():
            tests = tests_of(mod)
            res = results[mod] = ModuleResult(mod, total)
            for m in judged.get(mod, []):
                m.outcome, m.detail = "not run", "judged equivalent, not run"
                res.mutants.append(m)
                if jfile:
                    jfile.write(_record(mod, m) + "\n")
            if judged.get(mod):
                print(f"== {mod}: {len(judged[mod])} mutants judged equivalent, not run (--skip-judged)",
                      flush=True)
            if selection is None:
                outcome, took, tail = run_tests(workers[0].tree, tests, max(args.timeout, 1800))
                res.baseline = took
                if outcome != "passed":
                    res.note = f"the unmutated tests do not pass ({outcome}): {tail}"
                    print(f"== {mod}: skipped, {res.note}", flush=True)
                    continue
                print(f"== {mod}: {len(chosen)} of {total} mutants; tests {' '.join(tests)} "
                      f"(unmutated {took:.0f} s)", flush=True)
            else:
                print(f"== {mod}: {len(chosen)} of {total} mutants; the tests that reach each line, "
                      f"from {' '.join(tests)}", flush=True)

            def one(m: Mutant, tests: tuple[str, ...] = tests, whole: float = res.baseline) -> Mutant:
                if selection is None:
                    chosen_tests, limit = tests, args.timeout or 3 * whole + 30
                else:
                    picked = selection.for_mutant(m, tests)
                    if not picked:
                        m.outcome, m.detail = "survived", "no test reaches it"
                        return m
                    chosen_tests = tuple(picked)
                    limit = args.timeout or 3 * selection.seconds_of(picked) + 30
                with free_lock:
                    w = free.pop()
                try:
                    m = w.run(m, chosen_tests, limit)
                    if selection is not None and not m.detail.startswith("does not"):
                        m.detail = f"{len(chosen_tests)} tests" + (f"; {m.detail}" if m.outcome == "error" else "")
                    return m
                finally:
                    with free_lock:
                        free.append(w)

            with ThreadPoolExecutor(max_workers=len(workers)) as pool:
                for m in pool.map(one, chosen):
                    res.mutants.append(m)
                    note = "  [judged equivalent]" if m.outcome == "survived" and m.key in EQUIVALENT else ""
                    extra = f"  ({m.detail})" if m.detail and m.outcome != "error" else ""
                    print(f"  {m.outcome:8} {m.seconds:5.0f} s  {m.label()}{extra}{note}", flush=True)
                    if m.outcome == "error":
                        print(f"           {m.detail}", flush=True)
                    if jfile:
                        jfile.write(_record(mod, m) + "\n")
                        jfile.flush()
    except KeyboardInterrupt:
        print("mutate: interrupted; the figures below count the mutants run so far", flush=True)
    finally:
        for w in workers:
            w.close()
        if jfile:
            jfile.close()
        if args.keep:
            print(f"mutate: copies kept in {base}")
        else:
            shutil.rmtree(base, ignore_errors=True)
    print(f"mutate: {time.monotonic() - t_start:.0f} s in all", flush=True)
    return report(results)


def _record(mod: str, m: Mutant) -> str:
    return json.dumps({"module": mod, "line": m.line, "function": m.qualname, "op": m.op, "before": m.before,
                       "after": m.after, "key": m.key, "outcome": m.outcome, "detail": m.detail,
                       "seconds": round(m.seconds, 1)})


def merged(files: list[Path], modules: list[str], rev: str | None) -> dict[str, ModuleResult]:
    """Module results from --json files; the total per module is counted afresh
    (in the work tree, or at ``rev``)."""
    latest: dict[str, dict] = {}
    for f in files:
        if not f.is_file():
            raise SystemExit(f"mutate: error: no file {str(f)!r} (give the --json files of earlier runs)")
        for n, line in enumerate(f.read_text().splitlines(), 1):
            try:
                rec = json.loads(line)
            except ValueError:
                raise SystemExit(f"mutate: error: {f}:{n} is not a JSON line of a --json file") from None
            latest[rec["key"]] = rec
    results: dict[str, ModuleResult] = {}
    for mod in modules:
        src = (subprocess.run(["git", "-C", str(ROOT), "show", f"{rev}:{mod}"], check=True, capture_output=True,
                              text=True).stdout if rev else (ROOT / mod).read_text())
        recs = [r for r in latest.values() if r["module"] == mod]
        if not recs:
            continue
        res = results[mod] = ModuleResult(mod, len(mutants_of(mod, src, TARGETS[mod].scope)))
        for r in sorted(recs, key=lambda r: r["line"]):
            res.mutants.append(Mutant(mod, r["line"], r["function"], r["op"], r["before"], r["after"], 0, 0, "",
                                      key=r["key"], outcome=r["outcome"], seconds=r["seconds"],
                                      detail=r.get("detail", "")))
    return results


def _rate(row: dict[str, int]) -> str:
    judged = row["run"] - row["equiv."]
    return f"{100 * (row['killed'] + row['timeout']) / judged:.1f}%" if judged else "-"


def report(results: dict[str, ModuleResult]) -> int:
    print("\nkill rate: killed (timeouts included) / (run - equivalent); 'unreached' survivors are lines no "
          "test executes, 'left' the survivors neither equivalent nor unobservable; 'not run' the mutants "
          "judged equivalent and left out by --skip-judged (in no column but 'mutants')")
    cols = ("mutants", "not run", "run", "killed", "timeout", "survived", "unreached", "equiv.", "unobs.",
            "left")
    print(f"\n{'module':30}" + "".join(f"{c:>10}" for c in cols) + f"{'kill rate':>10}")
    total = dict.fromkeys(cols, 0)
    for mod, r in results.items():
        surv = [m for m in r.mutants if m.outcome == "survived"]
        row = {"mutants": r.total, "not run": r.count("not run"), "run": r.count("killed", "timeout", "survived"), "killed": r.count("killed"),
               "timeout": r.count("timeout"), "survived": len(surv),
               "unreached": sum(m.detail == "no test reaches it" for m in surv),
               "equiv.": sum(m.key in EQUIVALENT for m in surv), "unobs.": sum(m.key in UNOBSERVABLE for m in surv)}
        row["left"] = row["survived"] - row["equiv."] - row["unobs."]
        for c in cols:
            total[c] += row[c]
        print(f"{mod:30}" + "".join(f"{row[c]:10}" for c in cols) + f"{_rate(row):>10}"
              + (f"  ({r.note[:60]})" if r.note else ""))
    if len(results) > 1:
        print(f"{'all':30}" + "".join(f"{total[c]:10}" for c in cols) + f"{_rate(total):>10}")
    survivors = [m for r in results.values() for m in r.mutants if m.outcome == "survived"]
    if survivors:
        print("\nsurvivors:")
        for m in survivors:
            why = EQUIVALENT.get(m.key)
            blind = UNOBSERVABLE.get(m.key)
            looked = OPEN.get(m.key)
            print(f"  {m.label()}" + (f"  ({m.detail})" if m.detail == "no test reaches it" else "")
                  + (f"\n      equivalent: {why}" if why else "")
                  + (f"\n      unobservable, not equivalent: {blind}" if blind else "")
                  + (f"\n      open: {looked}" if looked else "")
                  + f"\n      key: {m.key}")
    unrun = [m for r in results.values() for m in r.mutants if m.outcome == "not run"]
    if unrun:
        print(f"\njudged equivalent, not run (--skip-judged): {len(unrun)}")
        for m in unrun:
            why = EQUIVALENT.get(m.key)
            print(f"  {m.label()}" + (f"\n      equivalent: {why}" if why else
                                      "\n      NO LONGER JUDGED: run it (--only)") + f"\n      key: {m.key}")
    errors = [m for r in results.values() for m in r.mutants if m.outcome == "error"]
    for m in errors:
        print(f"  error: {m.label()}: {m.detail}")
    return 1 if any(m.key not in EQUIVALENT and m.key not in UNOBSERVABLE for m in survivors + unrun) else 0


if __name__ == "__main__":
    sys.exit(main())
