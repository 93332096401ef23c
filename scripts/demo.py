"""make demo: start the bundled test web, crawl it for about a minute, report.

Everything runs on this machine: the test web listens on 127.0.1.x only and
the crawler maps its host names there through its own DNS override
(--resolve-file), with --allow-private because those are loopback addresses.

Knobs (environment): DEMO_HOSTS (300), DEMO_SECONDS (60), DEMO_DELAY (1.0),
DEMO_OUT (demo-out).

Exit status: the crawl's own when it fails; 1 when the server-side audit
finds a politeness violation (the demo is also the crawler's politeness
check, so a violation must not pass as success); 0 otherwise.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
CRAWL = [sys.executable, "-m", "crawl"]

from crawl.core import CrawlDir  # noqa: E402
from crawl.run import results_where  # noqa: E402


def say(text: str) -> None:
    print(f"\n== {text}", flush=True)


def main() -> int:
    out = Path(os.environ.get("DEMO_OUT", ROOT / "demo-out"))
    hosts = os.environ.get("DEMO_HOSTS", "300")
    seconds = os.environ.get("DEMO_SECONDS", "60")
    delay = os.environ.get("DEMO_DELAY", "1.0")
    shutil.rmtree(out, ignore_errors=True)
    web, crawl_dir = out / "web", out / "crawl"
    say(f"starting the test web: {hosts} hosts on 127.0.1.x (crawl testweb serve)")
    server = subprocess.Popen([*CRAWL, "testweb", "serve", "--out", str(web), "--hosts", hosts],
                              stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, cwd=ROOT)
    try:
        assert server.stdout is not None
        ready = json.loads(server.stdout.readline() or "{}")
        if "port" not in ready:
            print("the test web did not start", file=sys.stderr)
            return 1
        print(f"listening on port {ready['port']} at {len(ready['addresses'])} loopback addresses; "
              f"ground truth in {web}/manifest.ndjson")
        cmd = [*CRAWL, "run", "--dir", str(crawl_dir), "--seeds", str(web / "seeds.txt"),
               "--resolve-file", str(web / "hosts"), "--allow-private", "--scope", "any",
               "--duration", f"{seconds}s", "--max-per-host", "60", "--delay", delay,
               "--timeout", "10", "--connect-timeout", "5", "--idle-exit", "5s", "--interval", "5s",
               # who the crawler says it is; a real crawl names its operator here
               "--user-agent", "crawl/0.1 (+http://127.0.0.1/; make demo, loopback only)"]
        say("crawling: " + " ".join(c if c != sys.executable else "python" for c in cmd))
        rc = subprocess.run(cmd, cwd=ROOT).returncode
        if rc != 0:
            return rc
        say("server-side politeness audit (crawl testweb audit)")
        audited = subprocess.run([*CRAWL, "testweb", "audit", str(web), "--delay", delay, "--agent", "crawl"],
                                 cwd=ROOT).returncode
        say("index of the WARC files (crawl index)")
        subprocess.run([*CRAWL, "index", "--dir", str(crawl_dir)], cwd=ROOT)
        for text in results_where(CrawlDir(crawl_dir)):  # the WARC files, not their .cdxj sidecars
            print(text)
        first = (web / "seeds.txt").read_text().split()[0]
        print(f"read a page back:  crawl index --dir {crawl_dir} --url {first} --body | head")
        if audited != 0:
            print(f"\nmake demo: FAILED: the politeness audit found violations (listed above; "
                  f"crawl testweb audit {web} --delay {delay} --agent crawl --json for details)",
                  file=sys.stderr)
            return 1
    finally:
        server.send_signal(signal.SIGTERM)
        try:
            server.wait(10)
        except subprocess.TimeoutExpired:
            server.kill()
    return 0


if __name__ == "__main__":
    sys.exit(main())
