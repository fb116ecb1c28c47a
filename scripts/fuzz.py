#!/usr/bin/env python3
"""Coverage-guided fuzzing of kafkalike's parsers and request path (targets: kafkalike/testing/fuzz/).

    scripts/fuzz.py --minutes 5                       # every target, 5 minutes each, with atheris
    scripts/fuzz.py --minutes 30 --target records     # one target
    scripts/fuzz.py --target records --replay FILE    # run one saved input again, show what it raises
    scripts/fuzz.py --write-seeds                     # regenerate tests/fuzz/corpus/ from our encoders
    scripts/fuzz.py --engine mutation --runs 100000   # the seeded mutator the tests use, no atheris

The working corpus grows under .fuzz/corpus/<target>/ (git-ignored), starting from the committed
seeds in tests/fuzz/corpus/<target>/. Each crash is saved under .fuzz/crashes/ and printed with
the command that replays it. A crash restarts the fuzzer on the grown corpus until time is up.
Exit status 1 when anything was found.
"""

from __future__ import annotations

import argparse
import logging
import os
import re
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SEED_ROOT = ROOT / "tests" / "fuzz" / "corpus"
WORK_ROOT = ROOT / ".fuzz"
MAX_REPEATS = 5  # crashes at a place already reported, before giving up on the target
# libFuzzer's own per-input limit; the request path target bounds each input itself, well below.
INPUT_TIMEOUT_S = 30


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--minutes", type=float, default=1.0, help="minutes per target (default 1)")
    parser.add_argument("--runs", type=int, help="stop each target after this many inputs instead")
    parser.add_argument("--target", action="append", help="a target name (repeatable; default all)")
    parser.add_argument("--engine", choices=["atheris", "mutation"], default="atheris")
    parser.add_argument("--seed", type=int, default=0, help="random seed (0: atheris picks one)")
    parser.add_argument("--replay", type=Path, help="run the target once on this file")
    parser.add_argument("--write-seeds", action="store_true", help="regenerate the committed seed corpus")
    parser.add_argument("--max-crashes", type=int, default=20, help="distinct crashes per target before stopping")
    parser.add_argument("--work-dir", type=Path, default=WORK_ROOT, help="corpus and crashes (default .fuzz/)")
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()

    from kafkalike.testing import fuzz  # not before: the atheris child instruments it on import

    if args.write_seeds:
        for name, count in fuzz.write_seeds(SEED_ROOT).items():
            print(f"{name}: {count} seeds in {SEED_ROOT / name}")
        return 0
    names = args.target or list(fuzz.TARGETS)
    for name in names:
        fuzz.target(name)  # unknown names fail here, before anything runs
    if args.replay is not None:
        return replay(names[0], args.replay)
    found = 0
    for name in names:
        if args.engine == "mutation":
            found += run_mutation(name, args)
        else:
            found += run_atheris(name, args)
    return 1 if found else 0


def replay(name: str, path: Path) -> int:
    from kafkalike.testing import fuzz

    crash = fuzz.run_one(fuzz.target(name), path.read_bytes())
    fuzz.stop_request_path()
    if crash is None:
        print(f"{name}: {path} passes")
        return 0
    print(crash.error, end="")
    return 1


def seed_inputs(name: str) -> list[bytes]:
    from kafkalike.testing import fuzz

    return fuzz.read_corpus(SEED_ROOT / fuzz.SEED_DIR_FOR.get(name, name))


def run_mutation(name: str, args: argparse.Namespace) -> int:
    from kafkalike.testing import fuzz

    target = fuzz.target(name)
    runs = args.runs if args.runs is not None else 10**12
    deadline = time.monotonic() + args.minutes * 60
    stats = fuzz.RunStats()
    batch_seed = args.seed
    while stats.executions < runs and time.monotonic() < deadline and len(stats.crashes) < args.max_crashes:
        part = fuzz.mutation_run(
            target, seed_inputs(name), inputs=min(runs - stats.executions, 20_000), rng_seed=batch_seed
        )
        batch_seed += 1
        stats.executions += part.executions
        stats.seconds += part.seconds
        stats.crashes += part.crashes
    fuzz.stop_request_path()
    for crash in stats.crashes:
        path = fuzz.save_crash(crash, args.work_dir / "crashes")
        print(crash.error, end="")
        print(f"replay: {fuzz.replay_command(name, path)}")
    print(f"{name}: {stats.executions} executions, {stats.per_second:.0f}/s, {len(stats.crashes)} crashes (mutation)")
    return len(stats.crashes)


def run_atheris(name: str, args: argparse.Namespace) -> int:
    """Children run atheris until time is up; one that crashes is replaced, on the grown corpus."""
    from kafkalike.testing import fuzz

    corpus = args.work_dir / "corpus" / name
    crashes = args.work_dir / "crashes"
    corpus.mkdir(parents=True, exist_ok=True)
    crashes.mkdir(parents=True, exist_ok=True)
    deadline = time.monotonic() + args.minutes * 60
    executions, started = 0, time.monotonic()
    found: dict[str, str] = {}  # crash file -> where it was raised
    runs_left, repeats = args.runs, 0
    coverage: list[tuple[str, str]] = []  # libFuzzer's last count of covered edges and features
    while len(found) < args.max_crashes and repeats < MAX_REPEATS:
        seconds = int(deadline - time.monotonic())
        if (runs_left is None and seconds < 1) or (runs_left is not None and runs_left <= 0):
            break
        command = [sys.executable, __file__, "--child", "--target", name]
        libfuzzer = [
            str(corpus),
            str(SEED_ROOT / fuzz.SEED_DIR_FOR.get(name, name)),
            f"-artifact_prefix={crashes}/{name}-",
            f"-max_len={fuzz.target(name).max_len}",
            f"-timeout={INPUT_TIMEOUT_S}",
            "-rss_limit_mb=3072",
            "-print_final_stats=1",
            f"-seed={args.seed}",
        ]
        libfuzzer.append(f"-runs={runs_left}" if runs_left is not None else f"-max_total_time={max(seconds, 1)}")
        child = subprocess.run(
            [*command, "--", *libfuzzer], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, check=False
        )
        ran = _executions(child.stdout)
        executions += ran
        coverage = re.findall(r" cov: (\d+) ft: (\d+)", child.stdout)[-1:] or coverage
        if runs_left is not None:
            runs_left -= max(ran, 1)
        if child.returncode == 0:
            continue
        artifact = re.search(r"Test unit written to (\S+)", child.stdout)
        if artifact is None:
            print(child.stdout[-4000:])
            print(f"{name}: the fuzzer exited with status {child.returncode} and saved no input")
            found[f"exit status {child.returncode}"] = ""
            break
        error = _python_traceback(child.stdout)
        where = _raised_at(error)
        if where in found.values():
            repeats += 1  # the same bug again, through another input
            continue
        found[artifact.group(1)] = where
        print(error, end="")
        print(f"replay: {fuzz.replay_command(name, Path(artifact.group(1)))}")
    elapsed = time.monotonic() - started
    rate = executions / elapsed if elapsed else 0.0
    edges = f", coverage {coverage[0][0]} edges / {coverage[0][1]} features" if coverage else ""
    print(f"{name}: {executions} executions, {rate:.0f}/s, {len(found)} distinct crashes (atheris){edges}")
    return len(found)


def _executions(output: str) -> int:
    final = re.search(r"stat::number_of_executed_units: (\d+)", output)
    if final:
        return int(final.group(1))
    progress = re.findall(r"^#(\d+)\s", output, re.MULTILINE)
    return int(progress[-1]) if progress else 0


def _python_traceback(output: str) -> str:
    start = output.find("=== Uncaught Python exception: ===")
    if start < 0:  # a timeout or out-of-memory: libFuzzer's own report
        start = max(output.rfind("==", 0, output.find("ERROR: libFuzzer")), 0)
    end = output.find("ERROR: libFuzzer", start + 40)
    return output[start : end if end > 0 else None].rstrip("=0123456789 ") + "\n"


def _raised_at(error: str) -> str:
    """The innermost frame and the exception type: what tells one bug from another."""
    frames = re.findall(r'File "([^"]+)", line (\d+)', error)
    last = error.strip().splitlines()[-1] if error.strip() else ""
    return f"{frames[-1] if frames else ''} {last.split(':')[0]}"


# The code each target runs: only that is instrumented (instrumenting costs seconds at start-up and
# slows what it covers). Targets not listed get all of kafkalike (the request path runs the broker).
_PROTOCOL = ("kafkalike.protocol", "kafkalike.testing.fuzz")
_COORDINATORS = (*_PROTOCOL, "kafkalike.log", "kafkalike.group", "kafkalike.txn")
INSTRUMENTED = {
    **dict.fromkeys(("framing", "requests", "records", "record_bodies", "compression", "broken_decoder"), _PROTOCOL),
    "consumer_protocol": _COORDINATORS,
    "coordinator_records": _COORDINATORS,
}


def _modules_outside(prefixes: tuple[str, ...]) -> list[str]:
    names = []
    for path in (ROOT / "kafkalike").rglob("*.py"):
        parts = path.relative_to(ROOT).with_suffix("").parts
        name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        if not any(name == p or name.startswith(p + ".") for p in prefixes):
            names.append(name)
    return names


def child(argv: list[str]) -> None:
    """One atheris run of one target: instrument what it runs as it is imported, then fuzz."""
    import atheris

    name = argv[argv.index("--target") + 1]
    libfuzzer = argv[argv.index("--") + 1 :]
    prefixes = INSTRUMENTED.get(name)
    exclude = _modules_outside(prefixes) if prefixes else []
    with atheris.instrument_imports(include=["kafkalike"], exclude=exclude):
        from kafkalike.testing import fuzz
    target = fuzz.target(name)
    atheris.Setup([argv[0], *libfuzzer], target.check)
    atheris.Fuzz()


if __name__ == "__main__":
    sys.path.insert(0, str(ROOT))
    # What a target makes the broker log at WARNING (refused input) is expected; errors are findings.
    logging.getLogger("kafkalike").addHandler(logging.NullHandler())
    if "--child" in sys.argv:
        os.environ.setdefault("PYTHONHASHSEED", "0")
        child(sys.argv)
    else:
        sys.exit(main())
