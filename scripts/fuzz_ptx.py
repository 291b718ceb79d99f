"""Fuzz the PTX front end and the emulator in-process (issue 14).

Seeds are the PTX fixtures (tests/fixtures) and, when present, the corpus in ../shared/corpus, cut into small
modules (the module header plus one function) so that each input parses in about a millisecond.  Each input is
one to four edits of a seed (numbers at the edges of their fields, odd characters, lines deleted, duplicated,
spliced from another seed, truncated); every ``--emulate-every``-th input that parses is also emulated and
counted on sm_90 (block and grid drawn from a small set, the step budget bounded) twice: at the default level
(CTA classes) and with every CTA emulated (``--exhaustive``).

Passing means: the library returns, or raises InputError, and the two levels count the same (differential
oracle, where both finished).  Anything else is a failure (see fuzz_common).

    python scripts/fuzz_ptx.py --seconds 30                     # what CI runs (tests/test_fuzz_smoke.py)
    python scripts/fuzz_ptx.py --count 1000000 --seed 7 --crashes /tmp/crashes --report fuzz_ptx.json
"""

from __future__ import annotations

import random
import re
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from fuzz_common import ROOT, SHARED, Findings, arguments, mutate_text, run_loop  # noqa: E402

MAX_FUNCTION_LINES = 250
#: Share of inputs that are a whole function (the rest are a few lines of one).
WHOLE_FUNCTIONS = 0.05
_FUNCTION_START = re.compile(r"^\s*(?:\.visible\s+|\.weak\s+|\.extern\s+)?\.(?:entry|func)\b")


def seed_files() -> list[Path]:
    files = sorted((ROOT / "tests" / "fixtures").rglob("*.ptx"))
    if (SHARED / "corpus").is_dir():
        files += sorted((SHARED / "corpus").glob("*.ptx"))
    return files


def snippets(files: list[Path]) -> list[str]:
    """Module header + one function of every seed file (functions up to MAX_FUNCTION_LINES lines)."""
    out = []
    for path in files:
        lines = path.read_text(errors="replace").split("\n")
        starts = [i for i, line in enumerate(lines) if _FUNCTION_START.match(line)]
        if not starts:
            continue
        header = [line for line in lines[:starts[0]] if line.strip() and not line.lstrip().startswith("//")]
        header = [line for line in header if not line.lstrip().startswith(".extern")][:40]
        for start in starts:
            end = next((i for i in range(start, min(len(lines), start + MAX_FUNCTION_LINES)) if lines[i] == "}"),
                       None)
            if end is not None:
                out.append("\n".join(header + lines[start:end + 1]) + "\n")
    return out


def small(snippet: str, rng: random.Random) -> str:
    """The header, the function's opening lines up to its '{', and a window of at most 8 body lines: most
    inputs are this small, so that a run reaches a million inputs in reasonable time."""
    lines = snippet.split("\n")
    brace = next((i for i, line in enumerate(lines) if line.strip() == "{"), None)
    if brace is None or brace + 2 >= len(lines):
        return snippet
    begin = rng.randrange(brace + 1, len(lines) - 1)
    return "\n".join(lines[:brace + 1] + lines[begin:begin + rng.randint(1, 8)] + ["}", ""])


def make_one(emulate_every: int, crashes: Path | None = None):
    """The function that runs one input: ``one(rng, findings)``."""
    from traceconf.errors import InputError
    from traceconf.emulate.launch import LaunchRequest
    from traceconf.pipeline import analyze_kernel
    from traceconf.programs.ptx import PtxProgram
    from traceconf.ptx import parse_ptx
    from traceconf.rules import load_rule_sets

    seeds = snippets(seed_files())
    rules = load_rule_sets(["sm_90"])
    launches = [((32, 1, 1), (1, 1, 1)), ((64, 1, 1), (2, 1, 1)), ((16, 2, 1), (1, 2, 1)), ((256, 1, 1), (1, 1, 1)),
                ((32, 1, 1), (5, 1, 1)), ((64, 1, 1), (3, 2, 1))]
    parsed = [0]

    def one(rng: random.Random, findings: Findings) -> None:
        seed = rng.choice(seeds)
        text = mutate_text(seed if rng.random() < WHOLE_FUNCTIONS else small(seed, rng), rng, seeds)
        findings.inputs += 1
        stage = "parse"
        try:
            module = parse_ptx(text.encode("utf-8", "surrogatepass"), "<fuzz>")
            parsed[0] += 1
            if emulate_every and parsed[0] % emulate_every == 0:
                stage = "emulate"
                findings.count_stage("emulated")
                block, grid = rng.choice(launches)
                for kernel in module.kernel_names()[:1]:
                    levels = [analyze_kernel(PtxProgram(module), kernel, LaunchRequest(
                        block=block, grid=grid, params={}, max_steps=20_000, classes=classes), rules)
                        for classes in (True, False)]
                    if not any("partial" in level.launch for level in levels):
                        stage = "oracle"
                        findings.count_stage("compared with --exhaustive")
                        default, exhaustive = (level.results for level in levels)
                        assert default.equals(exhaustive), (f"default level and --exhaustive differ "
                                                            f"(block {block}, grid {grid})")
            findings.passed += 1
        except InputError as error:
            findings.input_error(error, text.encode("utf-8", "surrogatepass"), crashes, ".ptx")
        except Exception as error:  # a finding: anything but InputError
            findings.count_stage(f"failed in {stage}")
            findings.record(error, text.encode("utf-8", "surrogatepass"), crashes, ".ptx")

    one.seeds = len(seeds)
    return one


def main() -> None:
    args = arguments(__doc__.splitlines()[0])
    emulate_every = 25
    one = make_one(emulate_every, args.crashes)
    print(f"{one.seeds} seed snippets; emulating every {emulate_every}th parsed input", file=sys.stderr)
    summary = run_loop(one, args, Findings(), random.Random(args.seed))
    sys.exit(1 if summary["distinct_failures"] else 0)


if __name__ == "__main__":
    main()
