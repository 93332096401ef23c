"""A package face whose names load on first use (PEP 562).

``crawl run --help`` or ``crawl stats`` must not pay for lxml, numpy, the
dedupe index or the cluster client; ``crawl run`` must not pay for them
before its first request when they are not needed yet. A package that
gathers heavy modules behind one face (``crawl.run``, ``crawl.parse``) lists
its names in a table (name -> the submodule that defines it) and gets a
module ``__getattr__`` from :func:`lazy_face`: ``from crawl.run import Crawl``
still works, and imports ``crawl.run.crawl`` only then. The same names are
imported for real under ``if TYPE_CHECKING:`` so type checkers and readers
see the face; tests/test_layout.py reads the table as the face.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import Any


def lazy_face(package: str, table: dict[str, str], namespace: dict[str, Any]) -> tuple[
        Callable[[str], Any], Callable[[], list[str]]]:
    """``(__getattr__, __dir__)`` for ``package``: a name in ``table`` is fetched from its
    submodule on first use and kept in ``namespace`` (the package's globals), so the
    next use costs nothing. A name that is its own submodule (``traps``) is that module.
    """

    def getattr_(name: str) -> Any:
        try:
            module = table[name]
        except KeyError:
            raise AttributeError(f"module {package!r} has no attribute {name!r}") from None
        mod = importlib.import_module(f"{package}.{module}")
        value = mod if name == module else getattr(mod, name)
        namespace[name] = value
        return value

    def dir_() -> list[str]:
        return sorted(set(namespace) | set(table))

    return getattr_, dir_
