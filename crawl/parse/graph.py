"""The link graph: each parsed page's out-links, kept so audits never re-parse WARC files.

``crawl report`` needs every page that links to a broken URL (with its
anchor text), the targets of redirects and canonicals, and the sitemap URLs
no page links to; ``crawl why`` shows a URL's first referrers. Both read
this store. One LMDB value per page (key: a 128-bit hash of its URL, value:
the URL and its edges, zstd-compressed), so a page parsed again (a new
cycle, or a batch replayed after a crash) replaces its old edges instead of
adding to them. Edges are bounded per page so a link farm cannot grow the
store faster than its pages.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Iterator

import orjson
import xxhash
import zstandard

from crawl.core import Record, close_env, open_env

MAX_EDGES = 1000  # per page; the rest are counted as cut
MAX_ANCHOR = 120  # characters of anchor text kept

Edge = list  # [target URL, anchor, rel (space-separated), source (a, sitemap, redirect...), trap]


def edges_of(links: Iterable[Record]) -> tuple[list[Edge], int]:
    """(edges, how many links were cut) from a page's ``link`` records."""
    edges: list[Edge] = []
    cut = 0
    for link in links:
        if link.get("kind") != "link" or not isinstance(link.get("url"), str):
            continue
        if len(edges) >= MAX_EDGES:
            cut += 1
            continue
        anchor, rel = link.get("anchor"), link.get("rel")
        if rel.__class__ is list:  # parse's records: a list of strings, joined without a filter
            try:
                rels = " ".join(rel)
            except TypeError:  # something else in it: only its strings
                rels = " ".join(r for r in rel if isinstance(r, str))
        else:
            rels = " ".join(r for r in rel if isinstance(r, str)) if isinstance(rel, list) else ""
        edges.append([
            link["url"],
            anchor[:MAX_ANCHOR] if isinstance(anchor, str) else "",
            rels,
            link.get("source") or "",
            link.get("trap") or "",
        ])
    return edges, cut


def _key(url: str) -> bytes:
    return xxhash.xxh3_128_digest(url.encode("utf-8", "surrogatepass"))


class LinkGraph:
    """``D/graph``: write a batch of pages' edges in one fsynced transaction; read them all."""

    def __init__(self, path: str | os.PathLike[str], readonly: bool = False) -> None:
        self.env = open_env(path, max_dbs=1, readonly=readonly)
        self._c = zstandard.ZstdCompressor(level=1)
        self._d = zstandard.ZstdDecompressor()

    def record(self, pages: Iterable[tuple[str, Iterable[Record]]]) -> int:
        """Store each (page URL, its link records); returns the number of pages stored."""
        n = 0
        with self.env.begin(write=True) as txn:
            for url, links in pages:
                edges, cut = edges_of(links)
                txn.put(_key(url), self._c.compress(orjson.dumps([url, edges, cut])))
                n += 1
        return n

    def pages(self) -> Iterator[tuple[str, list[Edge], int]]:
        """(page URL, edges, links cut) for every page, in no particular order."""
        with self.env.begin(buffers=True) as txn:
            for _, value in txn.cursor():
                url, edges, cut = orjson.loads(self._d.decompress(bytes(value)))
                yield url, edges, cut

    def edges(self, url: str) -> tuple[list[Edge], int] | None:
        with self.env.begin(buffers=True) as txn:
            value = txn.get(_key(url))
            if value is None:
                return None
            _, edges, cut = orjson.loads(self._d.decompress(bytes(value)))
            return edges, cut

    def __len__(self) -> int:
        return int(self.env.stat()["entries"])

    def close(self) -> None:
        close_env(self.env)

    def __enter__(self) -> LinkGraph:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
