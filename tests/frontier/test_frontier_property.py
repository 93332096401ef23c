"""Property test: random interleavings of add / next / complete / expire / clock
steps on a real LMDB frontier with a simulated clock never give two live
leases for one host, never lease before the host's next-allowed time or above
the per-IP cap, never lease a URL completed in this cycle, and never lose a
URL (drained at the end, every URL added is done or dropped)."""

from __future__ import annotations

import shutil
import tempfile
from typing import Any

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from crawl.frontier import Frontier, Politeness

HOSTS = [f"h{i}.test" for i in range(5)]
IP = {"h0.test": "10.0.0.1", "h1.test": "10.0.0.1", "h2.test": "10.0.0.2", "h3.test": "10.0.0.2",
      "h4.test": "10.0.0.3"}
URLS = [f"http://{h}/{j}" for h in HOSTS for j in range(4)] + ["http://h1.test/a?b=1&c=2&d=3"]
CFG = Politeness(per_ip=1, max_retries=2, park_after=3, park_seconds=40.0, backoff_cap=30.0,
                 max_leases=3)
OUTCOMES = [
    ("ok", 200), ("ok", 200), ("http-error", 404), ("http-error", 429), ("http-error", 503),
    ("http-error", 500), ("timeout", None), ("connect-error", None), ("redirect", 301),
    ("robots-disallowed", None),
]


class FrontierMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.dir = tempfile.mkdtemp(prefix="frontier-prop-")
        self.fr = Frontier(self.dir, CFG, sync=False)
        self.now = 1_000.0
        self.added: set[str] = set()
        self.live: dict[str, dict[str, Any]] = {}  # lease id -> lease record
        self.stale: list[dict[str, Any]] = []  # leases past their deadline
        self.done: set[str] = set()
        self.not_before: dict[str, float] = {}  # host -> next_allowed from complete events
        self.ip_known: dict[str, str] = {}
        self.lease_ip: dict[str, str] = {}  # lease id -> IP it counted against

    def expire_model(self) -> None:
        for lid, lease in list(self.live.items()):
            if lease["deadline"] <= self.now:
                self.stale.append(self.live.pop(lid))
                self.lease_ip.pop(lid, None)

    @rule(urls=st.lists(st.sampled_from(URLS), max_size=6), due=st.sampled_from([None, None, 5.0, 50.0]))
    def add(self, urls: list[str], due: float | None) -> None:
        recs = [{"kind": "url", "v": 1, "url": u, **({"due": self.now + due} if due else {})} for u in urls]
        counts = self.fr.add(recs, self.now)
        assert counts["rejected"] == 0 and counts["dropped_host_cap"] == 0
        self.added.update(urls)

    @rule(n=st.integers(1, 6), lease_s=st.sampled_from([5.0, 30.0]))
    def next(self, n: int, lease_s: float) -> None:
        self.expire_model()
        leases = self.fr.next(n, lease_s, self.now)
        assert len(leases) <= n
        for lease in leases:
            host, url = lease["host"], lease["url"]
            assert all(other["host"] != host for other in self.live.values()), f"two leases for {host}"
            assert self.now >= self.not_before.get(host, 0.0), f"{host} leased before next-allowed"
            assert url not in self.done, f"{url} leased again after completion"
            assert url in self.added and lease["deadline"] == self.now + lease_s
            ip = self.ip_known.get(host)
            if ip is not None:
                busy = sum(1 for v in self.lease_ip.values() if v == ip)
                assert busy < CFG.per_ip, f"per-IP cap exceeded on {ip}"
                self.lease_ip[lease["lease"]] = ip
            self.live[lease["lease"]] = lease

    @precondition(lambda self: self.live or self.stale)
    @rule(pick=st.integers(0, 100), result=st.sampled_from(OUTCOMES), retry_after=st.sampled_from([None, 3, 60]))
    def complete(self, pick: int, result: tuple[str, int | None], retry_after: int | None) -> None:
        self.expire_model()
        pool = list(self.live.values()) + self.stale
        if not pool:
            return
        lease = pool[pick % len(pool)]
        outcome, status = result
        rec = {"kind": "fetch", "v": 1, "url": lease["url"], "lease": lease["lease"], "outcome": outcome,
               "status": status, "ip": IP[lease["host"]], "retry_after": retry_after,
               "timings": {"total": 0.1}}
        [ev] = self.fr.complete([rec], self.now)
        if lease["lease"] not in self.live:
            assert ev["event"] == "frontier.unknown-lease"
            self.stale.remove(lease)
            return
        assert ev["event"] == "frontier.complete", ev
        del self.live[lease["lease"]]
        self.lease_ip.pop(lease["lease"], None)
        self.ip_known[lease["host"]] = IP[lease["host"]]
        assert ev["next_allowed"] >= self.now
        self.not_before[lease["host"]] = ev["next_allowed"]
        if ev["disposition"] == "done":
            self.done.add(lease["url"])

    @rule(dt=st.sampled_from([0.0, 0.25, 1.0, 2.0, 7.0, 31.0]))
    def tick(self, dt: float) -> None:
        self.now += dt

    @rule()
    def expire(self) -> None:
        self.expire_model()
        self.fr.requeue_expired(self.now)

    @invariant()
    def nothing_lost(self) -> None:
        states = {u: self.fr.state_of(u) for u in self.added}
        assert None not in states.values(), "a URL was lost"
        for lease in self.live.values():
            if lease["deadline"] > self.now:
                assert states[lease["url"]] == "leased"
        for u in self.done:
            assert states[u] == "done"
        queued = sum(1 for s in states.values() if s == "queued")
        assert self.fr.stats(self.now)["queued"] == queued

    def teardown(self) -> None:
        try:
            self.drain()
        finally:
            self.fr.close()
            shutil.rmtree(self.dir, ignore_errors=True)

    def drain(self) -> None:
        for _ in range(400):
            self.expire_model()
            for lease in self.fr.next(10, 30.0, self.now):
                assert lease["url"] not in self.done
                rec = {"kind": "fetch", "v": 1, "url": lease["url"], "lease": lease["lease"],
                       "outcome": "ok", "status": 200}
                [ev] = self.fr.complete([rec], self.now)
                assert ev["disposition"] == "done"
                self.done.add(lease["url"])
            pending = self.fr.pending()
            if pending["queued"] == 0 and pending["in_flight"] == 0:
                break
            self.now += 40.0
        else:
            raise AssertionError(f"frontier did not drain: {self.fr.stats(self.now)}")
        for u in self.added:
            assert self.fr.state_of(u) in ("done", "dropped"), u


TestFrontierMachine = FrontierMachine.TestCase
TestFrontierMachine.settings = settings(
    max_examples=60, stateful_step_count=40, deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
