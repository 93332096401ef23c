"""robots.txt (RFC 9309): the conformance corpus, parser edge cases, properties.

Named as google/robotstxt names its tests: ``test_rfc9309_*`` checks what
the RFC requires, ``test_lenient_*`` checks leniency beyond it.
"""

from __future__ import annotations

import importlib.util
import json
import os
import random
import re
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from crawl.robots import MAX_BYTES, parse
from crawl.robots import policy as robots
from crawl.robots.policy import ALLOW_ALL, DISALLOW_ALL, Decision, for_status
from crawl.testweb.generator import rules_disallow

# The corpus lives beside the checkout (../shared/conformance).
CONFORMANCE = Path(os.environ.get("CRAWL_CONFORMANCE", Path(__file__).resolve().parents[3]
                                  / "shared" / "conformance"))


def _load_checker():
    spec = importlib.util.spec_from_file_location("check_robots", CONFORMANCE / "check_robots.py")
    if spec is None or spec.loader is None or not (CONFORMANCE / "check_robots.py").exists():
        why = f"conformance corpus not found at {CONFORMANCE} (set CRAWL_CONFORMANCE)"
        if os.environ.get("CI"):  # in CI a missing corpus is a broken set-up, never a quiet skip
            pytest.fail(why + "; CI is set, so the RFC 9309 conformance tests may not be skipped")
        pytest.skip(why)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_a_missing_corpus_fails_under_ci(tmp_path: Path) -> None:
    """The two corpus tests, run by a real pytest with CI set and the corpus pointed
    at nothing, fail and say why (without CI they skip, as on a bare checkout)."""
    args = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--noconftest",
            str(Path(__file__).resolve()), "-k", "test_conformance_"]
    env = {**os.environ, "CI": "true", "CRAWL_CONFORMANCE": str(tmp_path / "nowhere")}
    ci = subprocess.run(args, env=env, capture_output=True, text=True, timeout=120)
    assert ci.returncode == 1 and "2 failed" in ci.stdout, ci.stdout[-2000:]
    assert "may not be skipped" in ci.stdout


def _allowed(body: str, agent: str, url: str) -> bool:
    return parse(body).allowed(url, agent)


# -- the conformance corpus ----------------------------------------------------------
def _group(case: dict) -> str:
    if case["source"] == "google/robotstxt":
        return "google ID_" if case["name"].startswith("ID_") else "google other"
    return case["source"]


def test_conformance_corpus(capsys: pytest.CaptureFixture[str]) -> None:
    cr = _load_checker()
    cases = cr.load_cases()
    results = cr.evaluate(cases, cr.run_callable(_allowed, cases))
    # Where the sources disagree the corpus README says who wins: for the
    # ID_Encoding conflicts the RFC (percent-encoding normalised on both
    # sides, section 2.2.2) wins over Google's expectation.
    overruled = {c["name"] for g in cr.find_conflicts(cases) for c in g
                 if c["source"] == "google/robotstxt" and c["name"].startswith("ID_Encoding")}
    assert len(overruled) == 3
    rates: dict[str, list[int]] = {}
    for r in results:
        rates.setdefault(_group(r["case"]), [0, 0])[r["status"] == "pass"] += 1
    with capsys.disabled():
        print("\nrobots.txt conformance (crawl.robots):")
        for name, (bad, good) in sorted(rates.items()):
            print(f"  {name:<26} {good:4d}/{good + bad:<4d} ({100 * good / (good + bad):5.1f}%)")
        total = sum(g for _, g in rates.values())
        print(f"  {'TOTAL':<26} {total:4d}/{len(results)}  (protego 0.7.0: 531/547)")
    must = [r for r in results
            if (r["case"]["source"] == "rfc9309"
                or (r["case"]["source"] == "google/robotstxt" and r["case"]["name"].startswith("ID_")
                    and r["case"]["name"] not in overruled))]
    failed = [r for r in must if r["status"] != "pass"]
    assert not failed, cr.format_failures(failed, 20)
    # ... and on those three we side with the RFC, not with Google.
    assert not any(r["status"] == "pass" for r in results if r["case"]["name"] in overruled)
    assert sum(r["status"] == "pass" for r in results) >= 534  # no regression below today's rate


def test_conformance_extras_crawl_delay_request_rate_sitemaps() -> None:
    cr = _load_checker()
    cases = cr.load_extras()

    def answer(c: dict) -> dict:
        r = parse(c["robots"])
        if c["kind"] == "crawl_delay":
            return {"crawl_delay": r.crawl_delay(c["agent"])}
        if c["kind"] == "sitemaps":
            return {"sitemaps": list(r.sitemaps)}
        rate = r.request_rate(c["agent"])
        return {"request_rate": rate._asdict() if rate else None}

    results = cr.evaluate(cases, [(answer(c), None) for c in cases])
    failed = [r for r in results if r["status"] != "pass"]
    assert not failed, cr.format_failures(failed, 20)


# -- RFC 9309 requirements, spelled out ----------------------------------------------------
RULES = """\
User-agent: otherbot
Disallow: /

User-agent: crawl
Disallow: /private/
Allow: /private/open-
Allow: /news/
Disallow: /news/
Disallow: /*.pdf$
Crawl-delay: 2

User-agent: *
Disallow: /
Sitemap: http://h.test/sitemap.xml
"""


def test_rfc9309_decide_names_the_rule_line_and_group() -> None:
    r = parse(RULES)
    assert r.decide("http://h.test/private/x", "crawl") == Decision(False, "Disallow: /private/", 5, "crawl")
    assert r.decide("/private/open-1", "crawl") == Decision(True, "Allow: /private/open-", 6, "crawl")
    assert r.decide("/news/a", "crawl").rule == "Allow: /news/"  # a tie: Allow wins
    assert r.decide("/a.pdf", "crawl").allowed is False
    assert r.decide("/a.pdf?x=1", "crawl").allowed is True  # $ anchors the end
    assert r.decide("/public", "crawl") == Decision(True, None, None, "crawl")
    assert r.decide("/public", "somebot") == Decision(False, "Disallow: /", 13, "*")
    assert r.decide("/robots.txt", "otherbot").allowed  # section 2.2.2: always allowed
    assert r.crawl_delay("crawl") == 2.0 and r.crawl_delay("somebot") is None
    assert r.sitemaps == ("http://h.test/sitemap.xml",)
    with pytest.raises(AttributeError):
        r.sitemaps = ()  # an immutable value, shared by every fetch task
    assert r.allowed("/public\ud800", "crawl")  # even a broken str never raises


def test_rfc9309_full_user_agent_string_selects_by_product_token() -> None:
    r = parse(RULES)
    ua = "crawl/0.1 (+https://github.com/crawl/crawl; crawler contact)"
    assert r.decide("/private/x", ua).group == "crawl"
    assert r.allowed("/public", ua) and r.allowed("/public", "CRAWL")
    compatible = "Mozilla/5.0 (compatible; OtherBot/2.1; +http://other.example/)"
    assert r.decide("/x", compatible) == Decision(False, "Disallow: /", 2, "otherbot")


def test_rfc9309_status_table() -> None:
    assert for_status(200) is None and for_status(204) is None
    for code in (400, 401, 403, 404, 410, 301, 399):
        assert for_status(code) is ALLOW_ALL
    for code in (500, 502, 503, 504, 599, 429, 0, 600):
        assert for_status(code) is DISALLOW_ALL
    assert ALLOW_ALL.allowed("/anything", "crawl")
    assert DISALLOW_ALL.decide("/anything", "crawl") == Decision(False, "Disallow: /", None, "*")
    assert DISALLOW_ALL.allowed("/robots.txt", "crawl")


def test_rfc9309_500_kib_limit() -> None:
    head = b"User-agent: *\n"
    filler = b"# " + b"x" * 98 + b"\n"
    body = head + filler * ((MAX_BYTES - 200) // len(filler))
    inside = b"Disallow: /inside\n"
    assert len(body) + len(inside) <= MAX_BYTES
    straddle = b"Allow: /" + b"y" * 300 + b"\n"  # crosses the limit: dropped, not cut short
    beyond = b"Disallow: /beyond\n"
    big = body + inside + straddle + filler * 10 + beyond
    r = parse(big)
    assert MAX_BYTES == 512_000 and r.truncated and r.size == len(big)
    assert not r.allowed("/inside", "crawl")
    assert r.allowed("/beyond", "crawl")
    assert r.decide("/y", "crawl").rule is None  # no half rule "Allow: /yyy" survives
    assert not parse(body + inside).truncated


def test_rfc9309_line_endings_and_bom() -> None:
    for sep in ("\n", "\r\n", "\r"):
        body = sep.join(["User-agent: a", "Allow: /x", "User-agent: b", "", "", "Disallow: /"])
        r = parse(body)
        assert r.allowed("/x", "a") and not r.allowed("/x", "b")
    for bom in (b"\xef\xbb\xbf", b"\xef\xbb", b"\xef"):
        r = parse(bom + b"User-agent: a\nDisallow: /x\n")
        assert not r.allowed("/x", "a")
    assert parse("\ufeffUser-agent: a\nDisallow: /x\n").allowed("/x", "a") is False
    # a BOM in the middle of the file is garbage, not skipped
    assert parse(b"User-agent: a\n\xef\xbb\xbfDisallow: /x\n").allowed("/x", "a")


def test_rfc9309_invalid_utf8_is_kept_as_bytes() -> None:
    r = parse(b"User-agent: *\nDisallow: /caf\xe9\nDisallow: /\xff\xfe/\n")
    assert not r.allowed("/caf%E9", "x") and not r.allowed("/caf%e9/menu", "x")
    assert not r.allowed("/%FF%FE/a", "x")
    assert r.allowed("/cafe", "x") and r.allowed("/caf%C3%A9", "x")


def test_rfc9309_percent_encoding_both_sides() -> None:
    r = parse("User-agent: *\nDisallow: /\nAllow: /foo/bar/ツ\nAllow: /%7Ejoe/\nAllow: /a%2fb\n")
    for url in ("/foo/bar/%E3%83%84", "/foo/bar/ツ", "/foo/bar/%e3%83%84x", "/~joe/x", "/%7ejoe/"):
        assert r.allowed(url, "x"), url
    assert not r.allowed("/a/b", "x")  # %2F is not "/" in a path
    assert robots.normalize("/a b<\"") == "/a%20b%3C%22"
    assert robots.path_of("http://u@h:1/p;q?x#f") == "/p;q?x"
    assert robots.path_of("http://h") == "/" and robots.path_of("?q") == "/?q"


def test_lenient_directives_and_typos() -> None:
    body = ("useragent: a\ndissallow: /typo\nuser agent b\ndisallow /nocolon\n"
            "User-agent: c*bot\nDisallow: /glob\nSITE-MAP: http://h/s.xml\n")
    r = parse(body)
    assert not r.allowed("/typo", "a") and not r.allowed("/nocolon", "b")
    assert not r.allowed("/glob", "cxbot") and r.allowed("/glob", "cxbo")
    assert r.sitemaps == ("http://h/s.xml",)


def test_crawl_delay_attaches_to_its_agents_without_splitting_groups() -> None:
    r = parse("User-agent: a\nCrawl-delay: 5\nUser-agent: b\nCrawl-delay: 1.5\nDisallow: /x\n")
    assert r.crawl_delay("a") == 5.0 and r.crawl_delay("b") == 1.5
    assert not r.allowed("/x", "a")  # still one group (section 2.2.4)
    assert parse("User-agent: *\nCrawl-delay: soon\n").crawl_delay("x") is None
    assert parse("User-agent: *\nCrawl-delay: -3\n").crawl_delay("x") is None


def test_ten_megabytes_of_garbage_parse_without_error() -> None:
    # imported here: test_a_missing_corpus_fails_under_ci runs this file with --noconftest,
    # and without tests/conftest.py the tests/ folder is not on sys.path
    from cputime import cpu_seconds_at_most

    with cpu_seconds_at_most(10.0):
        rng = random.Random(9309)
        garbage = bytes(rng.getrandbits(8) for _ in range(1 << 16)) * 160  # 10 MiB
        r = parse(garbage)
        assert r.truncated and r.size == len(garbage)
        assert isinstance(r.allowed("/x", "crawl"), bool)
        hostile = ("User-agent: *\n" + "Disallow: /" + "*a" * 2000 + "b\n") * 5000
        r = parse(hostile)
        assert r.allowed("/" + "a" * 20_000, "crawl")  # linear matching, no regex blow-up
        assert not r.allowed("/" + "a" * 2000 + "b", "crawl")


# -- properties -----------------------------------------------------------------------
# Paths never start with "//" (that would be a scheme-relative URL).
_PATHS = st.text(alphabet="ab/.", max_size=12).filter(lambda s: not s.startswith("/"))


def _reference(pattern: str, path: str) -> bool:
    """A slow, obviously right matcher: the pattern as an anchored regex."""
    anchored = pattern.endswith("$")
    body = pattern[:-1] if anchored else pattern
    rx = ".*".join(re.escape(p) for p in body.split("*")) + ("$" if anchored else "")
    return re.match(rx, path, re.DOTALL) is not None


@settings(max_examples=300, deadline=None)
@given(pattern=st.text(alphabet="ab/*", max_size=10).map(lambda s: "/" + s), dollar=st.booleans(),
       path=_PATHS.map(lambda s: "/" + s))
def test_property_wildcards_agree_with_a_reference_matcher(pattern: str, dollar: bool, path: str) -> None:
    pattern += "$" if dollar else ""
    decision = parse(f"User-agent: *\nDisallow: {pattern}\n").decide(path, "x")
    assert (not decision.allowed) == _reference(pattern, path)


_RULES = st.lists(st.tuples(st.booleans(), st.text(alphabet="ab/*", max_size=6),
                            st.sampled_from(["/", "*", "/a", "/b"]), st.booleans()), max_size=8)


@settings(max_examples=300, deadline=None)
@given(rules=_RULES, path=_PATHS.map(lambda s: "/" + s))
def test_property_longest_match_over_many_rules(rules: list, path: str) -> None:
    """Longest match wins, Allow wins a tie: against a brute-force reference."""
    lines, best = ["User-agent: *"], None
    for allow, tail, head, dollar in rules:
        pattern = head + tail + ("$" if dollar else "")
        lines.append(f"{'Allow' if allow else 'Disallow'}: {pattern}")
        if _reference(pattern, path):
            cand = (len(pattern), allow)
            best = cand if best is None or cand > best else best
    want = best is None or best[1]
    assert parse("\n".join(lines)).allowed(path, "x") == want


@settings(max_examples=200, deadline=None)
@given(body=st.binary(max_size=400) | st.text(max_size=400), url=st.text(max_size=40),
       agent=st.text(max_size=20))
def test_property_parse_never_raises_and_allowed_matches_decide(body: bytes | str, url: str,
                                                                agent: str) -> None:
    r = parse(body)
    assert r.allowed(url, agent) == r.decide(url, agent).allowed


@settings(max_examples=200, deadline=None)
@given(path=st.text(alphabet="abcXYZ019-._~", min_size=1, max_size=15), data=st.data())
def test_property_encoding_unreserved_characters_changes_nothing(path: str, data: st.DataObject) -> None:
    encoded = "".join(f"%{ord(c):02X}" if data.draw(st.booleans()) else c for c in path)
    r = parse(f"User-agent: *\nDisallow: /{encoded}\n")
    assert not r.allowed("/" + path, "x")
    assert not parse(f"User-agent: *\nDisallow: /{path}\n").allowed("/" + encoded, "x")


# -- crawl robots (the command) -------------------------------------------------------------
def _crawl(*args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "crawl", "robots", *args], input=stdin,
                          capture_output=True, text=True, timeout=60,
                          cwd=Path(__file__).resolve().parents[2])


@pytest.fixture
def robots_file(tmp_path: Path) -> Path:
    path = tmp_path / "robots.txt"
    path.write_text(RULES)
    return path


def test_cli_robots_file_text_output(robots_file: Path) -> None:
    p = _crawl("--robots-file", str(robots_file), "/private/x", "http://h.test/news/a", "/robots.txt")
    assert p.returncode == 0, p.stderr
    lines = p.stdout.splitlines()
    assert lines[0].split()[:4] == ["disallowed", "/private/x", "Disallow:", "/private/"]
    assert "(line 5, group crawl)" in lines[0]
    assert lines[1].startswith("allowed") and "Allow: /news/" in lines[1]
    assert "always allowed" in lines[2]


def test_cli_json_explain_and_agent(robots_file: Path) -> None:
    p = _crawl("-f", str(robots_file), "--json", "--explain", "--agent", "Googlebot/2.1", "/x?y")
    assert p.returncode == 0, p.stderr
    (rec,) = [json.loads(line) for line in p.stdout.splitlines()]
    assert rec["url"] == "/x?y" and rec["allowed"] is False
    assert rec["rule"] == "Disallow: /" and rec["line"] == 13 and rec["group"] == "*"
    assert rec["robots_txt"]["file"] == str(robots_file)
    assert rec["explain"]["agent_tokens"] == ["googlebot"]
    assert rec["explain"]["matching"] == [{"rule": "Disallow: /", "line": 13, "priority": 1}]


def test_cli_reads_records_from_stdin_and_reports_bad_lines(robots_file: Path) -> None:
    stdin = '/public\n{"kind": "url", "url": "/private/a", "priority": 3}\n{oops\n'
    p = _crawl("-f", str(robots_file), "--json", stdin=stdin)
    assert p.returncode == 0, p.stderr
    recs = [json.loads(line) for line in p.stdout.splitlines()]
    assert [(r["url"], r["allowed"]) for r in recs] == [("/public", True), ("/private/a", False)]
    assert recs[1]["priority"] == 3  # fields pass through
    assert "line 3" in p.stderr and "bad records 1" in p.stderr
    assert _crawl("-f", str(robots_file), "--strict", stdin=stdin).returncode == 3


def test_cli_exit_statuses(robots_file: Path, tmp_path: Path) -> None:
    assert _crawl("-f", str(robots_file), "--fail-disallowed", "/public").returncode == 0
    p = _crawl("-f", str(robots_file), "--fail-disallowed", "/public", "/private/")
    assert p.returncode == 1 and len(p.stdout.splitlines()) == 2
    p = _crawl("-f", str(tmp_path / "missing.txt"), "/x")
    assert p.returncode == 2 and "cannot read --robots-file" in p.stderr
    p = _crawl("/bare/path")  # live mode needs a URL with a host: bad input, said and skipped
    assert p.returncode == 0 and p.stdout == "" and "not an absolute URL" in p.stderr
    assert _crawl("--strict", "/bare/path").returncode == 3
    p = _crawl("-f", "-", stdin="User-agent: *\nDisallow: /\n")
    assert p.returncode == 2 and "give the URLs as arguments" in p.stderr


def test_cli_warns_about_an_oversize_file(tmp_path: Path) -> None:
    big = tmp_path / "big.txt"
    big.write_bytes(b"User-agent: *\nDisallow: /a\n" + b"# filler\n" * 60_000 + b"Disallow: /late\n")
    p = _crawl("-f", str(big), "--json", "/a", "/late")
    assert [json.loads(x)["allowed"] for x in p.stdout.splitlines()] == [False, True]
    assert "only the first 512,000 are parsed" in p.stderr


def test_cli_live_against_the_test_web(testweb) -> None:
    """Live mode fetches each origin's robots.txt and agrees with the web's ground truth."""
    urls, want = [], []
    for variant in ("simple", "rules", "404", "500", "oversize", "redirect"):
        host = testweb.with_behaviour(variant)[0]
        truth = testweb.hosts[host]["robots"]
        paths = {p["path"] for p in testweb.pages_of(host)}
        paths |= {"/", "/private/x", "/private/open-1", "/news/a", "/docs/a-draft", "/f.pdf",
                  "/blog/b", "/robots.txt"}
        for path in sorted(paths):
            urls.append(testweb.url(host, path))
            disallowed = path != "/robots.txt" and (
                truth.get("complete_disallow") or rules_disallow(truth.get("rules", []), path))
            want.append(not disallowed)
    p = _crawl("--json", "--resolve-file", str(testweb.hosts_file), "--allow-private",
               stdin="\n".join(urls) + "\n")
    assert p.returncode == 1, p.stderr  # the 500 host's robots.txt could not be consulted
    got = [json.loads(line) for line in p.stdout.splitlines()]
    assert [r["url"] for r in got] == urls
    wrong = [(r["url"], r["allowed"], r["rule"]) for r, w in zip(got, want, strict=True)
             if r["allowed"] is not w]
    assert not wrong
    verdicts = {r["robots_txt"]["verdict"] for r in got}
    assert {"parsed", "unavailable", "unreachable"} <= verdicts


def test_cli_live_with_a_crawl_dir_uses_its_robots_cache(testweb, tmp_path: Path) -> None:
    url = testweb.url(testweb.with_behaviour("rules")[0], "/private/x")
    args = ("--json", "--dir", str(tmp_path / "crawl"), "--resolve-file", str(testweb.hosts_file),
            "--allow-private", url)
    first, second = (json.loads(_crawl(*args).stdout) for _ in range(2))
    assert first["allowed"] is second["allowed"] is False
    assert first["rule"] == second["rule"] == "Disallow: /private/"
    assert (first["robots_txt"]["source"], second["robots_txt"]["source"]) == ("fetched", "cache")


def test_cli_refuses_urls_that_cannot_be_crawled(robots_file: Path) -> None:
    """Validated by the canonicaliser, as every stage does: no verdict for a URL no crawl
    would fetch (it used to answer "allowed" for each of these)."""
    bad = ["ftp://h.test/private/x", "javascript:alert(1)", "http://[::1", "http://h.test:99999/"]
    p = _crawl("-f", str(robots_file), "--json", "/news/a", *bad)
    assert p.returncode == 0, p.stderr
    assert [json.loads(x)["url"] for x in p.stdout.splitlines()] == ["/news/a"]
    for i, reason in enumerate(["unsupported-scheme", "unsupported-scheme", "invalid-host", "invalid-port"], 2):
        assert f"argument {i}: " in p.stderr and reason in p.stderr
    assert "bad records 4" in p.stderr
    assert _crawl("-f", str(robots_file), "--strict", *bad).returncode == 3
    p = _crawl("-f", str(robots_file), stdin="ftp://h.test/\n/news/a\n")
    assert "record 1: 'ftp://h.test/'" in p.stderr and p.stdout.startswith("allowed")


def test_cli_exits_1_when_robots_txt_cannot_be_consulted(testweb) -> None:
    """A 5xx or unreachable robots.txt decides "disallowed" by RFC 9309's rule, but the
    file was not consulted: exit 1, as the page says. A 404 is an answer (allow all): 0."""
    args = ("--resolve-file", str(testweb.hosts_file), "--allow-private")
    p = _crawl(*args, testweb.url(testweb.with_behaviour("500")[0], "/a"))
    assert p.returncode == 1, p.stderr
    assert p.stdout.startswith("disallowed") and "robots.txt unreachable" in p.stdout
    p = _crawl(*args, testweb.url(testweb.with_behaviour("404")[0], "/a"))
    assert p.returncode == 0 and p.stdout.startswith("allowed")


def test_cli_agent_defaults_to_the_user_agent_token(robots_file: Path) -> None:
    """--user-agent is the full header (as for fetch and run); its product token picks
    the group unless -A names one."""
    p = _crawl("-f", str(robots_file), "--json", "/news/a")
    assert json.loads(p.stdout)["group"] == "crawl"
    p = _crawl("-f", str(robots_file), "--json", "--user-agent", "OtherBot/2.0 (+http://o.test/bot)", "/news/a")
    rec = json.loads(p.stdout)
    assert (rec["group"], rec["allowed"]) == ("otherbot", False)
    p = _crawl("-f", str(robots_file), "--json", "--user-agent", "OtherBot/2.0", "-A", "crawl", "/news/a")
    assert json.loads(p.stdout)["group"] == "crawl"
