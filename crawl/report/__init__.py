"""Site audits: what a crawl found, for people and for spreadsheets.

:mod:`.model` gathers the audit from a crawl directory alone (the crawl
log, the link graph, the frontier's counters), read-only and in memory
bounded by the number of URLs; :mod:`.render` prints it on a terminal or
writes one CSV or NDJSON file per section; :mod:`.html` writes one
self-contained page with charts. ``crawl report`` is the command.
"""

from .html import write as write_html
from .model import Report as Report
from .model import Section as Section
from .model import gather as gather
from .render import terminal as terminal
from .render import write_files as write_files

__all__ = ["Report", "Section", "gather", "terminal", "write_files", "write_html"]
