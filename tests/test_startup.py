"""Start-up stays light: --help, --version and devices load no numpy, pyarrow, pandas or Lark (the CLI
imports heavy modules only where a command uses them), and ``analyze`` loads no pandas, acero or parquet
(scripts/bench_cli.py and scripts/bench_startup.py measure the time)."""

import os
import subprocess
import sys
from pathlib import Path

import pytest

HEAVY = ("numpy", "pyarrow", "pandas", "lark", "traceconf.pipeline")


def loaded_after(*argv: str) -> list[str]:
    code = ("import sys\nfrom traceconf.cli import app\n"
            f"try:\n    app({list(argv)!r})\nexcept SystemExit:\n    pass\n"
            f"print([m for m in {HEAVY!r} if m in sys.modules])")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    return eval(result.stdout.strip().splitlines()[-1])


def test_version_help_and_devices_load_nothing_heavy():
    for argv in (["--version"], ["--help"], ["devices"], ["devices", "h100"], ["analyze", "--help"]):
        assert loaded_after(*argv) == [], argv


def test_the_check_sees_a_heavy_import():
    assert "pyarrow" in loaded_after("schema", "accesses")


def test_version_alone_needs_no_cli_framework_and_says_what_the_app_says():
    code = ("import sys\nsys.argv = ['traceconf', '--version']\nfrom traceconf.cli import main\nmain()\n"
            "print([m for m in ('typer', 'rich', 'numpy', 'traceconf.errors') if m in sys.modules])")
    fast = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    version, loaded = fast.strip().splitlines()
    assert eval(loaded) == []
    through_app = subprocess.run([sys.executable, "-c", "from traceconf.cli import app\ntry:\n    app(['--version'])\n"
                                  "except SystemExit:\n    pass"], capture_output=True, text=True, check=True).stdout
    assert version == through_app.strip() and version.startswith("traceconf ")


TRANSPOSE = ["analyze", "tests/fixtures/emulate/transpose.ptx", "--block", "32,8", "--grid", "32,32"]
#: What a one-kernel ``analyze`` has no use for: pandas (pyarrow imports it to look for pandas objects; grouping in
#: traceconf.grouping), acero and pyarrow's dataset and file-system modules (the group-by; parquet output), and
#: pydantic (Typer 0.29 coerces every option value through it: pyproject.toml keeps Typer below 0.29), and the
#: numpydoc parser pyarrow.compute documents its functions with (traceconf.startup), and pyarrow's CSV writer (the
#: CSV output only).
NOT_FOR_ANALYZE = ("pandas", "pyarrow.acero", "pyarrow.dataset", "pyarrow.parquet", "pyarrow._fs", "cxxfilt",
                   "pydantic", "pyarrow.vendored.docscrape", "pydoc", "pyarrow.csv", "pyarrow._csv")


def loaded_by_the_command(*argv: str, entry: str = "main") -> list[str]:
    """Modules of NOT_FOR_ANALYZE loaded by ``traceconf ARGV`` run as the console script runs it (``main``) or
    through the Typer app alone (``app``)."""
    run = "main()" if entry == "main" else f"app({list(argv)!r})"
    code = (f"import sys\nsys.argv = ['traceconf', *{list(argv)!r}]\nfrom traceconf.cli import main, app\n"
            f"try:\n    {run}\nexcept SystemExit:\n    pass\n"
            f"print([m for m in {NOT_FOR_ANALYZE!r} if m in sys.modules])")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                            cwd=Path(__file__).resolve().parents[1])
    assert "transpose_unpadded" in result.stdout
    return eval(result.stdout.strip().splitlines()[-1])


def test_analyze_of_the_readme_transpose_loads_no_pandas_acero_or_parquet():
    assert loaded_by_the_command(*TRANSPOSE) == []
    assert loaded_by_the_command(*TRANSPOSE, "--suggest", "--format", "json") == []


def test_the_check_sees_pandas_and_docscrape_where_pyarrow_is_left_alone():
    assert {"pandas", "pyarrow.vendored.docscrape"} <= set(loaded_by_the_command(*TRANSPOSE, entry="app"))


PYARROW_WITHOUT_PANDAS = """
import sys
from traceconf.startup import pyarrow_without_pandas
{before}
pyarrow_without_pandas()
import numpy as np, pyarrow as pa, pyarrow.compute as pc
table = pa.table({{"n": pa.array([1, None, 3], pa.int64()), "s": pa.array(["a", None, "c"]),
                  "f": pa.array(np.array([0.5, 1.5, np.nan])), "b": pa.array(np.array([True, False, True]))}})
values = [pa.scalar(7).as_py(), pc.equal(table["n"], 3).to_pylist(), table["f"].to_numpy().tolist(),
          pa.array(np.arange(3, dtype=np.int16)).to_numpy().tolist(), table.to_pylist()]
loaded = "pandas" in sys.modules
import pandas as pd
frame = table.to_pandas()
expected = pd.DataFrame({{"n": [1.0, np.nan, 3.0], "s": ["a", None, "c"], "f": [0.5, 1.5, np.nan],
                         "b": [True, False, True]}})
pd.testing.assert_frame_equal(frame, expected)
print(loaded, values)
"""


@pytest.mark.parametrize("before", ["", "import pyarrow"])
def test_pyarrow_converts_without_pandas_and_to_pandas_still_works(before):
    """The pyarrow behaviour traceconf.startup relies on: its pandas checks, answered "absent" once, stay so for
    every conversion (Python, numpy, scalars, compute arguments), the values are the same, and an explicit
    ``import pandas`` then ``Table.to_pandas`` work as usual.  Fails if a pyarrow release changes that."""
    result = subprocess.run([sys.executable, "-c", PYARROW_WITHOUT_PANDAS.format(before=before)],
                            capture_output=True, text=True, check=True)
    loaded, values = result.stdout.strip().split(" ", 1)
    assert loaded == "False"
    assert values == ("[7, [False, None, True], [0.5, 1.5, nan], [0, 1, 2], [{'n': 1, 's': 'a', 'f': 0.5, 'b': True}, "
                      "{'n': None, 's': None, 'f': 1.5, 'b': False}, {'n': 3, 's': 'c', 'f': nan, 'b': True}]]")


def test_a_process_that_has_pandas_keeps_pyarrows_pandas_integration():
    code = ("import sys, pandas as pd\nfrom traceconf.startup import pyarrow_without_pandas\n"
            "pyarrow_without_pandas()\nimport pyarrow as pa\n"
            "print(pa.array(pd.Series([1.0, float('nan')])).null_count)")
    assert subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          check=True).stdout.strip() == "1"


PYARROW_COMPUTE = """
import inspect, sys
from traceconf.startup import DOCUMENTATION_PARSER, pyarrow_compute_without_option_docs
if {set_up}:
    pyarrow_compute_without_option_docs()
import pyarrow as pa, pyarrow.compute as pc
table = pa.table({{"a": [3, 1, 2], "s": ["x", None, "zz"]}})
values = [pc.sort_indices(table, sort_keys=[("a", "descending")]).to_pylist(), pc.round(pa.array([1.25]), ndigits=1),
          pc.cast(table["a"], pa.float32()).type, table["a"].take([2, 0]), pc.utf8_length(table["s"]),
          pc.fill_null(table["s"], "-"), pc.index_in(pa.array([2, 7]), value_set=table["a"]),
          table.filter(pc.greater(table["a"], 1)).num_rows, inspect.signature(pc.round), inspect.signature(pc.sum)]
names = ",".join(name for name in sorted(vars(pc)) if not name.startswith("_"))
print(DOCUMENTATION_PARSER in sys.modules, "ndigits" in pc.round.__doc__, names, [str(v) for v in values])
"""


def pyarrow_compute_in_a_process(set_up: bool) -> tuple[str, str, str, str]:
    result = subprocess.run([sys.executable, "-c", PYARROW_COMPUTE.format(set_up=set_up)], capture_output=True,
                            text=True, check=True)
    return tuple(result.stdout.strip().split(" ", 3))


def test_pyarrow_compute_without_option_docs_is_pyarrow_compute_less_the_docs():
    """The command line's pyarrow.compute has every function, signature and result of pyarrow's, only its
    docstrings lack the options' parameters, and the stand-in parser is gone once it is loaded (fails if a
    pyarrow release no longer reads them with docscrape at import)."""
    parser_left, documented, names, values = pyarrow_compute_in_a_process(True)
    assert (parser_left, documented) == ("False", "False")
    assert (names, values) == pyarrow_compute_in_a_process(False)[2:]


def test_the_check_sees_the_option_docs_of_a_plain_pyarrow_compute():
    parser_left, documented, _, _ = pyarrow_compute_in_a_process(False)
    assert (parser_left, documented) == ("True", "True")


#: Parses the README transpose with Lark's grammar analysis (the LALR tables) refused; prints its kernels and whether
#: the process built a Lark parser at all.
PARSE_WITHOUT_ANALYSIS = ("import lark.parsers.lalr_analysis as analysis\n"
                          "def refuse(self):\n    raise AssertionError('grammar analysed')\n"
                          "analysis.LALR_Analyzer.compute_lalr = refuse\n"
                          "from traceconf.ptx import parse_file\n"
                          "from traceconf.ptx.grammar import ptx_parser\n"
                          "print(parse_file('tests/fixtures/emulate/transpose.ptx').kernel_names, "
                          "'lark' in vars(ptx_parser()))")


def parse_without_analysis(empty: Path | None = None) -> subprocess.CompletedProcess:
    """The parse, with Lark's cache (in the temporary folder) and traceconf's (the terminals) in ``empty``."""
    environment = {**os.environ, "TMPDIR": str(empty), "TRACECONF_CACHE": str(empty)} if empty else None
    return subprocess.run([sys.executable, "-c", PARSE_WITHOUT_ANALYSIS], capture_output=True, text=True,
                          cwd=Path(__file__).resolve().parents[1], env=environment)


def test_the_fast_path_parses_without_grammar_analysis():
    """The cache folder keeps the grammar's terminals and the fast path reads the transpose's function headers by
    shape: a later process parses it without building a Lark parser, let alone analysing the grammar (Lark keeps
    the LALR tables in its own cache file for the files that need the parser)."""
    subprocess.run([sys.executable, "-c", "from traceconf.ptx.grammar import ptx_parser\nptx_parser().terminals"],
                   check=True)
    done = parse_without_analysis()
    assert done.returncode == 0 and "transpose_unpadded" in done.stdout, done.stderr[-1000:]
    assert done.stdout.split()[-1] == "False"          # no parser built


def test_the_check_sees_a_grammar_analysis(tmp_path):
    assert "grammar analysed" in parse_without_analysis(tmp_path).stderr     # empty caches: Lark analyses


COMMANDS_LOADED = ("import sys\nsys.argv = ['traceconf', *{argv!r}]\nfrom traceconf.cli import main\ntry:\n    main()\n"
                   "except SystemExit:\n    pass\n"
                   "print(sorted(m for m in sys.modules if m.startswith('traceconf.commands.')))")


def commands_loaded(*argv: str) -> tuple[str, list[str]]:
    """What ``traceconf ARGV`` prints, and the command modules it loaded."""
    result = subprocess.run([sys.executable, "-c", COMMANDS_LOADED.format(argv=list(argv))], capture_output=True,
                            text=True, check=True)
    *printed, loaded = result.stdout.strip().splitlines()
    return "\n".join(printed), eval(loaded)


def test_a_command_line_builds_the_command_it_names_and_no_other():
    printed, loaded = commands_loaded("--debug", "compare-ncu", "--help")
    # analyze: main() reports bad input with its report_input_error
    assert loaded == ["traceconf.commands.analyze", "traceconf.commands.compare_ncu"]
    through_app = subprocess.run([sys.executable, "-c", "import sys\nsys.argv[0] = 'traceconf'\n"
                                  "from traceconf.cli import app\napp()", "--debug", "compare-ncu", "--help"],
                                 capture_output=True, text=True).stdout
    assert printed.strip() == through_app.strip() and "Usage: traceconf compare-ncu [OPTIONS]" in printed


def test_without_a_command_the_whole_app_answers():
    from traceconf.cli import COMMAND_MODULES

    for argv in (["--help"], ["compare_ncu"], ["anlyze", "x.ptx"]):
        assert commands_loaded(*argv)[1] == sorted(f"traceconf.commands.{m}" for m in COMMAND_MODULES), argv


def test_the_command_line_sets_glibc_malloc_to_keep_freed_memory():
    """On glibc the CLI's set-up fixes malloc's thresholds (mallopt answers 1 for each); elsewhere it does nothing
    and never fails."""
    import ctypes
    import platform

    from traceconf.startup import MALLOC_SETTINGS, malloc_keeps_freed_memory
    glibc = platform.libc_ver()[0] == "glibc"
    assert malloc_keeps_freed_memory() is glibc
    assert dict(MALLOC_SETTINGS)[-3] >= 1 << 20       # arrays of one batch (128 KiB) stay in the heap
    if glibc:
        assert hasattr(ctypes.CDLL(None), "mallopt")


@pytest.mark.parametrize("colours", [False, True])
def test_the_stdout_console_highlights_only_what_it_colours(monkeypatch, colours):
    """Output without colours (here: captured, not a terminal) skips rich's highlighter; with colours (FORCE_COLOR)
    numbers are highlighted as before."""
    from traceconf.commands.analyze import stdout_console

    monkeypatch.delenv("NO_COLOR", raising=False)
    if colours:
        monkeypatch.setenv("FORCE_COLOR", "1")
    else:
        monkeypatch.delenv("FORCE_COLOR", raising=False)
    console = stdout_console()
    assert (console.color_system is not None) is colours
    assert bool(console.render_str("262,144 wavefronts, 32-way").spans) is colours


def test_the_command_line_collects_garbage_less_often_and_a_library_user_keeps_the_default():
    from traceconf.startup import FIRST_GENERATION_THRESHOLD

    code = ("import gc, sys\nsys.argv = ['traceconf', 'devices']\nimport traceconf.api\n"
            "from traceconf.cli import main\nbefore = gc.get_threshold()\ntry:\n    {call}\nexcept SystemExit:\n"
            "    pass\nprint([before, gc.get_threshold()])")

    def thresholds(call: str) -> list:
        done = subprocess.run([sys.executable, "-c", code.format(call=call)], capture_output=True, text=True,
                              check=True)
        return eval(done.stdout.strip().splitlines()[-1])

    before, after = thresholds("main()")
    assert before[0] < FIRST_GENERATION_THRESHOLD and after == (FIRST_GENERATION_THRESHOLD, *before[1:])
    before, after = thresholds("pass")
    assert after == before


@pytest.mark.skipif(not Path("/proc/self/task").is_dir(), reason="threads counted from /proc")
def test_the_command_line_imports_numpy_with_one_blas_thread_and_leaves_a_users_choice_and_a_library_user_alone():
    """numpy's OpenBLAS threads spin on start-up (CPU seconds in every command): the command line asks for one,
    unless OPENBLAS_NUM_THREADS says otherwise; a library user's process keeps OpenBLAS's default."""
    code = ("import os, sys\nsys.argv = ['traceconf', '--help']\nfrom traceconf.cli import main\n{call}\n"
            "import numpy\nprint([len(os.listdir('/proc/self/task')), os.environ.get('OPENBLAS_NUM_THREADS')])")

    def threads(call: str, **env: str) -> list:
        environment = {k: v for k, v in os.environ.items() if k not in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS")}
        done = subprocess.run([sys.executable, "-c", code.format(call=call)], capture_output=True, text=True,
                              check=True, env={**environment, **env})
        return eval(done.stdout.strip().splitlines()[-1])

    call = "try:\n    main()\nexcept SystemExit:\n    pass"
    assert threads(call) == [1, "1"]
    assert threads(call, OPENBLAS_NUM_THREADS="2") == [2, "2"]
    assert threads("pass")[1] is None
