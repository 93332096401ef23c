"""robots.txt (RFC 9309): fetched once per origin, cached, obeyed.

:mod:`.parse` reads the file into groups (bounded: 500 KiB), :mod:`.match`
compiles and matches path rules, :mod:`.policy` picks the group for our
product token and answers allowed or not (and what a 4xx or 5xx means);
:mod:`.fetch` fetches and caches verdicts in the crawl directory (through
:mod:`crawl.net`), and :mod:`.report` serves ``crawl robots``.
"""

from .fetch import RobotsCache as RobotsCache
from .fetch import RobotsFetcher as RobotsFetcher
from .fetch import RobotsInfo as RobotsInfo
from .policy import MAX_BYTES as MAX_BYTES
from .policy import Robots as Robots
from .policy import parse as parse
from .report import RobotsSource as RobotsSource
from .report import decision_record as decision_record
from .report import format_text as format_text
from .syntax import agent_token as agent_token
