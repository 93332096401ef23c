"""Bytes of a page to text: the charset, the visible text, and the compiled hot loops.

:mod:`.charset` decides how a body decodes (header, BOM, meta, sniffing);
:mod:`.extract` cuts a page into text blocks (what dedupe fingerprints);
:mod:`.compiled` says whether the C loops (``_compiled.c``, optional at
install) run, or the Python ones that define what they compute. Used by
both parse and dedupe, so it lives below both.
"""

from . import charset as charset
from . import compiled as compiled
from .charset import header_charset as header_charset
from .extract import Doc as Doc
from .extract import analyse as analyse
from .extract import fold as fold
