"""``crawl check``: verify a crawl directory, and repair what can be repaired (an fsck).

What is checked, each part read without trusting it:

* every LMDB environment (``D/*/data.mdb``, ``D/spool/*/data.mdb``), with
  py-lmdb's offline verifier: plain reads, never the memory map, so a
  damaged file gives findings instead of a crash (:func:`crawl.core.verify_live`);
* every WARC file, record by record: where it stops being readable, and
  whether anything after that point is still a whole record;
* the CDXJ sidecars and ``index.cdxj`` against the records the files hold;
* the crawl log, frame by frame, and every page it says was stored (the
  newest ``ok`` or ``not-modified`` event of each URL) against the WARC
  files, cross-checked with the frontier: a page the frontier counts as done
  whose record is gone is *lost*, the case nothing else notices.

Repairs (``--repair``, with the directory to itself, :mod:`crawl.core.dirlock`):
lost pages are queued again (``crawl.frontier.readd``) with their
conditional-request validators dropped, so the next run fetches them whole;
a torn WARC tail that nothing points into is cut off, with the sidecar lines
that pointed past it, and ``index.cdxj`` is rebuilt; a torn log tail is cut
and a log file with overwritten frames is rewritten from its whole frames
(the original kept beside it); a damaged LMDB environment is moved aside
(``NAME.damaged-TIMESTAMP``, never deleted) and the run starts that part
afresh (:data:`RESET_NOTES` says what each loss costs). Nothing that can
still be read is ever deleted.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import orjson

from crawl.canon import CanonError
from crawl.core import (
    CrawlDir,
    CrawlError,
    Record,
    open_env,
    own_dir,
    records,
    replace_file,
    verify_live,
)
from crawl.dedupe import Deduper
from crawl.frontier import Frontier, readd
from crawl.recrawl import History
from crawl.seen import SeenSet, canonical
from crawl.store import cdxj, iter_records, read_response

from .crawllog import pieces

STORED = ("ok", "not-modified")
_VALIDATORS = {"etag": None, "last_modified": None, "warc": None, "digest": None, "warc_date": None}

# What the next run does without a damaged environment that --repair set aside.
RESET_NOTES = {
    "frontier": "the frontier, the seen set and the run counters start afresh with the seeds "
                "(D/seeds.txt): pages already stored are fetched again as they are found",
    "seen": "the seen set starts afresh; the frontier still knows every URL it queued, so "
            "nothing is fetched twice in this cycle",
    "fetchstate": "robots.txt and DNS are asked again; the next fetch of each page is unconditional",
    "dedupe": "near-duplicates of pages stored before are no longer flagged",
    "recrawl": "the freshness model learns each page's change rate again",
    "runstate": "--max-pages and --max-per-host count from zero again",
    "graph": "crawl report and crawl why know only links parsed from now on",
}
_SPOOL_NOTE = "its unparsed results are gone: the pages they came from are queued again"


@dataclass
class Finding:
    """One part of the crawl directory and what the check found in it."""

    part: str  # lmdb, warc, index, pages, log
    path: str  # relative to the crawl directory
    status: str  # ok, notice (harmless), damaged, torn, stale, lost
    detail: str
    repair: str = ""  # what --repair does (did, once ``repaired``)
    repaired: bool = False
    counts: dict[str, int] = field(default_factory=dict)

    @property
    def problem(self) -> bool:
        """Needs the operator (exit status 1): not ok, not a harmless notice, not repaired."""
        return self.status not in ("ok", "notice") and not self.repaired

    def record(self) -> Record:
        return records.make("check", part=self.part, path=self.path, status=self.status,
                            detail=self.detail, repair=self.repair or None, repaired=self.repaired,
                            **self.counts)


@dataclass
class _WarcFile:
    """What a scan of one WARC file found: its readable records and where reading stopped."""

    path: Path
    size: int
    offsets: np.ndarray  # start of every response and revisit record read, ascending
    lengths: np.ndarray
    good_end: int  # end of the last record of the readable run from the start
    error: str = ""

    def holds(self, offset: int, length: int) -> bool:
        i = int(np.searchsorted(self.offsets, offset))
        return i < len(self.offsets) and int(self.offsets[i]) == offset and int(self.lengths[i]) == length


def _scan_warc(path: Path) -> _WarcFile:
    offs: list[int] = []
    lens: list[int] = []
    end, error = 0, ""
    try:
        for off, length, rec in iter_records(path):
            end = off + length
            if rec.rec_type in ("response", "revisit"):
                offs.append(off)
                lens.append(length)
    except Exception as exc:  # noqa: BLE001 - any reader failure ends the readable run
        error = f"{type(exc).__name__}: {exc}"
    return _WarcFile(path, path.stat().st_size, np.array(offs, dtype=np.int64),
                     np.array(lens, dtype=np.int64), end, error)


class _Pointers:
    """Whether a ``warc`` pointer still leads to its record, file by file."""

    def __init__(self, warc_dir: Path) -> None:
        self.dir = warc_dir
        self.files: dict[str, _WarcFile | None] = {}
        self.read_past: dict[str, set[int]] = {}  # file -> records read one by one past a damaged stretch

    def scan(self, name: str) -> _WarcFile | None:
        if name not in self.files:
            path = self.dir / name
            self.files[name] = _scan_warc(path) if path.is_file() else None
        return self.files[name]

    def state(self, ptr: Any) -> str:
        """``ok``, ``missing`` (the file is gone) or ``gone`` (no record there any more)."""
        try:
            name, off, length = str(ptr["file"]), int(ptr["offset"]), int(ptr["length"])
        except (KeyError, TypeError, ValueError):
            return "gone"
        wf = self.scan(name) if "/" not in name else None
        if wf is None:
            return "missing" if "/" not in name else "gone"
        if wf.holds(off, length):
            return "ok"
        if off < wf.good_end or off + length > wf.size:
            return "gone"
        try:  # past a damaged stretch the scan could not cross: read this one record
            read_response(self.dir, {"file": name, "offset": off, "length": length})
        except CrawlError:
            return "gone"
        self.read_past.setdefault(name, set()).add(off)
        return "ok"


@dataclass
class CheckReport:
    root: Path
    repair: bool
    findings: list[Finding] = field(default_factory=list)
    seconds: float = 0.0

    @property
    def problems(self) -> int:
        return sum(f.problem for f in self.findings)

    @property
    def repaired(self) -> int:
        return sum(f.repaired for f in self.findings)

    def summary(self) -> Record:
        by: dict[str, int] = {}
        for f in self.findings:
            by[f.part] = by.get(f.part, 0) + 1
        return records.make("check-summary", dir=str(self.root), checked=by, problems=self.problems,
                            repaired=self.repaired, seconds=round(self.seconds, 2))


def check_dir(root: str | os.PathLike[str], *, repair: bool = False, now: float | None = None,
              progress: Callable[[str], None] | None = None) -> CheckReport:
    """Check (and with ``repair``, repair) the crawl directory ``root``."""
    cd = CrawlDir(root)
    if not cd.root.is_dir():
        raise CrawlError(f"no crawl directory at {cd.root}")
    now = time.time() if now is None else now
    started = time.monotonic()
    say = progress or (lambda _text: None)
    rep = CheckReport(cd.root, repair)
    lock = own_dir(cd.root) if repair else None
    try:
        say("LMDB environments")
        bad = _check_envs(cd, rep, repair)  # with repair: set aside, so usable again
        say("WARC files, the index and the crawl log")
        ptrs = _Pointers(cd.warc)
        _check_log(cd, rep, repair)
        lost, unparsed = _stored_pages(cd, ptrs, spool_lost=repair and "spool" in bad)
        lost_in = {str(ptr.get("file")) for ptr, _ in lost.values() if isinstance(ptr, dict)}
        _check_warcs(cd, rep, ptrs, repair, lost_in)
        if repair and "frontier" in bad:
            _reseed(cd, rep, now)  # lost pages are found again from the seeds
        else:
            _check_lost(cd, rep, lost, repair, now, frontier_ok="frontier" not in bad)
            if unparsed:
                _requeue_unparsed(cd, rep, unparsed, now)
        if repair and any(f.part in ("warc", "index") and f.repaired for f in rep.findings) \
                and (cd.warc / cdxj.INDEX_NAME).exists():
            cdxj.build(cd.warc)
    finally:
        if lock is not None:
            lock.release()
    rep.seconds = time.monotonic() - started
    return rep


# -- LMDB -------------------------------------------------------------------


def _environments(cd: CrawlDir) -> Iterator[Path]:
    for pattern in ("*/data.mdb", "spool/*/data.mdb"):
        for data in sorted(cd.root.glob(pattern)):
            if ".damaged-" not in data.parent.name:
                yield data.parent


def _environments_all(cd: CrawlDir) -> Iterator[Path]:
    for pattern in ("*/data.mdb", "spool/*/data.mdb"):
        for data in cd.root.glob(pattern):
            yield data.parent


def _check_envs(cd: CrawlDir, rep: CheckReport, repair: bool) -> set[str]:
    """Verify each environment; with ``repair`` move damaged ones aside (a damaged
    frontier takes seen and runstate along). Returns the damaged names (``spool``
    for any spool)."""
    damaged: list[Path] = []
    for env in _environments(cd):
        rel = str(env.relative_to(cd.root))
        found = verify_live(env)
        pages = (env / "data.mdb").stat().st_size // 4096
        if not found:
            rep.findings.append(Finding("lmdb", f"{rel}/data.mdb", "ok", f"sound ({pages:,} pages)"))
            continue
        more = f" (and {len(found) - 1} more findings)" if len(found) > 1 else ""
        note = _SPOOL_NOTE if env.parent.name == "spool" else RESET_NOTES.get(env.name, "")
        rep.findings.append(Finding("lmdb", f"{rel}/data.mdb", "damaged", found[0] + more,
                                    repair=f"set aside; {note}" if note else "set aside",
                                    counts={"findings": len(found)}))
        damaged.append(env)
    found_names = {"spool" if env.parent.name == "spool" else env.name for env in damaged}
    if not repair:
        return found_names
    stamp = time.strftime("%Y%m%dT%H%M%S")
    while any(env.with_name(f"{env.name}.damaged-{stamp}").exists() for env in _environments_all(cd)):
        stamp += "x"  # a second repair within the same second
    names = {env.name for env in damaged if env.parent == cd.root}
    if "frontier" in names:  # a new frontier needs a new seen set, or nothing is admitted again
        for extra in ("seen", "runstate"):
            if (cd.sub(extra) / "data.mdb").exists() and extra not in names:
                damaged.append(cd.sub(extra))
                names.add(extra)
                rep.findings.append(Finding("lmdb", f"{extra}/data.mdb", "notice",
                                            "sound, but it belongs with the damaged frontier",
                                            repair=f"set aside as {extra}.damaged-{stamp}: "
                                                   f"{RESET_NOTES['frontier']}", repaired=True))
    for env in damaged:
        env.rename(env.with_name(f"{env.name}.damaged-{stamp}"))
    for f in rep.findings:
        if f.part == "lmdb" and f.status == "damaged":
            f.repaired = True
            f.repair = f.repair.replace("set aside", f"set aside as {f.path.rsplit('/', 1)[0]}.damaged-{stamp}", 1)
    return found_names | names


def _reseed(cd: CrawlDir, rep: CheckReport, now: float) -> None:
    """A new frontier gets the crawl's seeds, admitted as crawl run admits them:
    canonical, into the frontier, then marked seen."""
    seeds_file = cd.root / "seeds.txt"
    seeds = seeds_file.read_text().split() if seeds_file.exists() else []
    if not seeds:
        rep.findings.append(Finding("lmdb", "frontier/data.mdb", "notice", "no D/seeds.txt to start from",
                                    repair="give the seeds to the next crawl run"))
        return
    recs, fps = [], []
    for url in seeds:
        try:
            rec, fp = canonical(records.make("url", url=url, depth=0, priority=0, reason="seed"))
        except CanonError:
            continue
        recs.append(rec)
        fps.append(fp)
    with Frontier(cd.frontier) as fr:
        got = fr.add(recs, now)
    with SeenSet(cd.seen) as seen:
        seen.add_fps(fps)
    rep.findings.append(Finding("lmdb", "frontier/data.mdb", "notice",
                                f"the new frontier starts from the {len(seeds):,} seeds",
                                repair=f"{got.get('added', 0):,} seeds queued", repaired=True))


# -- the crawl log and the pages it says were stored ----------------------------


def _check_log(cd: CrawlDir, rep: CheckReport, repair: bool) -> None:
    if not cd.log.is_dir():
        return
    for path in sorted(cd.log.glob("crawl-*.ndjson.zst")):
        rel = str(path.relative_to(cd.root))
        data = path.read_bytes()
        frames = events = 0
        torn: tuple[int, int] | None = None
        damaged: list[tuple[int, int]] = []
        for kind, start, end, out in pieces(data):
            if kind == "frame":
                frames += 1
                events += out.count(b"\n")
            elif kind == "torn":
                torn = (start, end)
            else:
                damaged.append((start, end))
        counts = {"frames": frames, "events": events}
        if not torn and not damaged:
            rep.findings.append(Finding("log", rel, "ok", f"{frames:,} frames, {events:,} events", counts=counts))
            continue
        if damaged:
            bad = sum(e - s for s, e in damaged)
            f = Finding("log", rel, "damaged",
                        f"{len(damaged)} overwritten stretch(es), {bad:,} bytes: their events are lost "
                        f"(readers skip them); {frames:,} whole frames, {events:,} events",
                        repair="rewritten from its whole frames, the original kept as .damaged",
                        counts={**counts, "damaged_bytes": bad})
        else:
            assert torn is not None
            f = Finding("log", rel, "notice",
                        f"a torn last frame ({torn[1] - torn[0]:,} bytes: a crash while appending); "
                        f"{frames:,} whole frames", repair="cut off (crawl run also does this)",
                        counts=counts)
        if repair:
            keep = b"".join(out_bytes for out_bytes in _whole_frames(data))
            if damaged:
                aside = path.with_name(path.name + ".damaged")
                os.replace(path, aside)
                replace_file(path, lambda fh, keep=keep: fh.write(keep))
            else:
                os.truncate(path, torn[0] if torn else len(data))
            f.repaired = True
        rep.findings.append(f)


def _whole_frames(data: bytes) -> Iterator[bytes]:
    for kind, start, end, _out in pieces(data):
        if kind == "frame":
            yield data[start:end]


def _stored_pages(cd: CrawlDir, ptrs: _Pointers, *, spool_lost: bool
                  ) -> tuple[dict[str, tuple[Any, Record]], list[Record]]:
    """URL -> (pointer, event) of each page whose newest stored copy has no record;
    with ``spool_lost``, also the newest event of each stored page the parse side
    never saw (the dedupe index has no entry for it: its result was in the spool)."""
    from .crawllog import read_log

    lost: dict[str, tuple[Any, Record]] = {}
    newest: dict[str, Record] = {}
    if not cd.log.is_dir():
        return lost, []
    for ev in read_log(cd.log):
        if ev.get("event") != "fetch" or ev.get("outcome") not in STORED or "warc" not in ev:
            continue
        url = ev.get("url")
        if not isinstance(url, str):
            continue
        if spool_lost:
            newest[url] = ev
        if ptrs.state(ev["warc"]) == "ok":
            lost.pop(url, None)
        else:
            lost[url] = (ev["warc"], ev)
    if not newest:
        return lost, []
    with Deduper(cd.dedupe) as dd:
        unparsed = [ev for url, ev in newest.items() if url not in lost and dd.stored(url) is None]
    return lost, unparsed


def _requeue_unparsed(cd: CrawlDir, rep: CheckReport, events: list[Record], now: float) -> None:
    with Frontier(cd.frontier) as fr:
        got = requeue(cd, fr, events, now)
    rep.findings.append(Finding("pages", "spool", "notice",
                                f"{len(events):,} stored pages were not parsed yet (their results were "
                                "in the damaged spool)", repair=f"{got.get('added', 0):,} queued again",
                                repaired=True, counts={"pages": len(events)}))


def _check_lost(cd: CrawlDir, rep: CheckReport, lost: dict[str, tuple[Any, Record]], repair: bool,
                now: float, *, frontier_ok: bool) -> None:
    """Lost pages, by file; with ``repair`` queued again. Without a usable frontier
    (damaged, not repaired) they are listed from the log alone."""
    if not lost:
        if (cd.log).is_dir():
            rep.findings.append(Finding("pages", "log", "ok", "every stored page has its record"))
        return
    have = frontier_ok and (cd.frontier / "data.mdb").exists()
    fr = Frontier(cd.frontier) if have else None
    try:
        states = {url: (fr.state_of(url) if fr is not None else None) for url in lost}
        again = [u for u, s in states.items() if s in ("queued", "leased")]
        gone = [u for u in lost if u not in set(again)]
        by_file: dict[str, list[str]] = {}
        for url in gone:
            name = str(lost[url][0].get("file", "?")) if isinstance(lost[url][0], dict) else "?"
            by_file.setdefault(name, []).append(url)
        for name, urls in sorted(by_file.items()):
            missing = not (cd.warc / name).exists()
            why = "its WARC file is missing" if missing else "their records are gone"
            f = Finding("pages", f"warc/{name}", "lost",
                        f"{len(urls):,} stored pages have no record: {why} (e.g. {urls[0]})",
                        repair="queued again: the next crawl run fetches them", counts={"pages": len(urls)})
            if repair and fr is not None:
                requeue(cd, fr, [lost[u][1] for u in urls], now)
                f.repaired = True
            rep.findings.append(f)
        if again:
            rep.findings.append(Finding("pages", "frontier", "notice",
                                        f"{len(again):,} pages whose records are gone are queued already",
                                        counts={"pages": len(again)}))
    finally:
        if fr is not None:
            fr.close()


def requeue(cd: CrawlDir, fr: Frontier, events: list[Record], now: float) -> dict[str, int]:
    """Queue the pages of these fetch events again, for an unconditional fetch:
    a conditional one would get a 304 and a revisit record of the lost copy."""
    hist_env = open_env(cd.fetchstate)
    History(hist_env).update([(str(ev["url"]), dict(_VALIDATORS)) for ev in events])
    recs = [records.make("url", url=ev["url"], depth=int(ev.get("depth") or 0), reason="recovery")
            for ev in events]
    return readd(fr, recs, now)


# -- WARC files and their index ---------------------------------------------------


def _check_warcs(cd: CrawlDir, rep: CheckReport, ptrs: _Pointers, repair: bool, lost_in: set[str]) -> None:
    """Each file's readable run; a stretch after it that holds the record of a stored
    page (``lost_in``) or of an index line is a problem, else only a note."""
    if not cd.warc.is_dir():
        return
    for path in cdxj.warc_files(cd.warc):
        wf = ptrs.scan(path.name)
        assert wf is not None
        rel = str(path.relative_to(cd.root))
        side = path.with_name(path.name + ".cdxj")
        stale = _stale_lines(side, ptrs, path.name) if side.exists() else []
        n = len(wf.offsets)
        if wf.good_end >= wf.size and not wf.error:
            f = Finding("warc", rel, "ok", f"{n:,} responses and revisits, every record whole",
                        counts={"records": n})
        else:
            past = len(ptrs.read_past.get(path.name, ()))
            tail = wf.size - wf.good_end
            if past:
                f = Finding("warc", rel, "damaged" if path.name in lost_in or stale else "notice",
                            f"unreadable from offset {wf.good_end:,} ({wf.error or 'trailing bytes'}); "
                            f"{past:,} records after it still read one by one",
                            repair="left in place (records after it are in use); the pages whose "
                                   "records it held are queued again",
                            repaired=repair, counts={"records": n})
            else:
                f = Finding("warc", rel, "torn" if path.name in lost_in or stale else "notice",
                            f"whole records end at {wf.good_end:,} of {wf.size:,} bytes; the last "
                            f"{tail:,} bytes are a torn record ({wf.error or 'trailing bytes'})",
                            repair="cut off after the last whole record", counts={"records": n})
                if repair:
                    os.truncate(path, wf.good_end)
                    f.repaired = True
        rep.findings.append(f)
        if stale:
            g = Finding("index", str(side.relative_to(cd.root)), "stale",
                        f"{len(stale):,} index lines point at no record",
                        repair="dropped (and index.cdxj rebuilt)", counts={"lines": len(stale)})
            if repair:
                bad = set(stale)
                keep = [ln for i, ln in enumerate(side.read_bytes().splitlines(keepends=True)) if i not in bad]
                replace_file(side, lambda fh, keep=keep: fh.writelines(keep))
                g.repaired = True
            rep.findings.append(g)
    idx = cd.warc / cdxj.INDEX_NAME
    if idx.exists():
        stale = _stale_lines(idx, ptrs, None)
        if stale:
            rep.findings.append(Finding("index", str(idx.relative_to(cd.root)), "stale",
                                        f"{len(stale):,} lines point at no record",
                                        repair="rebuilt from the sidecars", repaired=repair,
                                        counts={"lines": len(stale)}))
        else:
            rep.findings.append(Finding("index", str(idx.relative_to(cd.root)), "ok", "every line has its record"))


def _stale_lines(path: Path, ptrs: _Pointers, only: str | None) -> list[int]:
    """Line numbers (0-based) of index lines whose record is not there."""
    out = []
    for i, ln in enumerate(path.read_bytes().splitlines()):
        try:
            _, _, fields = cdxj.parse_line(ln)
            ptr = {"file": fields["filename"], "offset": fields["offset"], "length": fields["length"]}
        except (ValueError, KeyError, TypeError):
            out.append(i)
            continue
        if only is not None and ptr["file"] != only:
            out.append(i)
            continue
        if ptrs.state(ptr) != "ok":
            out.append(i)
    return out


# -- crawl run, resuming ------------------------------------------------------------


def check_tails(cd: CrawlDir, fr: Frontier, files: list[str], now: float) -> list[str]:
    """What ``crawl run`` says when it resumes: whether the WARC files the last run
    wrote still hold every record their index lines name. Pages whose records
    are gone are queued again at once (the frontier had them as done); a file
    that is missing is only reported (it may have been archived on purpose)."""
    said: list[str] = []
    lost: list[Record] = []
    for name in files:
        path = cd.warc / name
        side = path.with_name(name + ".cdxj")
        if not path.is_file():
            said.append(f"warc/{name}, written by the last run, is missing: if it was not moved "
                        f"on purpose, `crawl check --dir {cd.root} --repair` queues its pages again")
            continue
        if not side.is_file():
            continue
        size = path.stat().st_size
        gone: list[Record] = []
        last: dict[str, Any] | None = None
        for ln in side.read_bytes().splitlines():
            try:
                _, _, f = cdxj.parse_line(ln)
                off, length = int(f["offset"]), int(f["length"])
            except (ValueError, KeyError, TypeError):
                continue
            if off + length > size:
                if _a_page(f):
                    gone.append(records.make("event", event="fetch", url=f.get("url"), outcome="ok"))
            elif last is None or off > int(last["offset"]):
                last = {"file": name, "offset": off, "length": length}
        if last is not None:
            try:
                read_response(cd.warc, last)
            except CrawlError:
                said.append(f"warc/{name}: its last whole record does not read; run "
                            f"`crawl check --dir {cd.root}`")
        urls = [ev for ev in gone if isinstance(ev.get("url"), str) and fr.state_of(ev["url"]) == "done"]
        end = max(_ends(side), default=0)
        if end > size:
            said.append(f"warc/{name} is {size:,} bytes but its index names records up to "
                        f"{end:,}: it was cut short; {len(urls):,} stored pages had no record "
                        f"there and are queued again (`crawl check --dir {cd.root} --repair` "
                        "tidies the file and its index)")
            lost.extend(urls)
    if lost:
        requeue(cd, fr, lost, now)
    return said


def _a_page(fields: dict[str, Any]) -> bool:
    """An index line of a stored page (2xx, or a 304's revisit), not of a redirect or an error."""
    if fields.get("mime") == "warc/revisit":
        return True
    status = str(fields.get("status") or "")
    return len(status) == 3 and status.startswith("2")


def _ends(side: Path) -> Iterator[int]:
    for ln in side.read_bytes().splitlines():
        try:
            _, _, f = cdxj.parse_line(ln)
            yield int(f["offset"]) + int(f["length"])
        except (ValueError, KeyError, TypeError):
            continue


def check_ndjson(rep: CheckReport) -> bytes:
    """The findings as records, one per line, and the summary last (``--json``)."""
    return b"".join(orjson.dumps(f.record()) + b"\n" for f in rep.findings) + orjson.dumps(rep.summary()) + b"\n"
