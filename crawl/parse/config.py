"""The parse stage's settings, apart from the parsers.

A command or ``crawl run`` builds a :class:`ParseConfig` from its flags
before anything is parsed; keeping it here (no lxml) lets them start, and
``crawl run`` send its first request, before the parsers load.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

from crawl.canon import DEFAULT, CanonConfig

from . import traps

# sitemaps.org: at most 50,000 URLs and 50 MiB (uncompressed) per file.
MAX_SITEMAP_URLS = 50_000
ANCHOR_CHARS = 100


@dataclass(frozen=True, slots=True)
class ParseConfig:
    """Caps and switches of the parse stage (the command's flags)."""

    max_links: int = 10_000
    max_sitemap_urls: int = MAX_SITEMAP_URLS
    anchor_chars: int = ANCHOR_CHARS
    agent: str = "crawl"
    follow_nofollow: bool = False
    rejects: bool = False
    canon: CanonConfig = DEFAULT
    traps: traps.TrapPolicy = field(default_factory=traps.TrapPolicy)

    def with_max_url_length(self, n: int) -> ParseConfig:
        return replace(self, canon=replace(self.canon, max_length=n))
