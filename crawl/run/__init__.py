"""The whole loop in one command: frontier, fetch, parse, seen, dedupe, recrawl.

:mod:`.crawl` owns what happens to records (admission under the crawl's
:mod:`.scope` and budgets, results, parsing), built from the stages' own
functions; :mod:`.loop` is the async side (tasks, signals, the parse
processes); :mod:`.crawllog` writes the crawl log; :mod:`.display` draws
the live table and the summary; :mod:`.stats` gathers what a crawl
directory holds for ``crawl stats`` (and whether its run is alive);
:mod:`.resume` gives back at once what a killed run left; :mod:`.check` verifies and repairs
one for ``crawl check``; :mod:`.options` keeps the settings a
run decided with (scope, politeness), so ``crawl why`` can name its rules.
"""

from .check import CheckReport as CheckReport
from .check import check_dir as check_dir
from .check import check_ndjson as check_ndjson
from .crawl import CYCLE_MODES as CYCLE_MODES
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
from .options import Recorded as Recorded
from .options import recorded_run as recorded_run
from .scope import MODES as MODES
from .scope import Scope as Scope
from .stats import gather as gather
from .stats import liveness as liveness
from .stats import outcome_counts as outcome_counts
