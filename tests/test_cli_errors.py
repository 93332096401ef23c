"""The error boundary, from outside: every command, given bad input, says one line.

Each case is a real ``python -m crawl`` subprocess (the entry point users run,
with the boundary in ``crawl.commands.main``). Every bad invocation must print
exactly one ``crawl: error:`` line, exit with the status crawl(1) documents
(1 error, 2 usage) and show no Python traceback; a command that only reads
must not create the directory or spool it was (wrongly) pointed at.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
CRAWL = [sys.executable, "-m", "crawl"]


def run(args: list[str], cwd: Path, stdin: bytes = b"", env: dict[str, str] | None = None,
        shell: bool = False) -> subprocess.CompletedProcess[bytes]:
    environ = {k: v for k, v in os.environ.items() if k not in ("CRAWL_DIR", "CRAWL_TRACEBACK")}
    environ["PYTHONPATH"] = str(ROOT)
    return subprocess.run(args, input=stdin, capture_output=True, cwd=cwd, timeout=60,
                          env={**environ, **(env or {})}, shell=shell)


def unwritable(base: Path) -> str:
    """A directory path that cannot be created here (root may write anywhere but /sys)."""
    if os.geteuid() == 0:
        return "/sys/crawl-test-no-such-dir/c"
    ro = base / "readonly"
    ro.mkdir()
    ro.chmod(0o500)
    return str(ro / "c")


@pytest.fixture(scope="module")
def place(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A working directory with the things the bad invocations point at."""
    d = tmp_path_factory.mktemp("errors")
    (d / "fd").mkdir()
    (d / "fd" / "frontier").write_text("a file where the frontier's directory belongs\n")
    (d / "adir").mkdir()
    (d / "bad.toml").write_text('max-pages = 5\nmax_pagez = 6\n')
    (d / "robots.txt").write_text("User-agent: *\nDisallow: /private\n")
    # a frontier holding one host on two ports, for the ambiguous --host case
    subprocess.run([*CRAWL, "frontier", "add", "--dir", str(d / "two")], cwd=ROOT, check=True,
                   input=b"http://two.test:8081/\nhttp://two.test:8082/\n", capture_output=True)
    (d / "ro").write_text(unwritable(d))
    return d


# (id, argv after "crawl", expected status, a word the message must hold, path that must not appear)
CASES: list[tuple[str, list[str], int, str, str | None]] = [
    ("unknown-command", ["nosuch"], 2, "No such command", None),
    ("unknown-flag", ["seen", "--dir", "c", "--bogus"], 2, "--bogus", None),
    ("canon-bad-int", ["canon", "--max-length", "3"], 2, "--max-length", None),
    ("canon-missing-input", ["canon", "-i", "missing.ndjson"], 2, "missing.ndjson", None),
    ("canon-input-dir", ["canon", "-i", "adir"], 2, "spool:adir", None),
    ("canon-output-dir", ["canon", "-o", "adir"], 2, "spool:adir", None),
    ("seen-missing-spool", ["seen", "--dir", "s1", "-i", "spool:typo"], 2, "no spool at typo", "s1"),
    ("seen-dir-cannot-exist", ["seen", "--dir", "/proc/crawl-test/x"], 1, "/proc/crawl-test/x", None),
    ("seen-dir-unwritable", ["seen", "--dir", "@ro"], 1, "write", None),
    ("seen-summary-typo", ["seen", "--dir", "typo", "--summary"], 2, "no crawl directory", "typo"),
    ("seen-bad-rate", ["seen", "--dir", "c", "--fp-rate", "2"], 2, "--fp-rate", "c"),
    ("frontier-file-in-dir", ["frontier", "add", "--dir", "fd"], 1, "fd/frontier", None),
    ("frontier-next-typo", ["frontier", "next", "--dir", "typo"], 2, "no crawl directory", "typo"),
    ("frontier-stats-typo", ["frontier", "stats", "--dir", "typo"], 2, "no crawl directory", "typo"),
    ("frontier-complete-typo", ["frontier", "complete", "--dir", "typo"], 2, "no crawl directory", "typo"),
    ("frontier-next-lease", ["frontier", "next", "--dir", "two", "--lease", "5x"], 2, "not a duration", None),
    ("frontier-dump-ambiguous", ["frontier", "dump", "--dir", "two", "--host", "two.test"], 2,
     "two.test:8081", None),
    ("fetch-timeout-zero", ["fetch", "--dir", "f1", "--timeout", "0"], 2, "more than 0", "f1"),
    ("fetch-timeout-word", ["fetch", "--dir", "f1", "--connect-timeout", "soon"], 2, "not a duration", "f1"),
    ("fetch-dir-unwritable", ["fetch", "--dir", "@ro"], 1, "write", None),
    ("robots-missing-file", ["robots", "-f", "missing.txt", "/x"], 2, "missing.txt", None),
    ("robots-stdin-file-no-urls", ["robots", "-f", "-"], 2, "arguments", None),
    ("parse-missing-spool", ["parse", "--dir", "p1", "-i", "spool:typo"], 2, "no spool", "p1"),
    ("dedupe-no-dir", ["dedupe"], 2, "--dir", None),
    ("dedupe-explain-typo", ["dedupe", "--explain", "--dir", "typo", "http://a.test/", "http://b.test/"], 2,
     "no crawl directory", "typo"),
    ("recrawl-ping-ftp", ["recrawl", "ping", "--dir", "r1", "ftp://x/"], 2, "unsupported-scheme", "r1"),
    ("recrawl-typo", ["recrawl", "--dir", "typo"], 2, "no crawl directory", "typo"),
    ("recrawl-stats-typo", ["recrawl", "stats", "--dir", "typo"], 2, "no crawl directory", "typo"),
    ("recrawl-interval-zero", ["recrawl", "--dir", "r1", "--min-interval", "0"], 2, "more than 0", "r1"),
    ("recrawl-budget", ["recrawl", "--dir", "r1", "--budget", "fast"], 2, "positive rate", "r1"),
    ("run-nothing", ["run", "--dir", "r2"], 2, "nothing to crawl", None),
    ("run-duration", ["run", "--dir", "r3", "--duration", "1h30x", "http://a.test/"], 2, "not a duration",
     "r3"),
    ("run-config-key", ["run", "--dir", "r3", "--config", "bad.toml"], 2, "max_pagez", "r3"),
    ("stats-typo", ["stats", "--dir", "typo"], 2, "no crawl directory", "typo"),
    ("index-typo", ["index", "--dir", "typo"], 2, "no WARC directory", None),
    ("spool-take-typo", ["spool", "take", "typo"], 2, "no spool at typo", "typo"),
    ("spool-peek-typo", ["spool", "peek", "typo"], 2, "no spool at typo", "typo"),
    ("spool-stats-typo", ["spool", "stats", "typo"], 2, "no spool at typo", "typo"),
    ("spool-take-output-dir", ["spool", "take", "two/frontier", "-o", "adir"], 2, "spool:adir", None),
    ("report-typo", ["report", "--dir", "typo"], 2, "no crawl directory", "typo"),
    ("why-typo", ["why", "--dir", "typo", "http://a.test/"], 2, "no crawl directory", "typo"),
    ("check-typo", ["check", "--dir", "typo"], 2, "no crawl directory", "typo"),
    ("testweb-mix", ["testweb", "serve", "--out", "w1", "--mix", "bogus"], 2, "bogus", None),
    ("testweb-audit-delay", ["testweb", "audit", "adir", "--delay", "1x"], 2, "not a duration", None),
    ("testweb-audit-missing", ["testweb", "audit", "missing-web"], 2, "missing-web", None),
]


@pytest.fixture(scope="module")
def outcomes(place: Path) -> dict[str, subprocess.CompletedProcess[bytes]]:
    """Every case run once, three at a time (each is a fresh interpreter: mostly start-up)."""
    from concurrent.futures import ThreadPoolExecutor

    ro = place.joinpath("ro").read_text()

    def one(case: tuple[str, list[str], int, str, str | None]) -> subprocess.CompletedProcess[bytes]:
        return run([*CRAWL, *[ro if a == "@ro" else a for a in case[1]]], cwd=place)

    with ThreadPoolExecutor(3) as pool:
        return dict(zip([c[0] for c in CASES], pool.map(one, CASES), strict=True))


@pytest.mark.parametrize(("case", "status", "word", "absent"), [(c[0], *c[2:]) for c in CASES],
                         ids=[c[0] for c in CASES])
def test_bad_invocation_is_one_line(place: Path, outcomes: dict[str, subprocess.CompletedProcess[bytes]],
                                    case: str, status: int, word: str, absent: str | None) -> None:
    p = outcomes[case]
    err = p.stderr.decode(errors="replace")
    lines = [ln for ln in err.splitlines() if ln.startswith("crawl: error:")]
    assert len(lines) == 1, err
    assert "Traceback" not in err, err
    assert p.returncode == status, err
    assert word in lines[0], err
    if absent is not None:
        assert not (place / absent).exists(), f"{absent} was created by a failing command"


def test_traceback_only_when_asked(place: Path) -> None:
    args = [*CRAWL, "seen", "--dir", "/proc/crawl-test/x"]
    quiet = run(args, cwd=place, env={"CRAWL_TRACEBACK": "0"})
    assert b"Traceback" not in quiet.stderr and quiet.returncode == 1
    loud = run(args, cwd=place, env={"CRAWL_TRACEBACK": "1"})
    assert b"Traceback" in loud.stderr and b"StateError" in loud.stderr
    assert loud.stderr.count(b"crawl: error:") == 1 and loud.returncode == 1  # same line, same status
    flag = run([*CRAWL, "--traceback", "seen", "--dir", "/proc/crawl-test/x"], cwd=place)
    assert b"Traceback" in flag.stderr and flag.returncode == 1


def test_a_closed_pipe_ends_quietly_with_0(place: Path) -> None:
    """`| head` under `set -o pipefail`: the writer must not fail the pipeline (git and
    grep die of SIGPIPE there, 141; crawl ends with 0, quietly)."""
    urls = place / "urls.txt"
    urls.write_text("".join(f"http://a.test/{i}\n" for i in range(50_000)))
    script = (f"set -o pipefail; {sys.executable} -m crawl canon < {urls} | head -n 1; "
              f"echo \"status=$?\" >&2")
    p = run(["bash", "-c", script], cwd=place)
    assert p.stdout.count(b"\n") == 1
    assert b"status=0" in p.stderr, p.stderr
    assert b"Traceback" not in p.stderr and b"rror" not in p.stderr


def test_ctrl_c_while_the_command_starts_is_quiet(tmp_path: Path) -> None:
    """The imports take a second on a loaded machine; a Ctrl-C in that second must end
    the command with 130 and nothing on stderr, not an import traceback. The program is
    started the way the installed entry point starts it (a script named ``crawl``), and
    the interrupt lands after ``crawl.commands`` is imported, before the boundary is up."""
    script = tmp_path / "crawl"
    script.write_text("import os, signal\nimport crawl.commands\n"
                      "os.kill(os.getpid(), signal.SIGINT)\nimport time\ntime.sleep(30)\n")
    # a job started in the background by a shell without job control (CI's, nohup's)
    # inherits SIGINT ignored, and Python then leaves it ignored: give the child the default
    def default_sigint() -> None:
        signal.signal(signal.SIGINT, signal.SIG_DFL)

    done = subprocess.run([sys.executable, str(script)], capture_output=True, timeout=60,
                          preexec_fn=default_sigint)
    assert (done.returncode, done.stderr) == (130, b"")
    # imported by anything else (a test, a library user), the handler is left alone
    other = tmp_path / "other.py"
    other.write_text(script.read_text())
    done = subprocess.run([sys.executable, str(other)], capture_output=True, timeout=60,
                          preexec_fn=default_sigint)
    assert done.returncode == -2 and b"KeyboardInterrupt" in done.stderr  # Python's own way
