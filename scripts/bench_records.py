"""Records codec: orjson (what crawl uses) against msgspec, on our records.

Prints records/s for decode and encode of realistic fetch and link records,
measured in the same run, and the ratio. This is the measurement behind the
choice of orjson in crawl/core/records.py.
"""

from __future__ import annotations

import time

import msgspec
import orjson

N = 200_000


def sample(i: int) -> list[dict]:
    fetch = {
        "kind": "fetch", "v": 1, "lease": f"{i:016x}", "url": f"http://h{i % 2000:04d}.test:8080/p/{i}.html",
        "host": f"h{i % 2000:04d}.test:8080", "ip": "127.0.1.3", "outcome": "ok", "status": 200,
        "bytes": 31_211, "content_type": "text/html; charset=utf-8",
        "timings": {"dns": 0.0, "connect": 0.0004, "first_byte": 0.0021, "total": 0.0043},
        "warc": {"file": "crawl-00001.warc.gz", "offset": 1234567 + i, "length": 9876},
        "digest": "sha1:2JZQGNOLDWQRHZ6X6W7BDGWJ3X5FJQXK", "fetched_at": 1764441600.25, "depth": 3,
    }
    link = {
        "kind": "link", "v": 1, "url": f"http://h{i % 2000:04d}.test:8080/p/{i * 7}.html",
        "parent": fetch["url"], "depth": 4, "position": i % 90, "priority": 1, "rel": [],
        "anchor": "Read more about this", "fp": f"{i * 2654435761 % 2**64:016x}",
    }
    return [fetch, link]


def bench(name: str, fn, items) -> float:
    t = time.perf_counter()
    for x in items:
        fn(x)
    return len(items) / (time.perf_counter() - t)


def main() -> None:
    recs = [r for i in range(N // 2) for r in sample(i)]
    lines = [orjson.dumps(r) for r in recs]
    enc, dec = msgspec.json.Encoder(), msgspec.json.Decoder()
    o_dec = bench("orjson", orjson.loads, lines)
    m_dec = bench("msgspec", dec.decode, lines)
    o_enc = bench("orjson", orjson.dumps, recs)
    m_enc = bench("msgspec", enc.encode, recs)
    print(f"records decode: orjson {o_dec:,.0f}/s  msgspec {m_dec:,.0f}/s  ratio {o_dec / m_dec:.2f}x")
    print(f"records encode: orjson {o_enc:,.0f}/s  msgspec {m_enc:,.0f}/s  ratio {o_enc / m_enc:.2f}x")


if __name__ == "__main__":
    main()
