"""robots.txt rules: parse once, answer "may this agent fetch this URL?" fast.

RFC 9309 (the Robots Exclusion Protocol) in three public names plus the
status table:

    robots = parse(body)                       # never raises on content
    robots.allowed("https://h/private", "crawl")   # -> bool
    robots.decide("/private", "crawl")         # -> Decision(allowed, rule, line, group)
    robots.crawl_delay("crawl"), robots.sitemaps
    for_status(503)                            # -> DISALLOW_ALL (section 2.3.1.4)

Parsing (crawl.robots.syntax), matching (crawl.robots.match) and the
group logic (here) are separate, as in google/robotstxt, but the result is an immutable value rather than a
stateful matcher, so one parsed file can be shared by every fetch task.

Matching is on the hot path of every fetch, so each pattern is compiled
once: a wildcard-free pattern is a ``startswith`` (or ``==`` with ``$``),
and a pattern with ``*`` becomes a linear-time chain of ``str.find`` calls
(no regular expressions: robots.txt is untrusted input). Rules are
sorted by specificity once, so a decision stops at the first match. The
group chosen for an agent is cached per agent string.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from .match import Rule, compile_rule, glob_match, normalize, path_of
from .syntax import MAX_BYTES, RawGroup, RawRule, RequestRate, agent_tokens, parse_text

__all__ = [
    "ALLOW_ALL",
    "DISALLOW_ALL",
    "MAX_BYTES",
    "Decision",
    "RequestRate",
    "Robots",
    "Rule",
    "for_status",
    "normalize",
    "parse",
    "path_of",
]


@dataclass(frozen=True, slots=True)
class Decision:
    """Why a URL is allowed or not.

    rule is the deciding line as "Allow: /x" / "Disallow: /x" (None when no
    rule matched: allowed by default); line is its 1-based line number;
    group names the user-agent group that applied ("*" for the wildcard
    group, "" when no group applied).
    """

    allowed: bool
    rule: str | None
    line: int | None
    group: str


@dataclass(frozen=True, slots=True)
class _Group:
    name: str
    rules: tuple[Rule, ...]  # most specific first; allow before disallow on a tie
    crawl_delay: float | None
    request_rate: RequestRate | None
    lines: tuple[int, ...] = ()  # where the merged groups start in the file
    # The rules again, split by the character after the leading "/": a path
    # only needs the rules of its own bucket plus the ones without a key.
    index: dict[str, tuple[Rule, ...]] = field(default_factory=dict)
    unkeyed: tuple[Rule, ...] = ()

    def first_match(self, path: str) -> Rule | None:
        """The highest-ranked rule matching ``path`` (both lists are sorted)."""
        best = None
        for rule in self.index.get(path[1:2], ()):
            if rule.match(path):
                best = rule
                break
        for rule in self.unkeyed:
            if best is not None and rule.rank <= best.rank:
                break
            if rule.match(path):
                return rule
        return best


_NO_GROUP = _Group("", (), None, None)


def _merge(name: str, groups: list[RawGroup]) -> _Group:
    """Combine all groups naming the agent into one (section 2.2.1)."""
    rules: list[Rule] = []
    for g in groups:
        for raw in g.rules:
            c = compile_rule(raw.allow, raw.value, raw.line or None)
            if c is not None:
                rules.append(c)
    rules.sort(key=lambda r: (-r.priority, not r.allow))
    delay = next((g.delays[name] for g in groups if name in g.delays), None)
    rate = next((g.rates[name] for g in groups if name in g.rates), None)
    index: dict[str, list[Rule]] = {}
    for r in rules:
        if r.key is not None:
            index.setdefault(r.key, []).append(r)
    return _Group(name, tuple(rules), delay, rate, tuple(g.line for g in groups if g.line),
                  {k: tuple(v) for k, v in index.items()},
                  tuple(r for r in rules if r.key is None))


def _names(agents: list[str], token: str) -> bool:
    """Does a group's user-agent list name this token?

    Exactly, or through a "*" inside a name ("foo*bot"), which some files
    use; such a group then applies to us, the polite reading.
    """
    if token in agents:
        return True
    return any("*" in a and a != "*" and glob_match(a, token) for a in agents)


class Robots:
    """A parsed robots.txt: an immutable value, safe to share and cache.

    Build one with :func:`parse` (or use ALLOW_ALL / DISALLOW_ALL).
    """

    __slots__ = ("_groups", "_by_agent", "sitemaps", "truncated", "size", "note")

    def __init__(
        self,
        groups: list[RawGroup],
        sitemaps: tuple[str, ...] = (),
        truncated: bool = False,
        size: int = 0,
        note: str = "",
    ) -> None:
        init = object.__setattr__  # the only writes: see __setattr__
        init(self, "_groups", tuple(groups))
        init(self, "_by_agent", {})  # agent string -> _Group, filled on first use
        init(self, "sitemaps", tuple(sitemaps))
        init(self, "truncated", truncated)  # the body was longer than MAX_BYTES
        init(self, "size", size)  # bytes received
        init(self, "note", note)  # why this value exists, e.g. "robots.txt returned 503"

    _groups: tuple[RawGroup, ...]
    _by_agent: dict[str, _Group]
    sitemaps: tuple[str, ...]
    truncated: bool
    size: int
    note: str

    def __setattr__(self, name: str, value: object) -> None:
        raise AttributeError(f"Robots is immutable (cannot set {name!r})")

    def __repr__(self) -> str:
        return f"<Robots {len(self._groups)} group(s), {len(self.sitemaps)} sitemap(s)>"

    def agents(self) -> tuple[str, ...]:
        """Product tokens named by the file's groups, in file order."""
        return tuple(dict.fromkeys(a for g in self._groups for a in g.agents if a))

    def _group(self, agent: str) -> _Group:
        got = self._by_agent.get(agent)
        if got is not None:
            return got
        got = None
        for token in agent_tokens(agent):
            mine = [g for g in self._groups if token != "*" and _names(g.agents, token)]
            if mine:
                got = _merge(token, mine)
                break
        if got is None:
            star = [g for g in self._groups if "*" in g.agents]
            got = _merge("*", star) if star else _NO_GROUP
        if len(self._by_agent) < 64:  # agents are few; bound it anyway
            self._by_agent[agent] = got
        return got

    def decide(self, url_or_path: str, agent: str) -> Decision:
        """Decide one URL (or path) for one agent, with the rule that did it.

        RFC 9309 section 2.2.2: the longest (most specific) matching rule
        wins, and Allow wins a tie; with no matching rule the URL is allowed.
        """
        group = self._group(agent)
        path = normalize(path_of(url_or_path))
        if path == "/robots.txt":  # section 2.2.2: implicitly allowed
            return Decision(True, None, None, group.name)
        rule = group.first_match(path)
        if rule is not None:
            return Decision(rule.allow, rule.text, rule.line, group.name)
        return Decision(True, None, None, group.name)

    def allowed(self, url_or_path: str, agent: str) -> bool:
        """May ``agent`` (a product token or full User-Agent) fetch this URL?"""
        group = self._group(agent)
        if not group.rules:
            return True
        path = normalize(path_of(url_or_path))
        rule = group.first_match(path)
        return rule is None or rule.allow or path == "/robots.txt"

    def explain(self, url_or_path: str, agent: str) -> dict[str, Any]:
        """Everything behind a decision, for people debugging a robots.txt.

        Lists every rule of the chosen group that matches, most specific
        first, so a surprising winner can be seen next to its competitors.
        """
        group = self._group(agent)
        path = path_of(url_or_path)
        norm = normalize(path)
        d = self.decide(url_or_path, agent)
        return {
            "path": path,
            "normalized": norm,
            "agent_tokens": agent_tokens(agent),
            "group": group.name,
            "group_lines": list(group.lines),
            "matching": [
                {"rule": r.text, "line": r.line, "priority": r.priority}
                for r in group.rules
                if r.match(norm)
            ],
            "implicit": "/robots.txt is always allowed" if norm == "/robots.txt" else None,
            "decision": "allowed" if d.allowed else "disallowed",
            "note": self.note or None,
        }

    def crawl_delay(self, agent: str) -> float | None:
        """Seconds between requests asked by the agent's group, if any.

        Crawl-delay is not part of RFC 9309; it is honoured as a hint.
        """
        return self._group(agent).crawl_delay

    def request_rate(self, agent: str) -> RequestRate | None:
        """The agent's Request-rate line, if any (not part of RFC 9309)."""
        return self._group(agent).request_rate


def parse(body: bytes | str, limit: int = MAX_BYTES) -> Robots:
    """Parse a robots.txt body; never raises on content.

    At most ``limit`` bytes are read (RFC 9309 section 2.5: at least 500 KiB
    must be parsed; the rest is ignored).
    """
    p = parse_text(body, limit)
    return Robots(p.groups, tuple(p.sitemaps), p.truncated, p.size)


ALLOW_ALL = Robots([], note="no usable robots.txt: everything allowed")
DISALLOW_ALL = Robots(
    [RawGroup(agents=["*"], agent_lines=["*"], rules=[RawRule(False, "/", 0)])],
    note="robots.txt unreachable: everything disallowed",
)


def for_status(status: int) -> Robots | None:
    """What a robots.txt HTTP status means before any body is read.

    RFC 9309 section 2.3.1: 2xx -> None ("parse the body"); 4xx
    ("unavailable") -> ALLOW_ALL; 5xx ("unreachable") -> DISALLOW_ALL.
    A 3xx seen here means the redirects ran out (more than five hops,
    section 2.3.1.2), which the RFC lets us treat as unavailable.
    Deviations, both toward politeness: 429 Too Many Requests is the server
    asking us to slow down, so it counts as unreachable (as Google does);
    so does any status that is not 2xx, 3xx or 4xx (1xx, or nonsense).
    """
    if 200 <= status < 300:
        return None
    if status == 429:
        return DISALLOW_ALL
    if 300 <= status < 500:
        return ALLOW_ALL
    return DISALLOW_ALL
