"""Run every benchmark in this folder, each in its own Python process (``make bench``).

Usage: ``python benchmarks/run.py [NAME ...] [-- BENCHMARK-OPTIONS]``. Without names every
``bench_*.py`` runs with its defaults; a name such as ``predict`` selects ``bench_predict.py``.
Options after ``--`` go to every selected benchmark. Each writes its results under
``benchmarks/results/``. The exit status is 1 if any benchmark failed.
"""

import argparse
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent


def discover(names=()):
    """The ``bench_*.py`` scripts of this folder, sorted, restricted to ``names`` if given."""
    scripts = sorted(HERE.glob("bench_*.py"))
    if not names:
        return scripts
    wanted = {name.removeprefix("bench_").removesuffix(".py") for name in names}
    unknown = wanted - {s.stem.removeprefix("bench_") for s in scripts}
    if unknown:
        raise SystemExit(f"no benchmark named {sorted(unknown)} in {HERE}")
    return [s for s in scripts if s.stem.removeprefix("bench_") in wanted]


def main(argv=None):
    argv = sys.argv[1:] if argv is None else list(argv)
    forwarded = argv[argv.index("--") + 1 :] if "--" in argv else []
    own = argv[: argv.index("--")] if "--" in argv else argv
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("names", nargs="*", help="benchmarks to run (default: all)")
    args = parser.parse_args(own)
    failed = []
    for script in discover(args.names):
        print(f"== {script.name}", flush=True)
        start = time.perf_counter()
        status = subprocess.run([sys.executable, str(script), *forwarded], check=False).returncode
        outcome = "ok" if status == 0 else f"FAILED (exit status {status})"
        print(f"== {script.name}: {outcome} in {time.perf_counter() - start:.0f} s\n", flush=True)
        if status != 0:
            failed.append(script.name)
    if failed:
        print(f"failed: {', '.join(failed)}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
