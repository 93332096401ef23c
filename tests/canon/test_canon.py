"""crawl.canon and `crawl canon`: one table per rule, properties, the CLI."""

from __future__ import annotations

import subprocess
import sys
from dataclasses import replace

import orjson
import pytest
import xxhash
from click.testing import CliRunner
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from crawl.canon import (
    CANON_VERSION,
    DEFAULT,
    CanonConfig,
    CanonError,
    canonicalize,
    host_of,
    registered_domain,
)
from crawl.canon.canonical import RULES, fingerprint, surt
from crawl.canon.rules import PCT_FIXABLE
from crawl.commands.canon import command as canon_cmd


def canon(url: str, base: str | None = None, config: CanonConfig = DEFAULT) -> str:
    return canonicalize(url, base, config).url


# -- one table per rule --------------------------------------------------------

RULE_TABLE = {
    "whatwg-parse": [
        ("HTTP://EXAMPLE.COM/", "http://example.com/"),  # scheme and host lowercased
        ("hTTpS://Example.Com/Path", "https://example.com/Path"),  # path case kept
        ("http://example.com:80/", "http://example.com/"),  # default port
        ("https://example.com:443/", "https://example.com/"),
        ("http://example.com:443/", "http://example.com:443/"),  # not the default for http
        ("https://example.com:8443/x", "https://example.com:8443/x"),
        ("http://example.com:0080/", "http://example.com/"),
        ("http://example.com/a/./b/../c", "http://example.com/a/c"),  # dot segments
        ("http://example.com/a/%2e%2E/c", "http://example.com/c"),
        ("http://example.com/../../a", "http://example.com/a"),
        ("http://example.com", "http://example.com/"),  # empty path
        ("http://example.com?a=1", "http://example.com/?a=1"),
        ("http://example.com/a b", "http://example.com/a%20b"),  # must-encode chars
        ("http://example.com/ä", "http://example.com/%C3%A4"),
        ("http:\\\\example.com\\a\\b", "http://example.com/a/b"),  # backslashes
        ("  http://example.com/\t\n ", "http://example.com/"),  # C0/space trimmed, tab/LF removed
    ],
    "root-dot": [
        ("http://example.com./", "http://example.com/"),
        ("http://Example.COM.:8080/a", "http://example.com:8080/a"),
    ],
    "userinfo": [
        ("http://user:pw@example.com/", "http://example.com/"),
        ("http://user@example.com/a", "http://example.com/a"),
    ],
    "fragment": [
        ("http://example.com/a#top", "http://example.com/a"),
        ("http://example.com/a#", "http://example.com/a"),
        ("http://example.com/a?b=1#c?d", "http://example.com/a?b=1"),
    ],
    "percent-encoding": [
        ("http://example.com/%7euser/%41", "http://example.com/~user/A"),  # unreserved decoded
        ("http://example.com/a%2fb", "http://example.com/a%2Fb"),  # reserved kept, upper-cased
        ("http://example.com/%c3%a4", "http://example.com/%C3%A4"),
        ("http://example.com/?q=%2d%5f%2e%7e%26", "http://example.com/?q=-_.~%26"),
        ("http://example.com/?a%3Db=c", "http://example.com/?a%3Db=c"),  # '=' stays encoded
        ("http://example.com/%zz%4", "http://example.com/%zz%4"),  # not escapes: untouched
        ("http://example.com/a+b?q=a+b", "http://example.com/a+b?q=a+b"),  # '+' never decoded
    ],
    "session-path-params": [
        ("http://example.com/a.jsp;jsessionid=0A1B2C", "http://example.com/a.jsp"),
        ("http://example.com/a;JSESSIONID=1/b", "http://example.com/a/b"),
        ("http://example.com/x;phpsessid=9?y=1", "http://example.com/x?y=1"),
        ("http://example.com/x;aspsessionidQQGG=abc", "http://example.com/x"),
        ("http://example.com/a/..;jsessionid=1/b", "http://example.com/b"),  # re-parsed
        ("http://example.com/x;v=2", "http://example.com/x;v=2"),  # other params kept
    ],
    "tracking-params": [
        ("http://example.com/?utm_source=x&utm_medium=y&a=1", "http://example.com/?a=1"),
        ("http://example.com/?gclid=1&fbclid=2&mc_eid=3&b", "http://example.com/?b"),
        ("http://example.com/?UTM_Campaign=z", "http://example.com/"),
        ("http://example.com/?utm_=1&utmx=2", "http://example.com/?utmx=2"),
        ("http://example.com/?a=utm_source", "http://example.com/?a=utm_source"),  # values kept
        ("http://example.com/?xgclid=1", "http://example.com/?xgclid=1"),  # whole names only
    ],
    "session-params": [
        ("http://example.com/?sid=1&a=2", "http://example.com/?a=2"),
        ("http://example.com/?PHPSESSID=ab&JSessionID=cd&q=1", "http://example.com/?q=1"),
        ("http://example.com/?sidebar=1", "http://example.com/?sidebar=1"),
        ("http://example.com/?ASPSESSIONIDSCQQ=1&cfid=2&cftoken=3", "http://example.com/"),
    ],
    "empty-query": [
        ("http://example.com/?", "http://example.com/"),
        ("http://example.com/?&&", "http://example.com/"),
        ("http://example.com/?a=1&&b=2&", "http://example.com/?a=1&b=2"),
        ("http://example.com/?a=", "http://example.com/?a="),  # an empty value is a value
    ],
    "sort-query": [
        ("http://example.com/?b=2&a=1", "http://example.com/?a=1&b=2"),
        ("http://example.com/?a=2&b=1&a=1", "http://example.com/?a=2&a=1&b=1"),  # stable
        ("http://example.com/?ab=1&a=2&a1=3", "http://example.com/?a=2&a1=3&ab=1"),
        ("http://example.com/?B=1&a=2", "http://example.com/?B=1&a=2"),  # code-point order
        ("http://example.com/?z&y=", "http://example.com/?y=&z"),
    ],
}


@pytest.mark.parametrize(
    ("rule", "raw", "want"),
    [(rule, raw, want) for rule, rows in RULE_TABLE.items() for raw, want in rows],
)
def test_rule_table(rule: str, raw: str, want: str) -> None:
    assert canon(raw) == want
    trace: list[dict[str, object]] = []
    canonicalize(raw, trace=trace)
    if raw != want:
        assert rule in [step["rule"] for step in trace], trace


def test_every_rule_has_a_table() -> None:
    assert {name for name, _ in RULES} <= set(RULE_TABLE)


def test_issue_example() -> None:
    c = canonicalize("HTTP://Example.COM:80/a/../b?utm_source=x&b=2&a=1#top")
    assert c.url == "http://example.com/b?a=1&b=2"
    assert c.host == "example.com"
    assert c.surt == "com,example)/b?a=1&b=2"
    assert c.fp == xxhash.xxh3_64_intdigest(b"http://example.com/b?a=1&b=2") == fingerprint(c.url)
    assert len(c.fp_hex) == 16 and int(c.fp_hex, 16) == c.fp


def test_percent_fast_check_agrees_with_the_rule_on_every_escape() -> None:
    hexdigits = "0123456789abcdefABCDEF"
    for a in hexdigits:
        for b in hexdigits:
            esc = f"%{a}{b}"
            changed = canon(f"http://e.test/{esc}") != f"http://e.test/{esc}"
            assert bool(PCT_FIXABLE.search(esc)) == changed, esc


HOSTS = [
    # IDN: UTS #46 mapping then punycode
    ("http://bücher.de/", "http://xn--bcher-kva.de/", "xn--bcher-kva.de"),
    ("http://BÜCHER.de/", "http://xn--bcher-kva.de/", "xn--bcher-kva.de"),
    ("http://xn--bcher-kva.de/", "http://xn--bcher-kva.de/", "xn--bcher-kva.de"),
    ("http://例え.テスト/", "http://xn--r8jz45g.xn--zckzah/", "xn--r8jz45g.xn--zckzah"),
    ("http://faß.de/", "http://xn--fa-hia.de/", "xn--fa-hia.de"),  # nontransitional
    ("http://%65xample.com/", "http://example.com/", "example.com"),
    # IPv4 in every form WHATWG accepts
    ("http://127.0.0.1/", "http://127.0.0.1/", "127.0.0.1"),
    ("http://0x7f.1/", "http://127.0.0.1/", "127.0.0.1"),
    ("http://2130706433/", "http://127.0.0.1/", "127.0.0.1"),
    ("http://0177.0.0.1/", "http://127.0.0.1/", "127.0.0.1"),
    ("http://127.1:8080/", "http://127.0.0.1:8080/", "127.0.0.1:8080"),
    ("http://1.2.3.4./", "http://1.2.3.4/", "1.2.3.4"),
    # IPv6: compressed, lowercase, brackets kept
    ("http://[::1]/", "http://[::1]/", "[::1]"),
    ("http://[0:0:0:0:0:0:0:1]:8080/", "http://[::1]:8080/", "[::1]:8080"),
    ("http://[2001:DB8:0:0:1::1]/", "http://[2001:db8::1:0:0:1]/", "[2001:db8::1:0:0:1]"),
    ("http://[::ffff:1.2.3.4]/", "http://[::ffff:102:304]/", "[::ffff:102:304]"),
    ("https://[::1]:443/", "https://[::1]/", "[::1]"),
]


@pytest.mark.parametrize(("raw", "want", "host"), HOSTS)
def test_hosts_idn_ipv4_ipv6(raw: str, want: str, host: str) -> None:
    c = canonicalize(raw)
    assert (c.url, c.host) == (want, host)
    assert host_of(raw) == host


REJECTS = [
    ("ftp://example.com/", "unsupported-scheme"),
    ("mailto:someone@example.com", "unsupported-scheme"),
    ("javascript:void(0)", "unsupported-scheme"),
    ("data:text/html,hi", "unsupported-scheme"),
    ("file:///etc/passwd", "unsupported-scheme"),
    ("ws://example.com/", "unsupported-scheme"),
    ("/relative/path", "relative-without-base"),
    ("page.html", "relative-without-base"),
    ("", "relative-without-base"),
    ("http://", "invalid-host"),
    ("http://?q", "invalid-host"),
    ("http://@/", "invalid-host"),
    ("http://exa mple.com/", "invalid-host"),
    ("http://a..b/", "invalid-host"),
    ("http://a$b.com/", "invalid-host"),
    ("http://-start.com/", "invalid-host"),
    ("http://" + "a" * 64 + ".com/", "invalid-host"),
    ("http://.", "invalid-host"),
    ("http://foo.123/", "invalid-host"),  # ends in a number but is no IPv4 address
    ("http://256.256.256.256/", "invalid-host"),
    ("http://[::1/", "invalid-host"),
    ("http://[1:2:3]/", "invalid-host"),
    ("http://xn--a.com/", "invalid-host"),  # punycode decoding to a control character
    ("http://xn--abc-.com/", "invalid-host"),  # an A-label for a pure-ASCII name
    ("http://xn--.com/", "invalid-host"),
    ("http://example.com:99999/", "invalid-port"),
    ("http://example.com:8o/", "invalid-port"),
    ("http://example.com/" + "a" * 2100, "too-long"),
    ("http://example.com/?" + "x=1&" * 3000, "too-long"),
    ("http://example.com/\ud800", "not-unicode"),
]


@pytest.mark.parametrize(("raw", "reason"), REJECTS)
def test_rejects_with_reason(raw: str, reason: str) -> None:
    with pytest.raises(CanonError) as info:
        canonicalize(raw)
    assert info.value.reason == reason
    assert isinstance(info.value, ValueError) and info.value.detail


def test_length_limit_counts_the_canonical_form_and_is_configurable() -> None:
    tracked = "http://example.com/?" + "&".join(f"utm_{i}=x" for i in range(300))
    assert len(tracked) > 2048 and canon(tracked) == "http://example.com/"
    exact = "http://example.com/" + "a" * (2048 - 19)
    assert canon(exact) == exact
    with pytest.raises(CanonError, match="too-long"):
        canonicalize(exact + "a")
    small = replace(DEFAULT, max_length=30)
    with pytest.raises(CanonError, match="too-long"):
        canonicalize("http://example.com/abcdefghijkl", config=small)


BASES = [
    ("../c", "http://h.test/a/b/", "http://h.test/a/c"),
    ("?q=1#f", "http://h.test/a/b", "http://h.test/a/b?q=1"),
    ("//other.test/x", "https://h.test/", "https://other.test/x"),
    ("/x", "https://h.test:8443/a", "https://h.test:8443/x"),
    ("https://abs.test/", "http://h.test/", "https://abs.test/"),  # absolute ignores base
    ("", "http://h.test/a#frag", "http://h.test/a"),
]


@pytest.mark.parametrize(("ref", "base", "want"), BASES)
def test_relative_references_resolve_against_base(ref: str, base: str, want: str) -> None:
    assert canon(ref, base) == want


def test_bad_bases() -> None:
    with pytest.raises(CanonError, match="invalid-base"):
        canonicalize("/x", "not a url")
    with pytest.raises(CanonError, match="unsupported-scheme"):
        canonicalize("x", "ftp://h.test/")


SURTS = [
    ("http://www.example.com/a?b=1", "com,example,www)/a?b=1"),
    ("https://Example.co.uk:8443/A/B", "uk,co,example:8443)/A/B"),
    ("http://127.0.0.1:8080/x", "127.0.0.1:8080)/x"),
    ("http://[::1]/", "[::1])/"),
    ("http://localhost/", "localhost)/"),
    ("http://h1.test/p/", "test,h1)/p/"),
]


@pytest.mark.parametrize(("raw", "want"), SURTS)
def test_surt(raw: str, want: str) -> None:
    assert surt(raw) == want


@pytest.mark.parametrize(("host", "want"), [
    ("www.example.co.uk", "example.co.uk"),
    ("a.b.example.com", "example.com"),
    ("EXAMPLE.com.:8080", "example.com"),
    ("foo.github.io", "github.io"),  # ICANN suffixes only
    ("www.h3.shop.test", "shop.test"),  # unknown suffix: last two labels
    ("localhost", "localhost"),
    ("127.0.0.1", "127.0.0.1"),
    ("[::1]:80", "[::1]"),
])
def test_registered_domain_offline(host: str, want: str) -> None:
    assert registered_domain(host) == want


def test_host_of_rejects_what_canon_rejects() -> None:
    assert host_of("HTTP://User@Example.COM.:81/x?y#z") == "example.com:81"
    for bad in ("ftp://x/", "http://a..b/", "/rel"):
        with pytest.raises(CanonError):
            host_of(bad)


def test_config_strip_keep_order_userinfo() -> None:
    cfg = DEFAULT.with_strip(["Ref", "pk_*"])
    assert canon("http://e.test/?ref=1&pk_campaign=2&PK_kwd=3&q=1", config=cfg) == "http://e.test/?q=1"
    assert canon("http://e.test/?ref=1") == "http://e.test/?ref=1"  # the default is unchanged
    keep = replace(DEFAULT, sort_query=False)
    assert canon("http://e.test/?b=1&a=2", config=keep) == "http://e.test/?b=1&a=2"
    userinfo = replace(DEFAULT, strip_userinfo=False)
    kept = canonicalize("http://u:p%7e@e.test/x?a", config=userinfo)
    assert (kept.url, kept.surt, kept.host) == ("http://u:p~@e.test/x?a", "test,e)/x?a", "e.test")
    none = CanonConfig(strip_params=frozenset(), strip_prefixes=(), session_params=frozenset(),
                       session_prefixes=())
    assert canon("http://e.test/x;sid=1?utm_a=1&sid=2", config=none) == "http://e.test/x;sid=1?sid=2&utm_a=1"


def test_explain_names_each_rule_in_order() -> None:
    trace: list[dict[str, object]] = []
    c = canonicalize("HTTP://Example.COM:80/a/../b?utm_source=x&b=2&a=1#top", trace=trace)
    assert [s["rule"] for s in trace] == ["whatwg-parse", "fragment", "tracking-params", "sort-query"]
    assert trace[0]["before"] == "HTTP://Example.COM:80/a/../b?utm_source=x&b=2&a=1#top"
    notes = trace[0]["notes"]
    assert isinstance(notes, list)
    assert {"scheme lowercased", "host lowercased", "default port 80 dropped",
            "dot segments resolved"} <= set(notes)
    assert trace[-1]["after"] == c.url
    for a, b in zip(trace, trace[1:], strict=False):
        assert a["after"] == b["before"]
    untouched: list[dict[str, object]] = []
    canonicalize("http://example.com/", trace=untouched)
    assert untouched == []


# -- properties ------------------------------------------------------------------

_label = st.text("abcxyzABC019-_äßü", min_size=1, max_size=8)
_host = st.one_of(
    st.lists(_label, min_size=1, max_size=4).map(".".join),
    st.sampled_from(["127.0.0.1", "0x7f.1", "[::1]", "[2001:DB8::1]", "example.com.", "a..b"]),
)
_seg = st.one_of(
    st.text("abAB09-._~%/;=!$'()*+,:@ äé", max_size=8),
    st.sampled_from([".", "..", "%2e", "%2E%2e", "%7e", "%7E", "%2f", "%41", "%zz",
                     "x;jsessionid=1", "..;jsessionid=2", ";sid=3", "%", "%4"]),
)
_pair = st.one_of(
    st.tuples(st.sampled_from(["a", "B", "utm_source", "UTM_x", "gclid", "sid", "q", "Q",
                               "phpsessid", "a%5Fb", "utm%5Fx", "", "x y", "é"]),
              st.sampled_from(["", "=", "=1", "=%7e", "=a&b", "=%2B", "==", "=é"]))
    .map("".join),
    st.text("ab=&%;+ é", max_size=6),
)
_url = st.builds(
    lambda scheme, userinfo, host, port, segs, pairs, q, frag: (
        f"{scheme}://{userinfo}{host}{port}/{'/'.join(segs)}"
        + (("?" + "&".join(pairs)) if q else "") + frag
    ),
    st.sampled_from(["http", "https", "HTTP", "hTTps"]),
    st.sampled_from(["", "user@", "u:p@", "%7e:x@"]),
    _host,
    st.sampled_from(["", ":80", ":443", ":8080", ":0", ":65535"]),
    st.lists(_seg, max_size=5),
    st.lists(_pair, max_size=6),
    st.booleans(),
    st.sampled_from(["", "#", "#top", "#a?b"]),
)

PROPS = settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@PROPS
@given(_url)
@example("http://x/a;jsessionid=1/..;sid=2/b")
@example("http://x/?utm_a=1&&b=2")
def test_idempotent(url: str) -> None:
    try:
        once = canonicalize(url)
    except CanonError:
        return
    twice = canonicalize(once.url)
    assert twice == once


@PROPS
@given(_url)
def test_fast_path_matches_the_traced_rule_run(url: str) -> None:
    try:
        fast = canonicalize(url)
    except CanonError as exc:
        with pytest.raises(CanonError) as info:
            canonicalize(url, trace=[])
        assert info.value.reason == exc.reason
        return
    trace: list[dict[str, object]] = []
    assert canonicalize(url, trace=trace) == fast
    if trace:
        assert trace[-1]["after"] == fast.url
    else:
        assert fast.url == url


@PROPS
@given(_url)
def test_keys_are_consistent(url: str) -> None:
    for config in (DEFAULT, replace(DEFAULT, strip_userinfo=False)):
        try:
            c = canonicalize(url, config=config)
        except CanonError:
            return
        assert c.url.isascii() and len(c.url) <= DEFAULT.max_length
        assert c.fp == fingerprint(c.url) and 0 <= c.fp < 2**64
        assert c.host == host_of(c.url) == host_of(url)
        authority = c.url.split("/", 3)[2]
        assert authority.rpartition("@")[2] == c.host
        assert "@" not in authority or not config.strip_userinfo
        assert c.surt.endswith(")" + "/" + c.url.split("/", 3)[3])
        assert "#" not in c.url


@settings(max_examples=600, deadline=None)
@given(st.text(max_size=60), st.one_of(st.none(), st.text(max_size=30),
                                       st.just("http://base.test/a/b")))
@example("http://\x00/", None)
@example("http://[", None)
@example("\ud800", "http://b.test/")
def test_arbitrary_text_only_ever_rejects(text: str, base: str | None) -> None:
    try:
        c = canonicalize(text, base)
    except CanonError as exc:
        assert exc.reason in {"too-long", "not-unicode", "relative-without-base", "invalid-base",
                              "unsupported-scheme", "invalid-host", "invalid-port", "invalid-url"}
        return
    assert canonicalize(c.url) == c


@settings(max_examples=600, deadline=None)
@given(st.sampled_from(["http://", "https://", "HTTP:", "http:/", "https:\\\\"]),
       st.text(max_size=60))
def test_arbitrary_text_after_a_scheme(prefix: str, rest: str) -> None:
    """Text that reaches the host and path parsers: canonical, idempotent, or a reject."""
    try:
        c = canonicalize(prefix + rest)
    except CanonError:
        return
    assert canonicalize(c.url) == c
    assert canonicalize(prefix + rest, trace=[]) == c
    assert host_of(prefix + rest) == c.host


# -- the command -------------------------------------------------------------------

def run(args: list[str], stdin: str) -> tuple[int, list[dict[str, object]], str]:
    res = CliRunner().invoke(canon_cmd, args, input=stdin)
    out = [orjson.loads(line) for line in res.stdout.splitlines()]
    return res.exit_code, out, res.stderr


def test_cli_issue_example_in_a_subprocess() -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "crawl", "canon"],
        input=b"HTTP://Example.COM:80/a/../b?utm_source=x&b=2&a=1#top\n",
        capture_output=True, check=True, timeout=60,
    )
    (rec,) = [orjson.loads(line) for line in proc.stdout.splitlines()]
    assert rec == {
        "kind": "url", "v": 1, "url": "http://example.com/b?a=1&b=2",
        "fp": f"{fingerprint('http://example.com/b?a=1&b=2'):016x}",
        "surt": "com,example)/b?a=1&b=2", "host": "example.com", "canon_v": CANON_VERSION,
    }


def test_cli_one_record_per_input_in_order_with_passthrough() -> None:
    lines = [
        "http://A.test/x#y",
        orjson.dumps({"kind": "link", "url": "../c?b=1&a=2", "base": "http://h.test/a/b/",
                      "depth": 3, "anchor": "next", "fp": "stale"}).decode(),
        "mailto:x@y.test",
        orjson.dumps({"url": "/rel", "parent": "http://p.test/"}).decode(),
    ]
    code, out, _ = run([], "\n".join(lines) + "\n")
    assert code == 0 and len(out) == 4
    assert out[0]["kind"] == "url" and out[0]["url"] == "http://a.test/x"
    link = out[1]
    assert link["kind"] == "link" and link["url"] == "http://h.test/a/c?a=2&b=1"
    assert (link["depth"], link["anchor"], link["base"]) == (3, "next", "http://h.test/a/b/")
    assert link["fp"] == f"{fingerprint(link['url']):016x}"  # stale fp replaced
    assert link["surt"] == "test,h)/a/c?a=2&b=1" and link["canon_v"] == CANON_VERSION
    assert out[2]["kind"] == "reject" and out[2]["input"] == "mailto:x@y.test"
    assert out[2]["error"] == "unsupported-scheme" and "url" not in out[2]
    assert out[3] == {"kind": "reject", "v": 1, "input": "/rel", "parent": "http://p.test/",
                      "error": "relative-without-base", "canon_v": CANON_VERSION,
                      "detail": out[3]["detail"]}


def test_cli_base_option_and_record_base_wins() -> None:
    stdin = "/a\n" + orjson.dumps({"url": "/b", "base": "http://rec.test/"}).decode() + "\n"
    code, out, _ = run(["--base", "https://opt.test/dir/"], stdin)
    assert code == 0
    assert [r["url"] for r in out] == ["https://opt.test/a", "http://rec.test/b"]


def test_cli_explain_strip_and_options() -> None:
    code, out, _ = run(["--explain", "--strip-param", "ref"], "http://E.test/?ref=1&b=2&a=1#x\n")
    assert code == 0 and out[0]["url"] == "http://e.test/?a=1&b=2"
    assert [s["rule"] for s in out[0]["explain"]] == [  # type: ignore[union-attr]
        "whatwg-parse", "fragment", "tracking-params", "sort-query"]
    code, out, _ = run(["--keep-query-order", "--keep-userinfo", "--max-length", "40"],
                       "http://u@e.test/?b=1&a=2\nhttp://e.test/" + "x" * 40 + "\n")
    assert out[0]["url"] == "http://u@e.test/?b=1&a=2"
    assert out[1]["kind"] == "reject" and out[1]["error"] == "too-long"


def test_cli_malformed_input_is_reported_and_strict_exits_3(tmp_path) -> None:  # type: ignore[no-untyped-def]
    stdin = 'http://ok.test/\n{"kind": "url"\n{"kind": "fetch", "url": "http://x/", "outcome": "ok"}\n'
    stats = tmp_path / "stats.json"
    code, out, err = run(["--stats", str(stats)], stdin)
    assert code == 0 and [r["url"] for r in out] == ["http://ok.test/"]
    assert "line 2" in err and "line 3" in err
    summary = orjson.loads(stats.read_bytes())
    assert summary["bad_records"] == 2 and summary["unchanged"] == 1
    code, out, err = run(["--strict"], stdin)
    assert code == 3 and len(out) == 1


def test_cli_spool_round_trip(tmp_path) -> None:  # type: ignore[no-untyped-def]
    src = tmp_path / "in.txt"
    src.write_text("http://a.test/?b=1&a=2\nftp://x/\n")
    code, _, _ = run(["-i", str(src), "-o", f"spool:{tmp_path / 'sp'}"], "")
    assert code == 0
    proc = subprocess.run([sys.executable, "-m", "crawl", "spool", "take", str(tmp_path / "sp")],
                          capture_output=True, check=True, timeout=60)
    out = [orjson.loads(line) for line in proc.stdout.splitlines()]
    assert [r.get("url", r.get("input")) for r in out] == ["http://a.test/?a=2&b=1", "ftp://x/"]


def test_cli_streams_a_record_before_stdin_closes() -> None:
    proc = subprocess.Popen([sys.executable, "-m", "crawl", "canon"], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    try:
        assert proc.stdin is not None and proc.stdout is not None
        proc.stdin.write(b"http://Stream.test/#x\n")
        proc.stdin.flush()
        first = orjson.loads(proc.stdout.readline())  # answered while stdin is still open
        assert first["url"] == "http://stream.test/"
        proc.stdin.write(b"http://two.test\n")
        proc.stdin.close()
        assert orjson.loads(proc.stdout.readline())["url"] == "http://two.test/"
        assert proc.wait(timeout=60) == 0
    finally:
        proc.kill()
        proc.wait()
