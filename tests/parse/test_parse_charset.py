"""Charset detection and decoding for crawl parse (crawl/text/charset.py)."""

from __future__ import annotations

import codecs

from hypothesis import given, settings
from hypothesis import strategies as st

from crawl.text import charset


def test_bom_wins_over_header_and_meta() -> None:
    body = codecs.BOM_UTF8 + b'<meta charset="windows-1251"><p>\xc3\xa9'
    d = charset.detect(body, "text/html; charset=iso-8859-2")
    assert (d.encoding, d.source, d.bom_length) == ("utf-8", "bom", 3)
    utf8, replaced = charset.to_utf8(body, d)
    assert not replaced and utf8.decode().endswith("<p>é")


def test_utf16_bom_is_decoded() -> None:
    body = codecs.BOM_UTF16_LE + '<a href="/é">x</a>'.encode("utf-16-le")
    d = charset.detect(body, "text/html")
    assert d.encoding == "utf-16-le"
    assert charset.to_utf8(body, d)[0].decode() == '<a href="/é">x</a>'


def test_header_beats_meta() -> None:
    body = b'<meta charset="utf-8"><p>\xe9'
    d = charset.detect(body, 'text/html; charset="ISO-8859-2"')
    assert (d.encoding, d.source) == ("iso8859-2", "header")


def test_meta_charset_and_http_equiv() -> None:
    d = charset.detect(b'<html><head><meta charset="koi8-r">', None)
    assert (d.encoding, d.source) == ("koi8-r", "meta")
    d = charset.detect(
        b'<meta http-equiv="Content-Type" content="text/html; charset=Shift_JIS">', ""
    )
    assert (d.encoding, d.source) == ("cp932", "meta")


def test_whatwg_labels_latin1_means_windows_1252() -> None:
    d = charset.detect(b"caf\x80", "text/html; charset=iso-8859-1")
    assert d.encoding == "cp1252"
    assert charset.to_utf8(b"caf\x80", d)[0].decode() == "caf€"


def test_meta_utf16_means_utf8() -> None:
    # WHATWG HTML: a <meta> can't switch to UTF-16, the prescan read ASCII.
    assert charset.detect(b'<meta charset="utf-16">', None).encoding == "utf-8"


def test_default_is_utf8_and_invalid_bytes_are_replaced() -> None:
    body = b"<p>ok \xff\xfe\xc3 bad</p>"
    d = charset.detect(body, None)
    assert (d.encoding, d.source) == ("utf-8", "default")
    utf8, replaced = charset.to_utf8(body, d)
    assert replaced and "\ufffd" in utf8.decode("utf-8")


def test_non_text_codecs_are_refused() -> None:
    # A page must not make us run zlib or base64 on its body.
    for label in ("zlib", "base64", "rot13", "hex", "uu", "bz2", "utf-7", "idna", "unicode_escape"):
        assert charset.normalize(label) is None, label
        assert charset.detect(b"x", f"text/html; charset={label}").source == "default"
    assert charset.normalize("no-such-charset") is None
    assert charset.normalize("x" * 200) is None


def test_nul_bytes_are_removed() -> None:
    body = b"<a hr\x00ef='/x'>y</a>"
    utf8, _ = charset.to_utf8(body, charset.detect(body))
    assert b"\x00" not in utf8


@settings(max_examples=200, deadline=None)
@given(st.binary(max_size=512), st.sampled_from([None, "text/html", "text/html; charset=gbk",
                                                  "text/html; charset=utf-16", "x; charset=\x00"]))
def test_any_bytes_decode_to_valid_utf8(body: bytes, ctype: str | None) -> None:
    d = charset.detect(body, ctype)
    utf8, _ = charset.to_utf8(body, d)
    utf8.decode("utf-8")  # never invalid, never raises
    assert b"\x00" not in utf8
