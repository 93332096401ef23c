"""Politeness flags shared by ``crawl frontier`` and ``crawl run``.

Usage in a command::

    @politeness_options
    def cmd(..., **kw):
        cfg = politeness_from(kw)   # pops the politeness keys from kw
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import click

from crawl.frontier import DEFAULT, Politeness

from ._common import DURATION

_OPTIONS: list[tuple[str, str, Any, str]] = [
    # (flag, Politeness field, click type, help)
    ("--delay", "default_delay", DURATION, "Minimum time between two requests to one host."),
    ("--response-factor", "response_factor", float, "k: wait at least k x the host's last response time."),
    ("--max-delay", "max_delay", DURATION, "Ceiling for the normal delay, robots Crawl-delay included."),
    ("--per-ip", "per_ip", int, "Leases in flight at once per resolved IP address."),
    ("--host-queue-cap", "host_queue_cap", int, "Pending URLs per host; more are dropped and counted."),
    ("--max-retries", "max_retries", int, "Transport failures before a URL is dropped for this cycle."),
    ("--max-leases", "max_leases", int, "Expired leases of one URL before it is dropped for this cycle."),
    ("--backoff-base", "backoff_base", DURATION, "First backoff after 429/503/transport errors (doubles)."),
    ("--backoff-cap", "backoff_cap", DURATION, "Longest backoff (also caps Retry-After)."),
    ("--park-after", "park_after", int, "Consecutive failures after which a host is parked."),
    ("--park-for", "park_seconds", DURATION, "How long a parked host is left alone."),
]


def politeness_options(f: Callable[..., Any]) -> Callable[..., Any]:
    """Add every Politeness field as a flag (defaults shown in --help)."""
    for flag, attr, typ, text in reversed(_OPTIONS):
        f = click.option(
            flag, "pol_" + attr, type=typ, default=getattr(DEFAULT, attr), show_default=True, help=text
        )(f)
    return f


def politeness_from(kw: dict[str, Any]) -> Politeness:
    """Build the Politeness value from (and remove) the flags' keyword arguments."""
    values = {attr: kw.pop("pol_" + attr) for _, attr, _, _ in _OPTIONS if "pol_" + attr in kw}
    for name in ("per_ip", "max_retries", "max_leases", "park_after"):
        if name in values and values[name] < 1:
            raise click.BadParameter(f"must be at least 1, got {values[name]}", param_hint=name)
    return Politeness(**values)
