"""A killed run is shown as gone, and the next run gives back at once what it left.

One real ``crawl run`` is SIGKILLed mid-crawl (every fetch of the slow test
web takes a second, so leases are in flight), then: ``crawl stats`` (table,
``--json``, ``--format openmetrics``) says the run stopped and shows no rate
or time left; the resumed run says how many leases of the killed run it
returned to the queue and how many results it recovered from the spool;
those URLs are fetched by the resumed run although the killed run's leases
were ten minutes long (so no expiry freed them); and the stored pages are
exactly the pages of the web, none lost.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path
from urllib.parse import urlsplit

import orjson
from conftest import start_testweb

from crawl.core import CrawlDir, Spool
from crawl.frontier import Frontier
from crawl.run import gather, read_log

CRAWL = [sys.executable, "-m", "crawl"]


def _stats(d: Path, *extra: str) -> subprocess.CompletedProcess[str]:
    res = subprocess.run([*CRAWL, "stats", "--dir", str(d), *extra], capture_output=True, text=True,
                         timeout=60)
    assert res.returncode == 0 and "Traceback" not in res.stderr, res.stderr
    return res


def _leased(d: Path, urls: list[str]) -> set[str]:
    fr = Frontier(CrawlDir(d).frontier)
    try:
        return {u for u in urls if fr.state_of(u) == "leased"}
    finally:
        fr.close()


def _stored(d: Path) -> set[str]:
    return {e["url"] for e in read_log(d / "log") if e.get("outcome") in ("ok", "not-modified")}


def test_sigkill_then_stats_says_gone_and_resume_returns_the_leases(tmp_path: Path) -> None:
    with start_testweb(tmp_path / "w", hosts=4, pages=6, links=2, mix="slow", latency=1.0,
                       drip=0.0) as web:
        d = tmp_path / "c"
        base = [*CRAWL, "run", "--dir", str(d), "--seeds", str(web.seeds_file), "--resolve-file",
                str(web.hosts_file), "--allow-private", "--delay", "0.2s", "--timeout", "5s",
                "--connect-timeout", "2s", "--idle-exit", "5s", "--response-factor", "0", "--progress",
                "plain", "--interval", "1s", "--parse-procs", "0"]
        # the reference, never interrupted, crawls beside it (its own dir and hosts' delays)
        ref = tmp_path / "ref"
        ref_run = subprocess.Popen([*base[:5], str(ref), *base[6:]], stdout=subprocess.DEVNULL,
                                   stderr=subprocess.PIPE, text=True)
        try:
            # Kill it while leases are out and some results wait in the spool. The slow web's
            # hosts answer in step (a second each), so a run seen with leases out can have
            # completed them all in the moment before the kill lands: then nothing was in
            # flight to give back, and the kill is tried again on the next run (it resumes).
            for attempt in range(5):
                proc = subprocess.Popen([*base, "--lease", "10m"], stdout=subprocess.DEVNULL,
                                        stderr=subprocess.DEVNULL, start_new_session=True)
                try:
                    deadline = time.monotonic() + 90
                    while time.monotonic() < deadline:
                        st = gather(d) if (d / "run-status.json").exists() else {}
                        run = st.get("run") or {}
                        if (run.get("alive") and run.get("pid") == proc.pid
                                and run.get("fetched", 0) >= (6 if attempt == 0 else 1)
                                and st["frontier"]["in_flight"] >= 2):
                            break
                        time.sleep(0.05)
                    else:
                        raise AssertionError("the run never had leases in flight")
                    assert run["state"] == "running" and run["pid"] == proc.pid
                    os.killpg(proc.pid, signal.SIGKILL)
                    killed_at = time.time()
                finally:
                    proc.wait()
                st = orjson.loads(_stats(d, "--json").stdout)
                if st["frontier"]["in_flight"] >= 1:
                    break
            else:
                raise AssertionError("five kills, and each landed with no lease in flight")

            # crawl stats: not alive, no rate, no time left
            run = st["run"]
            assert run["alive"] is False and run["state"] == "stopped", run
            assert f"pid {proc.pid}" in run["state_text"] and "the process is gone" in run["state_text"]
            table = _stats(d).stdout
            assert "stopped (pid" in table and "the process is gone" in table
            assert "last 10 s" not in table and "time left" not in table and "whole run" not in table
            metrics = _stats(d, "--format", "openmetrics").stdout
            assert re.search(r'^crawl_run_alive\{crawl="[^"]+"\} 0$', metrics, re.M), metrics
            left = st["frontier"]["in_flight"]
            assert left >= 1
            leased = _leased(d, list(web.pages))
            assert leased and len(leased) <= left  # (a lease of a URL outside the manifest is not named)
            # what the killed run left in its spool, counted there (its status file's
            # "unparsed" is a snapshot up to --interval old: the run may have parsed
            # those results before the kill, as one run at load 11-18 did)
            with Spool(CrawlDir(d).spools / "fetched") as spool:
                unparsed = sum(spool.counts().values())
            _, err = ref_run.communicate(timeout=240)
            assert ref_run.returncode == 0, err[-3000:]
            mark = len(web.requests())  # from here on, the resumed run's requests only

            # resume: the killed run's leases go back at once (they were 10 minutes long)
            res = subprocess.run(base, capture_output=True, text=True, timeout=240)
            assert res.returncode == 0, res.stderr[-3000:]
            said = [x for x in res.stderr.splitlines() if x.startswith("crawl run: resumed:")]
            assert len(said) == 1, res.stderr[-3000:]
            m = re.match(rf"crawl run: resumed: (\d+) leases? of the previous run \(pid {proc.pid}, killed; "
                         r"last heartbeat \S+\) returned to the queue", said[0])
            assert m and int(m.group(1)) == left, said[0]
            if unparsed:
                assert f"{unparsed:,} result{'s' if unparsed != 1 else ''} recovered from the spool" in said[0]
            else:
                assert "recovered from the spool" not in said[0]
            # those URLs were fetched again by the resumed run: each has a fetch event
            # after the kill, and the server saw the ones robots.txt allows
            again = [e for e in read_log(d / "log") if e.get("event") == "fetch" and e["ts"] > killed_at]
            assert leased <= {e["url"] for e in again}, sorted(leased - {e["url"] for e in again})
            asked = {(urlsplit(e["url"]).hostname, urlsplit(e["url"]).path or "/") for e in again
                     if e["url"] in leased and e.get("status")}
            assert asked <= {(r["host"], r["path"]) for r in web.requests(mark)}
            assert orjson.loads(_stats(d, "--json").stdout)["frontier"]["in_flight"] == 0

            final = orjson.loads(_stats(d, "--json").stdout)["run"]
            assert final["state"] == "finished" and final["alive"] is False

            # nothing lost: the pages stored are those of a crawl never interrupted
            assert _stored(d) == _stored(ref) and len(_stored(ref)) > 10
        finally:
            if ref_run.poll() is None:  # a failure above: stop it too
                ref_run.kill()
                ref_run.wait()



def test_a_pipelines_leases_are_kept_and_a_dead_runs_returned(tmp_path: Path) -> None:
    """A run returns only the leases a run took: those of ``crawl frontier next``,
    which a pipeline may still be fetching, are kept until they expire, and said."""
    from crawl.core import records as recs
    from crawl.run import Crawl, RunOptions

    d = tmp_path / "c"
    fr = Frontier(CrawlDir(d).frontier)
    fr.add([recs.make("url", url=f"http://h{i}.test/") for i in range(6)], time.time())
    fr.close()
    res = subprocess.run([*CRAWL, "frontier", "next", "--dir", str(d), "-n", "2", "--lease", "10m"],
                         capture_output=True, text=True, timeout=60)
    assert res.returncode == 0 and len(res.stdout.splitlines()) == 2, res.stderr
    piped = {orjson.loads(x)["url"] for x in res.stdout.splitlines()}

    dead = Crawl(CrawlDir(d), RunOptions())  # a run that leases three, then dies
    try:
        (line,) = dead.resume()  # nothing of a run to return: the pipeline's two are kept
        assert line.startswith("2 leases taken by crawl frontier next") and "held until they expire" in line
        taken = {r["url"] for r in dead.frontier.next(3, 600.0, time.time() + 0.01)}
    finally:
        dead.close()  # (its leases stay, as after a SIGKILL)
    assert len(taken) == 3 and not taken & piped

    run = Crawl(CrawlDir(d), RunOptions())
    try:
        lines = run.resume()
        assert lines[0].startswith("resumed: 3 leases of the previous run returned to the queue"), lines
        assert "2 leases taken by crawl frontier next" in lines[1], lines
        assert {u for u in taken | piped if run.frontier.state_of(u) == "leased"} == piped
        assert all(run.frontier.state_of(u) == "queued" for u in taken)
    finally:
        run.close()
