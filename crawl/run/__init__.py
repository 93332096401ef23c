"""The whole loop in one command: frontier, fetch, parse, seen, dedupe, recrawl.

:mod:`.crawl` owns what happens to records (admission under the crawl's
:mod:`.scope` and budgets, results, parsing), built from the stages' own
functions; :mod:`.loop` is the async side (tasks, signals, the parse
processes, which :mod:`.spawn` starts before the parent's imports);
:mod:`.crawllog` writes the crawl log; :mod:`.display` draws the live table
and the summary; :mod:`.stats` gathers what a crawl directory holds for
``crawl stats`` (and whether its run is alive); :mod:`.resume` gives back at
once what a killed run left; :mod:`.check` verifies and repairs one for
``crawl check``; :mod:`.options` keeps the settings a run decided with
(scope, politeness), so ``crawl why`` can name its rules.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from crawl.core import lazy_face

# name -> the module that defines it; loaded on first use (crawl.core.lazy): `crawl stats`
# needs none of the loop's stages, `crawl run --help` none at all.
_LAZY: dict[str, str] = {
    "CheckReport": "check",
    "check_dir": "check",
    "check_ndjson": "check",
    "CYCLE_MODES": "options",
    "Budgets": "crawl",
    "Children": "spawn",
    "Crawl": "crawl",
    "RunOptions": "crawl",
    "CrawlLog": "crawllog",
    "read_log": "crawllog",
    "make_display": "display",
    "results_where": "display",
    "summary": "display",
    "grep_log": "logscan",
    "tail_log": "logscan",
    "run_crawl": "loop",
    "Recorded": "options",
    "recorded_run": "options",
    "MODES": "scope",
    "Scope": "scope",
    "gather": "stats",
    "liveness": "stats",
    "outcome_counts": "stats",
}
__getattr__, __dir__ = lazy_face(__name__, _LAZY, globals())

if TYPE_CHECKING:
    from .check import CheckReport as CheckReport
    from .check import check_dir as check_dir
    from .check import check_ndjson as check_ndjson
    from .crawl import Budgets as Budgets
    from .crawl import Crawl as Crawl
    from .crawl import RunOptions as RunOptions
    from .crawllog import CrawlLog as CrawlLog
    from .crawllog import read_log as read_log
    from .display import make_display as make_display
    from .display import results_where as results_where
    from .display import summary as summary
    from .logscan import grep_log as grep_log
    from .logscan import tail_log as tail_log
    from .loop import run_crawl as run_crawl
    from .options import CYCLE_MODES as CYCLE_MODES
    from .options import Recorded as Recorded
    from .options import recorded_run as recorded_run
    from .scope import MODES as MODES
    from .scope import Scope as Scope
    from .spawn import Children as Children
    from .stats import gather as gather
    from .stats import liveness as liveness
    from .stats import outcome_counts as outcome_counts
