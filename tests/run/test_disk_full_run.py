"""``crawl run`` on a disk that fills up, then resumed once there is room (issue 15, item 10).

Before: five tracebacks (parent, parse process, trio nurseries, the Bloom
filter saved on the way out) and ``bloom.bin.tmp<pid>`` files left behind.
Now: one line naming the file and the crawl directory, exit status 1, no
temp file, no torn WARC record or log frame, and the resumed crawl stores
exactly the pages of a crawl that never ran out of space.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from conftest import TestWeb, start_testweb
from fullfs import resize, small_fs

from crawl.run import read_log

CRAWL = [sys.executable, "-m", "crawl"]


def run(web: TestWeb, d: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*CRAWL, "run", "--dir", str(d), "--seeds", str(web.seeds_file), "--resolve-file",
         str(web.hosts_file), "--allow-private", "--scope", "any", "--delay", "0.05",
         "--timeout", "1", "--connect-timeout", "1", "--lease", "4s", "--idle-exit", "3s",
         "--progress", "none"], capture_output=True, text=True, timeout=240)


def stored(d: Path) -> set[str]:
    return {e["url"] for e in read_log(d / "log") if e.get("outcome") in ("ok", "not-modified")}


def test_a_full_disk_stops_the_run_in_one_line_and_the_resume_loses_nothing(tmp_path: Path) -> None:
    with start_testweb(tmp_path / "w", hosts=20, seed=21, pages=10, links=4, mix="plain") as web:
        ref = tmp_path / "ref"
        assert run(web, ref).returncode == 0
        want = stored(ref)
        with small_fs(tmp_path / "fs", "3m") as fs:
            d = fs / "c"
            res = run(web, d)
            assert res.returncode == 1, res.stderr[-3000:]
            assert "Traceback" not in res.stderr, res.stderr[-5000:]
            errors = [x for x in res.stderr.splitlines() if x.startswith("crawl: error:")]
            assert errors and all("no space left on the device writing " + str(d) in x
                                  and f"in the crawl directory {d}" in x
                                  or "stopped on the error above" in x for x in errors), errors
            assert len(errors) <= 2, errors  # the parse process's own, then the parent's pointer to it
            assert not [p for p in d.rglob("*") if ".tmp" in p.name]
            check = subprocess.run([*CRAWL, "index", "--dir", str(d), "--check"], capture_output=True,
                                   text=True, timeout=60)
            assert check.returncode == 0, check.stdout  # no torn record left in any WARC file
            torn: list[str] = []
            before = stored(d) if (d / "log").exists() else set()
            list(read_log(d / "log", warn=torn.append))
            assert not torn
            assert before < want  # it stopped part-way
            resize(fs, "64m")  # space freed
            again = run(web, d)
            assert again.returncode == 0, again.stderr[-3000:]
            assert stored(d) == want
