"""The address policy's edges that a mutation run found untested: what is not an
address, and an address that carries a zone id (``fe80::1%eth0``, as
getaddrinfo writes link-local results)."""

from __future__ import annotations

import pytest

from crawl.net import AddressPolicy


@pytest.mark.parametrize("policy", [AddressPolicy(), AddressPolicy(allow_private=True),
                                    AddressPolicy.from_cidrs(["0.0.0.0/0", "::/0"])])
@pytest.mark.parametrize("text", ["", "example.test", "999.1.1.1", "::g", "%eth0"])
def test_what_is_not_an_address_is_never_permitted(policy: AddressPolicy, text: str) -> None:
    assert not policy.permits(text)


def test_the_zone_id_is_cut_before_the_address_is_judged() -> None:
    # allowed or refused by the address alone, whatever follows the '%'
    assert AddressPolicy(allow_private=True).permits("fe80::1%eth0")
    assert AddressPolicy.from_cidrs(["fe80::/10"]).permits("fe80::1%2")
    assert not AddressPolicy().permits("fe80::1%eth0")
    assert AddressPolicy().permits("8.8.8.8%0") and AddressPolicy().permits("2606:4700::1%eth0")
    assert not AddressPolicy().permits("127.0.0.1%lo")
