"""The plumbing every stage shares; it imports no stage.

Records (:mod:`.records`: one NDJSON object per line, each with ``kind`` and
``v``) go between stages through pipes or LMDB spools (:mod:`.spool`), read
and written by :mod:`.io`, which also runs a stage's batch loop (read a
batch, process, write, then acknowledge). :mod:`.state` lays out a crawl
directory and opens its LMDB environments, each data file checked first
(:mod:`.envcheck`) and its failures named (:mod:`.guard`); :mod:`.atomic`
rewrites small files whole; :mod:`.dirlock` gives a crawl directory one
writer at a time and names it; :mod:`.errors` holds the exceptions that become one ``crawl: error:``
line and an exit status;
:mod:`.maptrim` gives back the page cache of memory-mapped files and
:mod:`.heap` caps malloc's arenas;
:mod:`.durations` is the one grammar of time flags; :mod:`.lifeline`
makes worker processes die with their parent; :mod:`.names` checks the
names an operator gives for files inside a crawl directory; and
:mod:`.identity` is who the crawler says it is.
"""

from . import records as records
from .atomic import pid_alive as pid_alive
from .atomic import replace_file as replace_file
from .dirlock import LOCK_NAME as LOCK_NAME
from .dirlock import DirBusy as DirBusy
from .dirlock import DirLock as DirLock
from .dirlock import describe_holder as describe_holder
from .dirlock import hold_dir as hold_dir
from .dirlock import holder as holder
from .dirlock import iso_utc as iso_utc
from .dirlock import note_stage_leases as note_stage_leases
from .dirlock import own_dir as own_dir
from .dirlock import share_dir as share_dir
from .dirlock import stage_leased as stage_leased
from .durations import format_duration as format_duration
from .durations import parse_duration as parse_duration
from .envcheck import verify_env as verify_env
from .errors import BadRecord as BadRecord
from .errors import CrawlError as CrawlError
from .errors import DamagedState as DamagedState
from .errors import ExitStatus as ExitStatus
from .errors import NoSpace as NoSpace
from .errors import StateError as StateError
from .errors import UsageError as UsageError
from .guard import ENV_ROLES as ENV_ROLES
from .guard import crawl_dir_of as crawl_dir_of
from .guard import is_no_space as is_no_space
from .guard import no_space as no_space
from .heap import limit_arenas as limit_arenas
from .identity import AGENT_TOKEN as AGENT_TOKEN
from .identity import DEFAULT_USER_AGENT as DEFAULT_USER_AGENT
from .identity import USER_AGENT_ENV as USER_AGENT_ENV
from .identity import contact_warning as contact_warning
from .io import Batch as Batch
from .io import Report as Report
from .io import Sink as Sink
from .io import Source as Source
from .io import StreamSink as StreamSink
from .io import StreamSource as StreamSource
from .io import dumps_pretty as dumps_pretty
from .io import ensure_inside as ensure_inside
from .io import existing_spool as existing_spool
from .io import open_sink as open_sink
from .io import open_source as open_source
from .io import run_stage as run_stage
from .io import run_stage_pooled as run_stage_pooled
from .io import spool_exists as spool_exists
from .lazy import lazy_face as lazy_face
from .lifeline import ORPHANED as ORPHANED
from .lifeline import Lifeline as Lifeline
from .lifeline import hold_lifeline as hold_lifeline
from .maptrim import MAP_BUDGET as MAP_BUDGET
from .maptrim import MapTrimmer as MapTrimmer
from .names import check_file_name as check_file_name
from .records import Record as Record
from .spool import Spool as Spool
from .state import CrawlDir as CrawlDir
from .state import close_env as close_env
from .state import open_env as open_env
from .state import verify_live as verify_live
