"""Run one fuzz target: coverage-guided with atheris, or with hypothesis when atheris is missing.

    python tests/fuzz/fuzz.py robots --seconds 60          # what ``make fuzz`` runs, per target
    python tests/fuzz/fuzz.py warc --seconds 3 --runs 5000  # what the test suite runs
    python tests/fuzz/fuzz.py http crash-1a2b...            # replay saved inputs only

Every run starts from the committed seeds (``tests/fuzz/corpus/<target>``,
never written to) and keeps what it learns in ``--work`` (new corpus
entries under ``corpus/``, crashing inputs as ``crash-*`` / ``timeout-*``
files). An input that raises, runs past ``--timeout`` seconds or grows the
process past ``--rss-mb`` fails the run: the exit status is non-zero and
the input is saved for replay.
"""

from __future__ import annotations

import argparse
import hashlib
import resource
import signal
import sys
import time
import traceback
import types
from collections.abc import Callable
from pathlib import Path

HERE = Path(__file__).resolve().parent
CORPUS = HERE / "corpus"


def _selftest_crash(data: bytes) -> None:
    raise RuntimeError("selftest-crash: a target that fails on every input")


def _selftest_hang(data: bytes) -> None:
    while True:  # a target that never returns: the per-input timeout must end it
        time.sleep(0.05)


# The packages whose code each target exercises (atheris instruments them for coverage).
COVERED = {
    "robots": ["crawl.robots"],
    "canon": ["crawl.canon"],
    "record": ["crawl.core.records"],
    "links": ["crawl.parse.links"],
    "http": ["crawl.net.http1"],
    "codings": ["crawl.store.codings"],
    "warc": ["crawl.store.read", "crawl.store.codings", "warcio"],
}

SELFTESTS: dict[str, Callable[[bytes], None]] = {
    "selftest-crash": _selftest_crash,
    "selftest-hang": _selftest_hang,
}


def _load(name: str, instrument: bool) -> Callable[[bytes], None]:
    if name in SELFTESTS:
        return SELFTESTS[name]
    import targets

    if instrument:
        _instrument(COVERED.get(name, ["crawl"]))
    try:
        return targets.TARGETS[name]
    except KeyError:
        raise SystemExit(f"fuzz: error: no target {name!r}; targets: {', '.join(sorted(targets.TARGETS))}") from None


def _instrument(prefixes: list[str]) -> None:
    """Coverage for the modules under test only: atheris.instrument_imports works by
    top-level package, and all of crawl costs seconds of start-up per run."""
    import atheris

    for modname, module in list(sys.modules.items()):
        if module is None or not any(modname == p or modname.startswith(p + ".") for p in prefixes):
            continue
        for obj in list(vars(module).values()):
            for fn in [obj, *(vars(obj).values() if isinstance(obj, type) else ())]:
                fn = getattr(fn, "__func__", fn)  # static and class methods
                if isinstance(fn, types.FunctionType) and fn.__module__ == modname:
                    atheris.instrument_func(fn)


def seeds(name: str) -> list[Path]:
    """The committed seed inputs of a target (empty for the self-tests)."""
    folder = CORPUS / name
    return sorted(p for p in folder.iterdir() if p.is_file()) if folder.is_dir() else []


def _run_atheris(args: argparse.Namespace, work: Path) -> int:
    import atheris

    target = _load(args.target, instrument=True)
    corpus = work / "corpus"
    corpus.mkdir(parents=True, exist_ok=True)
    flags = [f"-timeout={args.timeout}", f"-rss_limit_mb={args.rss_mb}", f"-max_len={args.max_len}",
             f"-artifact_prefix={work}/", "-print_final_stats=1"]
    if args.inputs:
        argv = [sys.argv[0], *flags, *args.inputs]
    else:
        flags.append(f"-max_total_time={args.seconds}")
        if args.runs:
            flags.append(f"-runs={args.runs}")
        seed_dir = CORPUS / args.target
        argv = [sys.argv[0], *flags, str(corpus), *([str(seed_dir)] if seed_dir.is_dir() else [])]
    atheris.Setup(argv, target)
    atheris.Fuzz()  # exits the process: 0 when the budget ran out cleanly
    return 0


class Hang(Exception):
    """An input ran past the per-input timeout."""


def _on_alarm(signum: int, frame: object) -> None:
    raise Hang("input ran past the per-input timeout")


def _save(work: Path, kind: str, data: bytes) -> Path:
    path = work / f"{kind}-{hashlib.sha1(data).hexdigest()}"
    path.write_bytes(data)
    return path


def _run_hypothesis(args: argparse.Namespace, work: Path) -> int:
    from hypothesis import HealthCheck, Phase, given, settings
    from hypothesis import strategies as st

    target = _load(args.target, instrument=False)
    limit = args.rss_mb << 20
    resource.setrlimit(resource.RLIMIT_DATA, (limit, limit))  # a bomb ends in MemoryError, a failure
    signal.signal(signal.SIGALRM, _on_alarm)

    calls = 0

    def one(data: bytes) -> None:
        nonlocal calls
        calls += 1
        signal.setitimer(signal.ITIMER_REAL, args.timeout)
        try:
            target(data)
        except BaseException as exc:
            path = _save(work, "timeout" if isinstance(exc, Hang) else "crash", data)
            print(f"fuzz: {type(exc).__name__} on {path}", file=sys.stderr)
            raise
        finally:
            signal.setitimer(signal.ITIMER_REAL, 0)

    inputs = [Path(p) for p in args.inputs] or seeds(args.target)
    try:
        for path in inputs:
            one(path.read_bytes()[: args.max_len])
        if args.inputs:
            print(f"fuzz: replayed {calls} input(s) through {args.target}, all passed")
            return 0
        deadline = time.monotonic() + args.seconds
        budget = args.runs or 10**9
        while calls < budget and time.monotonic() < deadline:
            batch = min(100, budget - calls)

            # no shrinking: the first failing input is saved and ends the run
            @settings(max_examples=batch, deadline=None, database=None, phases=[Phase.generate],
                      report_multiple_bugs=False, suppress_health_check=list(HealthCheck))
            @given(st.binary(max_size=args.max_len))
            def check(data: bytes) -> None:
                one(data)

            check()
    except BaseException:  # noqa: BLE001 -- report and fail, whatever the target raised
        traceback.print_exc()
        return 1
    print(f"fuzz: {calls} input(s) through {args.target} (hypothesis), no failure")
    return 0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("target")
    ap.add_argument("inputs", nargs="*", help="replay these input files instead of fuzzing")
    ap.add_argument("--seconds", type=int, default=60, help="time budget of the run (default 60)")
    ap.add_argument("--runs", type=int, default=0, help="stop after this many inputs (0: no limit)")
    ap.add_argument("--timeout", type=int, default=10, help="seconds one input may take (default 10)")
    ap.add_argument("--rss-mb", type=int, default=1536, help="memory the process may grow to (default 1536)")
    ap.add_argument("--max-len", type=int, default=16384, help="longest input tried (default 16384)")
    ap.add_argument("--work", type=Path, help="keep corpus and crashes here (default: .fuzz/TARGET)")
    ap.add_argument("--engine", choices=("auto", "atheris", "hypothesis"), default="auto")
    args = ap.parse_args(argv)
    engine = args.engine
    if engine == "auto":
        try:
            import atheris  # noqa: F401
            engine = "atheris"
        except ImportError:
            engine = "hypothesis"
    work = args.work or HERE.parent.parent / ".fuzz" / args.target
    work.mkdir(parents=True, exist_ok=True)
    sys.path.insert(0, str(HERE))
    if engine == "atheris":
        return _run_atheris(args, work)
    return _run_hypothesis(args, work)

if __name__ == "__main__":
    sys.exit(main())
