"""What a mutation run found untested in the WARC writer: zstd frames carry a
checksum, so a record damaged on disk is refused when read back, never returned
as other bytes."""

from __future__ import annotations

import contextlib
import os
import random
from pathlib import Path

import pytest
import zstandard
from warcutil import capture

from crawl import store
from crawl.core import CrawlError


def _capture(url: str, body: bytes) -> store.Capture:
    return capture(url, body, content_type="application/octet-stream", user_agent=None)


def test_zstd_frames_carry_a_checksum_and_damage_is_refused(tmp_path: Path) -> None:
    body = random.Random(7).randbytes(4000)  # incompressible: the frame holds it as raw bytes
    w = store.WarcWriter(tmp_path, compression="zstd")
    ptr = w.write(_capture("http://example.test/a", body))
    w.close()
    path = tmp_path / ptr["file"]
    data = bytearray(path.read_bytes())
    start, length = int(ptr["offset"]), int(ptr["length"])
    assert zstandard.get_frame_parameters(bytes(data[start:start + length])).has_checksum
    assert store.read_response(tmp_path, ptr).body == body
    data[start + length - 500] ^= 0x55  # inside the body's bytes, before the checksum
    path.write_bytes(bytes(data))
    with pytest.raises(CrawlError, match="checksum"):  # not other bytes returned as the page
        store.read_response(tmp_path, ptr)


def test_discard_in_a_file_with_nothing_synced_removes_it_and_its_sidecar(tmp_path: Path) -> None:
    # after a rotation nothing of the new file is synced: a discard takes it all back, whatever the
    # old file had synced (its offsets mean nothing in the new one)
    w = store.WarcWriter(tmp_path, compression="zstd")
    kept = w.write(_capture("http://example.test/kept", random.Random(1).randbytes(3000)))
    w.rotate()
    new = tmp_path / w.name
    assert new != tmp_path / kept["file"] and new.exists()
    w.write(_capture("http://example.test/lost", b"lost"))
    w.discard()
    w.close()
    assert not new.exists() and not (tmp_path / (new.name + ".cdxj")).exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted([kept["file"], kept["file"] + ".cdxj"])
    assert store.read_response(tmp_path, kept).body == random.Random(1).randbytes(3000)


def test_discard_after_close_is_a_no_op(tmp_path: Path) -> None:
    w = store.WarcWriter(tmp_path)
    kept = w.write(_capture("http://example.test/kept", b"kept"))
    w.close()
    before = {p.name: p.read_bytes() for p in tmp_path.iterdir()}
    w.discard()  # a failure handler that runs after the writer was closed cuts nothing
    assert {p.name: p.read_bytes() for p in tmp_path.iterdir()} == before
    assert store.read_response(tmp_path, kept).body == b"kept"


def _open_paths() -> set[str]:
    """What this process's file descriptors point at (Linux /proc)."""
    out = set()
    for fd in os.listdir("/proc/self/fd"):
        with contextlib.suppress(OSError):
            out.add(os.readlink(f"/proc/self/fd/{fd}"))
    return out


def test_close_leaves_no_descriptor_of_the_file_or_its_sidecar_open(tmp_path: Path) -> None:
    # the writer object lives on (a fetcher keeps it): close() itself must give the descriptors back
    w = store.WarcWriter(tmp_path, compression="zstd")
    w.write(_capture("http://example.test/a", b"a"))
    path = str(tmp_path / w.name)
    assert path in _open_paths()
    w.close()
    assert path not in _open_paths() and path + ".cdxj" not in _open_paths()
    assert str(tmp_path) not in _open_paths()  # the directory fsynced at the open is closed too


def test_a_closed_writer_may_be_closed_synced_and_discarded_again(tmp_path: Path) -> None:
    # a failure handler or a final sync that runs after the writer was closed does nothing and raises nothing
    w = store.WarcWriter(tmp_path)
    kept = w.write(_capture("http://example.test/kept", b"kept"))
    w.close()
    before = {p.name: p.read_bytes() for p in tmp_path.iterdir()}
    w.close()
    w.sync()
    w.discard()
    assert {p.name: p.read_bytes() for p in tmp_path.iterdir()} == before
    assert store.read_response(tmp_path, kept).body == b"kept"
