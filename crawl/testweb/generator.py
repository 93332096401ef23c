"""The shape of the synthetic web, computed on demand from (seed, host, page).

Nothing here is stored: every host, page, link and robots rule is a pure
function of :class:`WebConfig`, so a web of 100,000 hosts costs no memory
until a page is asked for, and the server, the manifest and the tests all
agree because they call the same functions.

Host behaviours (one per host, see ``PROFILES``) and robots variants are
assigned so that the first ``len(PROFILES)`` hosts cover every behaviour once
(``mix="default"``); the rest are mostly ordinary.
"""

from __future__ import annotations

import functools
import hashlib
import posixpath
import re
from dataclasses import dataclass

from . import realistic
from .rules import TRAP_NAMES as TRAP_NAMES
from .rules import TRAP_PATTERNS as TRAP_PATTERNS
from .rules import rules_disallow as rules_disallow
from .rules import trap_of as trap_of
from .shapes import CHANGE_PERIODS as CHANGE_PERIODS
from .shapes import Host as Host
from .shapes import Link as Link
from .shapes import PageSpec as PageSpec
from .shapes import _rng as _rng
from .shapes import digest as digest

# (behaviour, robots variant): the first hosts of a "default" web, in order.
PROFILES: tuple[tuple[str, str], ...] = (
    ("plain", "simple"),
    ("plain", "rules"),
    ("plain", "404"),
    ("plain", "500"),
    ("plain", "timeout"),
    ("plain", "oversize"),
    ("plain", "redirect"),
    ("near-dups", "simple"),
    ("mirror-origin", "simple"),
    ("mirror", "simple"),
    ("traps", "simple"),
    ("redirects", "simple"),
    ("busy", "simple"),
    ("slow", "simple"),
    ("reset", "simple"),
    ("endless", "simple"),
    ("huge", "simple"),
    ("gzip-bomb", "simple"),
    ("content-type", "simple"),
    ("charset", "simple"),
    ("gzip-multi", "simple"),
    ("gzip-trailing", "simple"),
)
BEHAVIOURS = tuple(dict.fromkeys(b for b, _ in PROFILES))
ROBOTS_VARIANTS = tuple(dict.fromkeys(r for _, r in PROFILES))
# Behaviours a random (non-prefix) host may get; mirrors need a partner.
_RANDOM_BEHAVIOURS = ("near-dups", "traps", "redirects", "busy", "content-type", "charset")
_RANDOM_ROBOTS = ("rules", "404", "simple")

SECTIONS = ("news", "docs", "blog", "news", "private", "docs", "blog", "shop")
WORDS = (
    "alpha bravo river stone cloud paper market garden window signal harbor copper "
    "violet meadow engine silver forest candle bridge thunder orbit lantern summit "
    "cobalt falcon prairie ember glacier willow canyon draft pebble quartz tundra "
    "mosaic beacon saffron juniper nimbus"
).split()
NEAR_DUP_VARIANTS = ("tracking", "print", "mobile", "ref")
EPOCH = 1767225600  # 2026-01-01T00:00:00Z: "Last-Modified" of pages that never change
ROBOTS_LIMIT = 500 * 1024  # RFC 9309 2.5: parsers must read at least 500 KiB
PAGE_PROFILES = ("synthetic", "realistic")


@dataclass(frozen=True)
class WebConfig:
    """Every knob of a web; two equal configs serve byte-identical webs."""

    seed: int = 0
    hosts: int = 40
    pages: int = 20  # pages per host (page 0 is the home page "/")
    links: int = 8  # body links per page, besides navigation and footer
    cross: float = 0.1  # fraction of body links that point to another host
    addresses: int = 16  # loopback addresses 127.0.1.1 .. 127.0.1.N, shared by hosts
    agent: str = "crawl"  # product token the robots files address
    mix: str = "default"  # "default", "plain", or a comma list of behaviours
    min_size: int = 2048
    max_size: int = 200 * 1024
    port: int = 80
    latency: float = 0.3  # seconds before each response of a "slow" host
    drip: float = 0.05  # seconds between 1 KiB chunks of a "slow" host
    busy: int = 1  # times a busy page answers 429/503 before it answers 200
    hang: float = 60.0  # seconds a "timeout" robots.txt keeps the client waiting
    robots_recover: int = 0  # a "500"/"timeout" robots.txt fails this many times, then answers (0: never)
    huge_bytes: int = 500 * 1000 * 1000
    endless_cap: int = 2 << 30
    bomb_bytes: int = 1 << 30  # decompressed size of the gzip bomb
    # A home page that changes lists its newest N revisions' articles,
    # /latest/<revision>.html, so each revision links to a URL never seen
    # before (crawl cycles must follow them); 0: off. Not in the manifest.
    news: int = 0
    profile: str = "synthetic"  # "synthetic" or "realistic" (pages shaped like real sites: realistic.py)

    def __post_init__(self) -> None:
        if self.profile not in PAGE_PROFILES:
            raise ValueError(f"unknown profile {self.profile!r}; use one of: {', '.join(PAGE_PROFILES)}")
        if not 1 <= self.hosts <= 1_000_000:
            raise ValueError("hosts must be between 1 and 1,000,000")
        if self.pages < 2:
            raise ValueError("pages must be at least 2")
        if not 1 <= self.addresses <= 254 * 250:
            raise ValueError("addresses must be between 1 and 63,500")
        if self.mix not in ("default", "plain"):
            names = {m.strip() for m in self.mix.split(",") if m.strip()}
            unknown = names - set(BEHAVIOURS) - set(ROBOTS_VARIANTS)
            if unknown or not names:
                known = ", ".join(sorted(set(BEHAVIOURS) | set(ROBOTS_VARIANTS)))
                raise ValueError(f"unknown behaviour(s) in --mix: {', '.join(sorted(unknown)) or '(none)'}; "
                                 f"use default, plain or a comma list of: {known}")


class Web:
    """A web: host names, addresses, behaviours, pages and robots rules."""

    def __init__(self, config: WebConfig) -> None:
        self.config = config
        self.width = max(4, len(str(config.hosts - 1)))
        self._names: dict[str, int] | None = None
        self.host = functools.lru_cache(maxsize=65536)(self._host)
        self.page = functools.lru_cache(maxsize=8192)(self._page)  # ~2 KB a page spec
        self.path = functools.lru_cache(maxsize=65536)(self._path)  # type: ignore[method-assign]
        self.base = functools.lru_cache(maxsize=65536)(self._base)  # type: ignore[method-assign]
        self.host_index = functools.lru_cache(maxsize=65536)(self._host_index)  # type: ignore[method-assign]
        self.page_index = functools.lru_cache(maxsize=65536)(self._page_index)  # type: ignore[method-assign]

    # -- hosts ---------------------------------------------------------------
    def host_name(self, i: int) -> str:
        if i % 10 == 3:  # one host in ten shares the registered domain shop.test
            return f"b{i:0{self.width}d}.shop.test"
        return f"h{i:0{self.width}d}.test"

    def host_index(self, name: str) -> int | None:
        """The index of a host name of this web, or None."""
        return self._host_index(name)

    def _host_index(self, name: str) -> int | None:
        name = name.lower()
        m = re.fullmatch(r"[hb](\d+)\.(shop\.)?test", name)
        if not m:
            return None
        i = int(m.group(1))
        if i >= self.config.hosts or self.host_name(i) != name:
            return None
        return i

    def address(self, i: int) -> str:
        a = i % self.config.addresses
        return f"127.0.{1 + a // 254}.{1 + a % 254}"

    def addresses(self) -> list[str]:
        return [self.address(i) for i in range(min(self.config.addresses, self.config.hosts))]

    def _profile(self, i: int) -> tuple[str, str]:
        mix = self.config.mix
        if mix == "plain":
            return ("plain", "simple")
        if mix == "default":
            if i < len(PROFILES):
                return PROFILES[i]
            r = _rng(self.config.seed, "profile", i)
            if r.random() < 0.7:
                return ("plain", "simple")
            return (r.choice(_RANDOM_BEHAVIOURS), r.choice(_RANDOM_ROBOTS))
        wanted = self._wanted
        return wanted[i % len(wanted)]

    @functools.cached_property
    def _wanted(self) -> tuple[tuple[str, str], ...]:
        """The profiles a "name,name" mix cycles through (ordinary hosts first)."""
        names = {m.strip() for m in self.config.mix.split(",") if m.strip()}
        unknown = names - set(BEHAVIOURS) - set(ROBOTS_VARIANTS)
        if unknown:
            raise ValueError(f"unknown behaviour(s) in mix: {', '.join(sorted(unknown))}")
        if "mirror" in names:
            names.add("mirror-origin")
        chosen = tuple(
            p for p in PROFILES[1:]
            if p[0] in names or (p[0] == "plain" and p[1] in names)
        )
        return (("plain", "simple"),) + chosen

    def _host(self, i: int) -> Host:
        behaviour, robots = self._profile(i)
        mirror_of = None
        if behaviour == "mirror":
            origins = [j for j in range(i) if self._profile(j)[0] == "mirror-origin"]
            mirror_of = origins[-1] if origins else None
            if mirror_of is None:
                behaviour = "plain"
        return Host(i, self.host_name(i), self.address(i), behaviour, robots, mirror_of)

    def base(self, i: int) -> str:
        """``http://NAME:PORT``: URLs carry the port, the server is not on port 80."""
        return self._base(i)

    def _base(self, i: int) -> str:
        return f"http://{self.host_name(i)}:{self.config.port}"

    def url(self, i: int, path: str) -> str:
        return self.base(i) + path

    # -- pages ---------------------------------------------------------------
    def path(self, k: int) -> str:
        """The path of page ``k`` (the same on every host of a web)."""
        return self._path(k)

    def _path(self, k: int) -> str:
        if k == 0:
            return "/"
        section = SECTIONS[k % len(SECTIONS)]
        h = hashlib.blake2b(f"{self.config.seed}/slug/{k}".encode(), digest_size=2).digest()
        slug = f"{WORDS[h[0] % len(WORDS)]}-{WORDS[h[1] % len(WORDS)]}"
        if section == "private" and k % 3 == 0:
            slug = "open-" + slug
        return f"/{section}/{slug}-{k}.html"

    def page_index(self, path: str) -> int | None:
        """Which ordinary page a path is, or None."""
        return self._page_index(path)

    def _page_index(self, path: str) -> int | None:
        if path == "/":
            return 0
        m = re.fullmatch(r"/([a-z]+)/[a-z-]+-(\d+)\.html", path)
        if not m:
            return None
        k = int(m.group(2))
        if not 0 < k < self.config.pages or self.path(k) != path:
            return None
        return k

    def _page(self, i: int, k: int) -> PageSpec:
        cfg = self.config
        if cfg.profile == "realistic":
            return realistic.page_spec(self, i, k)
        host = self.host(i)
        src = host.mirror_of if host.mirror_of is not None else i
        r = _rng(cfg.seed, "page", src, k)
        lo, hi = cfg.min_size, max(cfg.min_size, cfg.max_size)
        size = int(lo * (hi / lo) ** (r.random() ** 2))
        if host.behaviour == "near-dups":  # enough article that boilerplate stays a small part
            size = max(size, 8192)
        period = r.choice(CHANGE_PERIODS)
        phase = r.randrange(86400)
        meta = "noindex" if k % 11 == 5 else "nofollow" if k % 13 == 6 else None
        relative_only = host.behaviour in ("mirror-origin", "mirror")
        path = self.path(k)
        base_href = None
        if k % 7 == 3 and not relative_only:
            base_href = self.url(src, "/docs/")
        base_dir = "/docs/" if base_href else posixpath.dirname(path).rstrip("/") + "/"
        links: list[Link] = []

        def add(target_host: int, target: str, tag: str = "a", rel: tuple[str, ...] = (),
                text: str = "", form: str | None = None) -> None:
            if form is None:
                form = r.choice(("root", "root", "relative", "relative", "absolute", "scheme"))
            if target_host != src:
                form = "absolute" if form in ("root", "relative") else form
            elif relative_only:
                form = "root" if form in ("absolute", "scheme") else form
            p, _, q = target.partition("?")
            if form == "absolute":
                href = self.url(target_host, target)
            elif form == "scheme":
                href = "//" + self.url(target_host, target).split("//", 1)[1]
            elif form == "root":
                href = target
            else:
                rel_path = posixpath.relpath(p, base_dir)
                if p.endswith("/") and rel_path != ".":
                    rel_path += "/"
                href = rel_path + ("?" + q if q else "")
            shown = i if target_host == src else target_host
            links.append(Link(self.url(shown, target), href, tag, rel, text or target))

        # navigation and footer boilerplate: the same on every page of a host
        for nav in range(min(4, cfg.pages)):
            add(src, self.path(nav), text="Home" if nav == 0 else f"Section {nav}", form="root")
        if k + 1 < cfg.pages:  # a chain through every page keeps the whole host reachable
            add(src, self.path(k + 1), text="next")
        for _n in range(max(0, cfg.links - 1)):
            if cfg.hosts > 1 and r.random() < cfg.cross:
                other = r.randrange(cfg.hosts - 1)
                other += other >= src
                add(other, self.path(r.randrange(cfg.pages)))
            else:
                rel = ("nofollow",) if r.random() < 0.08 else ()
                add(src, self.path(r.randrange(cfg.pages)), rel=rel)
        if k == 0:
            for ep in self.entry_points(src):
                add(src, ep, text="special", form="root")
        if k % 3 == 0:
            add(src, f"/files/report-{k}.pdf", text="report (PDF)")
        if k % 9 == 8:
            add(src, f"/gone/{k}.html", text="an old page")
        add(src, f"/img/photo-{k}.png", tag="img")  # last: it follows the article
        return PageSpec(i, k, path, size, period, phase, meta, base_href, tuple(links))

    def version(self, spec: PageSpec, now: float) -> tuple[int, int]:
        """(version, last_modified) of a page at time ``now`` (unix seconds)."""
        if spec.change_period is None:
            return 0, EPOCH - spec.phase
        p = spec.change_period
        v = int((now + spec.phase) // p)
        return v, v * p - spec.phase

    # -- special paths -------------------------------------------------------
    def entry_points(self, i: int) -> list[str]:
        """Paths only a behaviour host has, linked from its home page."""
        b = self.host(i).behaviour
        if b == "near-dups":
            out = []
            for k in range(1, min(5, self.config.pages)):
                out += [self.near_dup_path(k, v) for v in NEAR_DUP_VARIANTS]
            return out
        if b == "traps":
            return ["/calendar/2026/01/", "/s/5f3a9c/index.html", "/deep/a/", "/search?q=shoes"]
        if b == "redirects":
            return ["/redirect/chain-5", "/redirect/loop-a", "/redirect/away", "/redirect/relative"]
        if b == "busy":
            return [f"/busy/{n}.html" for n in range(4)]
        if b == "reset":
            return ["/reset/head.html", "/reset/body.html"]
        if b == "endless":
            return ["/stream/endless.html"]
        if b == "huge":
            return ["/huge.html"]
        if b == "gzip-bomb":
            return ["/bomb.html"]
        if b == "gzip-multi":
            return ["/gzip/multi.html"]
        if b == "gzip-trailing":
            return ["/gzip/trailing.html"]
        if b == "content-type":
            return ["/ct/missing.html", "/ct/wrong.html", "/ct/html-as-png.png", "/ct/png-as-html.html"]
        if b == "charset":
            return ["/charset/bogus-label.html", "/charset/invalid-bytes.html", "/charset/conflict.html"]
        return []

    def near_dup_path(self, k: int, variant: str) -> str:
        p = self.path(k)
        if variant == "tracking":
            return f"{p}?utm_source=newsletter&utm_medium=email&utm_campaign=c{k}"
        if variant == "print":
            return "/print" + p
        if variant == "mobile":
            return "/m" + p
        return f"{p}?ref=sidebar"

    # -- robots.txt ----------------------------------------------------------
    def robots_rules(self, i: int) -> tuple[list[tuple[str, str]], float | None]:
        """The (allow|disallow, pattern) rules that apply to ``agent``, and its Crawl-delay.

        These are the rules of the group the agent selects, within the first
        500 KiB (RFC 9309 2.5), after following redirects.
        """
        v = self.host(i).robots
        if v == "rules":
            return [
                ("disallow", "/private/"),
                ("allow", "/private/open-"),
                ("allow", "/news/"),
                ("disallow", "/news/"),  # a tie: allow wins (RFC 9309 2.2.2)
                ("disallow", "/*.pdf$"),
                ("disallow", "/docs/*draft"),
            ], 2.0
        if v in ("simple", "oversize"):
            return [("disallow", "/private/")], None
        if v == "redirect":
            return [("disallow", "/private/"), ("disallow", "/docs/")], None
        if v in ("500", "timeout"):
            return [("disallow", "/")], None
        return [], None  # 404: everything allowed

    def recovered_rules(self, i: int) -> list[tuple[str, str]] | None:
        """The rules of a failing robots.txt once it answers (``robots_recover``), or None
        if it never does: then it is the ``simple`` file, ``Disallow: /private/``."""
        if self.config.robots_recover and self.host(i).robots in ("500", "timeout"):
            return [("disallow", "/private/")]
        return None

    def disallowed(self, i: int, path: str) -> bool:
        return rules_disallow(self.robots_rules(i)[0], path)
