"""Decisions as records and as lines for people (the core of ``crawl robots``).

Kept out of the click command so it can be tested and reused: a
:class:`RobotsSource` says where the rules come from (one local file, or
robots.txt fetched live per origin through :mod:`crawl.robots.fetch`), and
:func:`decision_record` turns one URL into one annotated record.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from crawl.core import CrawlError, Record, records

from .policy import Robots, path_of


class RobotsSource:
    """The robots.txt for each URL: a fixed local file, or fetched live.

    Live answers are kept per origin for the life of the object, so many
    URLs of one site cost one robots.txt request.
    """

    def __init__(self, local: Robots | None, path: Path | None = None,
                 live_options: dict[str, Any] | None = None) -> None:
        self.local = local
        self.path = path
        self.live_options = {k: v for k, v in (live_options or {}).items() if v is not None}
        self._live: dict[str, tuple[Robots, dict[str, Any]]] = {}

    def for_url(self, url: str) -> tuple[Robots, dict[str, Any]]:
        """(rules, description of where they came from) for one URL."""
        if self.local is not None:
            return self.local, {"file": str(self.path), "size": self.local.size,
                                "truncated": self.local.truncated}
        if "://" not in url:
            raise CrawlError(f"{url!r} is not an absolute URL: live mode needs scheme and host "
                             "(or give --robots-file to test a local file with bare paths)")
        try:
            from .fetch import fetch_robots_sync, origin_of
        except ImportError:  # the fetching half is optional for this command
            raise CrawlError("live mode is not available in this build; "
                             "use --robots-file FILE") from None
        origin = origin_of(url)
        got = self._live.get(origin)
        if got is None:
            info = fetch_robots_sync(url, **self.live_options)
            got = self._live[origin] = (info.robots, info.summary())
        return got


def decision_record(rec: Record, agent: str, source: RobotsSource, explain: bool) -> Record:
    """The input record plus allowed, rule, line, group, agent and robots_txt.

    A URL whose robots.txt cannot be consulted gets ``allowed: null`` and an
    ``error``: it is reported, never silently dropped.
    """
    url = rec["url"]
    try:
        robots, where = source.for_url(url)
    except CrawlError as exc:
        return records.derive(rec, rec.get("kind", "url"), allowed=None, rule=None,
                              agent=agent, error=str(exc))
    d = robots.decide(url, agent)
    out = records.derive(rec, rec.get("kind", "url"), allowed=d.allowed, rule=d.rule,
                         line=d.line, group=d.group, agent=agent, robots_txt=where)
    if explain:
        out["explain"] = robots.explain(url, agent)
    return out


def format_text(rec: Record, explain: bool = False) -> str:
    """One line per decision (more with ``explain``), for a terminal."""
    url = rec["url"]
    if rec.get("allowed") is None:
        return f"{'error':<10}  {url}  {rec.get('error', '')}\n"
    verdict = "allowed" if rec["allowed"] else "disallowed"
    group = rec.get("group") or "none"
    if rec.get("rule"):
        at = f"line {rec['line']}, " if rec.get("line") else ""
        why = f"{rec['rule']}  ({at}group {group})"
    elif path_of(url) == "/robots.txt":
        why = "robots.txt itself is always allowed (RFC 9309 section 2.2.2)"
    else:
        why = f"no rule matched  (group {group})" if rec.get("group") else "no group applies"
    where = rec.get("robots_txt") or {}
    if where.get("verdict") in ("unavailable", "unreachable"):
        why += f"  [robots.txt {where['verdict']}: {where.get('error') or where.get('status')}]"
    elif where.get("source") == "stale":
        why += "  [stale cached copy: robots.txt unreachable]"
    lines = [f"{verdict:<10}  {url}  {why}"]
    ex = rec.get("explain")
    if explain and ex:
        lines.append(f"    path {ex['path']!r} compared as {ex['normalized']!r}")
        tokens = ", ".join(ex["agent_tokens"]) or "(none)"
        start = ", ".join(map(str, ex["group_lines"]))
        lines.append(f"    agent tokens tried: {tokens}; group {ex['group'] or 'none'}"
                     + (f" (starting at line {start})" if start else ""))
        for m in ex["matching"]:
            at = f"line {m['line']}, " if m["line"] else ""
            lines.append(f"    matches: {m['rule']}  ({at}{m['priority']} octets)")
        if not ex["matching"]:
            lines.append("    no rule of the group matches: allowed by default")
        for extra in (ex.get("implicit"), ex.get("note")):
            if extra:
                lines.append(f"    note: {extra}")
    return "\n".join(lines) + "\n"
