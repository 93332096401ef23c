"""URL canonicalisation: the one versioned function every stage agrees on.

Two URLs that name the same page must become one string before the seen
check (DESIGN invariant 3), or the crawl fetches a page once per spelling.
Canonicalisation is the biggest lever on the duplicate rate, so it lives
here as an ordered, reviewable list of rules, and :data:`CANON_VERSION`
changes whenever a rule does (it travels in every record as ``canon_v``).

Steps, in order:

1. WHATWG parsing (``ada-url``): resolves against the base, lowercases scheme
   and host, converts IDNs to ASCII (UTS #46), normalises IPv4 forms such as
   ``0x7f.1`` to dotted decimal and IPv6 to its compressed form, drops the
   default port, resolves dot segments (also ``%2e``), makes an empty path
   ``/`` and percent-encodes what must be encoded.
2. Scheme check: only ``http`` and ``https`` are crawled.
3. :data:`RULES`, the policy part: small functions in order, kept with
   their lists and :class:`CanonConfig` in :mod:`crawl.canon.rules`.
4. Host check (DNS-shaped names only) and the length limit.

The rules are policy, not parsing: dropping tracking parameters and sorting
the query is a heuristic that merges two distinct pages on the rare site
where parameter order matters, which is why it is all in one place.

**Parser choice.** ``ada-url`` (the C++ WHATWG parser) through its C API:
one parse, the href and the component offsets per URL, no Python URL
object. The C API is reached through the package's own cffi module
(``ada_url._ada_wrapper``), which the tests exercise on every rule, so an
ada-url upgrade that moved it would fail loudly, not silently. Measured by ``scripts/bench_canon.py`` on 100k realistic URLs (2
shared cores): ada C API 1.7 us/URL, ada's Python ``URL`` class 4.9 us/URL,
``urllib.parse.urlsplit`` + ``geturl`` 5.3 us/URL although it only splits
(no IDNA, dot segments, IPv4 forms, percent-encoding or base resolution,
all of which would then be ours to write in Python). So ada is both the
conformant and the fast choice. The whole function runs at ~3.4x
``w3lib.url.canonicalize_url`` (README, "Canonicalisation").

**Fingerprint.** ``fp`` is XXH3-64 (xxhash, seed 0) of the canonical URL's
UTF-8 bytes (it is ASCII): fast, stable across platforms and versions, and
64 bits is what the seen set stores. Not cryptographic: do not use it where
an adversary choosing URLs to collide would matter.

**SURT.** The key for host-ordered storage, in the CDX form: scheme and
``//`` dropped, host labels reversed and comma-joined, then ``)`` and the
path and query: ``http://www.example.com:8080/a?b`` ->
``com,example,www:8080)/a?b``. IP addresses are not reversed. Unlike the
Internet Archive's lossy ``surt`` canonicaliser we do not strip ``www`` or
lowercase the path: the key stays one-to-one with the canonical URL
(up to http/https).
"""

from __future__ import annotations

import re
from typing import Any, NamedTuple

import xxhash
from ada_url._ada_wrapper import ffi, lib

from .rules import (
    DEFAULT,
    PCT_FIXABLE,
    RULES,
    SESSION_PARAMS,
    SESSION_PREFIXES,
    TRACKING_PARAMS,
    TRACKING_PREFIXES,
    CanonConfig,
    _Parts,
)
from .why import parse_notes, refusal

CANON_VERSION = 3
"""Bump when any rule, default list or output form changes.

2: the percent rule no longer decodes a hex digit that would complete a
stray ``%`` (``%4%44`` had become ``%4D``, then ``M``).
"""


class CanonError(ValueError):
    """A URL that cannot be canonicalised; ``reason`` is a stable code.

    Codes: ``too-long``, ``not-unicode``, ``relative-without-base``,
    ``invalid-base``, ``unsupported-scheme``, ``invalid-host``,
    ``invalid-port``, ``invalid-url``. ``detail`` says it in words.
    """

    def __init__(self, reason: str, detail: str = "") -> None:
        super().__init__(f"{reason}: {detail}" if detail else reason)
        self.reason = reason
        self.detail = detail or reason


class Canonical(NamedTuple):
    """A canonical URL with its keys. ``host`` is the politeness key.

    Immutable; a NamedTuple rather than a frozen dataclass because it is
    built once per link on the hot path and is about five times cheaper to make.
    """

    url: str
    fp: int
    surt: str
    host: str

    @property
    def fp_hex(self) -> str:
        return f"{self.fp:016x}"


_new_canonical = tuple.__new__  # skips NamedTuple's Python-level __new__
_xxh3 = xxhash.xxh3_64_intdigest


_OMITTED = 0xFFFFFFFF
# Bound once: attribute lookups on the cffi lib cost ~10% of a parse.
_ada_parse, _ada_is_valid, _ada_free = lib.ada_parse, lib.ada_is_valid, lib.ada_free
_ada_get_href, _ada_get_components, _unpack = lib.ada_get_href, lib.ada_get_components, ffi.unpack
_Offsets = tuple[str, int, int, int, int, int]


def _parse(text: str, base: str | None) -> _Offsets:
    """WHATWG-parse ``text``: its href and ada's component offsets, or raise.

    Offsets (host_start, host_end, pathname_start, search_start, hash_start)
    index the href; ada's host_start points at the '@' when there is
    userinfo, and search/hash_start are ``_OMITTED`` when absent.
    """
    try:
        raw = text.encode()
    except UnicodeEncodeError:
        raise CanonError("not-unicode", "contains unpaired surrogates") from None
    if base is None:
        u = _ada_parse(raw, len(raw))
    else:
        try:
            braw = base.encode()
        except UnicodeEncodeError:
            raise CanonError("invalid-base", "base contains unpaired surrogates") from None
        u = lib.ada_parse_with_base(raw, len(raw), braw, len(braw))
    try:
        if not _ada_is_valid(u):
            raise CanonError(*refusal(text, base))
        s = _ada_get_href(u)
        href = _unpack(s.data, s.length).decode()
        if not href.startswith(("http:", "https:")):
            scheme = href.partition(":")[0]
            raise CanonError("unsupported-scheme", f"scheme {scheme[:40]!r} is not http or https")
        c = _ada_get_components(u)
        return href, c.host_start, c.host_end, c.pathname_start, c.search_start, c.hash_start
    finally:
        _ada_free(u)


def _parts(href: str, hs: int, he: int, ps: int, qs: int, fs: int) -> _Parts:
    p = _Parts()
    pe = 6 if href[4] == "s" else 5  # "https:" or "http:"
    p.scheme = href[: pe - 1]
    if href[hs] == "@":
        p.userinfo = href[pe + 2 : hs + 1]
        hs += 1
    else:
        p.userinfo = ""
    p.host = href[hs:he]
    p.port = href[he:ps]
    end = len(href) if fs == _OMITTED else fs
    if qs == _OMITTED:
        p.path = href[ps:end]
        p.query = None
    else:
        p.path = href[ps:qs]
        p.query = href[qs + 1 : end]
    p.fragment = None if fs == _OMITTED else href[fs + 1 :]
    p.reparse = False
    return p


_LABEL_RE = re.compile(r"[a-z0-9_](?:[a-z0-9_-]{0,61}[a-z0-9_])?\Z")


def _is_ip(host: str) -> bool:
    """After WHATWG parsing a host is an IP address exactly when it is in
    brackets (IPv6) or its last label is a number (the "ends in a number"
    rule sends it to the IPv4 parser, which normalised it)."""
    return host[:1] == "[" or host.rpartition(".")[2].isdigit()


def _check_host(host: str) -> None:
    """Only names DNS can resolve: WHATWG also allows ``a$b`` or ``a..b``."""
    if _is_ip(host):
        return
    if not host or len(host) > 253:
        raise CanonError("invalid-host", f"host {host[:100]!r} is empty or over 253 bytes")
    for label in host.split("."):
        if not _LABEL_RE.match(label):
            raise CanonError("invalid-host", f"host {host[:100]!r} has an invalid label "
                             f"{label[:70]!r} (letters, digits, '-', '_'; 1-63 bytes)")
        if label.startswith("xn--") and not _a_label_ok(label):
            raise CanonError("invalid-host", f"host {host[:100]!r} has a label {label!r} "
                             "that is not valid punycode for a Unicode name")


def _a_label_ok(label: str) -> bool:
    """RFC 5891 5.4, roughly: an A-label decodes to a printable non-ASCII name."""
    try:
        name = label[4:].encode().decode("punycode")
    except UnicodeError:
        return False
    return bool(name) and not name.isascii() and name.isprintable()


def canonicalize(
    url: str,
    base: str | None = None,
    config: CanonConfig = DEFAULT,
    *,
    trace: list[dict[str, Any]] | None = None,
) -> Canonical:
    """The canonical form of ``url`` (resolved against ``base`` if relative).

    Args:
        url: any text; a relative reference needs ``base``.
        base: absolute URL that relative references resolve against.
        config: the policy lists (tracking and session parameters, limits).
        trace: if a list is given, one ``{"rule", "before", "after"}`` dict is
            appended per step that changed the URL (``crawl canon --explain``).

    Raises:
        CanonError: the input is rejected; ``.reason`` is a stable code.
    """
    if len(url) > 4 * config.max_length:  # don't parse megabytes to reject them
        raise CanonError("too-long", f"input is {len(url)} characters, over 4x the limit")
    href, hs, he, ps, qs, fs = _parse(url, base)
    if (trace is None and qs == _OMITTED and href[hs] != "@" and href[he - 1] != "."
            and ";" not in href and ("%" not in href or not PCT_FIXABLE.search(href))):
        # The common case, done fast: on a URL with no query, userinfo, ';',
        # trailing host dot or percent-escape to fix, the only rule that can
        # fire is the fragment's. Keep in step with RULES (a property test
        # compares this path with the full rule run).
        if fs != _OMITTED:
            href = href[:fs]
        host = href[hs:he]
        host_key = _HOST_KEYS.get(host) or _host_key(host)
        if len(href) > config.max_length:
            raise _too_long(href, config)
        return _new_canonical(Canonical, (
            href, _xxh3(href.encode()), f"{host_key}{href[he:ps]}){href[ps:]}", href[hs:ps]))
    p = _parts(href, hs, he, ps, qs, fs)
    if trace is None:
        for _, rule in RULES:
            rule(p, config)
    else:
        if href != url:
            notes = parse_notes(url, base, p.host, p.port, _is_ip(p.host))
            trace.append({"rule": "whatwg-parse", "before": url, "after": href, "notes": notes})
        for name, rule in RULES:
            before = p.render()
            rule(p, config)
            after = p.render()
            if after != before:
                trace.append({"rule": name, "before": before, "after": after})
    out = p.render()
    if p.reparse:
        return canonicalize(out, None, config, trace=trace)
    host_key = _HOST_KEYS.get(p.host) or _host_key(p.host)
    if len(out) > config.max_length:
        raise _too_long(out, config)
    host = p.host + p.port
    return _new_canonical(Canonical, (
        out, _xxh3(out.encode()), f"{host_key}{p.port}){out[len(p.scheme) + 3 + len(p.userinfo) + len(host):]}", host))


def _too_long(url: str, config: CanonConfig) -> CanonError:
    return CanonError("too-long", f"canonical URL is {len(url)} bytes, "
                      f"over the {config.max_length}-byte limit")


def fingerprint(canonical_url: str) -> int:
    """XXH3-64 of a canonical URL: the seen set's key."""
    return xxhash.xxh3_64_intdigest(canonical_url.encode())


_HOST_KEYS: dict[str, str] = {}  # checked host -> its SURT form; links repeat hosts


def _host_key(host: str) -> str:
    key = _HOST_KEYS.get(host)
    if key is None:
        _check_host(host)
        key = host if _is_ip(host) else ",".join(reversed(host.split(".")))  # IPs stay as they are
        if len(_HOST_KEYS) >= 1 << 16:  # bounded: DESIGN invariant 5
            _HOST_KEYS.clear()
        _HOST_KEYS[host] = key
    return key


def surt(url: str) -> str:
    """The SURT key of a URL (canonicalised first)."""
    return canonicalize(url).surt


def host_of(url: str) -> str:
    """``host[:port]`` of an http(s) URL, lowercase, default port dropped.

    The politeness key. Cheaper than :func:`canonicalize` (no policy rules).
    """
    href, hs, he, ps, _, _ = _parse(url, None)
    if href[hs] == "@":
        hs += 1
    host = href[hs:he].rstrip(".")
    _host_key(host)
    return host + href[he:ps]


# -- many links against one base -------------------------------------------------
# Plain characters only: what WHATWG parsing leaves as it is in a path and a
# query, less anything a rule looks at (';' session paths, '%' escapes) or
# that parses differently when relative (':' schemes, '\\', leading '//').
_PLAIN_PATH = re.compile(r"[A-Za-z0-9\-._~!$&()*+,=@/]*\Z")
_PLAIN = re.compile(r"[A-Za-z0-9\-._~!$&()*+,=@/]*(?:\?[A-Za-z0-9\-._~!$&()*+,=@/?:;]*)?\Z")


class Resolver:
    """``canonicalize(href, base, config)`` for the many links of one page.

    Same results and the same errors, faster for the common shapes: an href
    that is a path from the root (``/a/b?q``), a path relative to the base's
    directory without dot segments (``b.html``) or an absolute URL on the
    base's own origin, written in plain characters (letters, digits and
    ``-._~!$&()*+,=@/``, ``?:;`` in the query), is resolved by joining
    strings: WHATWG parsing would change nothing in it, and of the policy
    rules only the fragment, the query parameters' and the sort can apply,
    which run here as they do in :data:`RULES`. Everything else, and any
    query a tracking or session parameter might be in, goes through
    :func:`canonicalize`. Measured by scripts/bench_parse.py: ~5x faster
    on such hrefs. tests/parse/test_parse_canon.py checks that both agree.
    """

    __slots__ = ("base", "config", "_origin", "_origin_slash", "_dir", "_host", "_surt_head",
                 "_limit", "_probe", "_scheme")

    def __init__(self, base: str, config: CanonConfig = DEFAULT) -> None:
        self.base = base
        self.config = config
        self._origin: str | None = None  # None: no fast path for this base
        self._dir: str | None = None
        self._limit = config.max_length
        self._probe = _probe(config)
        try:
            href, hs, he, ps, qs, fs = _parse(base, None)
            host = href[hs:he]
            if href[hs] == "@" or host.endswith("."):
                return  # userinfo or a root dot to strip: leave it to the rules
            key = _host_key(host)
        except CanonError:
            return
        self._origin = href[:ps]
        self._scheme = href[: href.index(":") + 1]
        self._origin_slash = href[:ps] + "/"
        self._host = href[hs:ps]
        self._surt_head = f"{key}{href[he:ps]})"
        end = min(qs, fs, len(href))
        directory = href[ps : href.rindex("/", ps, end) + 1]
        if _PLAIN_PATH.match(directory) and "/." not in directory:
            self._dir = directory

    def __call__(self, href: str) -> Canonical:
        """Like ``canonicalize(href, self.base, self.config)``."""
        origin = self._origin
        if origin is None or not href or len(href) > self._limit:
            return canonicalize(href, self.base, self.config)
        host, surt_head = self._host, self._surt_head
        c = href[0]
        if c == "/" and href[1:2] != "/":
            rest = href
        elif c == "h" and href.startswith(self._origin_slash):
            rest = href[len(origin):]
        elif c == "/" or (c == "h" and href.startswith(("http://", "https://"))):
            # another origin, or a scheme-relative one
            if c == "/":
                start, prefix = 2, self._scheme
            else:
                start, prefix = href.index("//") + 2, ""
            slash = href.find("/", start)
            if slash <= start:
                return canonicalize(href, self.base, self.config)
            known = _ORIGINS.get(prefix + href[:slash]) or _origin(prefix + href[:slash])
            if not known[0]:
                return canonicalize(href, self.base, self.config)
            origin, host, surt_head = known
            rest = href[slash:]
        elif self._dir is not None and c not in ".?#":
            rest = self._dir + href
        elif c == "." and self._dir is not None:
            joined = _up(self._dir, href)
            if joined is None:
                return canonicalize(href, self.base, self.config)
            rest = joined
        else:
            return canonicalize(href, self.base, self.config)
        if "#" in rest:
            rest, _, fragment = rest.partition("#")
            if not fragment.isascii():  # dropped, but canonicalize refuses surrogates
                return canonicalize(href, self.base, self.config)
        if not _PLAIN.match(rest) or "/." in rest:
            return canonicalize(href, self.base, self.config)
        q = rest.find("?")
        if q >= 0:
            query = rest[q + 1 :]
            if not query:  # the empty-query rule
                rest = rest[:q]
            elif self._probe.search(query.lower()):  # a parameter to strip, maybe
                return canonicalize(href, self.base, self.config)
            elif "&" in query:  # the empty-query and sort-query rules
                pairs = [x for x in query.split("&") if x]
                if self.config.sort_query:
                    pairs.sort(key=_param_name)
                query = "&".join(pairs)
                rest = f"{rest[:q]}?{query}" if query else rest[:q]
        url = origin + rest
        if len(url) > self._limit:
            return canonicalize(href, self.base, self.config)
        return _new_canonical(Canonical, (url, _xxh3(url.encode()), surt_head + rest, host))


def _param_name(pair: str) -> str:
    return pair.partition("=")[0]


_AUTHORITY = re.compile(r"[A-Za-z0-9.\-]+(?::[0-9]*)?\Z")
# An origin as written ("http://Example.com:80") -> (canonical origin,
# host[:port], SURT head), or ("", "", "") when it needs the full rules. Bounded.
_ORIGINS: dict[str, tuple[str, str, str]] = {}


def _origin(written: str) -> tuple[str, str, str]:
    """What ``written`` + "/" canonicalises to, as the fast path's origin."""
    known = ("", "", "")
    if _AUTHORITY.match(written, written.index("//") + 2):
        try:
            href, hs, he, ps, qs, fs = _parse(written + "/", None)
            host = href[hs:he]
            if (href[hs] != "@" and not host.endswith(".") and qs == fs == _OMITTED
                    and href[ps:] == "/"):
                known = (href[:ps], href[hs:ps], f"{_host_key(host)}{href[he:ps]})")
        except CanonError:
            pass
    if len(_ORIGINS) >= 4096:
        _ORIGINS.clear()
    _ORIGINS[written] = known
    return known


def _up(directory: str, href: str) -> str | None:
    """``href`` starting with ``./`` or ``../`` joined to ``directory``; None if odd."""
    while True:
        if href.startswith("../"):
            href = href[3:]
            if directory != "/":
                directory = directory[: directory.rindex("/", 0, len(directory) - 1) + 1]
        elif href.startswith("./"):
            href = href[2:]
        else:
            break
    if not href or href[0] in "./?#":
        return None
    return directory + href


# id(config) -> (config, probe): by identity, as hashing a config costs more
# than a page's worth of links; the config is kept so its id stays its own.
_PROBES: dict[int, tuple[CanonConfig, re.Pattern[str]]] = {}


def _probe(config: CanonConfig) -> re.Pattern[str]:
    """The tracking and session rules' probes in one (run on the lowered query)."""
    known = _PROBES.get(id(config))
    if known is None or known[0] is not config:
        if len(_PROBES) >= 64:
            _PROBES.clear()
        known = _PROBES[id(config)] = (config, re.compile(
            f"{config._tracking_query_re.pattern}|{config._session_query_re.pattern}"))
    return known[1]


_extractor: Any = None
_IP4_RE = re.compile(r"\d+\.\d+\.\d+\.\d+\Z")


def registered_domain(host: str) -> str:
    """The registrable domain (``www.example.co.uk`` -> ``example.co.uk``).

    Uses tldextract's bundled Public Suffix List snapshot, never the network.
    An IP address is its own domain; a name under an unknown suffix (such as
    ``.test``) keeps its last two labels.
    """
    global _extractor
    host = host.lower()
    if host.startswith("["):
        return host.partition("]")[0] + "]"
    host = host.partition(":")[0].rstrip(".")
    if not host or _IP4_RE.match(host):
        return host
    if _extractor is None:
        import tldextract

        _extractor = tldextract.TLDExtract(suffix_list_urls=(), cache_dir=None)
    ext = _extractor(host)
    if ext.suffix and ext.domain:
        return f"{ext.domain}.{ext.suffix}"
    return ".".join(host.split(".")[-2:])


__all__ = [
    "CANON_VERSION", "DEFAULT", "RULES", "SESSION_PARAMS", "SESSION_PREFIXES",
    "TRACKING_PARAMS", "TRACKING_PREFIXES",
    "CanonConfig", "CanonError", "Canonical", "Resolver", "canonicalize", "fingerprint",
    "host_of", "registered_domain", "surt",
]
