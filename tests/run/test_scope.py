"""crawl/run/scope.py: reason_out remembers hosts by a URL's authority, and decides
as host_of and registered_domain on the whole URL would (issue 19: host_of on every
admitted link was a seventh of the admit path)."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from crawl.canon import CanonError, host_of, registered_domain
from crawl.run import scope as scope_mod
from crawl.run.scope import Scope


def reference(sc: Scope, url: str, depth: int = 0) -> str | None:
    """reason_out as it was before the authority cache: host_of on the whole URL."""
    if sc.max_depth is not None and depth > sc.max_depth:
        return "max-depth"
    if sc.mode != "any":
        try:
            host = host_of(url)
        except (CanonError, ValueError):
            return "invalid-host"
        if sc.mode == "host" and host not in sc.hosts:
            return "off-host"
        if sc.mode == "domain":
            name = host.rsplit(":", 1)[0] if host.count(":") == 1 else host
            if registered_domain(name) not in sc.domains:
                return "off-domain"
    for rx in sc._deny:
        if rx.search(url):
            return "denied"
    if sc._allow and not any(rx.search(url) for rx in sc._allow):
        return "not-allowed"
    return None


SEEDS = ["http://a.test/", "https://www.b.example.co.uk:8443/x", "http://127.0.0.1:8080/"]
authorities = st.sampled_from([
    "http://a.test", "http://a.test:80", "http://a.test:", "http://a.test:0080", "https://a.test:443",
    "http://A.test", "http://a.test.", "http://sub.a.test", "https://www.b.example.co.uk:8443",
    "https://shop.b.example.co.uk", "http://127.0.0.1:8080", "http://127.0.0.1", "http://0x7f.0.0.1:8080",
    "http://a..test", "http://-x.test", "http://a_b.test", "http://user@a.test", "http://a.test:99999",
    "http://xn--abc.test", "http://a.test\\", "http://a.te\tst", "http://a.test%41", "ftp://a.test",
])
tails = st.sampled_from(["", "/", "/p?q=1", "?q", "#f", "/a/../b", "\\x", " ", "\n", "/%zz", "/a b",
                         ":", "@evil.test/", ".evil.test/"])


@settings(max_examples=400, deadline=None)
@given(authorities, tails, st.sampled_from(["host", "domain", "any"]), st.booleans())
def test_reason_out_is_host_of_on_the_whole_url(authority: str, tail: str, mode: str, twice: bool) -> None:
    sc = Scope(mode, deny=(r"/b$",), max_depth=3)
    sc.add_seeds(SEEDS)
    url = authority + tail
    if twice:  # the second call answers from what the first remembered
        sc.reason_out(authority + "/other")
    assert sc.reason_out(url) == reference(sc, url)
    assert sc.reason_out(url, 4) == "max-depth"


def test_remembered_authorities_are_bounded(monkeypatch) -> None:
    monkeypatch.setattr(scope_mod, "_AUTHORITIES", 8)
    sc = Scope("host")
    sc.add_seeds(["http://h3.test/"])
    for i in range(50):
        assert sc.reason_out(f"http://h{i}.test/p") == (None if i == 3 else "off-host")
        assert len(sc._by_authority) <= 8
    assert sc.reason_out("http://h3.test/q") is None


def test_seeds_added_later_count_for_remembered_hosts() -> None:
    sc = Scope("domain")
    sc.add_seeds(["http://a.test/"])
    assert sc.reason_out("http://www.b.test/x") == "off-domain"
    sc.add_seeds(["http://b.test/"])
    assert sc.reason_out("http://www.b.test/x") is None


def _admit_counts(tmp_path, links: list[dict], scope: Scope) -> tuple[dict[str, int], list[str]]:
    """Crawl.admit's counts for ``links`` and the URLs it queued."""
    import time

    from crawl.core import CrawlDir
    from crawl.run.crawl import Crawl, RunOptions

    run = Crawl(CrawlDir(tmp_path / "d"), RunOptions(scope=scope))
    try:
        counts = run.admit(links, time.time())
        queued = sorted({r["url"] for r in links if run.frontier.state_of(r["url"]) == "queued"})
    finally:
        run.close()
    return counts, queued


def _reference_counts(links: list[dict], scope: Scope) -> dict[str, int]:
    """What admit counted when it asked reason_out of every link, then looked for repeats."""
    counts = {"in": len(links), "out_of_scope": 0, "seen": 0}
    batch: set[str] = set()
    for rec in links:
        if scope.reason_out(rec["url"], rec["depth"]):
            counts["out_of_scope"] += 1
        elif rec["url"] in batch:
            counts["seen"] += 1
        else:
            batch.add(rec["url"])
    return counts


def test_admit_judges_a_urls_scope_once_and_counts_every_link_as_before(tmp_path, monkeypatch) -> None:
    """A batch's repeated links (navigation) are judged once per URL by the URL rules
    (host, deny), while the depth rule still applies to each link: the counts are
    those of reason_out asked for every link."""
    sc = Scope("host", deny=(r"/private/",), max_depth=2)
    sc.add_seeds(["http://a.test/"])
    urls = ["http://a.test/x", "http://b.test/y", "http://a.test/private/z", "http://a.test/w"]
    links = [{"kind": "link", "url": urls[i % 4], "depth": (i // 4) % 4} for i in range(40)]
    want = _reference_counts(links, sc)
    judged: list[str] = []
    real = Scope.url_reason_out
    monkeypatch.setattr(Scope, "url_reason_out", lambda self, url: judged.append(url) or real(self, url))
    counts, queued = _admit_counts(tmp_path, links, sc)
    assert {k: counts[k] for k in want} == want
    assert want["out_of_scope"] and want["seen"]  # the case has both kinds of repeats
    assert queued == ["http://a.test/w", "http://a.test/x"]
    assert sorted(judged) == sorted(urls)  # one judgement per URL, not per link (40)
