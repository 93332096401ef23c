"""Records and NDJSON input: bad input is normal input."""

from __future__ import annotations

import io

import orjson
import pytest
from hypothesis import given
from hypothesis import strategies as st

from crawl.core import Report, StreamSink, StreamSource, UsageError, ensure_inside, records
from crawl.core.errors import BadRecord


def _read(data: bytes, accept=records.URL_KINDS, size=1000):
    err = io.StringIO()
    report = Report("test", err=err)
    got = [r for b in StreamSource(io.BytesIO(data), accept, report).batches(size) for r in b.records]
    return got, report, err.getvalue()


def test_plain_url_lines_become_url_records() -> None:
    got, report, _ = _read(b"http://a.test/\r\nhttp://b.test/x\n")
    assert [r["url"] for r in got] == ["http://a.test/", "http://b.test/x"]
    assert all(r["kind"] == "url" and r["v"] == records.VERSION for r in got)


def test_unknown_fields_pass_through() -> None:
    got, _, _ = _read(b'{"kind":"url","url":"http://a.test/","mine":{"deep":[1,2]}}\n')
    out = records.derive(got[0], "link", depth=2)
    assert out["mine"] == {"deep": [1, 2]} and out["kind"] == "link" and out["depth"] == 2


@pytest.mark.parametrize(
    ("line", "reason"),
    [
        (b"{not json", "invalid JSON"),
        (b"[1,2]", "expected a JSON object"),
        (b'{"kind":"url"}', 'no "url" field'),
        (b'{"kind":"fetch","url":"http://a.test/","outcome":"ok"}', "not accepted here"),
        (b'{"kind":"url","url":""}', "non-empty string"),
        (b"http://a.test/ has spaces", "white space"),
        (b"\xff\xfe", "not valid UTF-8"),
    ],
)
def test_malformed_lines_are_reported_with_line_numbers_and_skipped(line: bytes, reason: str) -> None:
    data = b"http://ok.test/1\n" + line + b"\nhttp://ok.test/2\n"
    got, report, err = _read(data)
    assert [r["url"] for r in got] == ["http://ok.test/1", "http://ok.test/2"]
    assert report.counts["bad_records"] == 1
    assert "line 2:" in err and reason in err


def test_blank_lines_are_counted_not_reported() -> None:
    got, report, err = _read(b"\n\nhttp://a.test/\n\n")
    assert len(got) == 1 and report.counts["blank_lines"] == 3 and err == ""


def test_last_line_without_newline_is_read() -> None:
    got, _, _ = _read(b"http://a.test/\nhttp://b.test/")
    assert len(got) == 2


def test_overlong_line_is_rejected_without_buffering_forever() -> None:
    huge = b'{"kind":"url","url":"http://a.test/' + b"x" * (17 << 20) + b'"}'
    got, report, err = _read(huge + b"\nhttp://b.test/\n")
    assert [r["url"] for r in got] == ["http://b.test/"]
    assert report.counts["bad_records"] == 1 and "longer than" in err


def test_batches_respect_size() -> None:
    data = b"".join(b"http://a.test/%d\n" % i for i in range(2500))
    err = io.StringIO()
    sizes = [len(b.records) for b in StreamSource(io.BytesIO(data), None, Report("t", err=err)).batches(1000)]
    assert sum(sizes) == 2500 and max(sizes) <= 1000


@given(st.dictionaries(st.text(min_size=1), st.one_of(st.integers(-2**53, 2**53), st.text(), st.booleans(), st.none())))
def test_encode_decode_round_trip(extra: dict) -> None:
    rec = records.make("url", url="http://a.test/")
    for k, v in extra.items():
        if k not in ("kind", "v", "url"):
            rec[k] = v
    line = records.encode(rec)
    assert line.endswith(b"\n") and line.count(b"\n") == 1
    assert records.decode(line[:-1], None) == rec


def test_sink_writes_compact_lines() -> None:
    buf = io.BytesIO()
    StreamSink(buf).write([records.make("url", url="http://a.test/"), records.make("url", url="http://b.test/")])
    lines = buf.getvalue().splitlines()
    assert [orjson.loads(x)["url"] for x in lines] == ["http://a.test/", "http://b.test/"]


def test_check_rejects_bad_record_types() -> None:
    with pytest.raises(BadRecord, match="kind"):
        records.check({"no": "kind"}, None, 3)


def test_paths_never_escape_the_crawl_directory(tmp_path) -> None:
    assert ensure_inside(tmp_path, tmp_path / "warc" / "a.warc.gz").parent.name == "warc"
    for bad in ("../x", "/etc/passwd", "warc/../../x"):
        with pytest.raises(UsageError, match="escapes"):
            ensure_inside(tmp_path, bad)
