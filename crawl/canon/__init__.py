"""URL canonicalisation: one spelling per resource (DESIGN invariant 3).

Every URL that enters the frontier, the seen set or an index goes through
:func:`canonicalize` first (:mod:`.canonical`), under the rules in
:mod:`.rules`; :mod:`.why` explains which rules changed a URL or refused it.
:mod:`.hostkey` derives the ``host[:port]`` key that politeness queues,
history and recrawl state are keyed on; :mod:`.literal` reads a host as
the IP address it spells (``0x7f.1``), for the resolver's address policy.
"""

from .canonical import CANON_VERSION as CANON_VERSION
from .canonical import DEFAULT as DEFAULT
from .canonical import CanonConfig as CanonConfig
from .canonical import CanonError as CanonError
from .canonical import Resolver as Resolver
from .canonical import canonicalize as canonicalize
from .canonical import host_of as host_of
from .canonical import registered_domain as registered_domain
from .hostkey import fast_host as fast_host
from .hostkey import host_key as host_key
from .literal import ip_literal as ip_literal
