"""The fetch stage: leases in, fetch records out, responses archived as WARC.

:mod:`.fetcher` does one lease (address policy, robots.txt, conditional
request, classification); :mod:`.batch` runs many at once in one trio run
(reader, workers, one WARC writer with group commit, output), releasing a
result only after its records are fsynced.
"""

from .batch import ACCEPTS as ACCEPTS
from .batch import DEFAULT_TYPES as DEFAULT_TYPES
from .batch import DEFAULT_USER_AGENT as DEFAULT_USER_AGENT
from .batch import FetchConfig as FetchConfig
from .batch import StoreOptions as StoreOptions
from .batch import fetch_all as fetch_all
from .batch import open_fetcher as open_fetcher
from .batch import run_fetch as run_fetch
