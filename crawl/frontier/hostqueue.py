"""On-disk layout of the frontier: keys, compact values and host state.

Kept apart from crawl/frontier/db.py (the scheduling logic) so the byte formats
can be read and changed in one place. Every key is big-endian so LMDB's
byte order is the order we want: a host's queue is one contiguous key range
sorted by (priority, arrival), and the schedule is sorted by time.

Times in keys are integer milliseconds; a host's next-allowed time is rounded
*up* when it becomes a key and "now" is rounded *down*, so a key that looks
due never is early.
"""

from __future__ import annotations

import math
import struct
from dataclasses import dataclass
from typing import Any

import orjson

# The layout's version, kept in ``meta`` under b"layout". 1 (no such key) keyed
# known URLs by fingerprint alone and had no head/tail fields in host state;
# a frontier of another layout is refused, not converted (a crawl directory
# belongs to one crawl; crawl/frontier/db.py says what to do).
LAYOUT = 2

# --- keys --------------------------------------------------------------------

_HID = struct.Struct(">I")
_QKEY = struct.Struct(">IBQ")  # host id, priority, sequence
_SKEY = struct.Struct(">BQI")  # priority, next-allowed ms, host id
_TKEY = struct.Struct(">QQ")  # time ms, sequence/lease id
_U64 = struct.Struct(">Q")


def ms_up(t: float, _ceil: Any = math.ceil) -> int:
    ms: int = _ceil(t * 1000.0)
    return ms if ms > 0 else 0


def ms_down(t: float) -> int:
    return max(0, math.floor(t * 1000.0))


def hid_key(hid: int) -> bytes:
    return _HID.pack(hid)


def from_hid(key: bytes) -> int:
    hid: int = _HID.unpack(key)[0]
    return hid


def queue_key(hid: int, prio: int, seq: int) -> bytes:
    return _QKEY.pack(hid, prio, seq)


def unpack_queue_key(key: bytes) -> tuple[int, int, int]:
    hid, prio, seq = _QKEY.unpack(key)
    return hid, prio, seq


def sched_key(prio: int, t_ms: int, hid: int) -> bytes:
    return _SKEY.pack(prio, t_ms, hid)


def unpack_sched_key(key: bytes) -> tuple[int, int, int]:
    prio, t_ms, hid = _SKEY.unpack(key)
    return prio, t_ms, hid


def time_key(t_ms: int, n: int) -> bytes:
    return _TKEY.pack(t_ms, n)


def unpack_time_key(key: bytes) -> tuple[int, int]:
    t_ms, n = _TKEY.unpack(key)
    return t_ms, n


def u64(n: int) -> bytes:
    return _U64.pack(n)


def from_u64(b: bytes) -> int:
    n: int = _U64.unpack(b)[0]
    return n


# --- queued URL value --------------------------------------------------------
# flags (scheme prefix stripped?), attempts, failures, len(url rest); then the
# URL without its "scheme://host" prefix (the host is implied by the key), then
# the record's pass-through fields as JSON (empty when there are none).

_QVAL = struct.Struct("<BBBH")
_PREFIXES = ("http://", "https://")
_FULL = 2
_DROP_SET = frozenset(("kind", "v", "url", "due"))
_KEEP: dict[tuple[str, ...], tuple[str, ...]] = {}  # a record's keys -> the ones an entry keeps, in order


def encode_entry(url: str, host: str, rec: dict[str, Any] | None, attempts: int, fails: int,
                 _pack: Any = _QVAL.pack) -> bytes:
    flag, rest = _FULL, url
    start = 7 if url.startswith("http://") else 8 if url.startswith("https://") else 0
    if start:
        end = start + len(host)
        if url.startswith(host, start) and (len(url) == end or url[end] in "/?"):
            flag, rest = start - 7, url[end:]
    raw = rest.encode("utf-8", "surrogatepass")
    if len(raw) > 0x7FFF:
        raise ValueError("URL longer than 32767 bytes")
    extra = b""
    if rec is not None:
        shape = tuple(rec)
        keep = _KEEP.get(shape)
        if keep is None:  # the fields to keep, once per shape of record (a source sends one or a few)
            if len(_KEEP) >= 256:
                _KEEP.clear()
            keep = _KEEP[shape] = tuple(k for k in shape if k not in _DROP_SET)
        if keep:
            extra = orjson.dumps({k: rec[k] for k in keep} if len(keep) > 1 else {keep[0]: rec[keep[0]]})
            if len(extra) > 0xFFF0 - len(raw):
                raise ValueError("record too large for the frontier (over 64 KiB of fields)")
    return _pack(flag, attempts if attempts < 255 else 255, fails if fails < 255 else 255, len(raw)) + raw + extra


@dataclass(slots=True)
class Entry:
    """A queued URL as stored: enough to rebuild its record and lease it."""

    url: str
    attempts: int
    fails: int
    extra: bytes

    def record(self) -> dict[str, Any]:
        rec: dict[str, Any] = orjson.loads(self.extra) if self.extra else {}
        rec["url"] = self.url
        return rec

    def encode(self, host: str) -> bytes:
        rec = orjson.loads(self.extra) if self.extra else None
        return encode_entry(self.url, host, rec, self.attempts, self.fails)


def entry_counts(value: bytes) -> tuple[int, int]:
    """(attempts, failures) of a stored entry, without decoding it."""
    return value[1], value[2]


_COUNTS = struct.Struct("<BB")  # attempts, failures: bytes 1 and 2 of an entry


def with_counts(value: bytes, attempts: int, fails: int, _pack: Any = _COUNTS.pack) -> bytes:
    """A stored entry with its attempt and failure counts replaced (no re-encoding)."""
    return value[:1] + _pack(attempts if attempts < 255 else 255, fails if fails < 255 else 255) + value[3:]


def entry_url(value: bytes, host: str, _unpack: Any = _QVAL.unpack_from, _start: int = _QVAL.size) -> tuple[str, int]:
    """A stored entry's URL and where its pass-through fields start (``decode_entry`` without the object)."""
    flag, _, _, n = _unpack(value)
    end = _start + n
    rest = value[_start:end].decode("utf-8", "surrogatepass")
    return (rest if flag == _FULL else _PREFIXES[flag] + host + rest), end


def decode_entry(value: bytes, host: str, _unpack: Any = _QVAL.unpack_from, _start: int = _QVAL.size) -> Entry:
    flag, attempts, fails, n = _unpack(value)
    end = _start + n
    rest = value[_start:end].decode("utf-8", "surrogatepass")
    return Entry(rest if flag == _FULL else _PREFIXES[flag] + host + rest, attempts, fails, value[end:])


# --- blocks: a host queue stores many entries per LMDB value -----------------
# One LMDB node per URL costs a node header, a 13-byte key and a page slot;
# packing a host's URLs into blocks of ~BLOCK bytes keeps the per-URL cost
# close to the entry itself (measured in scripts/bench_frontier.py).

BLOCK = 1024
_ILEN = struct.Struct("<H")


def block_item(entry: bytes) -> bytes:
    return _ILEN.pack(len(entry)) + entry


def block_split_first(block: bytes) -> tuple[bytes, bytes]:
    """(first entry, the rest of the block)."""
    (n,) = _ILEN.unpack_from(block)
    return block[2 : 2 + n], block[2 + n :]


def block_entries(block: bytes) -> list[bytes]:
    out, i = [], 0
    while i < len(block):
        (n,) = _ILEN.unpack_from(block, i)
        out.append(block[i + 2 : i + 2 + n])
        i += 2 + n
    return out


# --- lease value -------------------------------------------------------------
# host id, priority, sequence, deadline, leased-at, fingerprint, then the entry.

_LVAL = struct.Struct("<IBQddQ")


@dataclass(slots=True)
class Lease:
    hid: int
    prio: int
    seq: int
    deadline: float
    leased_at: float
    fp: int
    entry: bytes

    def encode(self) -> bytes:
        return (
            _LVAL.pack(self.hid, self.prio, self.seq, self.deadline, self.leased_at, self.fp)
            + self.entry
        )


def lease_value(hid: int, prio: int, seq: int, deadline: float, leased_at: float, fp: int, entry: bytes) -> bytes:
    return _LVAL.pack(hid, prio, seq, deadline, leased_at, fp) + entry


def lease_value_of(qkey: bytes, deadline: float, leased_at: float, fp: int, entry: bytes, attempts: int,
                   _pack: Any = _LVAL.pack, _unkey: Any = _QKEY.unpack, _counts: Any = _COUNTS.pack) -> bytes:
    """The lease of ``entry`` taken from queue key ``qkey``, its attempt count set to ``attempts``
    (``lease_value`` of the key's fields and ``with_counts``, in one step)."""
    hid, prio, seq = _unkey(qkey)
    return (_pack(hid, prio, seq, deadline, leased_at, fp) + entry[:1]
            + _counts(attempts if attempts < 255 else 255, entry[2]) + entry[3:])


LEASE_HEAD = _LVAL  # the fixed fields in front of a lease's entry
LEASE_FP = slice(_LVAL.size - 8, _LVAL.size)  # where a lease value keeps the URL's fingerprint


def decode_lease(value: bytes) -> Lease:
    hid, prio, seq, deadline, leased_at, fp = _LVAL.unpack_from(value)
    return Lease(hid, prio, seq, deadline, leased_at, fp, bytes(value[_LVAL.size :]))


# --- known URLs --------------------------------------------------------------
# (host id, fingerprint) -> state, cycle, last outcome code: the add no-op and
# the "completed URL is never leased again in the same cycle" rule. Keyed by
# host first so the entries of one host share pages: a batch of leases or
# adds (host ids are handed out in order of arrival, and a page's links
# mostly share its host) dirties a few neighbouring pages, not one random
# page per URL (1,000 random updates cost ~3 us each plus ~10 us each at the
# fsynced commit; clustered ones ~1 us in all).

QUEUED, LEASED, DONE, DROPPED = 1, 2, 3, 4
STATE_NAMES = {QUEUED: "queued", LEASED: "leased", DONE: "done", DROPPED: "dropped"}
_KVAL = struct.Struct("<BHB")  # state, cycle (mod 65536), outcome code
_KKEY = struct.Struct(">IQ")  # host id, fingerprint


def known_key(hid: int, fp: int) -> bytes:
    return _KKEY.pack(hid, fp)


def known_value(state: int, cycle: int, outcome: int = 0) -> bytes:
    return _KVAL.pack(state, cycle & 0xFFFF, outcome)


def decode_known(value: bytes) -> tuple[int, int, int]:
    state, cycle, outcome = _KVAL.unpack(value)
    return state, cycle, outcome


# --- host state --------------------------------------------------------------

NOT_SCHEDULED = 255
WAITING_IP = 254
NO_HEAD = 255  # HostState.head when no URL is ready (queue empty or all delayed)
_HVAL = struct.Struct("<ddQIBQBHffBBQB")


@dataclass(slots=True)
class HostState:
    """Everything the scheduler knows about one host (one LMDB value).

    ``sched`` is the priority level the host is scheduled at, or
    NOT_SCHEDULED (nothing ready, or a lease in flight) or WAITING_IP (ready
    but its IP address has ``per_ip`` leases in flight). ``head`` is the
    priority of the host's first ready URL (NO_HEAD if none), so releasing
    a host never reads its queue. ``tail_prio``/``tail_seq`` name the block
    the last add appended to (the last block at that priority while it
    exists), so an add finds it with one get instead of a cursor search.
    """

    name: str
    next_allowed: float = 0.0
    parked_until: float = 0.0
    lease: int = 0
    queued: int = 0
    sched: int = NOT_SCHEDULED
    sched_ms: int = 0
    backoff: int = 0
    failures: int = 0
    crawl_delay: float = -1.0
    last_response: float = -1.0
    ip: str = ""
    head: int = NO_HEAD
    tail_prio: int = NO_HEAD
    tail_seq: int = 0

    def encode(self, _pack: Any = _HVAL.pack) -> bytes:
        ip = self.ip.encode()
        return _pack(
            self.next_allowed, self.parked_until, self.lease, self.queued, self.sched, self.sched_ms,
            self.backoff if self.backoff < 255 else 255, self.failures if self.failures < 0xFFFF else 0xFFFF,
            self.crawl_delay, self.last_response, self.head, self.tail_prio, self.tail_seq, len(ip),
        ) + ip + self.name.encode()

    def as_dict(self) -> dict[str, Any]:
        return {
            "host": self.name,
            "next_allowed": self.next_allowed,
            "parked_until": self.parked_until or None,
            "in_flight": f"{self.lease:016x}" if self.lease else None,
            "queued": self.queued,
            "scheduled": {NOT_SCHEDULED: None, WAITING_IP: "waiting-for-ip"}.get(
                self.sched, f"priority {self.sched}"
            ),
            "backoff_level": self.backoff,
            "consecutive_failures": self.failures,
            "crawl_delay": self.crawl_delay if self.crawl_delay >= 0 else None,
            "last_response_time": self.last_response if self.last_response >= 0 else None,
            "ip": self.ip or None,
        }


def decode_host(value: bytes, _unpack: Any = _HVAL.unpack_from, _start: int = _HVAL.size) -> HostState:
    h = _new(HostState)  # every field is set below: faster than the 15-argument __init__
    (h.next_allowed, h.parked_until, h.lease, h.queued, h.sched, h.sched_ms, h.backoff, h.failures,
     h.crawl_delay, h.last_response, h.head, h.tail_prio, h.tail_seq, nip) = _unpack(value)
    h.ip = value[_start : _start + nip].decode()
    h.name = value[_start + nip :].decode()
    return h


_new = object.__new__
