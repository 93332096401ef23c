"""The URL-seen set: has this canonical URL been admitted before?

:mod:`.seenset` is exact (LMDB) with a Bloom filter in front
(:mod:`.bloom`) so most new URLs cost no disk read; :mod:`.probe` asks it about one URL
without opening it for writing (``crawl why``).
"""

from .probe import seen_fp as seen_fp
from .seenset import SeenSet as SeenSet
from .seenset import canonical as canonical
