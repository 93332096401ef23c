"""The policy half of canonicalisation: what gets stripped, in which order.

:data:`RULES` is the ordered tuple of small functions that run after the
WHATWG parse (see :mod:`crawl.canon`, which re-exports everything public
here). Each rule edits a :class:`_Parts` in place and is a no-op when it
has nothing to do. Changing a rule or a default list means bumping
``crawl.canon.CANON_VERSION``: every seen-set key changes with it.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field, replace

TRACKING_PARAMS = frozenset({
    "gclid", "fbclid", "mc_eid", "mc_cid", "msclkid", "dclid", "gbraid",
    "wbraid", "yclid", "igshid", "_hsenc", "_hsmi",
})
TRACKING_PREFIXES = ("utm_",)
SESSION_PARAMS = frozenset({"jsessionid", "phpsessid", "sid", "cfid", "cftoken"})
SESSION_PREFIXES = ("aspsessionid",)  # ASPSESSIONIDxxxxxxxx


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


# -- the policy rules, in order; each edits _Parts in place --------------------

_UNRESERVED = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~")
_PCT_RE = re.compile(r"%([0-9A-Fa-f]{2})")
# An escape the rule would change: a lowercase hex digit, or an unreserved
# character (2D 2E 30-39 41-5A 5F 61-7A 7E). ada writes the escapes it makes
# in upper case, so most percent-encoded URLs have nothing to fix.
PCT_FIXABLE = re.compile(
    r"%(?:[0-9A-Fa-f][a-f]|[a-f][0-9A-F]|2[DE]|3[0-9]|4[1-9A-F]|5[0-9AF]|6[1-9A-F]|7[0-9AE])")


_HEX = frozenset("0123456789ABCDEFabcdef")


def _pct_fix(m: re.Match[str]) -> str:
    ch = chr(int(m.group(1), 16))
    if ch in _UNRESERVED and not (ch in _HEX and _after_stray_percent(m.string, m.start())):
        return ch
    return "%" + m.group(1).upper()


def _after_stray_percent(s: str, i: int) -> bool:
    """Is the escape at ``s[i]`` just after a ``%`` or ``%h`` that is not an escape?

    Decoding a hex digit there would write a new escape: ``%4%44`` would
    become ``%4D``, which the next run decodes to ``M``, another resource
    (and ``canon(canon(x)) != canon(x)``). The ``%`` before is never part
    of an escape the regex matched (that would overlap this one), and
    decoding never writes a ``%`` (``%25`` is not unreserved), so looking
    at the input is looking at the output.
    """
    return s[i - 1 : i] == "%" or (i >= 2 and s[i - 2] == "%" and s[i - 1] in _HEX)


def _pct(s: str) -> str:
    return _PCT_RE.sub(_pct_fix, s) if "%" in s and PCT_FIXABLE.search(s) else s


def _root_dot(p: _Parts, cfg: CanonConfig) -> None:
    """``example.com.`` is the same host as ``example.com`` (the DNS root).

    The stripped host is parsed again: WHATWG drops only one empty last
    label before asking whether a host ends in a number, so ``2..`` stays a
    domain, but ``2`` is the IPv4 address 0.0.0.2. Without the second parse
    one URL would have two canonical forms (and fingerprints).
    """
    if p.host.endswith("."):
        p.host = p.host.rstrip(".")
        p.reparse = True


def _userinfo(p: _Parts, cfg: CanonConfig) -> None:
    """Credentials are not part of a page's identity and must not reach logs."""
    if p.userinfo and cfg.strip_userinfo:
        p.userinfo = ""


def _fragment(p: _Parts, cfg: CanonConfig) -> None:
    """A fragment never reaches the server (RFC 9110 4.2.4 / RFC 3986 3.5)."""
    p.fragment = None


def _percent(p: _Parts, cfg: CanonConfig) -> None:
    """RFC 3986 6.2.2.1-2: upper-case escapes, decode unreserved ones only.

    Never so as to make a new escape out of a stray ``%`` (see
    :func:`_after_stray_percent`): such a hex digit stays encoded.
    """
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
    # Names compare case-insensitively. The probe runs case-sensitively on
    # the lowered query (much faster than re.IGNORECASE) and usually misses;
    # only a hit pays for the exact per-pair filter.
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
