"""Freshness: when each page should be fetched again.

:mod:`.history` keeps what each URL returned (validators for conditional
requests); :mod:`.freshness` holds the change-rate estimates and the
optimal revisit intervals; :mod:`.page` learns one page's signals;
:mod:`.recrawler` keeps the schedule; :mod:`.sim` replays it against the
test web.
"""

from .freshness import parse_budget as parse_budget
from .freshness import parse_duration as parse_duration
from .freshness import split_budget as split_budget
from .history import History as History
from .recrawler import Recrawler as Recrawler
