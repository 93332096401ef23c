"""The Scrapy side of scripts/bench_run.py: the same polite crawl with Scrapy.

Run by bench_run.py inside its own virtualenv (Scrapy is not a dependency of
crawl). Settings mirror `crawl run` under real politeness: robots.txt obeyed,
one request in flight per host, the same per-host delay, every page written
to disk. Host names resolve through the test web's hosts file (a custom
resolver), so traffic stays on 127.0.0.0/8.

    python scrapy_baseline.py WEB_DIR OUT_DIR SECONDS DELAY
"""

from __future__ import annotations

import hashlib
import json
import os
import sys
from pathlib import Path

import scrapy
from scrapy.crawler import CrawlerProcess
from twisted.internet import defer
from twisted.internet.interfaces import IResolverSimple
from zope.interface import implementer

WEB, OUT, SECONDS, DELAY = Path(sys.argv[1]), Path(sys.argv[2]), float(sys.argv[3]), float(sys.argv[4])


def load_hosts(path: Path) -> dict[str, str]:
    out = {}
    for line in path.read_text().splitlines():
        if line and not line.startswith("#"):
            addr, *names = line.split()
            for n in names:
                out[n] = addr
    return out


@implementer(IResolverSimple)
class HostsResolver:
    """Answers only from the test web's hosts file: never a real DNS query."""

    def __init__(self, reactor, mapping: dict[str, str]) -> None:
        self.reactor = reactor
        self.mapping = mapping

    @classmethod
    def from_crawler(cls, crawler, reactor):
        return cls(reactor, load_hosts(WEB / "hosts"))

    def install_on_reactor(self) -> None:
        self.reactor.installResolver(self)

    def getHostByName(self, name: str, timeout=None):  # noqa: N802 (Twisted's name)
        addr = self.mapping.get(name)
        if addr is None:
            return defer.fail(OSError(f"{name} is not in the test web's hosts file"))
        return defer.succeed(addr)


class Polite(scrapy.Spider):
    name = "polite"

    async def start(self):  # Scrapy >= 2.13
        for url in (WEB / "seeds.txt").read_text().split():
            yield scrapy.Request(url)

    def start_requests(self):  # older Scrapy
        for url in (WEB / "seeds.txt").read_text().split():
            yield scrapy.Request(url)

    def parse(self, response):
        body = response.body
        name = hashlib.sha1(response.url.encode()).hexdigest()
        (OUT / name).write_bytes(body)
        self.crawler.stats.inc_value("bench/pages")
        if not isinstance(response, scrapy.http.TextResponse):
            return
        for href in response.css("a::attr(href), link::attr(href)").getall():
            url = response.urljoin(href)
            if url.startswith("http") and ".test" in url.split("/")[2]:
                yield scrapy.Request(url, callback=self.parse)


def main() -> None:
    OUT.mkdir(parents=True, exist_ok=True)
    process = CrawlerProcess(settings={
        "ROBOTSTXT_OBEY": True,
        "ROBOTSTXT_USER_AGENT": "crawl",
        "USER_AGENT": "crawl/0.1 (scrapy baseline; bench)",
        "CONCURRENT_REQUESTS": 256,
        "CONCURRENT_REQUESTS_PER_DOMAIN": 1,
        "DOWNLOAD_DELAY": DELAY,
        "RANDOMIZE_DOWNLOAD_DELAY": False,
        "DOWNLOAD_DELAY_JITTER": 0,
        "DNS_RESOLVER": "__main__.HostsResolver",  # Scrapy < 2.14
        "TWISTED_DNS_RESOLVER": "__main__.HostsResolver",
        "CLOSESPIDER_TIMEOUT": SECONDS,
        "LOG_LEVEL": os.environ.get("SCRAPY_LOG", "WARNING"),
        "TELNETCONSOLE_ENABLED": False,
        "REQUEST_FINGERPRINTER_IMPLEMENTATION": "2.7",
        "DOWNLOAD_TIMEOUT": 10,
        "RETRY_TIMES": 2,
    })
    crawler = process.create_crawler(Polite)
    process.crawl(crawler)
    process.start()
    print(json.dumps({"pages": crawler.stats.get_value("bench/pages", 0)}))


if __name__ == "__main__":
    main()
