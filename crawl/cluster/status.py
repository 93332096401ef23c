"""What ``crawl cluster status`` shows: members, map epoch, shards per node, routed/s, lag.

A cluster that silently failed to form is the failure to make visible
(BUbiNG#10: a cluster view held one member and nothing was routed). So the
status asks each server given on its own (is it reachable, which cluster
does it say it is in, does JetStream answer), reads every stream's leader
and replicas, and lists as *problems* what an operator must act on: a
server that does not answer, JetStream without a meta leader, a stream
without a leader or with replicas behind, shards without an owner, owners
without a heartbeat, no member at all.
"""

from __future__ import annotations

import asyncio
from typing import Any

from crawl.core import UsageError

from .kv import Cluster, connect, stream_name


async def _probe(url: str) -> dict[str, Any]:
    out: dict[str, Any] = {"url": url}
    try:
        nc = await asyncio.wait_for(connect(url, reconnect=False, timeout=2), 4)
    except Exception as exc:  # unreachable: the status says so instead of failing
        why = str(exc)
        out["error"] = "unreachable" + (f" ({why.split(' (', 1)[1].split(')')[0]})" if " (" in why else "")
        return out
    try:
        info = getattr(nc, "_server_info", {}) or {}
        out.update({"name": info.get("server_name", "?"), "cluster": info.get("cluster"),
                    "version": info.get("version")})
        try:
            acct = await asyncio.wait_for(nc.jetstream(timeout=3).account_info(), 4)
            out["jetstream"] = True
            out["streams"] = acct.streams
        except Exception as exc:
            out["jetstream"] = False
            out["error"] = f"JetStream does not answer ({exc or type(exc).__name__})"
    finally:
        await nc.close()
    return out


async def cluster_status(servers: str, crawl: str) -> dict[str, Any]:
    """Everything the status shows, as one dict (``--json`` prints it as is)."""
    urls = [u.strip() for u in servers.split(",") if u.strip()]
    probes = await asyncio.gather(*(_probe(u) for u in urls))
    out: dict[str, Any] = {"crawl": crawl, "servers": probes, "problems": []}
    problems: list[str] = out["problems"]
    for p in probes:
        if p.get("error"):
            problems.append(f"server {p['url']}: {p['error']}")
    clusters = {p.get("cluster") for p in probes if "name" in p}
    if len(probes) > 1:
        for p in probes:
            if "name" in p and not p.get("cluster"):
                problems.append(f"server {p['url']} ({p['name']}) is standalone, in no cluster: "
                                "the servers did not form one cluster (check their cluster routes)")
    if len(clusters - {None}) > 1:
        problems.append(f"the servers report different clusters {sorted(map(str, clusters))}: "
                        "they did not form one cluster (check their routes)")
    if not any(p.get("jetstream") for p in probes):
        if not problems:
            problems.append("JetStream answers on no server")
        return out
    nc = await connect(",".join(p["url"] for p in probes if p.get("jetstream")), reconnect=False)
    try:
        cl = Cluster(nc, crawl)
        try:
            cfg = await cl.open()
        except UsageError as exc:
            problems.append(str(exc))
            return out
        out["config"] = dict(cfg.__dict__)
        members = await cl.members()
        cur, rev = await cl.read_map()
        leaving = await cl.leaving()
        owner = cur.get("owner", {})
        per: dict[str, int] = {}
        for n in owner.values():
            per[n] = per.get(n, 0) + 1
        out.update({"epoch": cur.get("epoch"), "revision": rev, "owner": owner, "moving": cur.get("moving", {}),
                    "members": members, "shards_per_node": per, "draining_nodes": sorted(leaving)})
        streams = []
        lag: dict[str, int] = {}
        for k, r in enumerate(cfg.ranges()):
            name = stream_name(crawl, k)
            s: dict[str, Any] = {"name": name, "vshards": [r.start, r.stop - 1]}
            try:
                info = await cl.js.stream_info(name, subjects_filter=f"crawl.{crawl}.links.*")
                s["messages"] = info.state.messages
                for subj, n in (info.state.subjects or {}).items():
                    lag[subj.rsplit(".", 1)[1]] = n
                cl_info = info.cluster
                s["leader"] = cl_info.leader if cl_info else None
                s["replicas"] = [{"name": x.name, "current": x.current, "lag": x.lag}
                                 for x in ((cl_info.replicas if cl_info else None) or [])]
                s["consumers"] = [
                    {"name": c.name, "filters": len(c.config.filter_subjects or []),
                     "pending": c.num_pending, "ack_pending": c.num_ack_pending,
                     "redelivered": c.num_redelivered}
                    for c in await cl.js.consumers_info(name)]
                if cfg.replicas > 1 and not s["leader"]:
                    problems.append(f"stream {name} has no leader")
                behind = [x["name"] for x in s["replicas"] if not x["current"]]
                if behind:
                    problems.append(f"stream {name}: replicas {behind} are not current")
                if cfg.replicas > 1 and len(s["replicas"]) + 1 < cfg.replicas:
                    problems.append(f"stream {name}: {len(s['replicas']) + 1} of {cfg.replicas} "
                                    "replicas placed")
            except Exception as exc:
                s["error"] = str(exc) or type(exc).__name__
                problems.append(f"stream {name}: {s['error']}")
            streams.append(s)
        out["streams"] = streams
        out["lag"] = lag
        rates: dict[str, float] = {}
        for m in members.values():
            for v, x in (m.get("out_rate") or {}).items():
                rates[v] = rates.get(v, 0.0) + x
        out["routed_per_s"] = rates
        if not members:
            problems.append("no crawl node has joined (no heartbeat): start crawl run --cluster "
                            "on each node")
        unowned = cfg.v - len(owner)
        if unowned and members:
            problems.append(f"{unowned} of {cfg.v} shards have no owner yet")
        for n in sorted(set(owner.values()) - set(members)):
            problems.append(f"node {n} owns {per[n]} shards but has no heartbeat "
                            f"(they move after its grace of {cfg.grace:g} s)")
        for n, m in sorted(members.items()):
            if m.get("fenced"):
                problems.append(f"node {n} is fenced (its heartbeats fail): it leases nothing")
    finally:
        await nc.close()
    return out


def render_status(st: dict[str, Any], top: int = 20) -> str:
    """The human view of :func:`cluster_status`'s dict."""
    lines = [f"crawl {st['crawl']}"]
    lines.append("servers:")
    for p in st["servers"]:
        if p.get("error") and "name" not in p:
            lines.append(f"  {p['url']:<28} UNREACHABLE  {p['error']}")
        else:
            js = "jetstream ok" if p.get("jetstream") else "JETSTREAM DOWN"
            lines.append(f"  {p['url']:<28} {p.get('name', '?'):<8} cluster={p.get('cluster') or '-'}"
                         f"  {js}")
    if "config" in st:
        c = st["config"]
        lines.append(f"map: epoch {st['epoch']}, {c['v']} vshards over {c['streams']} streams, "
                     f"R{c['replicas']}, heartbeat TTL {c['ttl']:g} s, grace {c['grace']:g} s")
        members = st["members"]
        lines.append(f"members ({len(members)}):")
        per = st["shards_per_node"]
        for n in sorted(set(members) | set(per)):
            m = members.get(n)
            if m is None:
                lines.append(f"  {n:<16} NO HEARTBEAT  shards {per.get(n, 0)}")
                continue
            flags = " FENCED" if m.get("fenced") else ""
            flags += " draining" if n in st.get("draining_nodes", []) else ""
            lines.append(f"  {n:<16} shards {per.get(n, 0):>5}  routed/s {m.get('routed_per_s', 0):>9}"
                         f"  published {m.get('published', 0):>9}  consumed {m.get('consumed', 0):>9}"
                         f"  dead {m.get('dead', 0)}{flags}")
        if st["moving"]:
            lines.append(f"moving: {len(st['moving'])} shard(s) being handed over")
        lines.append("streams:")
        for s in st["streams"]:
            if "error" in s:
                lines.append(f"  {s['name']:<24} ERROR {s['error']}")
                continue
            reps = ", ".join(f"{x['name']}{'' if x['current'] else ' (behind)'}" for x in s["replicas"])
            lines.append(f"  {s['name']:<24} vshards {s['vshards'][0]}-{s['vshards'][1]}  "
                         f"leader {s['leader'] or '-'}  replicas [{reps}]  queued {s['messages']}")
            for c in s["consumers"]:
                lines.append(f"    consumer {c['name']:<20} {c['filters']} shards  pending {c['pending']}"
                             f"  unacked {c['ack_pending']}  redelivered {c['redelivered']}")
        lag, rate = st["lag"], st["routed_per_s"]
        busy = sorted(set(lag) | set(rate), key=lambda v: (-lag.get(v, 0), -rate.get(v, 0), int(v)))
        owner = st.get("owner", {})
        lines.append(f"shards (lag = messages waiting; top {top} of {len(busy)} with traffic):")
        for v in busy[:top]:
            lines.append(f"  vshard {v:>5}  lag {lag.get(v, 0):>7}  routed/s {rate.get(v, 0):>8}"
                         f"{'  ' + owner[v] if v in owner else ''}")
    if st["problems"]:
        lines.append("PROBLEMS:")
        lines += [f"  - {p}" for p in st["problems"]]
    else:
        lines.append("no problems found")
    return "\n".join(lines)
