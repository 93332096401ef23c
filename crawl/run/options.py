"""The settings a run decided with, kept so that ``crawl why`` can name the rule.

"Out of scope" means nothing without the scope: the mode, the allow and
deny patterns, the depth limit; "waits 2 s" means little without the base
delay and the response factor it came from. ``crawl run`` writes them
into ``D/run-status.json`` (``options``, beside its progress) and
:func:`recorded_run` reads them back: the scope is rebuilt with the seeds the
crawl directory keeps (``D/seeds.txt``), as the run itself does, so the
status file stays small however many seeds there are.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import orjson

from crawl.frontier import Politeness
from crawl.parse import traps

from .scope import Scope
from .stats import RUN_STATUS

if TYPE_CHECKING:
    from .crawl import RunOptions

# the choices of crawl run --cycle (its help says what each does); here, not in .crawl, so
# that the command's flags are declared without loading the loop
CYCLE_MODES = ("auto", "new", "continue")
VERSION = 1


def describe(opts: RunOptions) -> dict[str, Any]:
    """The part of a run's options that explains its decisions (JSON-ready)."""
    s = opts.scope
    return {
        "v": VERSION,
        "scope": {"mode": s.mode, "allow": list(s.allow), "deny": list(s.deny), "max_depth": s.max_depth},
        "max_per_host": opts.budgets.max_per_host,
        "politeness": dataclasses.asdict(opts.politeness),
        "agent": opts.fetch.agent_token,
        "robots": opts.fetch.robots,
        "traps": dataclasses.asdict(opts.parse.traps),
    }


@dataclass
class Recorded:
    """A run's decision settings as read back from its crawl directory."""

    scope: Scope
    politeness: Politeness
    agent: str
    robots: bool
    max_per_host: int
    trap_policy: traps.TrapPolicy
    found: bool  # False: no run recorded them (defaults, or a pipeline crawl)


def _fields(cls: Any, values: object) -> dict[str, Any]:
    """The keys of ``values`` that ``cls`` has (a newer run may have recorded more)."""
    names = {f.name for f in dataclasses.fields(cls)}
    return {k: v for k, v in values.items() if k in names} if isinstance(values, dict) else {}


def recorded_run(root: str | Path) -> Recorded:
    """The settings of the latest ``crawl run`` in ``root``, or the defaults (``found`` False)."""
    root = Path(root)
    opts: dict[str, Any] = {}
    try:
        status = orjson.loads((root / RUN_STATUS).read_bytes())
        got = status.get("options") if isinstance(status, dict) else None
        opts = got if isinstance(got, dict) and got.get("v") == VERSION else {}
    except (OSError, orjson.JSONDecodeError):
        pass
    sc = opts.get("scope") if isinstance(opts.get("scope"), dict) else {}
    try:
        scope = Scope(sc.get("mode", "domain"), tuple(sc.get("allow") or ()), tuple(sc.get("deny") or ()),
                      sc.get("max_depth"))
    except (ValueError, TypeError):
        scope = Scope()
    seeds = root / "seeds.txt"
    if seeds.exists():
        scope.add_seeds(seeds.read_text(errors="replace").split())
    try:
        politeness = Politeness(**_fields(Politeness, opts.get("politeness")))
    except TypeError:
        politeness = Politeness()
    try:
        policy = traps.TrapPolicy(**_fields(traps.TrapPolicy, opts.get("traps")))
    except TypeError:
        policy = traps.TrapPolicy()
    return Recorded(scope=scope, politeness=politeness, agent=str(opts.get("agent") or "crawl"),
                    robots=bool(opts.get("robots", True)), max_per_host=int(opts.get("max_per_host") or 0),
                    trap_policy=policy, found=bool(opts))
