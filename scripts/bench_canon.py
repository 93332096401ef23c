#!/usr/bin/env python3
"""Benchmark URL canonicalisation against w3lib, and the parser choice.

Generates 100,000 realistic URLs (as link extraction produces them: mostly
plain paths, a third with queries, some tracking and session parameters,
fragments, mixed case, default ports, dot segments, IDNs, IP hosts) from a
fixed seed, then times:

* ``crawl.canon.canonicalize`` against ``w3lib.url.canonicalize_url`` on the
  same URLs in the same run, interleaved chunk by chunk so that load from
  other processes hits both alike; the ratio is the goal (>= 3x);
* the parse step alone: ada-url through its C API (what canon uses),
  ada-url's Python ``URL`` class, and ``urllib.parse.urlsplit`` (which only
  splits and does no WHATWG normalisation at all).

Times are CPU seconds of this process (time.process_time), best of the
rounds, so a busy shared machine disturbs them less. Run:
``.venv/bin/python scripts/bench_canon.py [--n 100000] [--rounds 3]``
"""

from __future__ import annotations

import argparse
import random
import resource
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from urllib.parse import urlsplit

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import ada_url  # noqa: E402
import w3lib.url  # noqa: E402
from ada_url._ada_wrapper import ffi, lib  # noqa: E402

from crawl.canon import CanonError, canonicalize, host_of  # noqa: E402

WORDS = ("docs api blog news products category item search about contact help "
         "guide 2024 archive page user profile shop cart list view detail en de fr "
         "static img assets download release notes faq support tag topic").split()
TLDS = ("com", "org", "net", "de", "co.uk", "io", "fr", "info", "edu", "jp")
PARAMS = ("q", "page", "sort", "id", "lang", "category", "color", "size", "ref", "filter",
          "order", "limit", "offset", "view", "tab", "format", "year", "month")
TRACKING = ("utm_source", "utm_medium", "utm_campaign", "utm_content", "gclid", "fbclid",
            "mc_eid")
IDN = ("bücher", "münchen", "café", "españa", "übersee", "straße")


def make_urls(n: int, seed: int = 42) -> list[str]:
    """Realistic, unique URLs from a fixed seed (the same every run)."""
    rnd = random.Random(seed)
    hosts = []
    for i in range(2000):
        name = f"{rnd.choice(WORDS)}{rnd.choice(WORDS)}{i}"
        if rnd.random() < 0.03:
            name = rnd.choice(IDN) + str(i)
        sub = rnd.choice(("www.", "www.", "", "shop.", "blog.", "m.", "docs."))
        hosts.append(f"{sub}{name}.{rnd.choice(TLDS)}")
    hosts += ["192.168.1.10", "10.0.0.5", "[2001:db8::1]", "127.0.0.1:8080"]
    out = []
    for i in range(n):
        r = rnd.random
        host = rnd.choice(hosts)
        scheme = "https" if r() < 0.7 else "http"
        if r() < 0.08:
            scheme, host = scheme.upper(), host.upper()  # mixed case
        port = (":443" if scheme.lower() == "https" else ":80") if r() < 0.04 else ""
        if ":" in host.rpartition("]")[2]:
            port = ""
        segs = [rnd.choice(WORDS) for _ in range(rnd.randint(0, 4))]
        if r() < 0.05 and segs:
            segs.insert(rnd.randrange(len(segs)), "..")
        if r() < 0.04:
            segs.append(f"caf%c3%a9-{rnd.choice(WORDS)}%7e")
        leaf = rnd.choice(("", f"{rnd.choice(WORDS)}-{i}.html", f"{i}", f"{rnd.choice(WORDS)}-{i}/"))
        path = "/" + "/".join(segs + [leaf]) if segs or leaf else ""
        if r() < 0.02 and path:
            path += f";jsessionid={rnd.getrandbits(64):016X}"
        query = ""
        if r() < 0.35:
            pairs = [f"{rnd.choice(PARAMS)}={rnd.choice(WORDS)}{rnd.randint(0, 99)}"
                     for _ in range(rnd.randint(1, 4))]
            if r() < 0.3:
                pairs += [f"{rnd.choice(TRACKING)}={rnd.choice(WORDS)}"
                          for _ in range(rnd.randint(1, 3))]
                rnd.shuffle(pairs)
            if r() < 0.05:
                pairs.append(f"PHPSESSID={rnd.getrandbits(48):x}")
            query = "?" + "&".join(pairs)
        frag = f"#{rnd.choice(WORDS)}" if r() < 0.15 else ""
        out.append(f"{scheme}://{host}{port}{path}{query}{frag}")
    return out


def _canon(u: str) -> object:
    try:
        return canonicalize(u)
    except CanonError:
        return None


def _w3lib(u: str) -> object:
    try:
        return w3lib.url.canonicalize_url(u)
    except ValueError:
        return None


def _ada_c(u: str) -> str:
    raw = u.encode()
    p = lib.ada_parse(raw, len(raw))
    try:
        s = lib.ada_get_href(p)
        return ffi.unpack(s.data, s.length).decode()
    finally:
        lib.ada_free(p)


def _ada_py(u: str) -> str:
    return ada_url.URL(u).href


_split = getattr(urlsplit, "__wrapped__", urlsplit)  # 3.11+ caches urlsplit; time the parser


def _urlsplit(u: str) -> str:
    return _split(u).geturl()


def interleaved(fns: dict[str, Callable[[str], object]], urls: list[str], rounds: int,
                chunk: int = 5000) -> dict[str, float]:
    """Best-of-rounds CPU seconds per function, chunks alternating between them."""
    best = {name: float("inf") for name in fns}
    for _ in range(rounds):
        spent = dict.fromkeys(fns, 0.0)
        for start in range(0, len(urls), chunk):
            part = urls[start : start + chunk]
            for name, fn in fns.items():
                t = time.process_time()
                for u in part:
                    fn(u)
                spent[name] += time.process_time() - t
        for name in fns:
            best[name] = min(best[name], spent[name])
    return best


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--n", type=int, default=100_000)
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args()
    urls = make_urls(args.n)
    rejected = sum(_canon(u) is None for u in urls)
    changed = sum(1 for u in urls if (c := _canon(u)) is not None and c.url != u)  # type: ignore[attr-defined]
    print(f"canon: {len(urls):,} generated URLs, {changed:,} changed by canonicalisation, "
          f"{rejected:,} rejected")

    t = interleaved({"canon": _canon, "w3lib": _w3lib}, urls, args.rounds)
    ours, base = len(urls) / t["canon"], len(urls) / t["w3lib"]
    print(f"canon: {ours:,.0f} URLs/s (w3lib {base:,.0f} URLs/s) ratio {ours / base:.1f}x "
          f"[goal >= 3x: {'met' if ours / base >= 3 else 'NOT met'}]")

    t = interleaved({"ada-c": _ada_c, "ada-URL": _ada_py, "urlsplit": _urlsplit,
                     "host_of": host_of}, urls, args.rounds)
    us = {k: v / len(urls) * 1e6 for k, v in t.items()}
    print(f"parse: ada-url C API {us['ada-c']:.2f} us/URL, ada-url URL class "
          f"{us['ada-URL']:.2f} us/URL, urllib.parse urlsplit+geturl {us['urlsplit']:.2f} us/URL "
          f"(split only, no normalisation)")
    print(f"host_of: {1 / us['host_of'] * 1e6:,.0f} URLs/s")

    # The command end to end: NDJSON decode, canonicalise, encode, pipes.
    data = ("\n".join(urls) + "\n").encode()
    root = Path(__file__).resolve().parent.parent
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    proc = subprocess.run([sys.executable, "-m", "crawl", "canon"], input=data, cwd=root,
                          capture_output=True, check=True)
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    lines = proc.stdout.count(b"\n")
    print(f"crawl canon (CLI, plain lines in, NDJSON out, startup included): "
          f"{lines / cpu:,.0f} records per CPU second ({lines / wall:,.0f}/s wall)")


if __name__ == "__main__":
    main()
