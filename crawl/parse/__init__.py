"""The parse stage: a stored page in, its links (and page facts) out.

:mod:`.pages` reads a fetch record's body back from the WARC and parses it
(HTML with lxml, sitemaps, feeds, redirects); :mod:`.links` extracts and
resolves links; :mod:`.sitemap` and :mod:`.feed` read XML safely;
:mod:`.traps` flags URL patterns that never end (calendars, session ids,
facets, deep repeats).
"""

from . import traps as traps
from .graph import LinkGraph as LinkGraph
from .pages import ParseConfig as ParseConfig
from .pages import Response as Response
from .pages import parse_fetch as parse_fetch
