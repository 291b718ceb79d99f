"""Shared parts of the fuzz harnesses (scripts/fuzz_ptx.py, scripts/fuzz_traces.py).

A harness feeds mutated inputs to the library in-process; an input "passes" when the library returns or raises
:class:`traceconf.errors.InputError` (the one error users see).  Anything else is a finding: it is grouped by a
signature (exception type and the innermost traceconf frame), the first input of each signature is saved under
``--crashes``, and the run ends with a JSON summary.  A finding becomes a test (tests/test_robust.py).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import sys
import time
import traceback
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
#: The shared data folder (../shared beside the checkout, or $TRACECONF_SHARED): more seeds when present.
SHARED = Path(os.environ.get("TRACECONF_SHARED") or ROOT.parent / "shared")

#: Integers at the edges of every field width, in the spellings PTX and the traces use.
EDGE_INTEGERS = ["0", "1", "-1", "7", "31", "32", "33", "64", "127", "255", "1023", "1024", "1025", "4096", "65535",
                 "65536", "2147483647", "2147483648", "-2147483648", "-2147483649", "4294967295", "4294967296",
                 "1099511627776", "9223372036854775807", "9223372036854775808", "-9223372036854775808",
                 "18446744073709551615", "18446744073709551616", "99999999999999999999999999999",
                 "0x7fffffff", "0x80000000", "0xffffffff", "0x7fffffffffffffff", "0x8000000000000000",
                 "0xffffffffffffffff", "0xFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFF", "0777", "0b101", "0x", "08", "1U"]
#: Characters the fuzzers insert: blanks Python treats as space but the grammar does not, controls, non-ASCII.
ODD_CHARACTERS = ["\u00a0", "\u2028", "\u2029", "\v", "\f", "\x00", "\x1c", "\t", "\r", "\ufeff", "é", "\U0001f600",
                  "{", "}", "[", "]", "(", ")", ";", ",", "%", ".", "\"", "//", "/*", "*/", "@", "!", "<", ">", "+",
                  "-", "_", "$", ":", "\\"]

#: Values a TOML field is swapped for: other types, other shapes (lists of lists, tables), dates, non-numbers.
TOML_ODD_VALUES = ["[[\"ld\"]]", "[[1, 2]]", "{}", "{a = 1}", "\"\"", "true", "1.5", "inf", "nan", "-1", "0",
                   "2147483648", "9223372036854775807", "-9223372036854775808", "[]", "[1, \"a\"]",
                   "\"0x20\"", "[[]]", "[{}]", "1979-05-27"]


def swap_toml_value(text: str, rng: random.Random) -> str:
    """One ``key = value`` line gets a value of another type or shape."""
    lines = text.split("\n")
    candidates = [i for i, line in enumerate(lines) if "=" in line and not line.lstrip().startswith("#")]
    if not candidates:
        return text
    index = rng.choice(candidates)
    key = lines[index].split("=", 1)[0]
    lines[index] = f"{key}= {rng.choice(TOML_ODD_VALUES + EDGE_INTEGERS[:30])}"
    return "\n".join(lines)


def message_fault(error) -> str | None:
    """What is wrong with an InputError as the user would see it, or None: the CLI prints ``str(error)`` as
    one line, so it must be one line, and it must name where the bad value is (a file, or an option)."""
    text = str(error)
    if "\n" in text or "\r" in text:
        return "a message of more than one line"
    if not error.file and "--" not in error.message:
        return "a message that names neither a file nor an option"
    return None


class UnclearMessage(Exception):
    """A finding: an InputError the user could not act on (see :func:`message_fault`)."""


@dataclass
class Findings:
    inputs: int = 0
    passed: int = 0
    input_errors: int = 0
    by_signature: dict = field(default_factory=dict)
    stages: dict = field(default_factory=dict)

    def count_stage(self, stage: str) -> None:
        self.stages[stage] = self.stages.get(stage, 0) + 1

    def record(self, error: BaseException, data: bytes, crashes: Path | None, suffix: str) -> None:
        frames = [f for f in traceback.extract_tb(error.__traceback__) if "traceconf" in f.filename]
        where = f"{Path(frames[-1].filename).name}:{frames[-1].lineno}" if frames else "?"
        signature = f"{type(error).__name__} at {where}"
        entry = self.by_signature.setdefault(signature, {"count": 0, "message": str(error)[:300], "saved": None})
        entry["count"] += 1
        if crashes is not None and entry["saved"] is None:
            crashes.mkdir(parents=True, exist_ok=True)
            path = crashes / f"crash-{len(self.by_signature):03d}{suffix}"
            path.write_bytes(data)
            entry["saved"] = str(path)
            (crashes / f"crash-{len(self.by_signature):03d}.txt").write_text(
                "".join(traceback.format_exception(error)))

    def input_error(self, error, data: bytes, crashes: Path | None, suffix: str) -> None:
        """An InputError: counted, and a finding when its message is unclear."""
        fault = message_fault(error)
        if fault is None:
            self.input_errors += 1
            return
        try:
            raise UnclearMessage(f"{fault}: {str(error)[:300]!r}") from error
        except UnclearMessage as finding:
            finding.__traceback__ = error.__traceback__
            self.record(finding, data, crashes, suffix)

    def summary(self, seconds: float) -> dict:
        import resource
        return {"inputs": self.inputs, "seconds": round(seconds, 1), "inputs_per_second": round(self.inputs / max(
            seconds, 1e-9)), "accepted": self.passed, "input_errors": self.input_errors,
            "peak_rss_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss // 1024,
            "cpu_seconds": round(sum(resource.getrusage(who).ru_utime + resource.getrusage(who).ru_stime
                                     for who in (resource.RUSAGE_SELF, resource.RUSAGE_CHILDREN)), 1),
            "failures": sum(e["count"] for e in self.by_signature.values()),
            "distinct_failures": len(self.by_signature), "stages": self.stages, "by_signature": self.by_signature}


def arguments(description: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--seconds", type=float, default=None, help="stop after this many seconds")
    parser.add_argument("--count", type=int, default=None, help="stop after this many inputs")
    parser.add_argument("--seed", type=int, default=1, help="random seed (runs are reproducible per seed)")
    parser.add_argument("--crashes", type=Path, default=None, help="save the first input of each failure here")
    parser.add_argument("--report", type=Path, default=None, help="write the JSON summary here")
    parser.add_argument("--progress", type=float, default=60.0, help="print a progress line every N seconds")
    args = parser.parse_args()
    if args.seconds is None and args.count is None:
        args.seconds = 30.0
    return args


def run_loop(one, args, findings: Findings, rng: random.Random) -> dict:
    """Call ``one(rng, findings)`` until the count or the time is reached; returns the summary."""
    start = last = time.monotonic()
    while True:
        now = time.monotonic()
        if args.count is not None and findings.inputs >= args.count:
            break
        if args.seconds is not None and now - start >= args.seconds:
            break
        one(rng, findings)
        if args.progress and now - last >= args.progress:
            last = now
            print(f"{findings.inputs:,} inputs, {len(findings.by_signature)} distinct failures, "
                  f"{now - start:.0f} s", file=sys.stderr, flush=True)
    summary = findings.summary(time.monotonic() - start)
    text = json.dumps(summary, indent=2)
    if args.report is not None:
        args.report.write_text(text)
    print(text)
    return summary


def mutate_text(text: str, rng: random.Random, donors: list[str]) -> str:
    """One to four edits: numbers to edge values, odd characters, line deletion/duplication/splicing."""
    lines = text.split("\n")
    for _ in range(rng.randint(1, 4)):
        if not lines:
            lines = [""]
        choice = rng.random()
        index = rng.randrange(len(lines))
        line = lines[index]
        if choice < 0.35:
            digits = [i for i, c in enumerate(line) if c.isdigit() and (i == 0 or not line[i - 1].isalnum())]
            if digits:
                start = rng.choice(digits)
                end = start
                while end < len(line) and (line[end].isalnum()):
                    end += 1
                lines[index] = line[:start] + rng.choice(EDGE_INTEGERS) + line[end:]
            else:
                lines[index] = line + " " + rng.choice(EDGE_INTEGERS)
        elif choice < 0.5:
            at = rng.randint(0, len(line))
            lines[index] = line[:at] + rng.choice(ODD_CHARACTERS) + line[at:]
        elif choice < 0.6:
            del lines[index]
        elif choice < 0.7:
            lines.insert(index, line)
        elif choice < 0.8:
            donor = rng.choice(donors).split("\n")
            lines.insert(index, rng.choice(donor))
        elif choice < 0.87:
            at = rng.randint(0, len(line))
            lines[index] = line[:at]
        elif choice < 0.94:
            other = rng.randrange(len(lines))
            lines[index], lines[other] = lines[other], lines[index]
        else:
            words = line.split()
            if words:
                words[rng.randrange(len(words))] = rng.choice(rng.choice(donors).split() or ["x"])
                lines[index] = " ".join(words)
    return "\n".join(lines)


def mutate_bytes(data: bytes, rng: random.Random) -> bytes:
    """Bit flips, truncation, a run of one byte, or bytes duplicated (binary formats: Parquet, xz)."""
    out = bytearray(data)
    choice = rng.random()
    if not out:
        return bytes(rng.randrange(256) for _ in range(rng.randint(1, 64)))
    if choice < 0.4:
        for _ in range(rng.randint(1, 8)):
            out[rng.randrange(len(out))] ^= 1 << rng.randrange(8)
    elif choice < 0.6:
        del out[rng.randrange(len(out)):]
    elif choice < 0.8:
        at = rng.randrange(len(out))
        out[at:at + rng.randint(1, 64)] = bytes([rng.choice([0, 0xFF, 0x7F, 0x80])]) * rng.randint(1, 64)
    else:
        at = rng.randrange(len(out))
        out[at:at] = out[at:at + rng.randint(1, 256)]
    return bytes(out)
