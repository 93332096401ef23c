"""The flags that make ``crawl run`` one node of a shared crawl (crawl/cluster)."""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import click

from crawl.core import UsageError

_NAME = re.compile(r"[A-Za-z0-9_-]{1,64}\Z")  # one NATS subject token (crawl.<name>.links.<shard>)


def cluster_run_options(f: Callable[..., Any]) -> Callable[..., Any]:
    f = click.option("--node", default=None, metavar="ID",
                     help="This node's name in the cluster (default: the one --dir had before, "
                          "else host name and a hash of --dir; kept in DIR/cluster/node-id).")(f)
    f = click.option("--crawl", "cluster_crawl", default=None, metavar="NAME",
                     help="The shared crawl's name (with --cluster): every node of one crawl gives "
                          "the same NAME (letters, digits, _ and -).")(f)
    f = click.option("--cluster", default=None, metavar="URLS",
                     help="Be one node of a crawl shared through NATS JetStream: comma-separated "
                          "server URLs (nats://host:4222,...). This node crawls only the hosts of "
                          "its shards and routes other links to their owners.")(f)
    return f


def cluster_settings(kw: dict[str, Any]) -> dict[str, str]:
    """The RunOptions fields for the cluster flags, checked (UsageError on a bad mix)."""
    servers, name, node = kw.get("cluster"), kw.get("cluster_crawl"), kw.get("node")
    if not servers:
        if name or node:
            raise UsageError("--crawl and --node belong to --cluster URLS: give the NATS servers too")
        return {}
    urls = [u.strip() for u in servers.split(",") if u.strip()]
    bad = [u for u in urls if not re.match(r"(nats|tls)://[^/\s]+\Z", u)]
    if not urls or bad:
        raise UsageError(f"--cluster wants nats://host:port URLs separated by commas, not {servers!r}")
    if not name:
        raise UsageError("--cluster needs --crawl NAME: the shared crawl's name, the same on every node")
    if not _NAME.match(name):
        raise UsageError(f"--crawl {name!r}: use 1-64 letters, digits, _ or -")
    if node is not None and not _NAME.match(node):
        raise UsageError(f"--node {node!r}: use 1-64 letters, digits, _ or -")
    return {"cluster": ",".join(urls), "cluster_crawl": name, "node": node or ""}


def route_to_owners(crawl_dir: Path, io: Any, canonical: Callable[[list[Any], Any], list[Any]]) -> None:
    """``crawl frontier add --cluster``: every URL goes into ``D/cluster/outbox`` with its
    shard, for D's bridge to publish to the owner (this node too), whose run admits it
    through its seen set. The frontier of D is not touched."""
    from crawl.canon import host_key
    from crawl.cluster import OUTBOX, ShardMap, cluster_dir
    from crawl.core import Spool

    smap = ShardMap(crawl_dir)
    if smap.epoch < 0:
        raise UsageError(f"{crawl_dir} is not a cluster node yet (no {cluster_dir(crawl_dir) / 'map.json'}): "
                         f"start `crawl run --dir {crawl_dir} --cluster URLS --crawl NAME` first; its bridge "
                         "writes the shard map")
    with Spool(cluster_dir(crawl_dir) / OUTBOX) as out:
        for batch in io.source.batches(5000):
            recs = [{**r, "vshard": smap.shard(host_key(r["url"]))} for r in canonical(batch.records, io.report)]
            if recs:
                out.put(recs)
            io.report.add("routed", len(recs))
            batch.ack()
