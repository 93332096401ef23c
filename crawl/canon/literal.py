"""What a host names literally, read the way the canonicaliser reads it.

A URL that reaches the fetcher without going through :func:`canonicalize`
(``crawl fetch`` takes URLs as written) can spell an address as
``0x7f.0.0.1``, ``2130706433``, ``127.1`` or ``%31%32%37.0.0.1``. The
WHATWG host parser reads all of them as 127.0.0.1, glibc's resolver some of
them, an override file none: the same URL was ``private-address`` with
system DNS and ``dns-error`` with ``--resolve-file``. The resolver asks
here first, so every spelling of an address is judged as that address
before any lookup.
"""

from __future__ import annotations

from .canonical import CanonError, _is_ip, _parse

# Characters that would end the host inside "http://HOST/" (or start a port
# or userinfo): such a text is not one host, so it is no literal either.
_NOT_IN_HOST = frozenset("/\\?#@[] \t\r\n")


def ip_literal(host: str) -> str | None:
    """The IP address ``host`` spells, in its standard form, or None for a name.

    ``host`` is a URL's host as written (IPv6 with or without brackets, any
    case, a trailing dot allowed). IPv4 follows the WHATWG URL standard: a
    host whose last label is a number is an IPv4 address in decimal, octal
    or hex parts (``0x7f.1``, ``0177.0.0.1``, ``2130706433``), after
    percent-decoding and UTS #46 mapping (full-width digits). IPv6 comes
    back compressed and without brackets.

    Raises:
        CanonError: the host is no address and no name a URL may have:
            ``1.2.3.256`` and ``a.0x1`` end in a number but are not IPv4,
            ``[::g]`` is not IPv6.
    """
    if host[:1] == "[" or ":" in host:
        inner = host[1:-1] if host[:1] == "[" and host[-1:] == "]" else host
        if "[" in inner or "]" in inner or "/" in inner:
            raise CanonError("invalid-host", f"{host[:100]!r} is not an IPv6 address")
        href, hs, he, *_ = _parse(f"http://[{inner}]/", None)
        return href[hs + 1 : he - 1]
    if host.isascii() and "%" not in host:
        last = host[:-1] if host[-1:] == "." else host
        last = last.rpartition(".")[2]
        if not (last[-1:].isdigit() or last[:2].lower() == "0x"):
            return None  # no number at the end: a name (the common case, no parse)
    if _NOT_IN_HOST.intersection(host):
        return None
    href, hs, he, *_ = _parse(f"http://{host}/", None)
    name = href[hs:he]
    return name if _is_ip(name) else None
