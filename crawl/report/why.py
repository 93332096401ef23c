"""``crawl why``: every decision the crawl made about one URL or one host, with its cause.

An engineer asking "why is this URL not fetched" or "why is this host
idle" needs the canonicaliser's rules, the scope, robots.txt, the seen
set, the frontier, the host's politeness, the fetch attempts, dedupe and
the pages that link to the URL, in one place and in the order the crawl
applies them. Each comes from its own store in the crawl directory, read
without writing and without a lock, so this works beside a running crawl
and on a copy of its directory:

* canonical form: :func:`crawl.canon.canonicalize` with its trace;
* scope: the run's recorded settings (:func:`crawl.run.recorded_run`) and
  :meth:`crawl.run.Scope.explain`;
* robots.txt: the crawl's cache in ``D/fetchstate``;
* seen: :func:`crawl.seen.seen_fp`; frontier: :class:`crawl.frontier.FrontierView`;
* the host's next-allowed time and its cause: :func:`host_wait`;
* fetch attempts and duplicates: the crawl log (:func:`crawl.run.grep_log`);
* referrers: the fetch event's parent and anchor, and a scan of the link
  graph bounded by ``referrers``.

:func:`why_url` and :func:`why_host` return one JSON-ready dict (``--json``
keeps all of it); :func:`format_url` and :func:`format_host` print it for
people, one fact per line.
"""

from __future__ import annotations

import datetime as dt
import math
import time
from pathlib import Path
from typing import Any

import orjson

from crawl.canon import CanonError, canonicalize
from crawl.core import CrawlDir, open_env
from crawl.frontier import FrontierView, Politeness, release_cause, replay_delay
from crawl.parse import LinkGraph, traps
from crawl.robots import RobotsCache
from crawl.robots import parse as parse_robots
from crawl.run import Recorded, grep_log, recorded_run
from crawl.seen import seen_fp

REFERRERS = 10  # pages that link to the URL, found by scanning the link graph
HISTORY = 50  # delay changes and recent outcomes of a host
CHANGE = 0.2  # a delay that moved by more than this share of itself is a change worth a line


# -- small readers ---------------------------------------------------------------

def _origin(url: str) -> str:
    """``scheme://host[:port]`` of a canonical URL: the robots cache key."""
    start = url.find("//") + 2
    end = url.find("/", start)
    return url[: end if end >= 0 else len(url)]


def _robots_entry(cd: CrawlDir, origin: str) -> tuple[dict[str, Any], bytes] | None:
    if not (cd.fetchstate / "data.mdb").exists():
        return None
    try:
        cache = RobotsCache(open_env(cd.fetchstate, readonly=True))
    except Exception:  # noqa: BLE001 - no robots table yet (lmdb.ReadonlyError): nothing cached
        return None
    return cache.get(origin)


def _host_admitted(cd: CrawlDir, host: str) -> int | None:
    """URLs ``crawl run`` admitted for ``host`` under --max-per-host (its run state)."""
    path = cd.sub("runstate")
    if not (path / "data.mdb").exists():
        return None
    env = open_env(path, max_dbs=4, readonly=True)
    try:
        db = env.open_db(b"host-admitted", create=False)
    except Exception:  # noqa: BLE001 - never written (no cap): the table is not there
        return None
    with env.begin() as txn:
        raw = txn.get(host.encode(), db=db)
    return int(raw) if raw else 0


def frontier_view(cd: CrawlDir) -> FrontierView | None:
    """The crawl directory's frontier, read-only; None if it has none."""
    return FrontierView(cd.frontier) if (cd.frontier / "data.mdb").exists() else None


def _iso(ts: object) -> str:
    if not isinstance(ts, int | float) or isinstance(ts, bool) or not math.isfinite(ts) or ts <= 0:
        return "-"
    return dt.datetime.fromtimestamp(ts, dt.UTC).strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"


def _secs(s: object) -> str:
    """Seconds as people read them: ``0.250 s``, ``42.0 s``, ``23h52m``."""
    if not isinstance(s, int | float) or isinstance(s, bool):
        return "-"
    if s < 10:
        return f"{s:.3f} s"
    if s < 120:
        return f"{s:.1f} s"
    parts, rest = [], float(s)
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60), ("s", 1)):
        n, rest = divmod(rest, size)
        if n or parts:
            parts.append(f"{int(n)}{unit}")
        if len(parts) == 2:
            break
    return "".join(p for p in parts if not p.startswith("0"))


def _when(ts: object, now: float) -> str:
    """An ISO time and how far it is from now."""
    if not isinstance(ts, int | float) or ts <= 0:
        return "-"
    d = ts - now
    rel = "now" if abs(d) < 0.5 else (f"in {_secs(d)}" if d > 0 else f"{_secs(-d)} ago")
    return f"{_iso(ts)} ({rel})"


# -- the host's wait -----------------------------------------------------------------

def host_wait(h: dict[str, Any], cfg: Politeness, now: float,
              robots: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    """When a host may be asked next and why: ``next``, ``ready``, ``cause``, ``delay``, ``detail``.

    ``h`` is a host state from :class:`crawl.frontier.FrontierView`,
    ``robots`` the host's cached robots.txt verdicts (:func:`host_robots`).
    The causes, in the order they hold a host back: a lease in flight, parked
    after failures, its address at the per-IP cap, its address slowed by a
    429/503 of another host there, an unreachable robots.txt, a cause the
    frontier noted at the last completion (Retry-After, backoff after
    429/503 or errors), and otherwise the normal release: the largest of
    the base delay, k x the last response time and Crawl-delay.
    """
    na = float(h.get("next_allowed") or 0.0)
    parked = float(h.get("parked_until") or 0.0)
    slow = float(h.get("ip_slowed_until") or 0.0)
    nxt = max(na, parked, slow)
    noted = h.get("noted")
    lease = h.get("lease")
    rt, cd = h.get("last_response_time"), h.get("crawl_delay")
    normal = release_cause(cfg, rt, cd)
    out: dict[str, Any] = {"next": nxt, "ready": nxt <= now and not h.get("in_flight"), "figures": normal.terms}
    unreadable = [f for f in robots or () if f.get("verdict") == "unreachable"]
    if h.get("in_flight"):
        where = f" ({lease['url']}, leased {_iso(lease['leased_at'])}, deadline {_iso(lease['deadline'])})" \
            if lease else ""
        out.update(cause="in-flight", delay=None, detail=f"a fetch is in flight{where}")
    elif parked > now:
        out.update(cause="parked", delay=(noted or {}).get("delay"),
                   detail=f"parked after {h.get('consecutive_failures')} consecutive failures "
                          f"(--park-after {cfg.park_after}) until {_iso(parked)}")
    elif h.get("waiting_ip"):
        out.update(cause="per-ip-cap", delay=None,
                   detail=f"its address {h.get('ip')} has {h.get('ip_in_flight')} fetches in flight, "
                          f"the --per-ip cap of {cfg.per_ip}")
    elif slow > now and slow >= na - 0.001:
        out.update(cause="per-ip-slowdown", delay=None,
                   detail=f"a 429/503 from a host on its address {h.get('ip')} slows every host there "
                          f"until {_iso(slow)}")
    elif (noted or {}).get("cause") == "robots-wait" or unreadable:
        f = unreadable[0] if unreadable else {}
        why = f.get("error") or (f"status {f['status']}" if f.get("status") else "unreachable")
        out.update(cause="robots-wait", delay=(noted or {}).get("delay"),
                   detail=f"robots.txt cannot be read ({why}; {f.get('checks') or 1} failed check(s) since "
                          f"{_iso(f.get('unreachable_since') or (noted or {}).get('at'))}): nothing is fetched "
                          f"until it is checked again, {_when(na, now)}")
    elif noted is not None:
        out.update(cause=noted["cause"], delay=noted.get("delay"), detail=_noted_detail(noted, cfg))
    elif h.get("backoff_level"):
        out.update(cause="backoff", delay=None,
                   detail=f"backing off (level {h['backoff_level']}, {h.get('consecutive_failures')} "
                          "consecutive failures) after 429/503 or errors; the exact cause was not "
                          "recorded by the version that wrote this frontier")
    else:
        out.update(cause=normal.cause, delay=normal.delay, detail=release_detail(normal.cause, normal.delay,
                                                                               cfg, rt, cd))
    return out


def release_detail(cause: str, delay: float, cfg: Politeness, rt: object, cd: object) -> str:
    """The normal release delay in words, with the figures it came from."""
    if cause == "crawl-delay":
        return f"robots.txt Crawl-delay: {_secs(cd)}"
    if cause == "response-time":
        return (f"{cfg.response_factor:g} x the last response time {_secs(rt)} = {_secs(delay)} "
                f"(more than the base delay {_secs(cfg.default_delay)})")
    if cause == "max-delay":
        return f"capped at --max-delay {_secs(cfg.max_delay)}"
    return f"the base delay (--delay): {_secs(cfg.default_delay)}"


def _noted_detail(n: dict[str, Any], cfg: Politeness) -> str:
    code = n.get("status") or n.get("outcome")
    at = _iso(n.get("at"))
    if n["cause"] == "retry-after":
        return f"Retry-After: {_secs(n.get('retry_after'))}, sent with the {code} at {at}"
    if n["cause"] == "backoff":
        return (f"backoff level {n.get('level')} after the {code} at {at} (no Retry-After): "
                f"{_secs(n.get('delay'))} (doubling from --backoff-base {_secs(cfg.backoff_base)})")
    if n["cause"] == "error-backoff":
        return (f"backoff level {n.get('level')} after {code} at {at}, {n.get('failures')} consecutive "
                f"failure(s): {_secs(n.get('delay'))}")
    if n["cause"] == "robots-wait":
        return f"robots.txt unreachable at {at}: checked again after {_secs(n.get('delay'))}"
    if n["cause"] == "parked":
        return f"parked after {n.get('failures')} consecutive failures at {at}"
    return str(n["cause"])


def host_robots(cd: CrawlDir, host: str, now: float) -> list[dict[str, Any]]:
    """The cached robots.txt verdicts of a host's origins (http and https)."""
    out = []
    for scheme in ("http", "https"):
        origin = f"{scheme}://{host}"
        got = _robots_entry(cd, origin)
        if got is None:
            continue
        entry, body = got
        out.append(_robots_file(origin, entry, body, now))
    return out


def _robots_file(origin: str, entry: dict[str, Any], body: bytes, now: float) -> dict[str, Any]:
    fetched = float(entry.get("fetched_at") or 0.0)
    return {"origin": origin, "verdict": entry.get("verdict"), "status": entry.get("status"),
            "error": entry.get("error") or entry.get("last_error") or None, "fetched_at": fetched,
            "age_s": round(now - fetched, 3) if fetched else None, "next_check": entry.get("expires"),
            "checks": entry.get("checks"), "unreachable_since": entry.get("unreachable_since"),
            "bytes": len(body)}


def robots_state(files: list[dict[str, Any]]) -> str:
    """A host's robots.txt in a few words, for a table cell: ``parsed``,
    ``unavailable (404: all allowed)``, ``unreachable (500)``, ``not fetched``."""
    if not files:
        return "not fetched"
    f = files[0]
    v, status = f.get("verdict"), f.get("status")
    if v == "unavailable":
        return f"unavailable ({status}: all allowed)"
    if v == "unreachable":
        return f"unreachable ({status or (f.get('error') or '').split(':', 1)[0] or 'error'})"
    if v == "parsed" and f.get("checks"):
        return "parsed (stale copy: unreachable now)"
    return str(v)


def host_politeness(root: str | Path, now: float | None = None) -> dict[str, dict[str, Any]]:
    """Every host of the frontier: its robots.txt state, current delay and its cause.

    For the report's per-host table; one pass over the frontier's hosts and
    one robots-cache lookup per host.
    """
    now = time.time() if now is None else now
    cd = CrawlDir(root)
    fv = frontier_view(cd)
    if fv is None:
        return {}
    cfg = recorded_run(cd.root).politeness
    out = {}
    for h in fv.hosts(now):
        files = host_robots(cd, h["host"], now)
        wait = host_wait(h, cfg, now, files)
        out[h["host"]] = {"robots": robots_state(files),
                          "delay_s": round(wait["delay"], 3) if isinstance(wait.get("delay"), float) else None,
                          "delay_reason": wait["cause"], "next_allowed": wait["next"], "wait": wait,
                          "queued": h.get("queued", 0) + h.get("delayed", 0), "in_flight": bool(h.get("lease"))}
    return out


# -- why URL ----------------------------------------------------------------------

def _referrers(cd: CrawlDir, url: str, limit: int) -> dict[str, Any]:
    """Pages whose stored links point at ``url`` (a scan of the link graph, stopped at ``limit``)."""
    found: list[dict[str, Any]] = []
    scanned = 0
    complete = True
    if (cd.graph / "data.mdb").exists() and limit > 0:
        with LinkGraph(cd.graph, readonly=True) as g:
            for page, edges, _ in g.pages():
                scanned += 1
                for dst, anchor, rel, source, trap in edges:
                    if dst == url:
                        found.append({"page": page, "anchor": anchor, "rel": rel, "source": source,
                                      "trap": trap or None})
                        break
                if len(found) >= limit:
                    complete = False
                    break
    return {"pages": found, "scanned_pages": scanned, "complete": complete}


def _fetch_row(ev: dict[str, Any]) -> dict[str, Any]:
    keep = ("ts", "outcome", "status", "bytes", "seconds", "attempt", "retry_after", "warc", "error",
            "location", "content_type", "depth", "duplicate_of", "distance")
    row = {k: ev[k] for k in keep if k in ev}
    robots = ev.get("robots")
    if isinstance(robots, dict):
        row["robots_rule"] = robots.get("rule")
        row["robots_verdict"] = robots.get("verdict")
    return row


def why_url(root: str | Path, url: str, now: float | None = None, referrers: int = REFERRERS) -> dict[str, Any]:
    """Every decision about ``url`` in crawl directory ``root`` (see the module docstring)."""
    now = time.time() if now is None else now
    cd = CrawlDir(root)
    out: dict[str, Any] = {"kind": "why", "v": 1, "url": url, "dir": str(cd.root), "now": now}
    trace: list[dict[str, Any]] = []
    try:
        c = canonicalize(url, trace=trace)
    except CanonError as exc:
        out["canonical"] = {"error": exc.reason, "detail": exc.detail, "rules": trace}
        out["verdict"] = f"not crawlable: {exc.reason} ({exc.detail})"
        out["cause"] = "canon"
        return out
    curl = c.url
    out["canonical"] = {"url": curl, "changed": curl != url, "fp": f"{c.fp:016x}", "host": c.host,
                        "rules": trace}
    run = recorded_run(cd.root)
    out["options_recorded"] = run.found

    refs = _referrers(cd, curl, referrers)
    needles = [orjson.dumps(curl)] + [orjson.dumps(r["page"]) for r in refs["pages"]]
    fetches: list[dict[str, Any]] = []
    duplicate: dict[str, Any] | None = None
    page_depth: dict[str, int] = {}
    if cd.log.exists():
        for ev in grep_log(cd.log, needles):
            kind, ev_url = ev.get("event"), ev.get("url")
            if kind == "fetch" and isinstance(ev.get("depth"), int):
                page_depth.setdefault(ev_url, ev["depth"])
            if ev_url != curl:
                continue
            if kind == "fetch":
                fetches.append(_fetch_row(ev) | {"parent": ev.get("parent"), "anchor": ev.get("anchor")})
            elif kind == "duplicate":
                duplicate = {"of": ev.get("duplicate_of"), "distance": ev.get("distance"),
                             "kind": ev.get("dup_kind") or "near", "ts": ev.get("ts")}
    if duplicate is None:
        dup = next((f for f in reversed(fetches) if f.get("duplicate_of")), None)
        if dup:
            duplicate = {"of": dup["duplicate_of"], "distance": dup.get("distance"), "kind": "near",
                         "ts": dup.get("ts")}
    fv = frontier_view(cd)
    entry = fv.url(curl, now) if fv is not None else {"state": "unknown", "why": "no frontier in this directory"}
    fields = entry.pop("fields", None) or {}

    # depth: the URL's own (fetch event or frontier entry), else its referrers' plus one hop
    depth: int | None = next((f["depth"] for f in fetches if isinstance(f.get("depth"), int)), None)
    depth_from = "its fetch events"
    if depth is None and isinstance(fields.get("depth"), int):
        depth, depth_from = fields["depth"], "its frontier entry"
    if depth is None:
        via = [(page_depth[r["page"]] + (0 if r["source"] == "redirect" or "canonical" in r["rel"].split() else 1),
                r["page"]) for r in refs["pages"] if r["page"] in page_depth]
        if via:
            depth, page = min(via)
            depth_from = f"the referrer {page} (depth {page_depth[page]}) plus one link"
    out["depth"] = {"depth": depth, "from": depth_from if depth is not None else "unknown"}
    scope = run.scope.explain(curl, depth if depth is not None else 0)
    if depth is None:
        scope["note"] = "depth unknown (no fetch, frontier entry or stored referrer): judged at depth 0"
    if not run.found and not run.scope.hosts:
        scope.update(in_scope=None, reason=None, rule="not judged: no crawl run recorded a scope or seeds here")
    out["scope"] = scope
    out["robots"] = _robots_verdict(cd, curl, run, now)
    verdict = traps.check(curl, depth or 0, run.trap_policy)
    graph_trap = next((r["trap"] for r in refs["pages"] if r["trap"]), None)
    out["trap"] = ({"heuristic": verdict.reason, "action": verdict.action} if verdict is not None
                   else {"heuristic": graph_trap, "action": "demote"} if graph_trap else None)
    out["seen"] = seen_fp(cd.seen, c.fp)
    out["frontier"] = entry
    host_state = fv.host(c.host, now) if fv is not None else None
    if host_state and "ambiguous" not in host_state:
        out["host"] = {"state": host_state,
                       "wait": host_wait(host_state, run.politeness, now, host_robots(cd, c.host, now))}
    if run.max_per_host:
        out["host_cap"] = {"cap": run.max_per_host, "admitted": _host_admitted(cd, c.host)}
    out["fetches"] = fetches
    out["dedupe"] = duplicate
    first = next(({"page": f["parent"], "anchor": f.get("anchor")} for f in fetches if f.get("parent")), None)
    if first is None and fields.get("parent"):
        first = {"page": fields["parent"], "anchor": fields.get("anchor")}
    out["referrers"] = {"first": first, **refs}
    out["verdict"], out["cause"] = _url_verdict(out, now)
    return out


def _robots_verdict(cd: CrawlDir, url: str, run: Recorded, now: float) -> dict[str, Any]:
    origin = _origin(url)
    if not run.robots:
        return {"verdict": "ignored", "detail": "the run ignores robots.txt (--ignore-robots)"}
    got = _robots_entry(cd, origin)
    if got is None:
        return {"verdict": "unknown", "origin": origin, "agent": run.agent,
                "detail": "robots.txt of this origin has not been fetched yet"}
    entry, body = got
    out = {"agent": run.agent, "file": _robots_file(origin, entry, body, now)}
    v = entry.get("verdict")
    if v == "parsed" or (v == "unreachable" and body):  # a good copy kept while unreachable (RFC 9309 2.4)
        d = parse_robots(body).decide(url, run.agent)
        out.update(verdict="allowed" if d.allowed else "disallowed", rule=d.rule, line=d.line, group=d.group)
        if v == "unreachable":
            out["note"] = "robots.txt is unreachable now; its last good copy is used"
    elif v == "unavailable":
        out.update(verdict="allowed", rule=None,
                   detail=f"robots.txt answered {entry.get('status')}: everything is allowed (RFC 9309 2.3.1.3)")
    else:
        why = entry.get("error") or f"status {entry.get('status')}"
        out.update(verdict="unreachable", rule=None,
                   detail=f"robots.txt cannot be read ({why}): nothing is fetched from this origin "
                          f"until it is, next check {_iso(entry.get('expires'))} (RFC 9309 2.3.1.4)")
    return out


def _url_verdict(w: dict[str, Any], now: float) -> tuple[str, str]:
    """The one-line answer and its cause code, from the facts gathered."""
    fr = w["frontier"]
    state = fr.get("state")
    fetches = w["fetches"]
    last = fetches[-1] if fetches else None
    wait = (w.get("host") or {}).get("wait") or {}
    if state in ("queued", "delayed", "leased"):
        if state == "leased":
            return f"being fetched now (leased, deadline {_iso(fr.get('deadline'))})", "leased"
        if state == "delayed":
            return f"queued, not due until {_when(fr.get('due'), now)}", "due"
        if w["robots"].get("verdict") == "unreachable" or wait.get("cause") == "robots-wait":
            return f"queued, waiting on robots.txt: {wait.get('detail') or w['robots'].get('detail')}", "robots-wait"
        when = "now" if wait.get("ready") else _when(wait.get("next"), now)
        pos = f", {fr['position']:,} in its host's queue" if fr.get("position") else ""
        return (f"queued (priority {fr.get('priority')}{pos}); its host may be asked {when}: "
                f"{wait.get('detail', '')}", wait.get("cause") or "queued")
    if last is not None:
        outcome = last.get("outcome")
        head = f"fetched {len(fetches)} time(s); last {outcome}" + (
            f" {last['status']}" if last.get("status") else "") + f" at {_iso(last.get('ts'))}"
        if outcome == "robots-disallowed":
            return f"{head}: blocked by robots.txt ({last.get('robots_rule') or w['robots'].get('rule')})", \
                "robots-disallowed"
        if w["dedupe"]:
            d = w["dedupe"]
            return f"{head}; a {d['kind']} duplicate of {d['of']} (distance {d['distance']})", "duplicate"
        if state == "dropped":
            return f"{head}; dropped after failing {fr.get('last_outcome')} too often", "dropped"
        return head, outcome or "fetched"
    if state in ("done", "dropped"):
        return f"{state} in this cycle (last outcome {fr.get('last_outcome')}), no fetch event in the log", state
    trap = w["trap"]  # parse drops a trap link before admission judges its scope
    if trap and trap["action"] == "drop":
        return f"not admitted: dropped as a spider trap ({trap['heuristic']})", "trap"
    scope = w["scope"]
    if scope["in_scope"] is False and not (w["depth"]["depth"] is None and scope["reason"] == "max-depth"):
        return f"not admitted: out of scope ({scope['reason']}): {scope['rule']}", str(scope["reason"])
    cap = w.get("host_cap")
    if cap and cap.get("admitted") is not None and cap["admitted"] >= cap["cap"]:
        return f"not admitted: its host reached --max-per-host {cap['cap']}", "host-cap"
    if w["seen"]:
        return "seen (admitted) but not in the frontier: added by another pipeline, or its frontier was reset", \
            "seen"
    if not w["referrers"]["pages"] and not w["referrers"]["first"]:
        return "never discovered: no stored page links to it", "undiscovered"
    return "linked from stored pages but not admitted yet (its links are still being parsed?)", "pending"


# -- why --host ---------------------------------------------------------------------

def why_host(root: str | Path, host: str, now: float | None = None, history: int = HISTORY) -> dict[str, Any]:
    """A host's politeness state, its delay changes with their causes, robots.txt, queue and outcomes."""
    now = time.time() if now is None else now
    cd = CrawlDir(root)
    run = recorded_run(cd.root)
    out: dict[str, Any] = {"kind": "why-host", "v": 1, "host": host, "dir": str(cd.root), "now": now,
                           "options_recorded": run.found}
    fv = frontier_view(cd)
    state = fv.host(host, now) if fv is not None else None
    if state and "ambiguous" in state:
        out["ambiguous"] = state["ambiguous"]
        return out
    key = state["host"] if state else host.strip().lower()
    out["host"] = key
    out["known"] = state is not None
    out["state"] = state
    out["robots"] = host_robots(cd, key, now)
    out["wait"] = host_wait(state, run.politeness, now, out["robots"]) if state else None
    events = [ev for ev in grep_log(cd.log, [b'"host":' + orjson.dumps(key)])
              if ev.get("event") == "fetch" and ev.get("host") == key] if cd.log.exists() else []
    out["fetches"] = len(events)
    out["changes"] = _delay_history(events, run.politeness, state, history)
    out["recent"] = [{"ts": e.get("ts"), "url": e.get("url"), "outcome": e.get("outcome"),
                      "status": e.get("status"), "seconds": e.get("seconds")} for e in events[-history:]]
    outcomes: dict[str, int] = {}
    for e in events:
        k = str(e.get("status") or e.get("outcome"))
        outcomes[k] = outcomes.get(k, 0) + 1
    out["outcomes"] = dict(sorted(outcomes.items()))
    out["verdict"] = _host_verdict(out, now)
    return out


def _delay_history(events: list[dict[str, Any]], cfg: Politeness, state: dict[str, Any] | None,
                   limit: int) -> list[dict[str, Any]]:
    """Each completion whose cause differs from the one before, or whose delay
    moved by more than ``CHANGE`` of it (response times jitter), replayed
    through the frontier's rules, with the gap the crawl actually left until
    the host's next result (what shows the delay was kept)."""
    level = failures = 0
    prev: tuple[str, float] | None = None
    out: list[dict[str, Any]] = []
    fallback_cd = (state or {}).get("crawl_delay")
    for i, ev in enumerate(events):
        ra = ev.get("retry_after")
        cd = ev.get("crawl_delay", fallback_cd)
        r = replay_delay(cfg, level, failures, str(ev.get("outcome")), ev.get("status"),
                         float(ra) if isinstance(ra, int | float) else None, ev.get("seconds"),
                         cd if isinstance(cd, int | float) else None)
        level, failures = r.level, r.failures
        here = (r.cause, r.delay)
        if prev is None or r.cause != prev[0] or abs(r.delay - prev[1]) > CHANGE * prev[1]:
            gap = _gap(ev, events[i + 1]) if i + 1 < len(events) else None
            out.append({"ts": ev.get("ts"), "url": ev.get("url"), "outcome": ev.get("outcome"),
                        "status": ev.get("status"), "retry_after": r.retry_after, "cause": r.cause,
                        "delay": round(r.delay, 3), "level": r.level, "failures": r.failures,
                        "next_request_after": gap})
            prev = here
    return out[-limit:]


def _num(v: Any) -> float | None:
    return float(v) if isinstance(v, int | float) and not isinstance(v, bool) else None


def _gap(ev: dict[str, Any], nxt: dict[str, Any]) -> float | None:
    """Seconds from the end of ``ev``'s answer to the start of the host's next
    request: what the delay rule governs (it runs from the end of the answer as
    the crawler received it). The crawl log's ``ended_at`` and ``seconds`` say
    both; a log written before ``ended_at`` existed gives the gap between the
    two results' log times, which also holds a result's storage time."""
    end, start = _num(ev.get("ended_at")), None
    n_end, n_secs = _num(nxt.get("ended_at")), _num(nxt.get("seconds"))
    if n_end is not None and n_secs is not None:
        start = n_end - n_secs
    if end is None or start is None:
        end, start = _num(ev.get("ts")), _num(nxt.get("ts"))
    return None if end is None or start is None else round(start - end, 3)


def _host_verdict(w: dict[str, Any], now: float) -> str:
    st = w["state"]
    if st is None:
        return "unknown to the frontier of this crawl directory"
    wait = w["wait"]
    queued = st.get("queued", 0) + st.get("delayed", 0)
    if wait["cause"] == "in-flight":
        return f"fetching: {wait['detail']}"
    if not queued:
        return f"idle: nothing queued for it ({w['fetches']:,} results so far); next allowed " \
               f"{_when(wait['next'], now)} ({wait['cause']})"
    if st.get("queued", 0) == 0:
        return f"idle: its {st['delayed']:,} URL(s) are not due until {_when(st.get('delayed_next_due'), now)}"
    if wait["ready"]:
        return f"ready: {st['queued']:,} URL(s) queued, allowed now"
    return f"waiting: {st['queued']:,} URL(s) queued, next allowed {_when(wait['next'], now)}: {wait['detail']}"


# -- for people ------------------------------------------------------------------------

def _line(label: str, text: object) -> str:
    return f"{label:<14} {text}"


def format_url(w: dict[str, Any]) -> str:
    """The explanation of one URL, one fact per line."""
    now = w["now"]
    lines = [_line("url", w["url"]), _line("verdict", w["verdict"])]
    c = w["canonical"]
    if "error" in c:
        lines.append(_line("canonical", f"refused: {c['error']} ({c['detail']})"))
        return "\n".join(lines) + "\n"
    lines.append(_line("canonical", c["url"] + ("" if c["changed"] else "  (unchanged)")))
    for step in c["rules"]:
        notes = f" [{', '.join(step['notes'])}]" if step.get("notes") else ""
        lines.append(_line("", f"rule {step['rule']}{notes}: {step['before']} -> {step['after']}"))
    if not w.get("options_recorded"):
        lines.append(_line("note", "no crawl run recorded its settings here: scope and politeness are the "
                                   "defaults"))
    s = w["scope"]
    verdict = {True: "in scope: ", False: f"OUT ({s['reason']}): ", None: ""}[s["in_scope"]]
    lines.append(_line("scope", verdict + str(s["rule"])))
    d = w["depth"]
    lines.append(_line("depth", f"{d['depth']} (from {d['from']})" if d["depth"] is not None else "unknown"))
    r = w["robots"]
    if r.get("rule") or r.get("verdict") in ("allowed", "disallowed"):
        f = r.get("file") or {}
        rule = f"{r['rule']} (line {r.get('line')}, group {r.get('group') or 'none'})" if r.get("rule") \
            else r.get("detail") or f"no rule matched (group {r.get('group') or 'none'})"
        lines.append(_line("robots", f"{r['verdict']}: {rule}"))
        if f:
            lines.append(_line("", f"robots.txt {f.get('verdict')} ({f.get('status')}), fetched "
                                   f"{_when(f.get('fetched_at'), now)}, next check {_when(f.get('next_check'), now)}"))
    else:
        lines.append(_line("robots", f"{r.get('verdict')}: {r.get('detail')}"))
    t = w["trap"]
    lines.append(_line("trap", f"{t['heuristic']} ({t['action']})" if t else "no trap heuristic fires"))
    lines.append(_line("seen", {True: "yes", False: "no", None: "no seen set"}[w["seen"]]))
    fr = w["frontier"]
    facts = ", ".join(f"{k} {_fmt_fact(k, v, now)}" for k, v in fr.items()
                      if k not in ("state", "host", "fp") and v is not None)
    lines.append(_line("frontier", f"{fr.get('state')}" + (f" ({facts})" if facts else "")))
    h = w.get("host")
    if h:
        wait = h["wait"]
        when = "now" if wait["ready"] else _when(wait["next"], now)
        lines.append(_line("host", f"{h['state']['host']}: next allowed {when}"))
        lines.append(_line("", f"why: {wait['cause']}: {wait['detail']}"))
    if w.get("host_cap"):
        cap = w["host_cap"]
        lines.append(_line("host cap", f"{cap['admitted']} of {cap['cap']} URLs admitted (--max-per-host)"))
    if not w["fetches"]:
        lines.append(_line("fetches", "none in the crawl log"))
    for i, f in enumerate(w["fetches"], 1):
        bits = [str(f.get("outcome"))]
        if f.get("status"):
            bits.append(str(f["status"]))
        for k, label in (("bytes", "bytes"), ("seconds", "s")):
            if f.get(k) is not None:
                bits.append(f"{f[k]:,} {label}" if k == "bytes" else f"{f[k]:.3f} {label}")
        if f.get("retry_after") is not None:
            bits.append(f"Retry-After {_secs(f['retry_after'])}")
        if f.get("location"):
            bits.append(f"-> {f['location']}")
        if f.get("warc"):
            wp = f["warc"]
            bits.append(f"WARC {wp.get('file')}@{wp.get('offset')}+{wp.get('length')}")
        if f.get("error"):
            bits.append(f"({f['error']})")
        lines.append(_line("fetch" if i == 1 else "", f"#{i} {_iso(f.get('ts'))} " + ", ".join(bits)))
    dd = w["dedupe"]
    lines.append(_line("dedupe", f"{dd['kind']} duplicate of {dd['of']} at distance {dd['distance']}" if dd
                       else "not a duplicate of any page seen before"))
    refs = w["referrers"]
    if refs["first"]:
        lines.append(_line("found via", f"{refs['first']['page']} (anchor {refs['first'].get('anchor')!r})"))
    more = "" if refs["complete"] else f" (first {len(refs['pages'])}; --referrers N for more)"
    lines.append(_line("linked from", f"{len(refs['pages'])} stored page(s){more}" if refs["pages"]
                       else f"no stored page ({refs['scanned_pages']:,} scanned)"))
    for r in refs["pages"]:
        lines.append(_line("", f"{r['page']}  {r['anchor']!r}" + (f" [{r['source']}]" if r["source"] != "a" else "")))
    return "\n".join(lines) + "\n"


def _fmt_fact(k: str, v: object, now: float) -> str:
    if k in ("due", "leased_at", "deadline"):
        return _when(v, now)
    return str(v)


def format_host(w: dict[str, Any]) -> str:
    """The explanation of one host, one fact per line."""
    now = w["now"]
    if w.get("ambiguous"):
        return _line("host", f"{w['host']} names {len(w['ambiguous'])} hosts: {', '.join(w['ambiguous'])}; "
                             "give one with its port") + "\n"
    lines = [_line("host", w["host"]), _line("verdict", w["verdict"])]
    st = w["state"]
    if st:
        wait = w["wait"]
        lines.append(_line("next allowed", "now" if wait["ready"] else _when(wait["next"], now)))
        lines.append(_line("why", f"{wait['cause']}: {wait['detail']}"))
        terms = ", ".join(f"{k} {_secs(v)}" for k, v in wait["figures"].items())
        lines.append(_line("normal delay", f"largest of {terms}"))
        lines.append(_line("queue", f"{st['queued']:,} ready, {st['delayed']:,} delayed"
                                    + (f" (soonest due {_when(st['delayed_next_due'], now)})"
                                       if st.get("delayed_next_due") else "")))
        lease = st.get("lease")
        lines.append(_line("in flight", f"{lease['url']} since {_when(lease['leased_at'], now)}, deadline "
                                        f"{_when(lease['deadline'], now)}" if lease else "nothing"))
        lines.append(_line("backoff", f"level {st['backoff_level']}, {st['consecutive_failures']} consecutive "
                                      "failure(s)" + (f", parked until {_iso(st['parked_until'])}"
                                                      if st.get("parked_until") else "")))
        lines.append(_line("address", f"{st.get('ip') or '-'}: {st.get('ip_in_flight', 0)} in flight"
                                      + (f", slowed until {_iso(st['ip_slowed_until'])}"
                                         if st.get("ip_slowed_until") else "")))
    for r in w["robots"] or [{"origin": "-", "verdict": "not fetched yet"}]:
        extra = ""
        if r.get("fetched_at"):
            code = ": ".join(str(x) for x in (r.get("status") or None, r.get("error")) if x)
            extra = f" ({code}), fetched " \
                    f"{_when(r.get('fetched_at'), now)}, next check {_when(r.get('next_check'), now)}"
        lines.append(_line("robots.txt", f"{r['origin']}: {r['verdict']}{extra}"))
    lines.append(_line("outcomes", ", ".join(f"{k} {v:,}" for k, v in w["outcomes"].items()) or "none yet"))
    lines.append(_line("delay changes", f"{len(w['changes'])} (replayed from the crawl log through the "
                                        "frontier's rules; 'then' is the gap from the end of that answer "
                                        "to the host's next request)"))
    for ch in w["changes"]:
        code = ch.get("status") or ch.get("outcome")
        ra = f", Retry-After {_secs(ch['retry_after'])}" if ch.get("retry_after") is not None else ""
        then = f", then {_secs(ch['next_request_after'])}" if ch.get("next_request_after") is not None else ""
        lines.append(_line("", f"{_iso(ch['ts'])} {code}{ra}: {ch['cause']} {_secs(ch['delay'])}{then}"
                               f"  ({ch['url']})"))
    lines.append(_line("recent", f"last {len(w['recent'])} results"))
    for e in w["recent"][-10:]:
        lines.append(_line("", f"{_iso(e['ts'])} {e.get('status') or e.get('outcome')} {e['url']}"))
    return "\n".join(lines) + "\n"
