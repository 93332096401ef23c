"""The default User-Agent names no one: fetch and run say so once, and how to fix it.

The suite sets CRAWL_USER_AGENT (tests/conftest.py) so that the warning does not
flood every test's stderr; here it is unset to see the warning, and set to
see it go.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from crawl.core import DEFAULT_USER_AGENT, contact_warning

CRAWL = [sys.executable, "-m", "crawl"]


def _run(args: list[str], ua_env: str | None) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != "CRAWL_USER_AGENT"}
    if ua_env is not None:
        env["CRAWL_USER_AGENT"] = ua_env
    return subprocess.run([*CRAWL, *args], capture_output=True, text=True, input="", env=env, timeout=60)


def _warnings(stderr: str) -> list[str]:
    return [x for x in stderr.splitlines() if "no contact configured" in x]


def test_fetch_and_run_warn_once_without_a_contact(tmp_path: Path) -> None:
    res = _run(["fetch", "--dir", str(tmp_path / "f")], None)
    assert res.returncode == 0, res.stderr
    (line,) = _warnings(res.stderr)
    assert line.startswith("crawl fetch: warning:") and "--user-agent" in line and "CRAWL_USER_AGENT" in line
    res = _run(["run", "--dir", str(tmp_path / "r")], None)  # no seeds: a usage error, after the warning
    assert res.returncode == 2 and len(_warnings(res.stderr)) == 1, res.stderr
    assert "Traceback" not in res.stderr


def test_a_contact_by_flag_or_environment_silences_it(tmp_path: Path) -> None:
    mine = "acme-audit/1.0 (+https://acme.example/bot)"
    assert _warnings(_run(["fetch", "--dir", str(tmp_path / "a"), "--user-agent", mine], None).stderr) == []
    assert _warnings(_run(["fetch", "--dir", str(tmp_path / "b")], mine).stderr) == []
    assert contact_warning(mine) is None and contact_warning(DEFAULT_USER_AGENT)
