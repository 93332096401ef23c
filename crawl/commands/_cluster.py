"""The flags that make ``crawl run`` one node of a shared crawl (crawl/cluster)."""

from __future__ import annotations

import re
from collections.abc import Callable
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
