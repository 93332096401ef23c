"""The fuzz targets, briefly, on every test run; ``make fuzz`` runs them for longer.

Each target runs in its own process through tests/fuzz/fuzz.py (atheris when
installed, else hypothesis): first every committed seed, then new inputs
for a few seconds. A crash, an input past the per-input timeout or a process
grown past its memory limit fails the run, and the test shows the input.
The seeds also run here in-process, where a failure gives a plain traceback.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from fuzz import SELFTESTS, seeds
from targets import TARGETS

FUZZ = Path(__file__).resolve().parent / "fuzz.py"
SECONDS = 2  # of fuzzing per target, after the seeds
RUNS = 20_000  # and at most this many inputs


def _fuzz(target: str, work: Path, *extra: str, timeout: int = 10) -> subprocess.CompletedProcess[str]:
    cmd = [sys.executable, str(FUZZ), target, "--seconds", str(SECONDS), "--runs", str(RUNS),
           "--timeout", str(timeout), "--work", str(work), *extra]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=180)


def _tail(proc: subprocess.CompletedProcess[str]) -> str:
    return "\n".join((proc.stdout + proc.stderr).splitlines()[-40:])


@pytest.mark.parametrize("target", sorted(TARGETS))
def test_every_target_has_seeds(target: str) -> None:
    assert len(seeds(target)) >= 3, f"tests/fuzz/corpus/{target} needs seeds (python tests/fuzz/make_seeds.py)"


@pytest.mark.parametrize("target", sorted(TARGETS))
def test_the_seeds_pass(target: str) -> None:
    for path in seeds(target):
        TARGETS[target](path.read_bytes())


@pytest.mark.parametrize("target", sorted(TARGETS))
def test_a_brief_fuzz_run_finds_nothing(target: str, tmp_path: Path) -> None:
    proc = _fuzz(target, tmp_path)
    found = sorted(p.name for p in tmp_path.iterdir() if p.name.startswith(("crash-", "timeout-", "oom-")))
    assert proc.returncode == 0 and not found, f"{target}: {found}\n{_tail(proc)}"


@pytest.mark.parametrize(("target", "engine"), [(t, e) for t in sorted(SELFTESTS) for e in ("atheris", "hypothesis")])
def test_a_crash_or_a_hang_fails_the_run(target: str, engine: str, tmp_path: Path) -> None:
    """The harness itself: a target that raises, or one that never returns, ends the
    run with a failure and a saved input, within the per-input timeout."""
    if engine == "atheris":
        pytest.importorskip("atheris")
    proc = _fuzz(target, tmp_path, "--engine", engine, timeout=2)
    saved = [p.name for p in tmp_path.iterdir() if p.name.startswith(("crash-", "timeout-"))]
    assert proc.returncode != 0, _tail(proc)
    assert saved, _tail(proc)
    if target == "selftest-hang":
        assert saved[0].startswith("timeout-"), saved
