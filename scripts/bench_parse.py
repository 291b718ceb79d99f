"""PTX parse throughput (lines/s) against plain Lark tree building, measured in the same run.

Inputs: the largest corpus file (``../shared/corpus/reduction_kernel.ptx``,
15k lines) and a generated file of >= 1M lines that replicates its kernels
under new names (every occurrence of a kernel's name is renamed, so parameter
names and labels differ between copies as they do between real kernels).

Measured, best of ``--repeat`` runs, one process, one core:

* ``lark tree``       Lark(parser='lalr') building a parse tree, no transformer (the baseline)
* ``lark basic``      the same with lexer='basic' (the grammar needs the contextual lexer: reported if it fails)
* ``grammar``         ``parse_ptx_by_grammar``: the reference the tests check against, a whole-file
                      parse with the transformer inlined (no tree) + tables
* ``parse_ptx``       the production path: statements split by regex, shapes cached
* ``lark-cython``     Lark with lark_cython's parser frontend, when that package is installed

Usage: python3 scripts/bench_parse.py [--repeat 3] [--lines 1000000] [--corpus FILE.ptx]
"""

from __future__ import annotations

import argparse
import gc
import re
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from lark import Lark  # noqa: E402

from traceconf.ptx import parse_ptx  # noqa: E402
from traceconf.ptx.grammar import START_SYMBOLS, grammar_path  # noqa: E402
from traceconf.ptx.parse import blank_comments, parse_ptx_by_grammar  # noqa: E402

CORPUS = REPO.parent / "shared" / "corpus" / "reduction_kernel.ptx"
ENTRY = re.compile(r"^\s*(?:\.visible\s+)?\.entry\s+([A-Za-z_$][\w$]*)", re.M)


def replicate(text: str, min_lines: int) -> str:
    """Module header once, then copies of every kernel with renamed entries until min_lines."""
    starts = [m.start() for m in ENTRY.finditer(text)]
    header, kernels = text[:starts[0]], [text[a:b] for a, b in zip(starts, starts[1:] + [len(text)])]
    names = [ENTRY.match(k).group(1) for k in kernels]
    out, lines, copy = [header], header.count("\n"), 0
    while lines < min_lines:
        for kernel, name in zip(kernels, names):
            renamed = kernel.replace(name, f"{name}_copy{copy}")
            out.append(renamed)
            lines += renamed.count("\n")
        copy += 1
    return "".join(out)


def best_of(repeat: int, run) -> float:
    best = float("inf")
    for _ in range(repeat):
        gc.collect()
        start = time.perf_counter()
        run()
        best = min(best, time.perf_counter() - start)
    return best


def prefix_of(text: str, lines: int) -> str:
    """The first whole kernels of ``text`` adding up to about ``lines`` lines."""
    cut = 0
    for match in ENTRY.finditer(text):
        if text.count("\n", 0, match.start()) > lines:
            cut = match.start()
            break
    return text[:cut] if cut else text


def main() -> None:
    arguments = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    arguments.add_argument("--repeat", type=int, default=3)
    arguments.add_argument("--lines", type=int, default=1_000_000)
    arguments.add_argument("--baseline-lines", type=int, default=60_000,
                           help="lines of the big file that the (slow) Lark baselines parse")
    arguments.add_argument("--corpus", type=Path, default=CORPUS,
                           help="the PTX file measured and replicated (default: %(default)s)")
    options = arguments.parse_args()
    corpus_path = options.corpus
    if not corpus_path.exists():
        sys.exit(f"{corpus_path} not found (../shared/corpus is needed, or --corpus)")

    grammar = grammar_path().read_text()
    tree = Lark(grammar, parser="lalr", lexer="contextual", start=list(START_SYMBOLS))
    try:
        basic = Lark(grammar, parser="lalr", lexer="basic", start=list(START_SYMBOLS))
    except Exception as error:  # noqa: BLE001 - reported, not hidden
        basic, basic_error = None, f"cannot build: {type(error).__name__}"
    try:
        import lark_cython  # noqa: F401
        cython = Lark(grammar, parser="lalr", lexer="contextual", start=list(START_SYMBOLS),
                      _plugins=lark_cython.plugins)
    except ImportError:
        cython = None

    corpus = corpus_path.read_text()
    big = replicate(corpus, options.lines)
    baseline_text = prefix_of(big, options.baseline_lines)
    inputs = [(corpus_path.name, corpus, corpus), (f"generated ({big.count(chr(10)):,} lines)", big, baseline_text)]
    print(f"PTX parse throughput, lines/s, best of {options.repeat} (baselines on the first "
          f"{baseline_text.count(chr(10)):,} lines of the generated file)")
    for label, text, baseline in inputs:
        lines, baseline_lines = text.count("\n"), baseline.count("\n")
        blanked = blank_comments(baseline, "bench")

        def rate(seconds: float, n: int = baseline_lines) -> float:
            return n / seconds

        results = {"lark tree": rate(best_of(options.repeat, lambda: tree.parse(blanked, start="start")))}
        if basic is not None:
            try:
                results["lark basic"] = rate(best_of(options.repeat, lambda: basic.parse(blanked, start="start")))
            except Exception as error:  # noqa: BLE001
                results["lark basic"] = f"fails: {type(error).__name__}"
        else:
            results["lark basic"] = basic_error
        if cython is not None:
            results["lark-cython"] = rate(best_of(options.repeat, lambda: cython.parse(blanked, start="start")))
        else:
            results["lark-cython"] = "not installed"
        results["grammar"] = rate(best_of(options.repeat, lambda: parse_ptx_by_grammar(baseline, "bench")))
        repeat = options.repeat if lines < 100_000 else 1
        results["parse_ptx"] = rate(best_of(repeat, lambda: parse_ptx(text, "bench")), lines)
        base = results["lark tree"]
        print(f"\n{label}")
        for name, value in results.items():
            if isinstance(value, str):
                print(f"  {name:16s} {value}")
            else:
                print(f"  {name:16s} {value:>10,.0f} lines/s  x{value / base:5.1f} vs lark tree")


if __name__ == "__main__":
    main()
