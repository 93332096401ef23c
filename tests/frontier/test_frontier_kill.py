"""Durability under SIGKILL: hundreds of add / next / complete processes killed
at random points, then the invariants are checked against what was durably
emitted and against the final state.

Most processes are forked from this (already imported) test process and run
the real CLI entry point (``crawl.commands.main``), so a kill costs
milliseconds instead of an interpreter start; a few are real
``python -m crawl`` subprocesses. The children get their own LMDB handle
(the parent never holds one open across a fork, as LMDB requires).
"""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import orjson

import crawl.commands.frontier  # noqa: F401  (imported before forking: children start warm)
from crawl.commands import main as crawl_main
from crawl.frontier import Frontier
from crawl.frontier.hostqueue import u64

HOSTS = [f"k{i:02d}.test" for i in range(30)]
FAST = ["--delay", "0.02", "--response-factor", "0", "--backoff-base", "0.05"]


def _lines(path: Path) -> list[dict[str, Any]]:
    """Complete output lines only: a kill can cut the last one short."""
    data = path.read_bytes() if path.exists() else b""
    return [orjson.loads(line) for line in data.split(b"\n")[:-1] if line.strip()]


def _fork_cli(argv: list[str], stdin: Path, stdout: Path, kill_after: float | None) -> int | None:
    """Run ``crawl ARGV`` in a forked child; SIGKILL it after ``kill_after`` s.

    Returns the exit status, or None if the child was killed.
    """
    pid = os.fork()
    if pid == 0:  # child: never return into pytest
        code = 1
        try:
            fd_in = os.open(stdin, os.O_RDONLY)
            fd_out = os.open(stdout, os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
            fd_err = os.open(os.devnull, os.O_WRONLY)
            os.dup2(fd_in, 0)
            os.dup2(fd_out, 1)
            os.dup2(fd_err, 2)
            sys.stdin = open(0, closefd=False)  # noqa: SIM115
            sys.stdout = open(1, "w", closefd=False)  # noqa: SIM115
            sys.stderr = open(2, "w", closefd=False)  # noqa: SIM115
            try:
                crawl_main(argv)
                code = 0
            except SystemExit as exc:
                code = exc.code if isinstance(exc.code, int) else 1
        finally:
            os._exit(code)
    if kill_after is not None:
        deadline = time.monotonic() + kill_after
        while time.monotonic() < deadline:
            done, status = os.waitpid(pid, os.WNOHANG)
            if done:
                return os.waitstatus_to_exitcode(status)
            time.sleep(0.0005)
        os.kill(pid, signal.SIGKILL)
    _, status = os.waitpid(pid, 0)
    code = os.waitstatus_to_exitcode(status)
    return None if code == -signal.SIGKILL else code


class Harness:
    def __init__(self, tmp: Path, rng: random.Random) -> None:
        self.tmp, self.rng = tmp, rng
        self.dir = tmp / "crawl"
        self.added_ok: set[str] = set()
        self.done: set[str] = set()
        self.live: dict[str, dict[str, Any]] = {}  # lease id -> lease record
        self.kills = self.runs = 0
        self.durations: list[float] = []
        self.killed_after_commit = 0
        self.inbox = tmp / "in.ndjson"
        self.outbox = tmp / "out.ndjson"

    def leases_in_db(self, ids: list[str]) -> set[str]:
        with Frontier(self.dir / "frontier") as fr, fr.env.begin() as txn:
            return {i for i in ids if txn.get(u64(int(i, 16)), db=fr.db["leases"]) is not None}

    def progress(self) -> tuple[Any, ...]:
        if not (self.dir / "frontier").exists():
            return (0,)
        with Frontier(self.dir / "frontier") as fr, fr.env.begin() as txn:
            return tuple(txn.get(k, b"", db=fr.db["meta"]) for k in (b"seq", b"lease", b"done", b"retried"))

    def run(self, argv: list[str], payload: list[dict[str, Any]], kill: bool, real: bool = False) -> int | None:
        self.inbox.write_bytes(b"".join(orjson.dumps(r) + b"\n" for r in payload))
        self.outbox.unlink(missing_ok=True)
        self.runs += 1
        before = self.progress()
        if real:
            with open(self.inbox, "rb") as fin, open(self.outbox, "wb") as fout:
                p = subprocess.Popen([sys.executable, "-m", "crawl", *argv], stdin=fin, stdout=fout,
                                     stderr=subprocess.DEVNULL)
                try:
                    code: int | None = p.wait(timeout=self.rng.uniform(0.2, 1.0) if kill else 60)
                except subprocess.TimeoutExpired:
                    p.send_signal(signal.SIGKILL)
                    p.wait()
                    code = None
        else:
            # Kill anywhere in a typical run's life: before, during or after its commit.
            typical = sorted(self.durations)[len(self.durations) // 2] if self.durations else 0.05
            t0 = time.monotonic()
            code = _fork_cli(argv, self.inbox, self.outbox, self.rng.uniform(0.0, 1.3 * typical) if kill else None)
            if code is not None:
                self.durations.append(time.monotonic() - t0)
        if code is None and self.progress() != before:
            self.killed_after_commit += 1
        self.kills += code is None
        if code == 2 and argv[0] == "frontier" and argv[1] == "next" and not (self.dir / "frontier").exists():
            code = 0  # no add has committed yet: reading a frontier that is not there is exit 2, by design
        assert code in (None, 0), f"crawl {' '.join(argv)} exited {code}"
        return code

    def add(self, urls: list[str], kill: bool, real: bool = False) -> None:
        code = self.run(["frontier", "add", "--dir", str(self.dir)], [{"url": u} for u in urls], kill, real)
        if code == 0:
            self.added_ok.update(urls)

    def next(self, kill: bool, real: bool = False) -> None:
        self.run(["frontier", "next", "--dir", str(self.dir), "-n", "12", "--lease", "0.5s", *FAST], [],
                 kill, real)
        t_end = time.time()
        leases = _lines(self.outbox)
        for lease in leases:
            assert lease["url"] not in self.done, f"completed URL leased again: {lease['url']}"
            for other in self.live.values():
                # A live lease whose deadline is after this process ended cannot have expired in it.
                assert not (other["host"] == lease["host"] and other["deadline"] > t_end), \
                    f"two live leases for {lease['host']}"
            self.live[lease["lease"]] = lease
        # Output only after commit: every lease printed is in the database.
        ids = [r["lease"] for r in leases]
        assert self.leases_in_db(ids) == set(ids)

    def complete(self, kill: bool, real: bool = False) -> None:
        pool = list(self.live.values())
        batch = self.rng.sample(pool, min(len(pool), self.rng.randint(1, 12))) if pool else []
        recs = []
        for lease in batch:
            outcome = self.rng.choice(["ok", "ok", "ok", "ok", "timeout"])
            recs.append({"kind": "fetch", "url": lease["url"], "lease": lease["lease"], "outcome": outcome,
                         **({"status": 200} if outcome == "ok" else {})})
        self.run(["frontier", "complete", "--dir", str(self.dir), *FAST], recs, kill, real)
        for ev in _lines(self.outbox):
            if ev.get("event") == "frontier.complete":
                self.live.pop(ev["lease"], None)
                if ev["disposition"] == "done":
                    self.done.add(ev["url"])
        # A killed run may have committed without printing: ask the database.
        gone = set(self.live) - self.leases_in_db(list(self.live))
        for lid in gone:
            self.live.pop(lid)
        with Frontier(self.dir / "frontier") as fr:
            for u in self.done:
                assert fr.state_of(u) == "done", u


def test_sigkill_loops_lose_nothing(tmp_path: Path) -> None:
    rng = random.Random(20261129)
    h = Harness(tmp_path, rng)
    pending = [f"http://{host}/p{j}" for j in range(12) for host in HOSTS]
    rng.shuffle(pending)

    def step(real: bool = False) -> None:
        roll = rng.random()
        kill = rng.random() < 0.8
        if roll < 0.3 and pending:
            batch = [pending.pop() for _ in range(min(15, len(pending)))]
            h.add(batch, kill, real)
            if batch[0] not in h.added_ok and rng.random() < 0.7:
                pending.extend(batch)  # the operator re-runs a failed add: idempotent
        elif roll < 0.65:
            h.next(kill, real)
        else:
            h.complete(kill, real)

    for _ in range(6):  # a few real interpreters, killed anywhere in their lifetime
        step(real=True)
    start = time.monotonic()
    # 30 s of kills; on a loaded machine (fewer runs get killed mid-way) go on
    # until the 100 the assertion wants, within three minutes (make test runs the
    # suite on two workers, so a neighbour's crawl can halve the rate: 96 in 120 s seen).
    while h.kills < 250 and (time.monotonic() - start < 30
                             or (h.kills < 100 and time.monotonic() - start < 180)):
        step()
    assert h.kills >= 100, f"only {h.kills} kills in {h.runs} runs"

    # Drain with the library and a clock far ahead: every acknowledged URL ends done.
    now = time.time() + 10_000
    with Frontier(h.dir / "frontier") as fr:
        for _ in range(1000):
            leases = fr.next(100, 60, now)
            for lease in leases:
                assert lease["url"] not in h.done, f"completed URL leased again: {lease['url']}"
            events = fr.complete([{"kind": "fetch", "url": r["url"], "lease": r["lease"], "outcome": "ok",
                                   "status": 200} for r in leases], now)
            h.done.update(e["url"] for e in events if e.get("disposition") == "done")
            p = fr.pending()
            if p["queued"] == 0 and p["in_flight"] == 0:
                break
            now += 100
        lost = [u for u in h.added_ok if fr.state_of(u) not in ("done", "dropped")]
        assert not lost, f"{len(lost)} URLs lost, e.g. {lost[:3]}"
        assert fr.stats(now)["queued"] == 0
    assert h.added_ok, "no add survived: the test did not exercise anything"
    h.durations.sort()
    print(f"median unkilled run {h.durations[len(h.durations) // 2] * 1000:.1f} ms")
    print(f"{h.killed_after_commit} kills landed after the commit (output lost, state kept)")
    print(f"{h.runs} runs, {h.kills} SIGKILLs, {len(h.added_ok)} URLs acknowledged, {len(h.done)} done")
