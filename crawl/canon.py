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
3. :data:`RULES`, the policy part (each a small function, see below).
4. Host check (DNS-shaped names only) and the length limit.

The rules are policy, not parsing: dropping tracking parameters and sorting
the query is a heuristic that merges two distinct pages on the rare site
where parameter order matters, which is why it is all in one place.

**Parser choice.** ``ada-url`` (C++ WHATWG parser, called through its C API
with one parse and one offsets read per URL) against ``urllib.parse`` on
the realistic URLs of ``scripts/bench_canon.py`` (2 shared cores):
ada parse+href 1.5 us/URL, ``urlsplit`` 1.9 us/URL. ``urlsplit`` only splits
(no IDNA, dot segments, IPv4 forms or percent-encoding), so doing those in
Python would cost several times more; ada gives WHATWG conformance and is
the faster of the two. Whole function: see README ("Canonicalisation").

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
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field, replace
from typing import Any, NamedTuple
from urllib.parse import urlsplit

import xxhash
from ada_url._ada_wrapper import ffi, lib

CANON_VERSION = 1
"""Bump when any rule, default list or output form changes."""

TRACKING_PARAMS = frozenset({
    "gclid", "fbclid", "mc_eid", "mc_cid", "msclkid", "dclid", "gbraid",
    "wbraid", "yclid", "igshid", "_hsenc", "_hsmi",
})
TRACKING_PREFIXES = ("utm_",)
SESSION_PARAMS = frozenset({"jsessionid", "phpsessid", "sid", "cfid", "cftoken"})
SESSION_PREFIXES = ("aspsessionid",)  # ASPSESSIONIDxxxxxxxx


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


@dataclass(frozen=True, slots=True)
class CanonConfig:
    """What the policy rules strip. Parameter names compare case-insensitively.

    ``strip_params``/``strip_prefixes`` are the tracking rule,
    ``session_params``/``session_prefixes`` the session rules (query and
    ``;name=`` path parameters). Use :meth:`with_strip` to add names.
    """

    max_length: int = 2048
    strip_params: frozenset[str] = TRACKING_PARAMS
    strip_prefixes: tuple[str, ...] = TRACKING_PREFIXES
    session_params: frozenset[str] = SESSION_PARAMS
    session_prefixes: tuple[str, ...] = SESSION_PREFIXES
    sort_query: bool = True
    strip_userinfo: bool = True
    # Compiled from the lists: a C-speed "anything to strip here?" probe.
    _session_path_re: re.Pattern[str] = field(init=False, repr=False, compare=False)
    _session_query_re: re.Pattern[str] = field(init=False, repr=False, compare=False)
    _tracking_query_re: re.Pattern[str] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        for attr in ("strip_params", "session_params"):
            object.__setattr__(self, attr, frozenset(n.lower() for n in getattr(self, attr)))
        for attr in ("strip_prefixes", "session_prefixes"):
            object.__setattr__(self, attr, tuple(n.lower() for n in getattr(self, attr)))
        session = _names_re(self.session_params, self.session_prefixes, "[^=/;&]*")
        tracking = _names_re(self.strip_params, self.strip_prefixes, "[^=&]*")
        object.__setattr__(self, "_session_path_re",
                           re.compile(f";{session}=[^/;]*", re.IGNORECASE))
        for attr, names in (("_session_query_re", session), ("_tracking_query_re", tracking)):
            object.__setattr__(self, attr, re.compile(f"(?:^|&){names}(?:=|&|$)"))

    def with_strip(self, names: Iterable[str]) -> CanonConfig:
        """Also strip these query parameters; ``name*`` strips a prefix."""
        exact = set(self.strip_params)
        prefixes = list(self.strip_prefixes)
        for name in names:
            name = name.strip().lower()
            if name.endswith("*"):
                prefixes.append(name[:-1])
            elif name:
                exact.add(name)
        return replace(self, strip_params=frozenset(exact), strip_prefixes=tuple(prefixes))


def _names_re(exact: Iterable[str], prefixes: Iterable[str], rest: str) -> str:
    alts = [re.escape(n) for n in sorted(exact)] + [re.escape(p) + rest for p in prefixes]
    return "(?:" + ("|".join(alts) or "(?!)") + ")"


DEFAULT = CanonConfig()


class Canonical(NamedTuple):
    """A canonical URL with its keys. ``host`` is the politeness key.

    Immutable; a NamedTuple rather than a frozen dataclass because it is
    built once per link on the hot path and is four times cheaper to make.
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


class _Parts:
    """The parsed URL the rules edit in place (special schemes only)."""

    __slots__ = ("scheme", "userinfo", "host", "port", "path", "query", "fragment",
                 "reparse")

    def render(self) -> str:
        url = f"{self.scheme}://{self.userinfo}{self.host}{self.port}{self.path}"
        if self.query is not None:
            url += "?" + self.query
        if self.fragment is not None:
            url += "#" + self.fragment
        return url


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
            raise _diagnose(text, base)
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


_SCHEME_RE = re.compile(r"[\x00-\x20]*([A-Za-z][A-Za-z0-9+.\-]*):")
_AUTHORITY_RE = re.compile(r"[/\\]*([^/\\?#]*)")


def _diagnose(text: str, base: str | None) -> CanonError:
    """Say why the WHATWG parser refused ``text`` (it only says no)."""
    m = _SCHEME_RE.match(text)
    if m is None:
        if base is None:
            return CanonError("relative-without-base", "relative URL and no base to resolve it")
        if not lib.ada_can_parse(base.encode(), len(base.encode())):
            return CanonError("invalid-base", f"base {base[:100]!r} is not a valid URL")
        return CanonError("invalid-url", "cannot be resolved against the base")
    scheme = m.group(1).lower()
    if scheme not in ("http", "https"):
        return CanonError("unsupported-scheme", f"scheme {scheme!r} is not http or https")
    authority = _AUTHORITY_RE.match(text, m.end()).group(1)  # type: ignore[union-attr]
    hostport = authority.rpartition("@")[2]
    host, colon, port = hostport.rpartition(":")
    if colon and "]" not in port and (not port.isascii() or not port.isdigit()
                                      or int(port) > 65535):
        return CanonError("invalid-port", f"port {port[:20]!r} is not a number up to 65535")
    return CanonError("invalid-host", f"host {hostport[:100]!r} is not a valid host name")


# -- the policy rules, in order; each edits _Parts in place --------------------

_UNRESERVED = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~")
_PCT_RE = re.compile(r"%([0-9A-Fa-f]{2})")


def _pct_fix(m: re.Match[str]) -> str:
    ch = chr(int(m.group(1), 16))
    return ch if ch in _UNRESERVED else "%" + m.group(1).upper()


def _pct(s: str) -> str:
    return _PCT_RE.sub(_pct_fix, s) if "%" in s else s


def _root_dot(p: _Parts, cfg: CanonConfig) -> None:
    """``example.com.`` is the same host as ``example.com`` (the DNS root)."""
    if p.host.endswith("."):
        p.host = p.host.rstrip(".")


def _userinfo(p: _Parts, cfg: CanonConfig) -> None:
    """Credentials are not part of a page's identity and must not reach logs."""
    if p.userinfo and cfg.strip_userinfo:
        p.userinfo = ""


def _fragment(p: _Parts, cfg: CanonConfig) -> None:
    """A fragment never reaches the server (RFC 9110 4.2.4 / RFC 3986 3.5)."""
    p.fragment = None


def _percent(p: _Parts, cfg: CanonConfig) -> None:
    """RFC 3986 6.2.2.1-2: upper-case escapes, decode unreserved ones only."""
    p.path = _pct(p.path)
    if p.query:
        p.query = _pct(p.query)
    if p.userinfo:
        p.userinfo = _pct(p.userinfo)


def _session_path(p: _Parts, cfg: CanonConfig) -> None:
    """``/a.jsp;jsessionid=XYZ`` names the same page as ``/a.jsp``."""
    if ";" in p.path:
        path = cfg._session_path_re.sub("", p.path)
        if path != p.path:
            p.path = path
            p.reparse = True  # "/..;jsessionid=1/" became a dot segment


def _drop_params(p: _Parts, probe: re.Pattern[str], exact: frozenset[str],
                 prefixes: tuple[str, ...]) -> None:
    q = p.query
    # The href is ASCII, so lower() keeps offsets; a case-sensitive search
    # on it is several times faster than re.IGNORECASE and usually misses.
    if q and probe.search(q.lower()):
        p.query = "&".join(
            x for x in q.split("&")
            if not ((n := x.partition("=")[0].lower()) in exact or n.startswith(prefixes))
        )


def _tracking(p: _Parts, cfg: CanonConfig) -> None:
    """utm_*, gclid, fbclid, ...: who sent the visitor, not which page."""
    _drop_params(p, cfg._tracking_query_re, cfg.strip_params, cfg.strip_prefixes)


def _session_query(p: _Parts, cfg: CanonConfig) -> None:
    """Session ids make one page look like infinitely many (a crawler trap)."""
    _drop_params(p, cfg._session_query_re, cfg.session_params, cfg.session_prefixes)


def _empty_query(p: _Parts, cfg: CanonConfig) -> None:
    """``?`` alone and empty ``&&`` pairs carry nothing."""
    q = p.query
    if q is not None:
        if "&&" in q or q.startswith("&") or q.endswith("&"):
            q = "&".join(x for x in q.split("&") if x)
        p.query = q or None


def _sort_query(p: _Parts, cfg: CanonConfig) -> None:
    """Order is not meaning on nearly every site; stable, so a=2&a=1 stays."""
    if cfg.sort_query and p.query and "&" in p.query:
        p.query = "&".join(sorted(p.query.split("&"), key=_param_name))


def _param_name(pair: str) -> str:
    return pair.partition("=")[0]


Rule = Callable[[_Parts, CanonConfig], None]
RULES: tuple[tuple[str, Rule], ...] = (
    ("root-dot", _root_dot),
    ("userinfo", _userinfo),
    ("fragment", _fragment),
    ("percent-encoding", _percent),
    ("session-path-params", _session_path),
    ("tracking-params", _tracking),
    ("session-params", _session_query),
    ("empty-query", _empty_query),
    ("sort-query", _sort_query),
)



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
            and "%" not in href and ";" not in href):
        # The common case, done fast: on a URL with no query, userinfo, '%',
        # ';' or trailing host dot, the only rule that can fire is the
        # fragment's. Keep in step with RULES (a property test compares
        # this path with the full rule run).
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
        _trace_parse(trace, url, base, href, p)
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
        out, _xxh3(out.encode()), f"{host_key}{p.port}){out[len(p.scheme) + 3 + len(host):]}", host))


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


def _trace_parse(trace: list[dict[str, Any]], url: str, base: str | None,
                 href: str, p: _Parts) -> None:
    """Say, for people, what the WHATWG parse changed (one step in ada)."""
    if href == url:
        return
    notes = []
    try:
        s = urlsplit(url.strip())
        raw_host, raw_port = s.hostname or "", s.port
    except ValueError:
        s, raw_host, raw_port = None, "", None
    if s is not None and not s.scheme:
        notes.append(f"resolved against base {base}")
    elif s is not None:
        m = _SCHEME_RE.match(url)
        if m and m.group(1) != m.group(1).lower():
            notes.append("scheme lowercased")
        netloc_host = s.netloc.rpartition("@")[2].rpartition(":")[0] or s.netloc
        if not raw_host.isascii():
            notes.append("host converted to IDNA (punycode)")
        elif _is_ip(p.host) and p.host[0] != "[" and raw_host != p.host:
            notes.append("IPv4 address normalised")
        elif p.host[0] == "[" and raw_host != p.host.strip("[]"):
            notes.append("IPv6 address normalised")
        elif any(c.isupper() for c in netloc_host):
            notes.append("host lowercased")
        if raw_port is not None and not p.port:
            notes.append(f"default port {raw_port} dropped")
        if not s.path:
            notes.append("empty path became /")
        elif re.search(r"(^|/)(\.|%2e){1,2}(/|$)", s.path, re.IGNORECASE):
            notes.append("dot segments resolved")
        if not (s.path + s.query).isascii() or " " in url.strip():
            notes.append("characters percent-encoded")
    trace.append({"rule": "whatwg-parse", "before": url, "after": href,
                  "notes": notes or ["normalised by WHATWG parsing"]})


__all__ = [
    "CANON_VERSION", "DEFAULT", "RULES", "SESSION_PARAMS", "TRACKING_PARAMS",
    "CanonConfig", "CanonError", "Canonical", "canonicalize", "fingerprint",
    "host_of", "registered_domain", "surt",
]
