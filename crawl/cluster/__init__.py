"""One crawl shared by several machines: hosts sharded over nodes, links routed through NATS JetStream.

:mod:`.shards` says which virtual shard a host belongs to and reads the map
of owners the bridge writes (``D/cluster/map.json``); :mod:`.node` is the
crawl process's side (routing links, admitting the inbox, the lease filter,
handing shards over).
"""

from .kv import ClusterConfig as ClusterConfig
from .kv import check_name as check_name
from .kv import drain_node as drain_node
from .kv import init_cluster as init_cluster
from .node import Node as Node
from .node import node_id as node_id
from .node import node_summary as node_summary
from .node import route_records as route_records
from .servers import DevCluster as DevCluster
from .servers import stop_recorded as stop_recorded
from .shards import BRIDGE_STATUS as BRIDGE_STATUS
from .shards import CLUSTER as CLUSTER
from .shards import DEFAULT_V as DEFAULT_V
from .shards import HANDOFF_DONE as HANDOFF_DONE
from .shards import HANDOFF_OUT as HANDOFF_OUT
from .shards import INBOX as INBOX
from .shards import MAP as MAP
from .shards import OUTBOX as OUTBOX
from .shards import ShardMap as ShardMap
from .shards import cluster_dir as cluster_dir
from .shards import vshard as vshard
from .shards import vshard_of_url as vshard_of_url
from .status import cluster_status as cluster_status
from .status import render_status as render_status


def run_bridge(servers: str, crawl: str, node: str, crawl_dir: str, **opts: object) -> int:
    """Run the asyncio bridge process (``crawl cluster bridge``) until SIGTERM.

    Imported here lazily: the bridge needs nats-py, which must never load
    into the trio crawl process.
    """
    from .bridge import run_bridge as run

    return run(servers, crawl, node, crawl_dir, **opts)
