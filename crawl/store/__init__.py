"""The WARC store: what was fetched, as it came, and how to read it back.

:mod:`.warc` writes request and response records (fsynced in groups, with a
body buffer bounded in memory); :mod:`.cdxj` keeps the URL index;
:mod:`.read` checks a pointer and reads the one record it names, or scans a
file, torn tails included; :mod:`.codings` undoes content codings in
bounded pieces, for the fetch's bomb limits and for readers alike.
"""

from . import cdxj as cdxj
from .codings import Bomb as Bomb
from .codings import Meter as Meter
from .read import BadPointer as BadPointer
from .read import Pointer as Pointer
from .read import ScanResult as ScanResult
from .read import StoredResponse as StoredResponse
from .read import check_pointer as check_pointer
from .read import iter_records as iter_records
from .read import read_response as read_response
from .read import scan as scan
from .warc import BodyBuffer as BodyBuffer
from .warc import Capture as Capture
from .warc import WarcWriter as WarcWriter
from .warc import http_block as http_block
from .warc import sha1_label as sha1_label
from .warc import sha1_text as sha1_text
from .warc import warc_date as warc_date
