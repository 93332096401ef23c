"""The parse stage: a stored page in, its links (and page facts) out.

:mod:`.pages` reads a fetch record's body back from the WARC and parses it
(HTML with lxml, sitemaps, feeds, redirects); :mod:`.links` extracts and
resolves links; :mod:`.sitemap` and :mod:`.feed` read XML safely;
:mod:`.traps` flags URL patterns that never end (calendars, session ids,
facets, deep repeats).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from crawl.core import lazy_face

# name -> the module that defines it; loaded on first use (crawl.core.lazy), so lxml loads
# with the first page parsed, not with every command that names a parse setting.
_LAZY: dict[str, str] = {
    "traps": "traps",
    "LinkGraph": "graph",
    "ParseConfig": "config",
    "Response": "pages",
    "parse_fetch": "pages",
}
__getattr__, __dir__ = lazy_face(__name__, _LAZY, globals())

if TYPE_CHECKING:
    from . import traps as traps
    from .config import ParseConfig as ParseConfig
    from .graph import LinkGraph as LinkGraph
    from .pages import Response as Response
    from .pages import parse_fetch as parse_fetch
