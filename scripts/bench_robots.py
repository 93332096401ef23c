#!/usr/bin/env python3
"""Benchmark crawl.robots: parses per second and decisions per second.

The baseline is protego (scrapy's parser) when it is installed; it is not a
dependency of crawl, so without it only our own figures are printed:

    .venv/bin/pip install protego    # optional, for the ratios
    .venv/bin/python scripts/bench_robots.py

With the conformance corpus beside the checkout (../shared/conformance)
both parsers are also scored on it, in the same run.
"""

from __future__ import annotations

import importlib.util
import random
import sys
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from crawl.robots import policy as robots  # noqa: E402

try:
    from protego import Protego
except ImportError:  # the baseline is optional
    Protego = None

AGENT = "crawl"
SECTIONS = ["news", "docs", "blog", "shop", "private", "search", "cart", "user", "api", "static"]


def make_robots(rng: random.Random, groups: int = 6, rules: int = 40) -> str:
    """A plausible big-site robots.txt: several groups, prefixes and wildcards."""
    out = ["# generated for bench_robots.py"]
    agents = ["googlebot", "bingbot", "otherbot", "examplebot", AGENT, "*"][:groups]
    for agent in agents:
        out.append(f"User-agent: {agent}")
        for _ in range(rules):
            sec = rng.choice(SECTIONS)
            kind = rng.choice(["Disallow", "Disallow", "Allow"])
            shape = rng.random()
            if shape < 0.6:
                pat = f"/{sec}/{rng.choice(SECTIONS)}-{rng.randrange(100)}"
            elif shape < 0.8:
                pat = f"/*?{rng.choice(['sort', 'sid', 'ref', 'page'])}="
            elif shape < 0.9:
                pat = f"/{sec}/*.{rng.choice(['pdf', 'zip', 'json'])}$"
            else:
                pat = f"/{sec}/"
            out.append(f"{kind}: {pat}")
        out.append("Crawl-delay: 1\n")
    out.append("Sitemap: https://example.com/sitemap.xml")
    return "\n".join(out) + "\n"


def make_urls(rng: random.Random, n: int) -> list[str]:
    urls = []
    for _ in range(n):
        path = "/".join(f"{rng.choice(SECTIONS)}-{rng.randrange(100)}" for _ in range(rng.randrange(1, 4)))
        url = f"https://example.com/{rng.choice(SECTIONS)}/{path}"
        r = rng.random()
        if r < 0.2:
            url += f"?page={rng.randrange(9)}&sort=asc"
        elif r < 0.3:
            url += ".pdf"
        urls.append(url)
    return urls


def rate(fn: Callable[[], object], n: int, budget: float = 2.0) -> float:
    """Calls per second of fn (which does n operations), best of a few runs."""
    best = float("inf")
    spent = 0.0
    runs = 0
    while runs < 3 or (spent < budget and runs < 20):
        t = time.perf_counter()
        fn()
        dt = time.perf_counter() - t
        best = min(best, dt)
        spent += dt
        runs += 1
    return n / best


def line(name: str, ours: float, theirs: float | None, unit: str) -> None:
    if theirs:
        print(f"{name}: {ours:,.0f} {unit} (protego {theirs:,.0f} {unit}) ratio {ours / theirs:.1f}x")
    else:
        print(f"{name}: {ours:,.0f} {unit} (protego not installed: no baseline)")


def conformance() -> None:
    path = ROOT.parent / "shared" / "conformance" / "check_robots.py"
    if not path.exists():
        return
    spec = importlib.util.spec_from_file_location("check_robots", path)
    assert spec and spec.loader
    cr = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(cr)
    cases = cr.load_cases()

    def score(fn: Callable[[str, str, str], bool]) -> int:
        return sum(r["status"] == "pass" for r in cr.evaluate(cases, cr.run_callable(fn, cases)))

    ours = score(lambda b, a, u: robots.parse(b).allowed(u, a))
    theirs = score(lambda b, a, u: Protego.parse(b).can_fetch(u, a)) if Protego else None
    print(f"conformance: {ours}/{len(cases)} cases"
          + (f" (protego {theirs}/{len(cases)})" if theirs is not None else ""))


def main() -> None:
    rng = random.Random(9309)
    text = make_robots(rng)
    big = "".join(make_robots(random.Random(i), groups=6, rules=400) for i in range(8))
    urls = make_urls(rng, 20_000)
    print(f"robots.txt: {len(text):,} bytes, {text.count(chr(10)):,} lines; "
          f"big one {len(big):,} bytes; {len(urls):,} URLs")

    n = 200
    ours = rate(lambda: [robots.parse(text) for _ in range(n)], n)
    theirs = rate(lambda: [Protego.parse(text) for _ in range(n)], n) if Protego else None
    line("parse (typical file)", ours, theirs, "files/s")
    n = 5
    ours = rate(lambda: [robots.parse(big) for _ in range(n)], n)
    theirs = rate(lambda: [Protego.parse(big) for _ in range(n)], n) if Protego else None
    line("parse (big file)", ours, theirs, "files/s")

    # Decisions on one parsed file: the per-fetch cost on the hot path.
    r = robots.parse(text)
    ours = rate(lambda: [r.allowed(u, AGENT) for u in urls], len(urls))
    theirs = None
    if Protego:
        p = Protego.parse(text)
        theirs = rate(lambda: [p.can_fetch(u, AGENT) for u in urls], len(urls))
    line("decide", ours, theirs, "URLs/s")

    # Parse + one decision, as a fetcher does on a cold cache.
    n = 200
    ours = rate(lambda: [robots.parse(text).allowed(urls[i], AGENT) for i in range(n)], n)
    theirs = (rate(lambda: [Protego.parse(text).can_fetch(urls[i], AGENT) for i in range(n)], n)
              if Protego else None)
    line("parse + first decision", ours, theirs, "files/s")

    same = sum(r.allowed(u, AGENT) == p.can_fetch(u, AGENT) for u in urls) if Protego else None
    if same is not None:
        print(f"agreement with protego on the bench URLs: {same:,}/{len(urls):,}")
    conformance()


if __name__ == "__main__":
    main()
