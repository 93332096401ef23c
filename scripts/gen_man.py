"""Generate man/crawl.1 and man/crawl-NAME.1 from the click commands.

The help text is written once, in the click docstrings and option help; the
man pages are derived from it, so they cannot drift (tests/test_docs.py
checks that the checked-in pages are current). Run: make man
"""

from __future__ import annotations

import sys
from pathlib import Path

import click

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from crawl import __version__  # noqa: E402
from crawl.commands import COMMANDS, cli  # noqa: E402
from crawl.commands._boundary import COMMAND_NOTES, STATUSES  # noqa: E402


def exit_status(name: str | None, cmd: click.Command) -> str:
    """crawl(1) has the whole table; a command's page lists the statuses it can
    return (3 only with a --strict flag), with what each means for it."""
    rows = [".SH EXIT STATUS"]
    for status, (meaning, who) in STATUSES.items():
        if name is not None and who == "strict" and not _has_strict(cmd):
            continue
        notes = [(n, by[status]) for n, by in sorted(COMMAND_NOTES.items())
                 if status in by and (name is None or n == name)]
        text = meaning + "".join(f". For crawl {n}: {note}" for n, note in notes)
        rows.append(f".TP\n.B {status}\n{_esc(text)}")
    if name is None:
        rows.append(".PP\nA command killed by a signal it does not handle ends as the shell "
                    "reports it (128 + the signal's number, 143 for SIGTERM).")
    return "\n".join(rows) + "\n"


def _has_strict(cmd: click.Command) -> bool:
    if any(p.name == "strict" for p in cmd.params):
        return True
    if isinstance(cmd, click.Group):
        ctx = click.Context(cmd)
        return any(_has_strict(c) for n in cmd.list_commands(ctx) if (c := cmd.get_command(ctx, n)))
    return False


def _esc(text: str) -> str:
    out = []
    for line in text.replace("\\", "\\\\").replace("-", "\\-").splitlines():
        if line.startswith((".", "'")):
            line = "\\&" + line
        out.append(line)
    return "\n".join(out)


def _help_body(cmd: click.Command) -> str:
    """The docstring as roff: \\b blocks stay verbatim, the rest is filled."""
    text = cmd.help or ""
    parts = []
    for para in text.strip().split("\n\n"):
        lines = para.splitlines()
        if lines and lines[0].strip() == "\b":
            parts.append(".PP\n.nf\n" + _esc("\n".join(lines[1:])) + "\n.fi")
            continue
        parts.append(".PP\n" + _esc(" ".join(s.strip() for s in lines)))
    return "\n".join(parts)


def _options(ctx: click.Context, cmd: click.Command) -> str:
    rows = []
    # cmd.params, not get_params(): click builds a command's help option once, from the first
    # context that asks, so a test that rendered help under another context would change the page
    for param in cmd.params:
        if isinstance(param, click.Argument):
            continue
        rec = param.get_help_record(ctx)
        if rec is None:
            continue
        name, help_text = rec
        rows.append(f".TP\n.B {_esc(name)}\n{_esc(help_text)}")
    if cmd.add_help_option and ctx.help_option_names:
        rows.append(f".TP\n.B {_esc(', '.join(ctx.help_option_names))}\nShow this message and exit.")
    return "\n".join(rows)


def _section(path: list[str], cmd: click.Command, parent: click.Context) -> str:
    ctx = click.Context(cmd, info_name=path[-1], parent=parent)
    usage = " ".join(cmd.collect_usage_pieces(ctx))
    out = [f'.SS "{_esc(" ".join(path))}"' if len(path) > 2 else ""]
    out.append(f".B {_esc(' '.join(path))}\n{_esc(usage)}")
    out.append(_help_body(cmd))
    opts = _options(ctx, cmd)
    if opts:
        out.append(".PP\nOptions:\n" + opts)
    if isinstance(cmd, click.Group):
        for name in sorted(cmd.list_commands(ctx)):
            sub = cmd.get_command(ctx, name)
            if sub is not None and not sub.hidden:
                out.append(_section([*path, name], sub, ctx))
    return "\n".join(x for x in out if x)


def render(name: str | None) -> str:
    root = click.Context(cli, info_name="crawl", **cli.context_settings)
    if name is None:
        title, cmd, purpose = "crawl", cli, "a polite, durable web crawler made of small commands"
        body = _help_body(cli) + "\n.SH COMMANDS\n" + "\n".join(
            f".TP\n.BR crawl\\-{n} (1)\n{_esc(COMMANDS[n][1])}" for n in cli.list_commands(root)
        ) + "\n.SH ENVIRONMENT\n.TP\n.B CRAWL_DIR\ndefault for \\-\\-dir\n.TP\n.B CRAWL_TRACEBACK\nset to 1: print the Python traceback of an error before its one crawl: error: line (as crawl \\-\\-traceback does)\n"
    else:
        title, cmd, purpose = f"crawl-{name}", cli.get_command(root, name), COMMANDS[name][1]
        assert cmd is not None
        body = _section(["crawl", name], cmd, root)
    head = (
        f'.TH {title.upper()} 1 "" "crawl {__version__}" "crawl manual"\n'
        f".SH NAME\n{_esc(title)} \\- {_esc(purpose.rstrip('.'))}\n"
        f".SH DESCRIPTION\n"
    )
    see = "\n.SH SEE ALSO\n.BR crawl (1)\n" if name else ""
    return head + body + "\n" + exit_status(name, cmd) + see


def pages() -> dict[str, str]:
    root = click.Context(cli, info_name="crawl", **cli.context_settings)
    out = {"crawl.1": render(None)}
    for n in cli.list_commands(root):
        out[f"crawl-{n}.1"] = render(n)
    return out


def main() -> None:
    mandir = ROOT / "man"
    mandir.mkdir(exist_ok=True)
    for fname, text in pages().items():
        (mandir / fname).write_text(text)
        print(f"wrote man/{fname}")


if __name__ == "__main__":
    main()
