"""One grammar across commands: time flags, --user-agent, exit statuses in the man pages."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import click
from click.testing import CliRunner, Result

from crawl.commands import cli
from crawl.core import DEFAULT_USER_AGENT, CrawlDir, parse_duration
from crawl.recrawl import Recrawler

ROOT = Path(__file__).resolve().parent.parent


def crawl(*args: str, stdin: str = "") -> Result:
    return CliRunner().invoke(cli, list(args), input=stdin)


def _commands() -> list[tuple[str, click.Command]]:
    """Every command and subcommand, by its path ("frontier next")."""
    out = []

    def walk(path: str, cmd: click.Command) -> None:
        out.append((path, cmd))
        if isinstance(cmd, click.Group):
            ctx = click.Context(cmd)
            for n in cmd.list_commands(ctx):
                sub = cmd.get_command(ctx, n)
                if sub is not None:
                    walk(f"{path} {n}".strip(), sub)

    walk("", cli)
    return out


def test_every_time_flag_takes_the_same_durations(tmp_path: Path) -> None:
    d = str(tmp_path / "c")
    assert crawl("frontier", "add", "--dir", d, stdin="http://a.test/\n").exit_code == 0
    res = crawl("fetch", "--dir", d, "--timeout", "30s", "--connect-timeout", "5s", "--host-delay", "1s")
    assert res.exit_code == 0, res.output
    res = crawl("frontier", "next", "--dir", d, "--lease", "1h30m", "--delay", "0.5s", "--park-for", "2d")
    assert res.exit_code == 0 and '"url":"http://a.test/"' in res.stdout
    res = crawl("recrawl", "--dir", d, "--min-interval", "1h30m", "--max-interval", "2d12h")
    assert res.exit_code == 0, res.output
    with Recrawler(CrawlDir(d)) as rc:
        cfg = rc.saved_config()
    assert (cfg.min_interval, cfg.max_interval) == (5400.0, 216000.0)
    conf = tmp_path / "nightly.toml"
    conf.write_text('duration = "1h30m"\nidle-exit = "0.5s"\ntimeout = "30s"\nconnect-timeout = 5\n'
                    'delay = "250ms"\n')
    res = crawl("run", "--dir", str(tmp_path / "r"), "--config", str(conf))
    assert "nothing to crawl" in str(res.exception)  # the settings all parsed (and the run looked)


def test_a_bad_duration_gets_the_same_message_everywhere(tmp_path: Path) -> None:
    d = str(tmp_path / "c")
    crawl("frontier", "add", "--dir", d)
    try:
        parse_duration("1h30x")
    except ValueError as exc:
        expected = str(exc)
    for args in (["run", "--dir", d, "--duration", "1h30x"], ["recrawl", "--dir", d, "--min-interval", "1h30x"],
                 ["fetch", "--dir", d, "--timeout", "1h30x"], ["frontier", "next", "--dir", d, "--lease", "1h30x"],
                 ["frontier", "complete", "--dir", d, "--backoff-cap", "1h30x"],
                 ["testweb", "audit", str(tmp_path), "--delay", "1h30x"],
                 ["testweb", "serve", "--out", str(tmp_path / "w"), "--latency", "1h30x"]):
        res = crawl(*args)
        assert res.exit_code == 2 and expected in " ".join(res.output.split()), (args, res.output)


def test_user_agent_is_the_full_header_everywhere() -> None:
    """--user-agent means the User-Agent header wherever it appears; the robots.txt
    product token is derived from it (crawl robots -A and testweb --agent name a token)."""
    seen = []
    for path, cmd in _commands():
        for p in cmd.params:
            if "--user-agent" in getattr(p, "opts", ()):
                seen.append(path)
                assert p.default in (DEFAULT_USER_AGENT, None), (path, p.default)
                assert "User-Agent header" in (getattr(p, "help", "") or ""), path
    assert {"fetch", "run", "parse", "robots"} <= set(seen)


def test_man_pages_list_only_the_statuses_a_command_returns() -> None:
    spec = importlib.util.spec_from_file_location("gen_man", ROOT / "scripts" / "gen_man.py")
    assert spec and spec.loader
    gen_man = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(gen_man)
    pages = gen_man.pages()
    every = _commands()
    for name in (path for path, _ in every if path and " " not in path):
        statuses = pages[f"crawl-{name}.1"].split(".SH EXIT STATUS", 1)[1]
        has_strict = any(p.name == "strict" for path, c in every if path == name or path.startswith(name + " ")
                         for p in c.params)
        assert (".B 3\n" in statuses) == has_strict, name
        assert ".B 130\n" in statuses and ".B 2\n" in statuses
    assert "Ctrl\\-C" in pages["crawl-run.1"].split(".SH EXIT STATUS")[1]
    assert "exits 0 (also while" not in pages["crawl-run.1"]  # no page says Ctrl-C gives 0
    assert ".B 3\n" in pages["crawl.1"] and "143" in pages["crawl.1"]
