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

    def add_seeds(self, urls: Iterable[str]) -> None:
        for url in urls:
            try:
                host = host_of(url)
            except (CanonError, ValueError):
                continue
            self.hosts.add(host)
            self.domains.add(registered_domain(host.rsplit(":", 1)[0] if host.count(":") == 1 else host))

    def reason_out(self, url: str, depth: int = 0) -> str | None:
        """None if ``url`` is in scope, else a short reason code."""
        if self.max_depth is not None and depth > self.max_depth:
            return "max-depth"
        if self.mode != "any":
            try:
                host = host_of(url)
            except (CanonError, ValueError):
                return "invalid-host"
            if self.mode == "host" and host not in self.hosts:
                return "off-host"
            if self.mode == "domain":
                name = host.rsplit(":", 1)[0] if host.count(":") == 1 else host
                if registered_domain(name) not in self.domains:
                    return "off-domain"
        for rx in self._deny:
            if rx.search(url):
                return "denied"
        if self._allow and not any(rx.search(url) for rx in self._allow):
            return "not-allowed"
        return None
