"""`crawl run` as an operator meets it: its seeds, its exit status, its summary and
what `crawl stats` then says, against the shared test web (real processes)."""

from __future__ import annotations

import io
import re
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import orjson
import pytest

from crawl.core import CrawlDir
from crawl.run import summary

CRAWL = [sys.executable, "-m", "crawl"]
FAST = ["--timeout", "2", "--connect-timeout", "2", "--idle-exit", "2s", "--progress", "plain",
        "--interval", "1s", "--delay", "0.05", "--scope", "host"]


@pytest.fixture(scope="module")
def small_crawl(testweb: Any, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """One short crawl of three test-web hosts, seeded with a file that has bad lines too."""
    base = tmp_path_factory.mktemp("runcli")
    seeds = base / "seeds.txt"
    good = [testweb.url(h) for h in testweb.with_behaviour("plain")[:3]]
    seeds.write_text(f"# three good seeds and three bad lines\n{good[0]}\n"
                     '{"kind": "url", "url": broken}\n'
                     f"{good[1]}\nhttp//typo\nftp://x.test/\n"
                     + orjson.dumps({"kind": "url", "url": good[2]}).decode() + "\n")
    d = base / "c"
    p = subprocess.run([*CRAWL, "run", "--dir", str(d), "--seeds", str(seeds), "--resolve-file",
                        str(testweb.hosts_file), "--allow-private", "--max-pages", "12", *FAST],
                       capture_output=True, text=True, timeout=240)
    return {"p": p, "d": d, "seeds": seeds, "good": good}


def test_bad_seed_lines_are_said_counted_and_skipped(small_crawl: dict[str, Any]) -> None:
    p, seeds = small_crawl["p"], small_crawl["seeds"]
    assert p.returncode == 0, p.stderr[-3000:]
    assert f"{seeds} line 3: invalid JSON" in p.stderr  # not "line 1": orjson's own numbering
    assert f"{seeds} line 5: 'http//typo': relative-without-base" in p.stderr
    assert f"{seeds} line 6: 'ftp://x.test/': unsupported-scheme" in p.stderr
    assert "3 seed(s) skipped (above); 3 seed(s) to crawl" in p.stderr
    kept = (small_crawl["d"] / "seeds.txt").read_text().split()
    assert kept == small_crawl["good"]


def test_the_summary_says_what_it_counts_and_where_the_results_are(small_crawl: dict[str, Any]) -> None:
    p, d = small_crawl["p"], small_crawl["d"]
    err = p.stderr
    warcs = sorted(x.name for x in (d / "warc").iterdir() if x.name.endswith(".warc.gz"))
    assert warcs and any(x.name.endswith(".cdxj") for x in (d / "warc").iterdir())
    assert f"WARC files: {len(warcs)} in {d / 'warc'}" in err  # the .cdxj sidecars are not counted
    assert f"index: {d / 'warc' / 'index.cdxj'}" in err and f"crawl log: {d / 'log'}" in err
    assert re.search(r"pages this run \(200, 304\) +\d+", err)
    assert re.search(r"pages in this crawl dir +\d+", err)
    assert re.search(r"HTML / other types +\d+ / \d+", err)
    assert "site errors (HTTP 4xx/5xx)" in err and "network errors (timeouts, refused, DNS)" in err
    assert err.count("crawl run: summary") == 1


def test_stats_for_people_and_json_for_machines(small_crawl: dict[str, Any]) -> None:
    d = small_crawl["d"]
    p = subprocess.run([*CRAWL, "stats", "--dir", str(d)], capture_output=True, text=True, timeout=60)
    assert p.returncode == 0, p.stderr
    labels = {line.split("│")[2].strip() for line in p.stdout.splitlines() if line.count("│") == 4}
    for raw in ("ts", "kind", "v", "mu", "pages_left", "error_rate", "avg_rate"):
        assert raw not in labels, raw
    assert {"updated", "pages this run (200, 304)", "pages in this crawl dir", "URLs seen",
            "files"} <= labels
    assert " UTC " in p.stdout and not re.search(r"\b1[0-9]{9}\.\d+", p.stdout)
    st = orjson.loads(subprocess.run([*CRAWL, "stats", "--dir", str(d), "--json"], capture_output=True,
                                     timeout=60).stdout)
    assert st["kind"] == "stats" and "ts" in st["run"] and "mu" in st["recrawl"]
    assert st["warc"]["files"] == len([x for x in (d / "warc").iterdir() if x.name.endswith(".warc.gz")])


def test_ctrl_c_stops_cleanly_and_exits_130(testweb: Any, tmp_path: Path) -> None:
    d = tmp_path / "c"
    seeds = tmp_path / "seeds.txt"
    seeds.write_text("".join(testweb.url(h) + "\n" for h in testweb.with_behaviour("plain")[:4]))
    proc = subprocess.Popen([*CRAWL, "run", "--dir", str(d), "--seeds", str(seeds), "--resolve-file",
                             str(testweb.hosts_file), "--allow-private", *FAST, "--delay", "30s",
                             "--idle-exit", "60s", "--json"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 60
        while not (d / "run-status.json").exists() and time.monotonic() < deadline:
            time.sleep(0.05)
        time.sleep(0.5)
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 130, err[-3000:]
    final = orjson.loads(out.splitlines()[-1])
    assert final["stopping"] == "signal SIGINT"  # it stopped cleanly, and said so on stdout
    assert "crawl run: summary" in err and "Traceback" not in err


def test_summary_lines_stay_whole_when_not_a_terminal() -> None:
    """Cron mails and log files: rich wraps at 80 columns unless told otherwise."""
    outcomes = {f"outcome/{k}": 1000 + i for i, k in enumerate(
        ("ok", "not-modified", "redirect", "http-error", "robots-disallowed", "timeout", "connect-error",
         "dns-error", "too-large", "skipped-content-type", "private-address", "invalid-url"))}
    st = {"rate": 1.0, "avg_rate": 1.0, "fetched": 12_078, "pages": 2001, "queued": 0, "hosts": 3,
          "hosts_ready": 0, "in_flight": 0, "backlog": 0, "error_rate": 0.33, "bytes": 10, "elapsed": 3.0,
          "counts": outcomes, "time_left": None, "pages_left": None, "stopping": "done"}
    err = io.StringIO()
    summary(st, err, where=CrawlDir("/tmp/a-crawl-dir-with-a-rather-long-name/that-goes-on-and-on"))
    lines = err.getvalue().splitlines()
    [outcome_line] = [ln for ln in lines if ln.startswith("outcomes: ")]
    assert len(outcome_line) > 80 and outcome_line.rstrip().endswith("too-large 1,008")
    assert any(ln.startswith("crawl log: /tmp/a-crawl-dir") and "crawl stats --dir" in ln for ln in lines)
