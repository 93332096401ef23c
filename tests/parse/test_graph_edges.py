"""crawl/parse/graph.py edges_of: parse's records (rel a list of strings) take a join
without a filter; anything else in rel still keeps only its strings (issue 19)."""

from __future__ import annotations

from crawl.parse.graph import MAX_ANCHOR, MAX_EDGES, LinkGraph, edges_of


def link(**kw: object) -> dict[str, object]:
    return {"kind": "link", "url": "http://a.test/x", **kw}


class Rels(list):
    pass


def test_edges_of_every_shape_of_rel() -> None:
    recs = [
        link(rel=["nofollow", "ugc"], anchor="a" * 200, source="a", trap="calendar"),
        link(rel=[]),
        link(rel=["x", 3, None, "y"]),
        link(rel=Rels(["p", 4, "q"])),
        link(rel="nofollow"),  # not a list: no rel
        link(rel=None, anchor=7),
        link(),
        {"kind": "reject", "url": "http://a.test/r"},
        {"kind": "link", "url": 5},
    ]
    edges, cut = edges_of(recs)
    assert cut == 0
    assert [e[2] for e in edges] == ["nofollow ugc", "", "x y", "p q", "", "", ""]
    assert edges[0] == ["http://a.test/x", "a" * MAX_ANCHOR, "nofollow ugc", "a", "calendar"]
    assert edges[5] == ["http://a.test/x", "", "", "", ""]


def test_edges_are_cut_at_the_bound_and_stored(tmp_path) -> None:
    recs = [link(url=f"http://a.test/{i}", rel=["r"]) for i in range(MAX_EDGES + 5)]
    edges, cut = edges_of(recs)
    assert len(edges) == MAX_EDGES and cut == 5
    with LinkGraph(tmp_path / "g") as g:
        g.record([("http://a.test/", recs)])
        got = g.edges("http://a.test/")
    assert got is not None and got[1] == 5 and got[0][0] == ["http://a.test/0", "", "r", "", ""]
