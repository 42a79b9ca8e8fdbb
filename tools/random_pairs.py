"""The slow tier's random model-kernel pairs, shared out among worker processes.

``tests/test_random_models.py::test_many_random_model_kernel_pairs`` runs its 500 pairs in
one process (over two hours on one core). This tool records the same derandomised pairs
(``record``: the test itself runs, with its check replaced by a recorder, so hypothesis
draws exactly the test's sequence) and then runs any range of them with the test's own
check in several worker processes (``run``), one JSON line per pair. On a machine with
many cores the 500 pairs take minutes; the one-process run in the slow tier stays the
check that a long process does not crash.

    python -m tools.random_pairs record --out pairs.pkl
    python -m tools.random_pairs run --pairs pairs.pkl --start 0 --stop 500 --workers 14 \
        --log pairs.jsonl --time-limit 3600
"""

import argparse
import json
import multiprocessing
import os
from pathlib import Path
import pickle
import sys
import time
import traceback

TESTS = Path(__file__).resolve().parents[1] / "tests"


def _import_suite():
    if str(TESTS) not in sys.path:
        sys.path.insert(0, str(TESTS))
    import test_random_models

    return test_random_models


def record(out: Path) -> int:
    suite = _import_suite()
    pairs = []
    check = suite.sample_and_check
    suite.sample_and_check = lambda *pair, clear_caches=False: pairs.append(pair)
    try:
        suite.test_many_random_model_kernel_pairs()
    finally:
        suite.sample_and_check = check
    out.write_bytes(pickle.dumps(pairs))
    return len(pairs)


def _worker_init():
    # as tests/conftest.py: two host devices, so that "parallel" chains run in parallel
    os.environ.setdefault("XLA_FLAGS", "--xla_force_host_platform_device_count=2")
    os.environ.setdefault("JAX_PLATFORMS", "cpu")


def _run_pair(job: tuple[int, tuple]) -> dict:
    index, pair = job
    suite = _import_suite()
    spec, kernel_name, chain_method, x64 = pair
    start = time.perf_counter()
    result = {"index": index, "kernel": kernel_name, "chain_method": chain_method, "x64": x64}
    result["model"] = spec.describe()
    try:
        suite.sample_and_check(*pair, clear_caches=True)
        result["status"] = "passed"
    except AssertionError as error:
        result["status"], result["error"] = "failed", str(error)[-2000:]
    except Exception:  # an error is a result too: the log names it
        result["status"], result["error"] = "error", traceback.format_exc()[-2000:]
    result["seconds"] = round(time.perf_counter() - start, 1)
    return result


def load_pairs(pairs_file: Path) -> list[tuple]:
    _import_suite()  # the pairs hold the suite's model specs
    return pickle.loads(pairs_file.read_bytes())


def run(jobs: list[tuple[int, tuple]], workers: int, log: Path, time_limit: float) -> None:
    """Run the `(index, pair)` jobs with the test's check, one JSON line each in `log`."""
    deadline = time.monotonic() + time_limit
    counts: dict[str, int] = {}
    context = multiprocessing.get_context("spawn")
    # one pair per task and a fresh worker every 20 pairs: compiled programs do not pile up
    with context.Pool(workers, initializer=_worker_init, maxtasksperchild=20) as pool:
        with log.open("a") as lines:
            for result in pool.imap_unordered(_run_pair, jobs):
                lines.write(json.dumps(result) + "\n")
                lines.flush()
                counts[result["status"]] = counts.get(result["status"], 0) + 1
                print(result["index"], result["status"], result["seconds"], flush=True)
                if time.monotonic() > deadline:
                    print(f"time limit reached: {counts}", flush=True)
                    pool.terminate()
                    break
    print(json.dumps(counts), flush=True)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    commands = parser.add_subparsers(dest="command", required=True)
    recorder = commands.add_parser("record", help="record the test's pairs")
    recorder.add_argument("--out", type=Path, required=True)
    runner = commands.add_parser("run", help="run a range of recorded pairs")
    runner.add_argument("--pairs", type=Path, required=True)
    runner.add_argument("--start", type=int, default=0)
    runner.add_argument("--stop", type=int, default=500)
    runner.add_argument("--indices", type=int, nargs="+", help="these pairs (not a range)")
    runner.add_argument(
        "--continuous", action="store_true", help="only the pairs whose model has a continuous site"
    )
    runner.add_argument("--workers", type=int, default=os.cpu_count())
    runner.add_argument("--log", type=Path, required=True)
    runner.add_argument("--time-limit", type=float, default=float("inf"), help="seconds")
    args = parser.parse_args()
    if args.command == "record":
        print(f"{record(args.out)} pairs recorded in {args.out}")
    else:
        pairs = load_pairs(args.pairs)
        indices = args.indices or range(args.start, min(args.stop, len(pairs)))
        jobs = [(i, pairs[i]) for i in indices if not args.continuous or pairs[i][0].continuous]
        run(jobs, args.workers, args.log, args.time_limit)


if __name__ == "__main__":
    main()
