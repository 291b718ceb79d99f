"""Fuzz the trace readers and the rule-file loader in-process (issue 14).

Seeds: the sample traces in traces/ (Accel-Sim .traceg and .xz, kernelslist folders, NVBit logs, canonical
CSV and Parquet), ../shared/traces when present (first 4 KiB of each text file), and the builtin rule files.  Text inputs
get one to four line edits (fuzz_common.mutate_text), binary ones (Parquet, .xz) bit flips, truncation and
runs; a kernelslist may name missing files or files outside its folder.  Each input is written to a
temporary folder and read the way ``traceconf analyze`` reads it (traceconf.pipeline.run_trace on sm_90)
or loaded as a rule file (traceconf.rules.load_rule_set).

Passing means: the library returns, or raises InputError.  Anything else is a failure (see fuzz_common).

    python scripts/fuzz_traces.py --seconds 30
    python scripts/fuzz_traces.py --count 100000 --seed 7 --crashes /tmp/crashes --report fuzz_traces.json
"""

from __future__ import annotations

import random
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from fuzz_common import (ROOT, SHARED, Findings, arguments, mutate_bytes, mutate_text, run_loop,  # noqa: E402
                         swap_toml_value)

SEED_BYTES = 4 * 1024
BINARY_SUFFIXES = (".parquet", ".xz")


def seed_inputs() -> list[tuple[str, bytes]]:
    """(file name, content) of every seed trace and rule file."""
    seeds = []
    folders = [ROOT / "traces"] + ([SHARED / "traces"] if (SHARED / "traces").is_dir() else [])
    for folder in folders:
        for path in sorted(folder.rglob("*")):
            if path.is_file() and (path.suffix in (".traceg", ".log", ".csv", ".parquet", ".xz", ".g")):
                data = path.read_bytes()
                seeds.append((path.name, data if path.suffix in BINARY_SUFFIXES else data[:SEED_BYTES]))
    for path in sorted((ROOT / "traceconf" / "rules").glob("*.toml")):
        seeds.append((f"rules-{path.name}", path.read_bytes()))
    return seeds


def make_one(crashes: Path | None = None):
    """The function that runs one input: ``one(rng, findings)``."""
    from traceconf.errors import InputError
    from traceconf.pipeline import run_trace
    from traceconf.rules import load_rule_set, load_rule_sets

    seeds = seed_inputs()
    texts = [data.decode("utf-8", "replace") for name, data in seeds if not name.endswith(BINARY_SUFFIXES)]
    traces = [s for s in seeds if not s[0].startswith("rules-")]
    rules = [s for s in seeds if s[0].startswith("rules-")]
    rule_sets = load_rule_sets(["sm_90"])
    folder = Path(tempfile.mkdtemp(prefix="traceconf-fuzz-"))
    kernel_files = [s for s in traces if s[0].endswith((".traceg", ".xz"))]

    def mutated(name: str, data: bytes, rng: random.Random) -> bytes:
        if name.endswith(BINARY_SUFFIXES):
            return mutate_bytes(data, rng)
        if name.startswith("rules-") and rng.random() < 0.4:      # a value of another type or shape
            return swap_toml_value(data.decode("utf-8", "replace"), rng).encode("utf-8", "surrogatepass")
        return mutate_text(data.decode("utf-8", "replace"), rng, texts).encode("utf-8", "surrogatepass")

    def one(rng: random.Random, findings: Findings) -> None:
        findings.inputs += 1
        for stale in folder.iterdir():
            stale.unlink()
        is_rule = rng.random() < 0.2
        name, data = rng.choice(rules if is_rule else traces)
        if not is_rule and name == "kernelslist.g" or rng.random() < 0.05:
            # a kernelslist naming kernel files: some mutated, some missing, some outside the folder
            listing = []
            for index in range(rng.randint(1, 3)):
                kname, kdata = rng.choice(kernel_files)
                file = f"kernel-{index + 1}{'.traceg.xz' if kname.endswith('.xz') else '.traceg'}"
                if rng.random() < 0.8:
                    (folder / file).write_bytes(mutated(kname, kdata, rng) if rng.random() < 0.5 else kdata)
                listing.append(file if rng.random() < 0.9 else f"kernel-x.trace/../../{file}")
            name, data = "kernelslist.g", ("\n".join(listing) + "\n").encode()
            if rng.random() < 0.5:
                data = mutated(name, data, rng)
        else:
            data = mutated(name, data, rng)
        path = folder / (name[len("rules-"):] if is_rule else name)
        path.write_bytes(data)
        try:
            if is_rule:
                findings.count_stage("rule files")
                load_rule_set(path)         # read again: rule sets are cached by content
            else:
                findings.count_stage("traces")
                _, failures = run_trace(path, None, rule_sets)
                for failure in failures:
                    cause = failure.error.__cause__
                    if failure.internal:           # a bug the per-kernel boundary caught: still a finding
                        findings.record(cause, data, crashes, path.suffix or ".bin")
                        return
                    if cause is not None:          # a library's data error turned into an InputError
                        findings.count_stage(f"boundary: {type(cause).__name__}")
                if failures:
                    findings.input_error(failures[0].error, data, crashes, path.suffix or ".bin")
                    return
            findings.passed += 1
        except InputError as error:
            findings.input_error(error, data, crashes, path.suffix or ".bin")
        except Exception as error:  # a finding: anything but InputError
            findings.record(error, data, crashes, path.suffix or ".bin")

    one.seeds = len(seeds)
    return one


def main() -> None:
    args = arguments(__doc__.splitlines()[0])
    one = make_one(args.crashes)
    print(f"{one.seeds} seed files", file=sys.stderr)
    summary = run_loop(one, args, Findings(), random.Random(args.seed))
    sys.exit(1 if summary["distinct_failures"] else 0)


if __name__ == "__main__":
    main()
