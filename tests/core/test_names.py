"""Names an operator gives for files inside the crawl directory (--warc-prefix)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from crawl.core import UsageError, check_file_name
from crawl.store import WarcWriter


@pytest.mark.parametrize("name", ["crawl", "nightly_2026-05-28", "shop.example", "crâwl", "a" * 100,
                                  "x" * 98 + "é"])
def test_plain_names_pass(name: str) -> None:
    assert check_file_name(name, "--warc-prefix") == name


@pytest.mark.parametrize("name, fault", [
    ("../../../x", "contains '/'"),
    ("a/b", "contains '/'"),
    ("a\\b", "contains '\\\\'"),
    ("..", "starts with '.'"),
    (".hidden", "starts with '.'"),
    ("-rf", "starts with '-'"),
    ("", "it is empty"),
    ("a b", "the character ' '"),
    ("a\tb", "the character '\\t'"),
    ("x\x00y", "the character '\\x00'"),
    ("x\ny", "the character '\\n'"),
    ("x\u200by", "the character '\\u200b'"),  # zero-width space: invisible in a listing
    ("x\udcff", "the character '\\udcff'"),  # an undecodable byte from argv
    ("a" * 101, "101 bytes long"),
    ("é" * 51, "102 bytes long"),
    (None, "of type NoneType, not a string"),
    (7, "of type int, not a string"),
])
def test_other_names_are_refused_with_the_reason_and_what_to_give(name: object, fault: str) -> None:
    with pytest.raises(UsageError) as got:
        check_file_name(name, "--warc-prefix")
    text = str(got.value)
    assert text.startswith("--warc-prefix ") and "is not a plain file name" in text
    assert fault in text and "give a name such as 'crawl'" in text
    assert "\n" not in text and got.value.exit_status == 2


def test_the_warc_writer_refuses_a_prefix_before_creating_anything(tmp_path: Path) -> None:
    with pytest.raises(UsageError, match="WARC file prefix"):
        WarcWriter(tmp_path / "warc", prefix="../x")
    assert list(tmp_path.iterdir()) == []


# -- the commands: flags and config, checked before anything is written ---------


def _crawl(*args: str, stdin: bytes = b"") -> subprocess.CompletedProcess[bytes]:
    return subprocess.run([sys.executable, "-m", "crawl", *args], input=stdin, capture_output=True,
                          timeout=120)


def _one_error_line(p: subprocess.CompletedProcess[bytes], prefix: str) -> None:
    err = p.stderr.decode()
    assert p.returncode == 2, err
    assert err.startswith(f"crawl: error: --warc-prefix {prefix!r} is not a plain file name"), err
    assert err.count("\n") == 1 and "Traceback" not in err
    assert p.stdout == b""


def test_fetch_refuses_a_warc_prefix_that_leaves_the_crawl_dir(testweb, tmp_path: Path) -> None:
    """``../../../x`` used to put the WARC files beside the crawl dir, where no reader
    looks (they refuse paths leaving DIR/warc): the page and its links were lost."""
    d = tmp_path / "a" / "b" / "D"
    p = _crawl("fetch", "--dir", str(d), "--resolve-file", str(testweb.hosts_file), "--allow-private",
               "--warc-prefix", "../../../x", stdin=testweb.url(0, "/").encode() + b"\n")
    _one_error_line(p, "../../../x")
    assert [f for f in tmp_path.rglob("*") if f.is_file()] == []  # nothing written, anywhere
    newline = _crawl("fetch", "--dir", str(d), "--warc-prefix", "a\nb", stdin=b"")
    _one_error_line(newline, "a\nb")


def test_run_refuses_a_warc_prefix_from_its_config(tmp_path: Path) -> None:
    hosts = tmp_path / "hosts"
    hosts.write_text("# no names: nothing may be fetched\n")
    cfg = tmp_path / "nightly.toml"
    cfg.write_text('warc-prefix = "../x"\nidle-exit = "1s"\n')
    d = tmp_path / "D"
    p = _crawl("run", "--dir", str(d), "--config", str(cfg), "--resolve-file", str(hosts),
               "--progress", "none", "http://a.test/")
    _one_error_line(p, "../x")
    assert not d.exists()  # refused before the crawl dir was made
