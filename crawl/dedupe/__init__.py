"""Duplicate and near-duplicate pages: exact payload digests and simhash.

:mod:`.deduper` checks pages (read back from the WARC) against the crawl's
index; :mod:`.simhash` computes and looks up 64-bit fingerprints;
:mod:`.boilerplate` learns each host's repeated blocks so that templates
do not make every page of a site look alike.
"""

from .boilerplate import RELEARN_EVERY as RELEARN_EVERY
from .boilerplate import ROUND_PAGES as ROUND_PAGES
from .deduper import MAX_DISTANCE as MAX_DISTANCE
from .deduper import REPEATED_BLOCK_PAGES as REPEATED_BLOCK_PAGES
from .deduper import Deduper as Deduper
from .deduper import Fingerprint as Fingerprint
from .deduper import Prints as Prints
from .deduper import explain as explain
from .deduper import fingerprint_pages as fingerprint_pages
