"""The IPv4 addresses an IPv6 address carries, so the policy can judge those.

Tunnels and translators turn some IPv6 addresses back into IPv4 ones: a
6to4 relay sends ``2002:7f00:1::1`` to 127.0.0.1, a NAT64 gateway sends
``64:ff9b::a9fe:a9fe`` to the cloud metadata service at 169.254.169.254.
Python's :mod:`ipaddress` classifies such an address by its IPv6 range
only, and not the same way in every version (3.11 calls all of 2002::/16
global, 3.12.4 and 3.13 none of it), so a page could name an internal IPv4
service through IPv6 and pass the policy. The policy asks here instead.
"""

from __future__ import annotations

from ipaddress import IPv4Address, IPv6Address

_V4 = 0xFFFFFFFF
_WKP = 0x0064FF9B << 64  # 64:ff9b::/96 (RFC 6052), as the top 96 bits
_LOCAL = 0x0064FF9B0001  # 64:ff9b:1::/48 (RFC 8215), as the top 48 bits


def carried_ipv4(ip: IPv6Address) -> tuple[IPv4Address, ...]:
    """Every IPv4 address ``ip`` can stand for; empty when it carries none.

    IPv4-mapped ``::ffff:0:0/96`` and IPv4-compatible ``::/96`` (but ``::``
    and ``::1``, which are themselves) carry the last 32 bits; 6to4
    ``2002::/16`` bits 16-47; Teredo ``2001::/32`` its server (bits 32-63)
    and its client (the last 32 bits, inverted); NAT64's well-known prefix
    ``64:ff9b::/96`` the last 32 bits. The local-use prefix
    ``64:ff9b:1::/48`` may be used at any RFC 6052 prefix length from 48
    up, and nothing in the address says which, so it stands for the IPv4
    at each of those positions (/48, /56, /64 and /96).
    """
    n = int(ip)
    top96 = n >> 32
    if top96 == 0xFFFF or (top96 == 0 and n > 1):
        return (IPv4Address(n & _V4),)
    if n >> 112 == 0x2002:
        return (IPv4Address((n >> 80) & _V4),)
    if n >> 96 == 0x20010000:
        return (IPv4Address((n >> 64) & _V4), IPv4Address(~n & _V4))
    if top96 == _WKP:
        return (IPv4Address(n & _V4),)
    if n >> 80 == _LOCAL:
        return tuple(IPv4Address(rfc6052_ipv4(n, length)) for length in (48, 56, 64, 96))
    return ()


def rfc6052_ipv4(n: int, prefix_length: int) -> int:
    """The IPv4 address in IPv6 address ``n`` under a prefix of that length.

    RFC 6052 2.2: the 32 bits follow the prefix, skipping bits 64-71 (the
    "u" octet, always zero) when they straddle it; at /96 they are the last
    32 bits.
    """
    if prefix_length == 96:
        return n & _V4
    if prefix_length not in (32, 40, 48, 56, 64):
        raise ValueError(f"RFC 6052 allows prefix lengths 32, 40, 48, 56, 64 and 96, not {prefix_length}")
    squeezed = ((n >> 64) << 56) | (n & ((1 << 56) - 1))  # 120 bits: the u octet taken out
    return (squeezed >> (120 - prefix_length - 32)) & _V4
