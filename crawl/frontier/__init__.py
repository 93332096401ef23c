"""The frontier: which URL is fetched next, and when its host may be asked again.

URLs come in (``add``: canonical, deduplicated by key), wait in per-host
queues ordered by priority (:mod:`.hostqueue`), leave as leases (``next``:
one host at a time, its delay and the per-IP cap respected,
:mod:`.politeness`, :mod:`.ipslots`) and come back as fetch results
(``complete``, :mod:`.complete`), which set the host's next-allowed time
(DESIGN invariant 1). Every change is one LMDB transaction (:mod:`.tx`) in
:mod:`.db`; :mod:`.report` reads it for ``stats`` and ``dump``;
:mod:`.recrawl` re-admits what the recrawl model says is due;
:mod:`.robotswait` keeps the hosts whose robots.txt cannot be read waiting,
their URLs queued, and says so. :mod:`.delays` notes why a host waits
(Retry-After, backoff, parked) and :mod:`.lookup` reads one URL's or
host's state without writing, for ``crawl why``. :mod:`.slices` moves
hosts out whole (queued URLs, politeness state, done URLs) when a shared
crawl hands them to another node.
"""

from .db import Frontier as Frontier
from .delays import release_cause as release_cause
from .delays import replay_delay as replay_delay
from .lookup import FrontierView as FrontierView
from .politeness import DEFAULT as DEFAULT
from .politeness import Politeness as Politeness
from .politeness import parse_retry_after as parse_retry_after
from .recrawl import enqueue_due as enqueue_due
from .recrawl import readd as readd
from .robotswait import describe_wait as describe_wait
from .robotswait import plural as plural
from .robotswait import wait_notice as wait_notice
from .slices import host_names as host_names
from .slices import merge_done as merge_done
from .slices import merge_host_state as merge_host_state
from .slices import take_hosts as take_hosts
