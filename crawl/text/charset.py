"""Which character encoding a fetched page is in, and its text.

The order is the one browsers use (WHATWG HTML, "determining the character
encoding", section 13.2.3.2): a byte order mark wins, then the charset of the
Content-Type header (RFC 9110 section 8.3.2), then a ``<meta charset>`` or
``<meta http-equiv="Content-Type">`` found by a prescan of the first bytes,
and UTF-8 last. Labels are mapped the WHATWG way (``iso-8859-1`` really means
windows-1252 on the web). Decoding never raises: invalid bytes become U+FFFD.

Labels come from the network, so only text encodings are accepted: Python
also registers ``zlib``, ``base64`` and friends as codecs, and a page must not
be able to make us inflate a bomb by naming one.
"""

from __future__ import annotations

import codecs
import re
from dataclasses import dataclass

from . import compiled

# How far the meta prescan looks. The spec says 1024 bytes; real pages put a
# long <head> prologue (comments, scripts) first, so we look a little further.
PRESCAN_BYTES = 4096

_BOMS: tuple[tuple[bytes, str], ...] = (
    (codecs.BOM_UTF8, "utf-8"),
    (codecs.BOM_UTF16_LE, "utf-16-le"),
    (codecs.BOM_UTF16_BE, "utf-16-be"),
)

# WHATWG Encoding Standard label aliases that differ from Python's meaning.
_WHATWG: dict[str, str] = {
    "iso-8859-1": "cp1252",
    "iso8859-1": "cp1252",
    "latin1": "cp1252",
    "latin-1": "cp1252",
    "l1": "cp1252",
    "ascii": "cp1252",
    "us-ascii": "cp1252",
    "iso-8859-9": "cp1254",
    "latin5": "cp1254",
    "iso-8859-11": "cp874",
    "tis-620": "cp874",
    "gb2312": "gb18030",
    "gbk": "gb18030",
    "x-gbk": "gb18030",
    "shift_jis": "cp932",
    "shift-jis": "cp932",
    "sjis": "cp932",
    "x-sjis": "cp932",
    "ms_kanji": "cp932",
    "windows-31j": "cp932",
    "euc-kr": "cp949",
    "ks_c_5601-1987": "cp949",
    "x-user-defined": "cp1252",
    "unicode-1-1-utf-8": "utf-8",
    "utf8": "utf-8",
}

# Text codecs Python has that no web page may select.
_REFUSED = frozenset(
    {"idna", "punycode", "unicode-escape", "raw-unicode-escape", "utf-7", "undefined"}
)

_HEADER_CHARSET = re.compile(r"""charset\s*=\s*["']?\s*([^\s;"',]+)""", re.I)
# Matches both <meta charset=x> and <meta http-equiv=... content="...; charset=x">.
_META_CHARSET = re.compile(
    rb"""<meta\b[^>]*?charset\s*=\s*["']?\s*([A-Za-z0-9_.:\-]+)""", re.I
)


@dataclass(frozen=True, slots=True)
class Detected:
    """An encoding and where it came from ("bom", "header", "meta", "default")."""

    encoding: str
    source: str
    bom_length: int = 0


def normalize(label: str | None) -> str | None:
    """A Python codec name for a web label, or None if it is not usable."""
    if not label:
        return None
    key = label.strip().strip("\"'").lower()
    if not key or len(key) > 40:
        return None
    key = _WHATWG.get(key, key)
    try:
        info = codecs.lookup(key)
    except (LookupError, ValueError):
        return None
    if not getattr(info, "_is_text_encoding", True) or info.name in _REFUSED:
        return None
    return info.name


def header_charset(content_type: str | None) -> str | None:
    """The usable charset named in a Content-Type value, if any."""
    if not content_type:
        return None
    m = _HEADER_CHARSET.search(content_type)
    return normalize(m.group(1)) if m else None


def meta_charset(body: bytes) -> str | None:
    """The usable charset a page declares in a <meta> near its start."""
    m = _META_CHARSET.search(body, 0, PRESCAN_BYTES)
    if not m:
        return None
    enc = normalize(m.group(1).decode("ascii", "replace"))
    # A meta declaration can't be UTF-16: the prescan read it as ASCII
    # (WHATWG HTML 13.2.3.2, "changing the encoding while parsing").
    if enc is not None and enc.startswith("utf-16"):
        return "utf-8"
    return enc


def detect(body: bytes, content_type: str | None = None) -> Detected:
    """Decide the encoding of an HTML body: BOM > header > meta > UTF-8."""
    for bom, enc in _BOMS:
        if body.startswith(bom):
            return Detected(enc, "bom", len(bom))
    enc = header_charset(content_type)
    if enc:
        return Detected(enc, "header")
    enc = meta_charset(body)
    if enc:
        return Detected(enc, "meta")
    return Detected("utf-8", "default")


def to_utf8(body: bytes, detected: Detected) -> tuple[bytes, bool]:
    """The body re-encoded as valid UTF-8, and whether bytes were replaced.

    lxml is handed UTF-8 bytes it can trust: libxml2 given invalid input may
    stop parsing early, which would silently lose links. Valid UTF-8 (the
    common case) is passed through without a copy.
    """
    data = body[detected.bom_length :] if detected.bom_length else body
    if detected.encoding == "utf-8":
        if b"\x00" in data:
            # NUL is a parse error in HTML and cuts libxml2's text short.
            data = data.replace(b"\x00", b"")
        if compiled.active is not None:  # the same answer without building a str (crawl/text/_compiled.c)
            if compiled.active.is_utf8(data):
                return data, False
            return data.decode("utf-8", "replace").encode("utf-8"), True
        try:
            data.decode("utf-8")
            return data, False
        except UnicodeDecodeError:
            return data.decode("utf-8", "replace").encode("utf-8"), True
    try:
        text = data.decode(detected.encoding)
        replaced = False
    except UnicodeDecodeError:
        text = data.decode(detected.encoding, "replace")
        replaced = True
    except LookupError:  # pragma: no cover - normalize() already checked
        text, replaced = data.decode("utf-8", "replace"), True
    if "\x00" in text:
        text = text.replace("\x00", "")
    return text.encode("utf-8", "replace"), replaced
