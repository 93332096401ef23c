"""Politeness audit of a test web's request log (what the server saw, not what the crawler says).

One reference point for every wait: the end of the previous answer as the
server sent it (the log's ``end``: its last byte handed to the kernel, see
:class:`crawl.testweb.server.RequestLog`) to the start of the next request
(``start``: the server had its head). It is the crawler's rule seen from
the other side: a host's delay, Crawl-delay, Retry-After and backoff run
from the end of the answer as the crawler received it (its last body byte
read, or the connection error), and a client cannot read a byte before the
server wrote it, so a polite crawler never shows a short gap here.
:data:`TOLERANCE` allows for the little the two clocks can differ.

Six rules, each checked from server-side timestamps (monotonic ns):

``overlap``     two requests to one host in flight at the same time
                (a request starts before the previous one to that host ended);
``gap``         a request to a host starts less than the required delay after
                the previous one ended; required = max(--delay, the host's
                robots ``Crawl-delay`` from the manifest);
``per-ip``      more than --per-ip requests in flight to one address;
``disallowed``  a fetch of a path the host's robots.txt disallows for the
                audited agent (a host whose robots.txt answers 5xx or times
                out disallows everything, RFC 9309 2.3.1.4; with
                ``--robots-recover`` only until the server first answered
                it with a 200, its recovered rules from then on). Fetching
                robots.txt itself (and the redirects it follows) never counts.
``retry-after`` a request to a host starts before the wait that host's last
                429 or 503 answer asked for in its Retry-After header has
                passed (counted from the end of that answer; the server
                logged the wait it meant, an HTTP-date already converted);
``backoff``     a request to a host starts less than --backoff seconds after
                a 429 or 503 answer that named no wait: "slow down" must
                slow the client below its normal pace, not just to it.

Requests for /robots.txt count as requests to the host for every rule but
``disallowed``. A request that starts before the previous one ended is an
``overlap``, never also a ``gap``, ``retry-after`` or ``backoff``. One
violation record names the rule, the host (or address), and the requests
involved.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import Any

import orjson

from .rules import rules_disallow

Violation = dict[str, Any]
# Seconds of slack on every wait: the crawler schedules on the wall clock
# (CLOCK_REALTIME, its answer's end converted from perf_counter, microseconds
# off), the server stamps CLOCK_MONOTONIC, and a large answer's end is
# stamped just after asyncio's writer handed over its last bytes, not before.
# Loopback skew, not politeness: 5 ms of a 1 s delay.
TOLERANCE = 0.005
_ROBOTS_PATHS = ("/robots.txt", "/robots-moved.txt", "/policies/robots.txt")
_SLOW_DOWN = (429, 503)  # the answers that ask a client to wait (RFC 6585 4, RFC 9110 15.6.4)


def _brief(req: dict[str, Any]) -> dict[str, Any]:
    out = {k: req.get(k) for k in ("start", "end", "conn", "addr", "path", "status")}
    if "retry_after" in req:
        out["retry_after"] = req["retry_after"]
    return out


def audit(
    requests: Iterable[dict[str, Any]],
    hosts: dict[str, dict[str, Any]],
    delay: float = 1.0,
    per_ip: int = 4,
    agent: str | None = None,
    tolerance: float = TOLERANCE,
    backoff: float | None = None,
) -> list[Violation]:
    """Every politeness violation in ``requests`` (log records), in a stable order.

    ``hosts`` maps host names to manifest host records (for Crawl-delay and
    robots rules). ``agent`` keeps only requests whose User-Agent product
    token is ``agent`` (case-insensitive), so other clients of a shared web
    (tests, curl) are not blamed on the crawler. ``backoff`` is the least
    wait after a 429/503 without Retry-After (default: twice ``delay``, as
    crawl's first backoff step of 2 s is twice its 1 s delay).
    """
    backoff = 2 * delay if backoff is None else backoff
    want = agent.lower() if agent else None
    reqs = [r for r in requests if r.get("host") and (want is None or _token(r.get("ua", "")) == want)]
    reqs.sort(key=lambda r: (r["start"], r["end"]))
    out: list[Violation] = []
    by_host: dict[str, list[dict[str, Any]]] = {}
    for r in reqs:
        by_host.setdefault(r["host"], []).append(r)
    for host, items in sorted(by_host.items()):
        rec = hosts.get(host, {})
        robots = rec.get("robots", {})
        crawl_delay = robots.get("crawl_delay") or 0.0
        required = max(delay, crawl_delay)
        prev = None
        for r in items:
            if prev is not None:
                if r["start"] < prev["end"]:
                    out.append({"kind": "violation", "rule": "overlap", "host": host,
                                "detail": f"{r['path']} started {(prev['end'] - r['start']) / 1e6:.1f} ms "
                                          f"before {prev['path']} ended",
                                "requests": [_brief(prev), _brief(r)]})
                else:
                    gap = (r["start"] - prev["end"]) / 1e9
                    if gap + tolerance < required:
                        out.append({"kind": "violation", "rule": "gap", "host": host,
                                    "gap": round(gap, 6), "required": required,
                                    "detail": f"{r['path']} {gap:.3f} s after {prev['path']} "
                                              f"(required {required:g} s)",
                                    "requests": [_brief(prev), _brief(r)]})
            if prev is None or r["end"] > prev["end"]:
                prev = r
            # a request that ends earlier than an overlapping one keeps the later end as reference
        out.extend(_waits(host, items, backoff, tolerance))
        # A robots.txt that recovers (manifest recovers_after) forbids everything
        # until the server has answered it with a 200, its recovered rules after.
        readable = min((r["end"] for r in items if r["path"] == "/robots.txt" and r.get("status") == 200),
                       default=None) if robots.get("recovers_after") else None
        for r in items:
            path = r["path"]
            if path in _ROBOTS_PATHS or not robots:
                continue
            if readable is not None and r["start"] >= readable:
                refused, why = rules_disallow(robots["recovered_rules"], path), "after it answered"
            else:
                refused = robots.get("complete_disallow") or rules_disallow(robots.get("rules", []), path)
                why = "before it answered" if robots.get("recovers_after") else ""
            if refused:
                out.append({"kind": "violation", "rule": "disallowed", "host": host,
                            "detail": f"{path} is disallowed by robots.txt ({robots.get('variant')}"
                                      f"{', ' + why if why else ''})",
                            "requests": [_brief(r)]})
    out.extend(_per_ip(reqs, per_ip))
    return out


def _waits(host: str, items: list[dict[str, Any]], backoff: float, tolerance: float) -> list[Violation]:
    """``retry-after`` and ``backoff``: after a "slow down" answer, the next requests wait.

    Every later request to the host that starts after the answer ended but
    before the asked-for wait is over is one violation (overlapping ones are
    the ``overlap`` rule's). ``items`` are one host's requests by start time.
    """
    out: list[Violation] = []
    for n, r in enumerate(items):
        if r.get("status") not in _SLOW_DOWN:
            continue
        asked = r.get("retry_after")
        rule, wait = ("retry-after", float(asked)) if asked is not None else ("backoff", backoff)
        if wait <= 0:
            continue
        until = r["end"] + (wait - tolerance) * 1e9
        for later in items[n + 1:]:
            if later["start"] >= until:
                break
            if later["start"] < r["end"]:
                continue
            gap = (later["start"] - r["end"]) / 1e9
            why = f"Retry-After asked for {wait:g} s" if rule == "retry-after" else \
                f"no Retry-After: back off at least {wait:g} s"
            out.append({"kind": "violation", "rule": rule, "host": host, "gap": round(gap, 6),
                        "required": wait,
                        "detail": f"{later['path']} {gap:.3f} s after {r['status']} on {r['path']} ({why})",
                        "requests": [_brief(r), _brief(later)]})
    return out


def _token(ua: str) -> str:
    """The product token of a User-Agent ("crawl/0.1 (+url)" -> "crawl"), lower case."""
    return ua.split("/", 1)[0].split(" ", 1)[0].strip().lower()


def _per_ip(reqs: list[dict[str, Any]], limit: int) -> list[Violation]:
    """Sweep start/end events per address; one violation per excursion above ``limit``."""
    by_addr: dict[str, list[dict[str, Any]]] = {}
    for r in reqs:
        by_addr.setdefault(r.get("addr", ""), []).append(r)
    out: list[Violation] = []
    for addr, items in sorted(by_addr.items()):
        # at equal times an end comes before a start: back-to-back is not concurrent
        events = sorted([(r["start"], 1, n) for n, r in enumerate(items)]
                        + [(r["end"], 0, n) for n, r in enumerate(items)])
        active: set[int] = set()
        excursion: set[int] | None = None
        peak = 0
        for _t, is_start, n in events:
            if is_start:
                active.add(n)
                if len(active) > limit:
                    excursion = (excursion or set()) | active
                    peak = max(peak, len(active))
            else:
                active.discard(n)
                if excursion is not None and len(active) <= limit:
                    involved = sorted(excursion, key=lambda m: items[m]["start"])
                    hosts = sorted({items[m]["host"] for m in involved})
                    out.append({"kind": "violation", "rule": "per-ip", "host": ",".join(hosts),
                                "addr": addr, "peak": peak, "limit": limit,
                                "detail": f"{peak} requests in flight to {addr} (limit {limit})",
                                "requests": [_brief(items[m]) for m in involved]})
                    excursion, peak = None, 0
    return out


def read_log(path: Path) -> list[dict[str, Any]]:
    with open(path, "rb") as f:
        return [orjson.loads(line) for line in f if line.strip()]


def read_hosts(web_dir: Path) -> dict[str, dict[str, Any]]:
    hosts: dict[str, dict[str, Any]] = {}
    with open(web_dir / "manifest.ndjson", "rb") as f:
        for line in f:
            if line.startswith(b'{"kind":"host"'):
                rec = orjson.loads(line)
                hosts[rec["host"]] = rec
    return hosts


def audit_dir(
    web_dir: Path, *, delay: float = 1.0, per_ip: int = 4, agent: str | None = None,
    log: Path | None = None, tolerance: float = TOLERANCE, backoff: float | None = None,
) -> tuple[list[Violation], dict[str, Any]]:
    """Audit ``web_dir/requests.log`` (or ``log``) against ``web_dir``'s manifest."""
    reqs = read_log(log or web_dir / "requests.log")
    backoff = 2 * delay if backoff is None else backoff
    violations = audit(reqs, read_hosts(web_dir), delay, per_ip, agent, tolerance, backoff)
    counts: dict[str, int] = {}
    for v in violations:
        counts[v["rule"]] = counts.get(v["rule"], 0) + 1
    summary = {"kind": "audit", "requests": len(reqs), "violations": counts,
               "delay": delay, "per_ip": per_ip, "backoff": backoff, "agent": agent, "tolerance": tolerance}
    return violations, summary
