"""crawl.canon.Resolver (the parse stage's many-links entry point) agrees
with crawl.canon.canonicalize on every href: same result, same error."""

from __future__ import annotations

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from crawl.canon import DEFAULT, CanonConfig, CanonError, Resolver, canonicalize
from crawl.parse import links
from crawl.testweb import Web, WebConfig
from crawl.testweb.content import page_html

BASES = [
    "http://a.test/", "http://a.test/dir/page.html", "https://a.test:8443/d/e/?q=1#f",
    "http://a.test/d;jsessionid=1/x", "http://a.test/%7Euser/x", "http://u:p@a.test/d/",
    "http://a.test./d/", "http://A.Test:80/D/x", "http://127.1/d/", "http://[::1]:8080/a/b",
    "http://a.test/.well/x", "ftp://a.test/", "not a url", "http://a..test/",
]
_CHARS = "abcAB09-._~!$&'()*+,;=:@/?#%[]|\\ \t\n\"<>^`{}é\ud800"
_PIECES = ["/", "//", "./", "../", "?", "#", "&", "=", "utm_source=x", "jsessionid=1",
           "gclid", "http://a.test", "https://a.test:8443", "http://b.test", "%7e", "%41",
           "page", "2024", "a=1", "b=2", "&&", ";x=1", "mailto:", "javascript:", "../", "./",
           "//a.test", "//B.test:80", "http://a.test:80", "http://A.TEST", "https://b.test:443",
           "http://b.test.", "http://xn--nxasmq6b.test", "http://xn--a.test", "http://1.2.3.4",
           "http://0x7f.1", "http://u@b.test", "http://b.test:99999", "http://b_c.test",
           ".."]
hrefs = st.lists(st.one_of(st.sampled_from(_PIECES), st.text(_CHARS, max_size=4)),
                 max_size=8).map("".join)


def outcome(fn: object) -> object:
    try:
        return fn()  # type: ignore[operator]
    except CanonError as exc:
        return ("error", str(exc))


def assert_same(href: str, base: str, cfg: CanonConfig = DEFAULT) -> None:
    want = outcome(lambda: canonicalize(href, base, cfg))
    got = outcome(lambda: Resolver(base, cfg)(href))
    assert got == want, (href, base)


@settings(max_examples=600, deadline=None)
@given(href=hrefs, base=st.sampled_from(BASES))
@example(href="/a?b=2&a=1&&", base="http://a.test/")
@example(href="x.html?utm_source=1&b=1", base="http://a.test/d/")
@example(href="/a#\ud800", base="http://a.test/")
@example(href="http://a.test/x//y?", base="http://a.test/")
@example(href="../../../x.html", base="http://a.test/d/e/f.html")
@example(href="//b.test:80/x?b=1&a=2", base="https://a.test/")
@example(href="http://B.test:80/x", base="http://a.test/")
def test_resolver_agrees_with_canonicalize(href: str, base: str) -> None:
    assert_same(href, base)


@pytest.mark.parametrize("cfg", [CanonConfig(sort_query=False), CanonConfig(max_length=30),
                                 DEFAULT.with_strip(["x", "s*"])])
@pytest.mark.parametrize("href", ["/p?b=1&a=2", "/p?x=1&a=2", "/p?sa=1", "q?a=" + "1" * 40,
                                  "/" + "a" * 40])
def test_resolver_agrees_under_other_configs(cfg: CanonConfig, href: str) -> None:
    assert_same(href, "http://a.test/d/", cfg)


def test_resolver_agrees_on_every_test_web_link() -> None:
    web = Web(WebConfig(hosts=3, pages=20, mix="plain"))
    n = 0
    for h in range(3):
        for k in range(20):
            url = web.url(h, web.page(h, k).path)
            for raw in links.extract(page_html(web, h, k, 0)).links:
                assert_same(raw.href.strip(), url)
                n += 1
    assert n > 100
