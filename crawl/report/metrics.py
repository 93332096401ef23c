"""``crawl stats --format openmetrics``: a crawl's gauges for Prometheus.

A cron job writes them where node_exporter's textfile collector reads
(README, "Monitoring"), so a dashboard can show a crawl next to the
machine it runs on and an alert can fire when a host keeps answering 429.
The text is the Prometheus exposition format in its OpenMetrics form
(``# HELP``, ``# TYPE``, samples, a final ``# EOF``): the textfile
collector reads it as the classic format, whose parser takes ``# EOF`` for
a comment. Every sample carries a ``crawl`` label (the crawl directory), so
several crawls can write files side by side without clashing.

Per crawl: whether a run is alive (``crawl_run_alive``, from the directory
lock and the heartbeat: a killed run is 0 at once), queue depth, in flight, hosts (all, ready, parked, waiting on
robots.txt), backlog, the next time a host is eligible, the idle fraction,
and the rates of results, 429s and 5xx over the last ``window`` seconds of
the crawl log (read from its end: :func:`crawl.run.tail_log`). Per host,
for the ``max_hosts`` hosts with the most queued (hosts with nothing queued
or in flight and no 429/5xx in the window are left out, to keep the series
few): queue depth, in flight, next-eligible time, current delay with its
cause as the ``reason`` label (:func:`crawl.report.why.host_wait`), and the
429 and 5xx rates.
"""

from __future__ import annotations

import math
import time
from collections import Counter
from pathlib import Path
from typing import Any

from crawl.core import CrawlDir
from crawl.run import gather, recorded_run, tail_log

from .why import frontier_view, host_robots, host_wait

WINDOW = 300.0  # seconds of the crawl log the rates are taken over
MAX_HOSTS = 1000  # per-host series at most (a crawl of a million hosts must not make a million series)

_CRAWL = (
    ("queue_depth", "URLs queued in the frontier (ready and not yet due).", "queued"),
    ("in_flight", "URLs leased to a fetcher and not completed yet.", "in_flight"),
    ("backlog", "URLs due now but not leased (a crawl that keeps up has few).", "backlog"),
    ("hosts", "Hosts the frontier knows.", "hosts"),
    ("hosts_ready", "Hosts with a URL that may be fetched now.", "hosts_ready"),
    ("hosts_parked", "Hosts parked after repeated failures.", "hosts_parked"),
    ("hosts_waiting_robots", "Hosts whose robots.txt cannot be read (their URLs wait).", "hosts_waiting_robots"),
    ("idle_ratio", "Share of time no host was ready when a fetcher asked (the idle fraction).", "idle_fraction"),
)


def _escape(value: str) -> str:
    return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def _labels(**kv: str) -> str:
    return "{" + ",".join(f'{k}="{_escape(v)}"' for k, v in kv.items()) + "}"


def _num(v: float | int) -> str:
    if isinstance(v, bool):
        return "1" if v else "0"
    if isinstance(v, int):
        return str(v)
    if math.isnan(v):
        return "NaN"
    if math.isinf(v):
        return "+Inf" if v > 0 else "-Inf"
    return repr(float(v))


class _Out:
    """Families in order, each with its HELP and TYPE once and its samples together."""

    def __init__(self) -> None:
        self.families: dict[str, tuple[str, list[str]]] = {}

    def gauge(self, name: str, help_: str, labels: dict[str, str], value: float | int | None) -> None:
        if value is None:  # unknown: no sample (NaN is kept: a delay with no figure)
            return
        fam = self.families.setdefault(name, (help_, []))
        fam[1].append(f"{name}{_labels(**labels)} {_num(value)}")

    def text(self) -> str:
        lines = []
        for name, (help_, samples) in self.families.items():
            lines += [f"# HELP {name} {_escape(help_)}", f"# TYPE {name} gauge", *samples]
        return "\n".join(lines + ["# EOF"]) + "\n"


def openmetrics(root: str | Path, now: float | None = None, window: float = WINDOW,
                max_hosts: int = MAX_HOSTS) -> str:
    """The gauges of crawl directory ``root`` as exposition text (see the module docstring)."""
    now = time.time() if now is None else now
    cd = CrawlDir(root)
    crawl = str(cd.root.resolve())
    out = _Out()
    st = gather(cd.root, now)
    fr: dict[str, Any] = st.get("frontier") or {}
    run = st.get("run") or {}
    out.gauge("crawl_run_alive", "1 while a crawl run works on the directory (it holds the lock, or its "
              "heartbeat is fresh), 0 once it finished or its process is gone.", {"crawl": crawl},
              int(bool(run.get("alive"))) if run else None)
    if isinstance(run.get("ts"), int | float):
        out.gauge("crawl_run_heartbeat_timestamp_seconds", "When the latest run last wrote its status "
                  "(unix time).", {"crawl": crawl}, run["ts"])
    for name, help_, key in _CRAWL:
        v = fr.get(key)
        out.gauge(f"crawl_{name}", help_, {"crawl": crawl}, v if isinstance(v, int | float) else None)

    # rates over the end of the crawl log
    since = now - window
    results: Counter[str] = Counter()
    r429: Counter[str] = Counter()
    r5xx: Counter[str] = Counter()
    if cd.log.exists():
        for ev in tail_log(cd.log, since):
            ts = ev.get("ts")
            if ev.get("event") != "fetch" or not isinstance(ts, int | float) or ts < since or ts > now:
                continue
            host = str(ev.get("host") or "")
            results[host] += 1
            status = ev.get("status")
            if status == 429:
                r429[host] += 1
            elif isinstance(status, int) and 500 <= status <= 599:
                r5xx[host] += 1
    labels = {"crawl": crawl}
    out.gauge("crawl_rate_window_seconds", "The span of crawl log the rates below are taken over.", labels, window)
    out.gauge("crawl_result_rate", "Fetch results per second over the window.", labels,
              sum(results.values()) / window)
    out.gauge("crawl_429_rate", "429 answers per second over the window.", labels, sum(r429.values()) / window)
    out.gauge("crawl_5xx_rate", "5xx answers per second over the window.", labels, sum(r5xx.values()) / window)

    # per host
    hosts: list[dict[str, Any]] = []
    fv = frontier_view(cd)
    cfg = recorded_run(cd.root).politeness
    soonest: float | None = None
    if fv is not None:
        for h in fv.hosts(now):
            queued = int(h.get("queued") or 0) + int(h.get("delayed") or 0)
            busy = bool(h.get("lease"))
            if not (queued or busy or r429[h["host"]] or r5xx[h["host"]]):
                continue
            wait = host_wait(h, cfg, now, host_robots(cd, h["host"], now))
            if h.get("queued"):
                soonest = wait["next"] if soonest is None else min(soonest, wait["next"])
            hosts.append({"host": h["host"], "queued": queued, "in_flight": busy, "wait": wait})
            if len(hosts) > 4 * max_hosts:  # keep the largest few in memory, not every host
                hosts.sort(key=lambda x: (-x["queued"], x["host"]))
                del hosts[max_hosts:]
    hosts.sort(key=lambda x: (-x["queued"], x["host"]))
    out.gauge("crawl_next_eligible_timestamp_seconds",
              "When the first host with a queued URL may be asked (unix time).", labels,
              max(soonest, 0.0) if soonest is not None else None)
    for x in hosts[:max_hosts]:
        hl = {"crawl": crawl, "host": x["host"]}
        wait = x["wait"]
        out.gauge("crawl_host_queue_depth", "URLs queued for the host.", hl, x["queued"])
        out.gauge("crawl_host_in_flight", "1 while a URL of the host is being fetched.", hl, int(x["in_flight"]))
        out.gauge("crawl_host_next_eligible_timestamp_seconds", "When the host may be asked again (unix time).",
                  hl, wait["next"])
        delay = wait.get("delay")
        out.gauge("crawl_host_delay_seconds",
                  "The host's current delay between requests; reason is the rule that set it.",
                  {**hl, "reason": str(wait["cause"])}, delay if isinstance(delay, int | float) else math.nan)
        out.gauge("crawl_host_429_rate", "429 answers per second from the host over the window.", hl,
                  r429[x["host"]] / window)
        out.gauge("crawl_host_5xx_rate", "5xx answers per second from the host over the window.", hl,
                  r5xx[x["host"]] / window)
    return out.text()
