"""The address policy sees through IPv6 forms of IPv4 and through IPv4 spellings.

An IPv6 address that a tunnel or translator turns back into IPv4 (6to4,
Teredo, NAT64, IPv4-mapped, IPv4-compatible) is judged by the IPv4 it
carries; a literal host such as ``0x7f.0.0.1`` is read as the URL parser
reads it, so with ``--resolve-file`` it is ``private-address``, not
``dns-error``.

Only 127.0.0.1 is ever dialled here: an IPv6 form is fetched only after
the test has checked that the policy refuses it, so a broken policy fails
an assertion instead of sending a packet anywhere.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from ipaddress import IPv4Address, IPv6Address
from pathlib import Path

import pytest
import trio

from crawl.canon import CanonError, ip_literal
from crawl.net import AddressPolicy, DnsError, Resolver
from crawl.net.carried import carried_ipv4, rfc6052_ipv4

sys.path.insert(0, str(Path(__file__).parent.parent))
from fetchutil import run_batch  # noqa: E402
from hostile import Server, hosts_text  # noqa: E402

# IPv6 spellings of special IPv4 addresses: (address, what it carries).
EMBEDDED_SPECIAL = [
    ("2002:7f00:1::1", "127.0.0.1"),  # 6to4
    ("2002:a9fe:a9fe::", "169.254.169.254"),
    ("2002:a00:1::", "10.0.0.1"),
    ("2002:c0a8:101:1::1", "192.168.1.1"),
    ("2002::", "0.0.0.0"),
    ("2001:0:4136:e378:8000:63bf:80ff:fffe", "127.0.0.1"),  # Teredo: client inverted
    ("2001:0:4136:e378:8000:63bf:5601:5601", "169.254.169.254"),
    ("2001:0:7f00:1:8000:63bf:f7f7:f7f7", "127.0.0.1"),  # Teredo server
    ("64:ff9b::7f00:1", "127.0.0.1"),  # NAT64 well-known prefix
    ("64:ff9b::a9fe:a9fe", "169.254.169.254"),
    ("64:ff9b::10.1.2.3", "10.1.2.3"),
    ("64:ff9b:1::7f00:1", "127.0.0.1"),  # NAT64 local-use, /96 position
    ("64:ff9b:1:7f00:0:100:808:808", "127.0.0.1"),  # /48 position, public at /96
    ("64:ff9b:1:7f:0:1:808:808", "127.0.0.1"),  # /56 position
    ("64:ff9b:1:0:7f:0:100:808", "127.0.0.1"),  # /64 position
    ("::ffff:127.0.0.1", "127.0.0.1"),  # IPv4-mapped
    ("::ffff:a9fe:a9fe", "169.254.169.254"),
    ("::127.0.0.1", "127.0.0.1"),  # IPv4-compatible
    ("::a9fe:a9fe", "169.254.169.254"),
    ("::10.0.0.1", "10.0.0.1"),
]

# The same forms carrying public addresses: NAT64 is how an IPv6-only
# network reaches IPv4 sites, so these must still be fetched.
EMBEDDED_PUBLIC = [
    "2002:808:808::1", "2001:0:4136:e378:8000:63bf:f7f7:f7f7", "64:ff9b::808:808",
    "64:ff9b::5db8:d822", "64:ff9b:1:808:8:800:808:808", "::ffff:8.8.8.8", "::8.8.8.8",
]


@pytest.mark.parametrize(("addr", "v4"), EMBEDDED_SPECIAL)
def test_ipv6_forms_of_special_ipv4_are_refused(addr: str, v4: str) -> None:
    assert IPv4Address(v4) in carried_ipv4(IPv6Address(addr))
    assert not AddressPolicy().permits(addr)
    assert AddressPolicy(allow_private=True).permits(addr)


@pytest.mark.parametrize("addr", EMBEDDED_PUBLIC)
def test_ipv6_forms_of_public_ipv4_are_allowed(addr: str) -> None:
    assert carried_ipv4(IPv6Address(addr))
    assert AddressPolicy().permits(addr)


@pytest.mark.parametrize("addr", ["::1", "::", "fe80::1", "fc00::1", "ff02::1", "2001:db8::1"])
def test_ipv6_special_without_ipv4_stays_refused(addr: str) -> None:
    assert not AddressPolicy().permits(addr)


def test_local_use_nat64_needs_every_rfc6052_position_public() -> None:
    """The /96 form with a zero subnet reads 0.0.0.0 at /48: refused, as
    nothing says which prefix length the translator uses."""
    assert not AddressPolicy().permits("64:ff9b:1::808:808")
    assert AddressPolicy.from_cidrs(["64:ff9b:1::/48"]).permits("64:ff9b:1::808:808")


def test_allowed_ranges_apply_to_the_carried_ipv4() -> None:
    lo = AddressPolicy.from_cidrs(["127.0.0.0/8"])
    assert lo.permits("::ffff:127.0.0.1") and lo.permits("2002:7f00:1::1") and lo.permits("64:ff9b::7f00:1")
    assert not lo.permits("2002:a9fe:a9fe::")
    staging = AddressPolicy.from_cidrs(["10.1.0.0/16"])
    assert staging.permits("::ffff:10.1.2.3") and not staging.permits("::ffff:10.2.0.1")
    assert not staging.permits("2002:7f00:1::1")
    # Teredo: both the server and the client must pass
    assert not lo.permits("2001:0:7f00:1:8000:63bf:5601:5601")


@pytest.mark.parametrize(("addr", "length"), [  # RFC 6052 2.4, the table of examples
    ("2001:db8:c000:221::", 32),
    ("2001:db8:1c0:2:21::", 40),
    ("2001:db8:122:c000:2:2100::", 48),
    ("2001:db8:122:3c0:0:221::", 56),
    ("2001:db8:122:344:c0:2:2100:0", 64),
    ("2001:db8:122:344::192.0.2.33", 96),
])
def test_rfc6052_positions(addr: str, length: int) -> None:
    assert IPv4Address(rfc6052_ipv4(int(IPv6Address(addr)), length)) == IPv4Address("192.0.2.33")


# Spellings of 127.0.0.1 that WHATWG URL parsing reads as that address.
LOOPBACK_SPELLINGS = ["127.0.0.1", "0x7f.0.0.1", "0X7F.0.0.1", "0x7f.1", "2130706433", "127.1",
                      "127.0.1", "0177.0.0.1", "0x7f000001", "017700000001", "127.0.0.1.",
                      "%31%32%37.0.0.1", "１２７.０.０.１", "0x7F.0x0.0x0.0x1"]


@pytest.mark.parametrize("host", LOOPBACK_SPELLINGS)
def test_ipv4_spellings_resolve_as_literals_without_a_lookup(host: str) -> None:
    r = Resolver({}, fallback=False)  # what --resolve-file gives: no system DNS
    got = trio.run(r.resolve, host)
    assert got.source == "literal" and got.addresses == ["127.0.0.1"]
    assert r.lookups == 0
    assert not AddressPolicy().permits(got.address)


@pytest.mark.parametrize(("host", "want"), [
    ("0xa9.0xfe.0xa9.0xfe", "169.254.169.254"), ("2852039166", "169.254.169.254"),
    ("10.1", "10.0.0.1"), ("0", "0.0.0.0"), ("[::ffff:127.0.0.1]", "::ffff:7f00:1"),
    ("2002:7F00:1::1", "2002:7f00:1::1"), ("[0:0:0:0:0:0:0:1]", "::1"),
])
def test_other_literals(host: str, want: str) -> None:
    got = trio.run(Resolver({}, fallback=False).resolve, host)
    assert got.source == "literal" and got.addresses == [want]


def test_a_literal_is_never_looked_up_in_the_override_file() -> None:
    r = Resolver({"0x7f.1": ["8.8.8.8"], "a.test": ["127.0.0.9"]}, fallback=False)
    assert trio.run(r.resolve, "0x7f.1").addresses == ["127.0.0.1"]
    assert trio.run(r.resolve, "a.test").source == "override"
    assert ip_literal("a.test") is None and ip_literal("bücher.de") is None


@pytest.mark.parametrize("host", ["1.2.3.256", "1.2.3.4.5", "a.0x1", "example.1", "[::g]", "0x100000000"])
def test_hosts_that_end_in_a_number_but_are_no_address_fail_clearly(host: str) -> None:
    with pytest.raises(CanonError):
        ip_literal(host)
    with pytest.raises(DnsError, match="neither a host name nor an IP address"):
        trio.run(Resolver({}, fallback=False).resolve, host)


# -- through the fetcher, against a real loopback server -----------------------------

@pytest.fixture(scope="module")
def srv() -> Iterator[Server]:
    s = Server().start()
    yield s
    s.stop()


def test_fetch_of_ipv4_spellings_is_private_address_with_a_resolve_file(srv: Server, tmp_path: Path) -> None:
    urls = [srv.url(h, "/ok") for h in LOOPBACK_SPELLINGS]
    n = len(srv.state.log)
    res = run_batch(tmp_path / "D", urls, hosts_text(), allow_private=False)
    assert [r["outcome"] for r in res] == ["private-address"] * len(urls), res
    assert {r["ip"] for r in res} == {"127.0.0.1"}
    assert len(srv.state.log) == n  # not a byte sent
    # allowed, the same spellings reach the server: they were read as 127.0.0.1
    ok = run_batch(tmp_path / "E", urls[:4], hosts_text(), allow_private=False, cidrs=("127.0.0.0/8",))
    assert [r["outcome"] for r in ok] == ["ok"] * 4, ok


def test_fetch_of_names_and_literals_that_carry_private_ipv4(srv: Server, tmp_path: Path) -> None:
    forms = [a for a, _ in EMBEDDED_SPECIAL]
    policy = AddressPolicy()
    assert not any(policy.permits(a) for a in forms)  # guard: nothing below may dial them
    hosts = "".join(f"{a} n{i}.test\n" for i, a in enumerate(forms))
    port = srv.port
    urls = [f"http://n{i}.test:{port}/ok" for i in range(len(forms))]  # resolved addresses
    urls += [f"http://[{a}]:{port}/ok" for a in forms]  # literal hosts
    res = run_batch(tmp_path / "D", urls, hosts, allow_private=False)
    assert [r["outcome"] for r in res] == ["private-address"] * len(urls), res
