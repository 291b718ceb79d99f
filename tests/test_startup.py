"""Start-up stays light: --help, --version and devices load no numpy, pyarrow, pandas or Lark (the CLI
imports heavy modules only where a command uses them; scripts/bench_cli.py measures the time)."""

import subprocess
import sys

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
