"""What a mutation run (issue 21) found untested in the spool: a claim that goes
back to the queue (expired, or released) leaves the claimed table, so the
counts say where each record is, and nothing is delivered twice after an ack."""

from __future__ import annotations

from pathlib import Path

import orjson

from crawl.core import Spool


def _recs(n: int) -> list[dict[str, object]]:
    return [{"kind": "url", "v": 1, "url": f"http://h.test/{i}", "i": i} for i in range(n)]


def test_expired_claims_leave_the_claimed_table_when_they_go_back(tmp_path: Path) -> None:
    path = tmp_path / "sp"
    with Spool(path, claim_timeout=-1.0) as gone:  # its claims are past their deadline at once
        gone.put(_recs(3))
        assert len(gone.claim(3)) == 3
        assert gone.counts() == {"queued": 0, "claimed": 3}
    with Spool(path) as live:
        got = live.claim(1)
        assert [orjson.loads(v)["i"] for _, v in got] == [0]
        assert live.counts() == {"queued": 2, "claimed": 1}
        live.ack([k for k, _ in got])
        rest = live.claim(10)
        assert [orjson.loads(v)["i"] for _, v in rest] == [1, 2]
        live.ack([k for k, _ in rest])
        assert live.counts() == {"queued": 0, "claimed": 0}
        assert live.claim(10) == []


def test_released_claims_leave_the_claimed_table(tmp_path: Path) -> None:
    with Spool(tmp_path / "sp") as sp:
        sp.put(_recs(4))
        sp.claim(3)
        sp.release()
        assert sp.counts() == {"queued": 4, "claimed": 0}
        assert [orjson.loads(v)["i"] for _, v in sp.claim(10)] == [0, 1, 2, 3]
