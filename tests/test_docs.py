"""Every command has help, a current man page and a place in the README."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path

import click
import pytest

from crawl.commands import COMMANDS, cli

ROOT = Path(__file__).resolve().parent.parent
_spec = importlib.util.spec_from_file_location("gen_man", ROOT / "scripts" / "gen_man.py")
assert _spec and _spec.loader
gen_man = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(gen_man)

AVAILABLE = cli.list_commands(click.Context(cli))


def test_every_listed_command_is_present() -> None:
    missing = sorted(set(COMMANDS) - set(AVAILABLE))
    assert not missing, f"commands listed but not implemented: {missing}"


@pytest.mark.parametrize("name", AVAILABLE)
def test_command_has_help_and_readme_mention(name: str) -> None:
    cmd = cli.get_command(click.Context(cli), name)
    assert cmd is not None and (cmd.help or "").strip(), f"crawl {name} has no help"
    assert f"crawl {name}" in (ROOT / "README.md").read_text(), f"README never shows crawl {name}"


def test_man_pages_are_current() -> None:
    for fname, text in gen_man.pages().items():
        path = ROOT / "man" / fname
        assert path.exists(), f"man/{fname} missing: run make man"
        assert path.read_text() == text, f"man/{fname} is stale: run make man"


def test_top_level_help_lists_every_command() -> None:
    out = subprocess.run([sys.executable, "-m", "crawl", "--help"], capture_output=True, text=True, check=True).stdout
    for name in AVAILABLE:
        assert f"  {name} " in out
    ver = subprocess.run([sys.executable, "-m", "crawl", "--version"], capture_output=True, text=True, check=True).stdout
    assert ver.startswith("crawl, version ")
