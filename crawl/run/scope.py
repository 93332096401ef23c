"""Which discovered URLs a crawl follows: a pure, reviewable filter.

Modes: ``host`` (only the seeds' hosts), ``domain`` (the seeds' registered
domains, from the bundled Public Suffix List, offline) and ``any``. Then
``deny`` patterns drop a URL and ``allow`` patterns, when given, must match.
Patterns are Python regular expressions searched in the canonical URL.
Budgets that are counts (pages per host, depth) are enforced here too, so
``crawl run`` and the pipeline version make the same decisions.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, field

from crawl.canon import CanonError, host_of, registered_domain

MODES = ("host", "domain", "any")
# An http(s) URL's scheme and authority, in plain lower-case characters. The
# host host_of finds (and so the registered domain) depends on nothing else
# in the URL, so reason_out remembers them by it: the links a crawl admits
# repeat a few authorities, and host_of parses the whole URL.
_AUTHORITY = re.compile(r"https?://[a-z0-9.\-]+(?::[0-9]*)?(?=[/?#]|\Z)")
_AUTHORITIES = 4096  # remembered at most (DESIGN invariant 5: bounded)


@dataclass
class Scope:
    mode: str = "domain"
    allow: tuple[str, ...] = ()
    deny: tuple[str, ...] = ()
    max_depth: int | None = None
    hosts: set[str] = field(default_factory=set)
    domains: set[str] = field(default_factory=set)

    def __post_init__(self) -> None:
        if self.mode not in MODES:
            raise ValueError(f"scope must be one of {', '.join(MODES)}, not {self.mode!r}")
        self._allow = [re.compile(p) for p in self.allow]
        self._deny = [re.compile(p) for p in self.deny]
        self._by_authority: dict[str, tuple[str, str | None]] = {}  # see _AUTHORITY

    def _host_domain(self, url: str) -> tuple[str, str | None]:
        """(host_of(url), its registered domain in domain mode); raises as host_of."""
        m = _AUTHORITY.match(url)
        known = self._by_authority.get(m.group()) if m is not None else None
        if known is not None:
            return known
        host = host_of(url)
        domain = None
        if self.mode == "domain":
            name = host.rsplit(":", 1)[0] if host.count(":") == 1 else host
            domain = registered_domain(name)
        if m is not None:
            if len(self._by_authority) >= _AUTHORITIES:
                self._by_authority.clear()
            self._by_authority[m.group()] = (host, domain)
        return host, domain

    def add_seeds(self, urls: Iterable[str]) -> None:
        for url in urls:
            try:
                host = host_of(url)
            except (CanonError, ValueError):
                continue
            self.hosts.add(host)
            if self.mode == "domain":  # only it reads them; the public-suffix list loads here
                self.domains.add(registered_domain(host.rsplit(":", 1)[0] if host.count(":") == 1 else host))

    def reason_out(self, url: str, depth: int = 0) -> str | None:
        """None if ``url`` is in scope, else a short reason code."""
        if self.too_deep(depth):
            return "max-depth"
        return self.url_reason_out(url)

    def too_deep(self, depth: int) -> bool:
        """The depth rule of :meth:`reason_out` (checked first there)."""
        return self.max_depth is not None and depth > self.max_depth

    def url_reason_out(self, url: str) -> str | None:
        """The rules of :meth:`reason_out` that read only the URL (host or domain,
        deny, allow): one verdict per URL, so a caller with many links to the same
        URL (a batch's navigation) can judge it once (crawl/run/crawl.py admit)."""
        if self.mode != "any":
            try:
                host, domain = self._host_domain(url)
            except (CanonError, ValueError):
                return "invalid-host"
            if self.mode == "host" and host not in self.hosts:
                return "off-host"
            if self.mode == "domain" and domain not in self.domains:
                return "off-domain"
        for rx in self._deny:
            if rx.search(url):
                return "denied"
        if self._allow and not any(rx.search(url) for rx in self._allow):
            return "not-allowed"
        return None

    def explain(self, url: str, depth: int = 0) -> dict[str, object]:
        """:meth:`reason_out`'s verdict and the rule behind it, for ``crawl why``.

        The verdict is ``reason_out``'s own (so the two cannot disagree);
        ``rule`` names what decided: the depth limit, the host or domain
        test with the seeds' hosts, the deny pattern that matched, or the
        allow patterns none of which did.
        """
        reason = self.reason_out(url, depth)
        out: dict[str, object] = {"in_scope": reason is None, "reason": reason, "mode": self.mode,
                                  "depth": depth, "max_depth": self.max_depth}
        try:
            host = host_of(url)
        except (CanonError, ValueError):
            host = ""
        name = host.rsplit(":", 1)[0] if host.count(":") == 1 else host
        if reason == "max-depth":
            rule = f"depth {depth} is beyond --max-depth {self.max_depth}"
        elif reason == "invalid-host":
            rule = "the URL has no host a scope can be judged by"
        elif reason == "off-host":
            rule = f"--scope host: {host} is not one of the {len(self.hosts)} seed host(s)"
        elif reason == "off-domain":
            rule = (f"--scope domain: {registered_domain(name)} is not one of the "
                    f"{len(self.domains)} seed domain(s)")
        elif reason == "denied":
            rule = "--deny " + next(rx.pattern for rx in self._deny if rx.search(url))
        elif reason == "not-allowed":
            rule = "no --allow pattern matches (" + ", ".join(rx.pattern for rx in self._allow) + ")"
        else:
            rule = {"host": f"--scope host: {host} is a seed host",
                    "domain": f"--scope domain: {registered_domain(name) if name else '?'} is a seed domain",
                    "any": "--scope any"}[self.mode]
            if self._allow:
                rule += "; --allow " + next(rx.pattern for rx in self._allow if rx.search(url))
        out["rule"] = rule
        return out
