"""The wire: names to addresses, connections, and one HTTP exchange under hard limits.

:mod:`.dns` resolves (override file, cache, system) and holds the address
policy (no private, loopback or link-local address unless allowed, nor an
IPv6 form of one: :mod:`.carried` finds the IPv4 an IPv6 address carries);
:mod:`.backend` dials only allowed addresses and pools connections per
origin; :mod:`.http1` speaks HTTP/1.1; :mod:`.exchange` runs one request
with connect, total, body and decoded-size limits and turns every failure
into a value. Both page fetches (:mod:`crawl.fetch`) and robots.txt
fetches (:mod:`crawl.robots`) go through here.
"""

from .backend import OriginPools as OriginPools
from .backend import make_transport as make_transport
from .dns import AddressPolicy as AddressPolicy
from .dns import DnsError as DnsError
from .dns import Resolver as Resolver
from .dns import load_hosts as load_hosts
from .request import Exchange as Exchange
from .request import Limits as Limits
from .request import exchange as exchange
