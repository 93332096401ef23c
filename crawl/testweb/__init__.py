"""The synthetic test web: a deterministic web of many hosts on loopback.

Modules, by concern:

- ``generator``: the shape of the web (hosts, addresses, behaviours, pages,
  links, robots rules), a pure function of :class:`WebConfig`;
- ``shapes``: the records of that shape (Host, Link, PageSpec) and the seeded generator;
- ``rules``: robots rule matching (RFC 9309 precedence) and trap patterns;
- ``words``: the text pages are cut from, and the furniture every ordinary page carries;
- ``realistic``: ``--profile realistic``, pages shaped like documentation and news sites;
- ``content``: the bytes (HTML, robots.txt, sitemaps, PDF, PNG, gzip bomb);
- ``router``: request in, response out (behaviours, conditional requests);
- ``server``: the asyncio HTTP/1.1 server and the request log;
- ``manifest``: the ground truth and the files written to ``--out``;
- ``audit``: politeness checks of a request log against the manifest;
- ``serve``: :func:`serve`, what ``crawl testweb serve`` runs.
"""

from __future__ import annotations

from .generator import BEHAVIOURS as BEHAVIOURS
from .generator import ROBOTS_VARIANTS as ROBOTS_VARIANTS
from .generator import Web as Web
from .generator import WebConfig as WebConfig
from .router import ADMIN_HOST as ADMIN_HOST
from .router import Clock as Clock
