"""Durable queues between stages: an LMDB directory with claim-then-ack.

A producer ``put``s records in one fsynced transaction. A consumer
``claim``s a batch (the records move from the queue to a claimed table,
stamped with the consumer's pid and a deadline), processes it, writes its
output durably, and only then ``ack``s the batch. So:

* a consumer that dies mid-batch loses nothing: its claims go back to the
  queue as soon as any consumer sees that its pid is gone (same machine) or
  its deadline has passed (anywhere), keeping their original order;
* only the unacknowledged batch can be delivered twice (at-least-once);
* several producers and consumers can share a spool: LMDB serialises the
  write transactions, so a record is claimed by exactly one live consumer.
"""

from __future__ import annotations

import heapq
import os
import socket
import struct
import time
from collections.abc import Iterable, Iterator
from pathlib import Path

import orjson

from .atomic import pid_alive
from .records import Record
from .state import close_env, open_env

_SEQ = struct.Struct(">Q")
_CLAIM = struct.Struct(">dI")  # deadline, pid; then host name, NUL, record
_HOST = socket.gethostname().encode()


class Spool:
    """One spool directory. Safe to open from many processes at once."""

    def __init__(self, path: str | os.PathLike[str], *, claim_timeout: float = 600.0) -> None:
        self.path = Path(path)
        self.env = open_env(self.path, max_dbs=4)
        self._q = self.env.open_db(b"queue")
        self._claimed = self.env.open_db(b"claimed")
        self._meta = self.env.open_db(b"meta")
        self.claim_timeout = claim_timeout
        self.pid = os.getpid()

    def close(self) -> None:
        close_env(self.env)

    def __enter__(self) -> Spool:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def put(self, recs: Iterable[Record | bytes]) -> int:
        """Append records durably (one transaction); returns how many."""
        n = 0
        with self.env.begin(write=True) as txn:
            raw = txn.get(b"next", db=self._meta)
            seq = _SEQ.unpack(raw)[0] if raw else 0
            cur = txn.cursor(db=self._q)
            for rec in recs:
                data = rec if isinstance(rec, bytes) else orjson.dumps(rec)
                cur.put(_SEQ.pack(seq), data, append=True)  # seq only grows
                seq += 1
                n += 1
            txn.put(b"next", _SEQ.pack(seq), db=self._meta)
        return n

    def _recover(self, txn: object, now: float) -> int:
        """Return dead or expired claims to the queue, keeping their order."""
        back = 0
        cur = txn.cursor(db=self._claimed)  # type: ignore[attr-defined]
        stale: list[tuple[bytes, bytes]] = []
        for key, val in cur:
            deadline, pid = _CLAIM.unpack_from(val)
            rest = val[_CLAIM.size :]
            host, _, data = rest.partition(b"\0")
            dead = host == _HOST and pid != self.pid and not pid_alive(pid)
            if dead or deadline < now:
                stale.append((bytes(key), bytes(data)))
        for key, data in stale:
            txn.delete(key, db=self._claimed)  # type: ignore[attr-defined]
            txn.put(key, data, db=self._q)  # type: ignore[attr-defined]
            back += 1
        return back

    def claim(self, n: int) -> list[tuple[bytes, bytes]]:
        """Claim up to ``n`` records: returns (key, encoded record) pairs."""
        now = time.time()
        out: list[tuple[bytes, bytes]] = []
        with self.env.begin(write=True) as txn:
            self._recover(txn, now)
            stamp = _CLAIM.pack(now + self.claim_timeout, self.pid) + _HOST + b"\0"
            cur = txn.cursor(db=self._q)
            if not cur.first():
                return out
            while len(out) < n:
                key, data = bytes(cur.key()), bytes(cur.value())
                out.append((key, data))
                txn.put(key, stamp + data, db=self._claimed)
                if not cur.delete():  # delete moves the cursor to the next entry
                    break
                if not cur.key():
                    break
        return out

    def ack(self, keys: Iterable[bytes]) -> None:
        """Acknowledge processed records: they are gone for good."""
        with self.env.begin(write=True) as txn:
            for key in keys:
                txn.delete(key, db=self._claimed)

    def release(self) -> None:
        """Give this process's unacknowledged claims back (clean shutdown)."""
        with self.env.begin(write=True) as txn:
            cur = txn.cursor(db=self._claimed)
            mine = []
            for key, val in cur:
                _, pid = _CLAIM.unpack_from(val)
                if pid == self.pid:
                    mine.append((bytes(key), bytes(val[_CLAIM.size :]).partition(b"\0")[2]))
            for key, data in mine:
                txn.delete(key, db=self._claimed)
                txn.put(key, data, db=self._q)

    def peek(self, limit: int = 0, *, claimed: bool = False) -> Iterator[bytes]:
        """Encoded records in queue order, from one read snapshot (0: all).

        Nothing is claimed or moved: a reader that only looks must not take
        records away from the consumer they are meant for. ``claimed`` also
        yields records claimed but not yet acknowledged, in their place.
        """
        with self.env.begin() as txn:
            queued = ((bytes(k), bytes(v)) for k, v in txn.cursor(db=self._q))
            parts = [queued]
            if claimed:
                parts.append((bytes(k), bytes(v[_CLAIM.size:]).partition(b"\0")[2])
                             for k, v in txn.cursor(db=self._claimed))
            for n, (_, data) in enumerate(heapq.merge(*parts), 1):
                yield data
                if n == limit:
                    return

    def counts(self) -> dict[str, int]:
        with self.env.begin() as txn:
            return {
                "queued": txn.stat(self._q)["entries"],
                "claimed": txn.stat(self._claimed)["entries"],
            }

    def drain(self, batch: int = 1000) -> Iterator[list[tuple[bytes, bytes]]]:
        """Claim batches until the queue is empty (the caller acks each)."""
        while True:
            got = self.claim(batch)
            if not got:
                return
            yield got
