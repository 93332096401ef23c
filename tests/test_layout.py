"""The layout's rules, read from the code's imports (an AST walk, nothing imported).

One package per stage; dependencies point one way (``commands`` -> ``run`` ->
stages -> ``core``); a package is entered only through its public face (the
names its ``__init__`` gives), never through a module or a private name; and
no two modules import each other, directly or round a loop. Function-level
(lazy) imports count too: a loop closed at run time is still a loop.
"""

from __future__ import annotations

import ast
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PKG = ROOT / "crawl"
STAGES = {"canon", "frontier", "robots", "net", "fetch", "store", "parse", "text", "seen", "dedupe",
          "recrawl", "testweb", "cluster"}
TOP = {"run", "report", "commands"}


def _modules() -> dict[str, Path]:
    out = {}
    for p in PKG.rglob("*.py"):
        rel = p.relative_to(ROOT).with_suffix("")
        name = ".".join(rel.parts)
        out[name[: -len(".__init__")] if name.endswith(".__init__") else name] = p
    return out


def _type_checking_nodes(tree: ast.AST) -> set[int]:
    skip: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            skip |= {id(n) for n in ast.walk(node)}
    return skip


def _imports(mods: dict[str, Path]) -> list[tuple[str, str, str | None, int]]:
    """(importing module, module or package imported from, name or None, line) per crawl import.

    ``from crawl.core import records`` gives ("...", "crawl.core", "records"):
    a submodule is a name the package offers (or not) like any other.
    """
    out = []
    for mod, path in mods.items():
        tree = ast.parse(path.read_text())
        skip = _type_checking_nodes(tree)
        package = mod if path.name == "__init__.py" else mod.rsplit(".", 1)[0]
        for node in ast.walk(tree):
            if id(node) in skip:
                continue
            if isinstance(node, ast.ImportFrom):
                if node.level:
                    base = package.split(".")[: len(package.split(".")) - node.level + 1]
                    target = ".".join(base + ([node.module] if node.module else []))
                else:
                    target = node.module or ""
                if target == "crawl" or target.startswith("crawl."):
                    out += [(mod, target, a.name, node.lineno) for a in node.names]
            elif isinstance(node, ast.Import):
                out += [(mod, a.name, None, node.lineno) for a in node.names if a.name.startswith("crawl")]
    return out


def _package(mod: str) -> str:
    parts = mod.split(".")
    return parts[1] if len(parts) > 1 else ""


MODS = _modules()
IMPORTS = _imports(MODS)


def test_every_module_lives_in_a_package() -> None:
    loose = [m for m in MODS if m.count(".") == 1 and m not in {f"crawl.{p}" for p in STAGES | TOP | {"core"}}
             and m not in ("crawl.__main__",)]
    assert not loose, f"modules outside a stage package: {loose}"


def test_dependencies_point_one_way() -> None:
    bad = []
    for mod, target, _, line in IMPORTS:
        src, dst = _package(mod), _package(target)
        if src == dst or not dst:
            continue
        if src == "core":
            bad.append(f"{mod}:{line}: core imports crawl.{dst}")
        elif src in STAGES and dst in TOP:
            bad.append(f"{mod}:{line}: a stage imports crawl.{dst}")
        elif src == "run" and dst in ("report", "commands"):
            bad.append(f"{mod}:{line}: run imports crawl.{dst}")
        elif src == "report" and dst == "commands":
            bad.append(f"{mod}:{line}: report imports crawl.commands")
    assert not bad, "\n".join(bad)


def test_packages_are_entered_through_their_public_face() -> None:
    faces = {}
    for p in STAGES | TOP | {"core"}:
        tree = ast.parse((PKG / p / "__init__.py").read_text())
        names = set()
        for node in tree.body:
            if isinstance(node, ast.ImportFrom):
                names |= {a.asname or a.name for a in node.names}
            elif isinstance(node, (ast.FunctionDef, ast.ClassDef)):
                names.add(node.name)
            elif isinstance(node, ast.Assign):
                names |= {t.id for t in node.targets if isinstance(t, ast.Name)}
            elif (isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name)
                  and node.target.id == "_LAZY" and isinstance(node.value, ast.Dict)):
                names |= {k.value for k in node.value.keys if isinstance(k, ast.Constant)}  # crawl.core.lazy
        faces[p] = names
    bad = []
    for mod, target, name, line in IMPORTS:
        src, dst = _package(mod), _package(target)
        if src == dst or dst in ("", "testweb", "commands"):
            continue  # testweb and the commands are tools, entered where they are documented
        where = f"{mod}:{line}"
        if target != f"crawl.{dst}":
            bad.append(f"{where}: imports the module {target}; import from crawl.{dst}")
        elif name is not None and (name.startswith("_") or name not in faces[dst]):
            bad.append(f"{where}: crawl.{dst} does not offer {name!r}")
    assert not bad, "\n".join(bad)


def _cycle(graph: dict[str, set[str]]) -> list[str] | None:
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(n: str) -> list[str] | None:
        state[n] = 1
        stack.append(n)
        for m in sorted(graph.get(n, ())):
            if state.get(m) == 1:
                return stack[stack.index(m):] + [m]
            if m not in state and (found := visit(m)):
                return found
        stack.pop()
        state[n] = 2
        return None

    for n in sorted(graph):
        if n not in state and (found := visit(n)):
            return found
    return None


def test_no_import_cycles_between_packages() -> None:
    graph: dict[str, set[str]] = defaultdict(set)
    for mod, target, _, _ in IMPORTS:
        if _package(mod) != _package(target) and _package(target):
            graph[_package(mod)].add(_package(target))
    assert _cycle(graph) is None, " -> ".join(_cycle(graph) or [])


def test_no_import_cycles_between_modules() -> None:
    graph: dict[str, set[str]] = defaultdict(set)
    for mod, target, name, _ in IMPORTS:
        sub = f"{target}.{name}"
        if _package(mod) == _package(target) and MODS.get(target, PKG).name == "__init__.py" \
                or target == "crawl":
            if sub in MODS:  # "from . import spool": the module, not the package's face
                graph[mod].add(sub)  # (and "from . import _compiled", the C module: no edge)
        elif target in MODS:
            graph[mod].add(target)  # a module, or a package's face (which imports its modules)
    graph = {m: {t for t in ts if t != m} for m, ts in graph.items()}
    cycle = _cycle(graph)
    assert cycle is None, " -> ".join(cycle or [])


def test_test_files_have_distinct_names() -> None:
    """tests/ has no __init__.py files: pytest imports each test file under its bare
    name, so two packages' test_x.py stop the suite at collection ("import file
    mismatch", seen in CI when tests/run and tests/frontier both had test_handoff.py)."""
    seen: dict[str, list[str]] = {}
    for path in sorted((ROOT / "tests").rglob("test_*.py")):
        seen.setdefault(path.name, []).append(str(path.relative_to(ROOT)))
    assert {name: paths for name, paths in seen.items() if len(paths) > 1} == {}
