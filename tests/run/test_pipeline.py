"""The crawl done with separate commands gets the same pages as crawl run."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

from conftest import ROOT, start_testweb
from test_run import CRAWL, crawl, stored


def test_pipeline_matches_crawl_run(tmp_path: Path) -> None:
    with start_testweb(tmp_path / "w", hosts=12, seed=21, pages=6, links=4, mix="plain") as web:
        ref = tmp_path / "run"
        crawl(web, ref)
        want = _stored_urls(ref)
        assert set(stored(ref)) <= want
        d = tmp_path / "pipe"
        env = {**os.environ, "POLITE": "--delay 0.2", "CRAWL": " ".join(CRAWL)}
        res = subprocess.run(
            [str(ROOT / "bin" / "crawl-pipeline"), str(d), str(web.seeds_file),
             "--resolve-file", str(web.hosts_file), "--allow-private", "--timeout", "2"],
            env=env, capture_output=True, text=True, timeout=600)
        assert res.returncode == 0, res.stderr[-3000:]
        got = _stored_urls(d)
        print(f"\npages stored: crawl run {len(want)}, pipeline {len(got)}")
        assert got == want, (sorted(want - got)[:5], sorted(got - want)[:5])


def _stored_urls(d: Path) -> set[str]:
    """URLs with an HTTP 200 response record in the crawl's WARC files
    (robots.txt aside): what the crawl stored, read back with warcio."""
    from warcio.archiveiterator import ArchiveIterator

    urls = set()
    for path in sorted((d / "warc").glob("*.warc.gz")):
        with path.open("rb") as f:
            for rec in ArchiveIterator(f):
                if rec.rec_type == "response" and rec.http_headers is not None \
                        and rec.http_headers.get_statuscode() == "200" \
                        and not rec.rec_headers.get_header("WARC-Target-URI").endswith("/robots.txt"):
                    urls.add(rec.rec_headers.get_header("WARC-Target-URI"))
    return urls
