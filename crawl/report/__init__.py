"""Site audits: what a crawl found, for people and for spreadsheets.

:mod:`.model` gathers the audit from a crawl directory alone (the crawl
log, the link graph, the frontier's counters), read-only and in memory
bounded by the number of URLs; :mod:`.render` prints it on a terminal or
writes one CSV or NDJSON file per section; :mod:`.html` writes one
self-contained page with charts. ``crawl report`` is the command.
:mod:`.why` explains every decision about one URL or host (``crawl why``);
:mod:`.metrics` writes a crawl's gauges for Prometheus (``crawl stats
--format openmetrics``).
"""

from .html import write as write_html
from .metrics import openmetrics as openmetrics
from .model import Report as Report
from .model import Section as Section
from .model import gather as gather
from .render import terminal as terminal
from .render import write_files as write_files
from .why import format_host as format_host
from .why import format_url as format_url
from .why import why_host as why_host
from .why import why_url as why_url

__all__ = ["Report", "Section", "format_host", "format_url", "gather", "openmetrics", "terminal", "why_host",
           "why_url", "write_files", "write_html"]
