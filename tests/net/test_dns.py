"""DNS: hosts-format overrides, the TTL cache, and the private-address policy.

No test here reaches the system resolver: every name comes from an override
or from a cache entry the test put there.
"""

from __future__ import annotations

import ipaddress
from pathlib import Path

import pytest
import trio
from hypothesis import given
from hypothesis import strategies as st

from crawl.core import UsageError, open_env
from crawl.net import dns


def test_parse_hosts_format() -> None:
    text = """
    # comment line
    127.0.0.2  a.test b.test   # trailing comment
    127.0.0.3\tc.test
    ::1 v6.test
    127.0.0.4 a.test
    """
    got = dns.parse_hosts(text)
    assert got["a.test"] == ["127.0.0.2", "127.0.0.4"]
    assert got["b.test"] == ["127.0.0.2"]
    assert got["c.test"] == ["127.0.0.3"]
    assert got["v6.test"] == ["::1"]


@pytest.mark.parametrize("line", ["127.0.0.1", "not-an-ip host.test", "999.1.1.1 x.test"])
def test_parse_hosts_rejects_bad_lines_with_line_number(line: str) -> None:
    with pytest.raises(UsageError, match="line 2"):
        dns.parse_hosts("127.0.0.1 ok.test\n" + line)


@given(st.dictionaries(st.from_regex(r"[a-z][a-z0-9-]{0,10}\.test", fullmatch=True),
                       st.ip_addresses(v=4), min_size=1, max_size=20))
def test_parse_hosts_round_trip(mapping: dict[str, ipaddress.IPv4Address]) -> None:
    text = "".join(f"{ip} {name}\n" for name, ip in mapping.items())
    assert dns.parse_hosts(text) == {n: [str(ip)] for n, ip in mapping.items()}


@pytest.mark.parametrize("addr", ["127.0.0.1", "10.1.2.3", "192.168.0.1", "172.16.5.5",
                                  "169.254.169.254", "::1", "fe80::1", "fc00::1", "0.0.0.0",
                                  "::ffff:127.0.0.1", "100.64.0.1", "224.0.0.1"])
def test_special_addresses_are_refused_by_default(addr: str) -> None:
    assert not dns.AddressPolicy().permits(addr)
    assert dns.AddressPolicy(allow_private=True).permits(addr)


@pytest.mark.parametrize("addr", ["93.184.216.34", "8.8.8.8", "2606:4700::1111"])
def test_public_addresses_are_allowed(addr: str) -> None:
    assert dns.AddressPolicy().permits(addr)


def test_cidr_allow_list() -> None:
    pol = dns.AddressPolicy.from_cidrs(["10.1.0.0/16", "127.0.0.2/32"])
    assert pol.permits("10.1.200.3") and pol.permits("127.0.0.2")
    assert not pol.permits("10.2.0.1") and not pol.permits("127.0.0.1")
    with pytest.raises(UsageError):
        dns.AddressPolicy.from_cidrs(["10.0.0.0/99"])


def test_override_and_literals_need_no_lookup() -> None:
    r = dns.Resolver({"a.test": ["127.0.0.9"]}, fallback=False)

    async def main() -> None:
        got = await r.resolve("A.Test.")
        assert got.addresses == ["127.0.0.9"] and got.source == "override"
        lit = await r.resolve("127.0.0.5")
        assert lit.source == "literal"
        assert (await r.resolve("[::1]")).address == "::1"
        with pytest.raises(dns.DnsError, match="not in the resolve file"):
            await r.resolve("elsewhere.test")

    trio.run(main)
    assert r.lookups == 0


def test_cache_ttl_and_persistence(tmp_path: Path) -> None:
    now = [1000.0]
    env = open_env(tmp_path / "fs")
    r = dns.Resolver({}, fallback=False, env=env, clock=lambda: now[0])
    # a system answer cached an hour ago would look like this
    r._store("cached.test", dns._Entry(["127.0.0.7"], now[0] + dns.DEFAULT_TTL))

    async def resolve(res: dns.Resolver, name: str) -> dns.Resolution:
        return await res.resolve(name)

    assert trio.run(resolve, r, "cached.test").source == "cache"
    # a second resolver on the same crawl directory sees the persisted entry
    r2 = dns.Resolver({}, fallback=False, env=env, clock=lambda: now[0] + 10)
    assert trio.run(resolve, r2, "cached.test").addresses == ["127.0.0.7"]
    now[0] += dns.DEFAULT_TTL + 1  # expired: with no fallback it is now an error
    with pytest.raises(dns.DnsError):
        trio.run(resolve, r, "cached.test")
    assert dns.DEFAULT_TTL >= 3600


def test_load_hosts_missing_file(tmp_path: Path) -> None:
    with pytest.raises(UsageError, match="cannot read --resolve-file"):
        dns.load_hosts(tmp_path / "nope")


@pytest.mark.parametrize(("addr", "special"), [
    ("2002:a00:1::1", True),  # 6to4 of 10.0.0.1: special through the address it carries
    ("2002:7f00:1::1", True),  # 6to4 of 127.0.0.1
    ("::ffff:8.8.8.8", False),  # IPv4-mapped public address: as public as the address itself
    ("::ffff:10.0.0.1", True),
])
def test_addresses_that_carry_ipv4_are_judged_by_it(addr: str, special: bool) -> None:
    assert dns.is_special(ipaddress.ip_address(addr)) is special


@pytest.mark.parametrize("cidrs", [(), ("10.1.0.0/16",)])
def test_a_carried_public_address_passes_whatever_else_is_allowed(cidrs: tuple[str, ...]) -> None:
    policy = dns.AddressPolicy.from_cidrs(cidrs)
    assert policy.permits("::ffff:8.8.8.8")
    assert not policy.permits("::ffff:10.2.0.1")
    assert policy.permits("::ffff:10.1.0.1") is bool(cidrs)


def test_an_allowed_range_written_with_host_bits_means_its_network() -> None:
    # operators write 10.1.2.3/16 for "that staging network": accepted as 10.1.0.0/16
    policy = dns.AddressPolicy.from_cidrs(["10.1.2.3/16"])
    assert policy.permits("10.1.200.7") and not policy.permits("10.2.0.1")
