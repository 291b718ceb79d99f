"""The HTML report, without a browser: structure (Python's html.parser), self-containment, size, escaping, and
the numbers against ``--format json`` of the same run.  tests/test_report_browser.py opens the same pages in
Chromium."""

from __future__ import annotations

import csv
import io
import json
import re
import shutil
from html import escape
from html.parser import HTMLParser
from pathlib import Path

import pytest
from typer.testing import CliRunner

from conftest import FIXTURES
from traceconf import tools
from traceconf.cli import app

TRANSPOSE = FIXTURES / "emulate" / "transpose.ptx"
TRANSPOSE_LAUNCH = ["--block", "32,8", "--grid", "32,32"]
HGEMM = FIXTURES / "scale" / "hgemm_stages.sm_90.ptx"
#: the 4096³ tiled GEMM of tests/data/hw/scale/launches.toml (hgemm_s2p0_4096)
HGEMM_LAUNCH = ["-k", "_Z19hgemm_mma_stages_tnILi2ELi0EEvPK6__halfS2_PS0_iii", "--block", "256", "--grid", "32,32",
                "-p", "3=4096", "-p", "4=4096", "-p", "5=4096"]
NCU = Path(__file__).resolve().parent / "data" / "hw" / "source_sm90"
VOID = {"area", "base", "br", "col", "embed", "hr", "img", "input", "link", "meta", "source", "track", "wbr"}
#: SVG elements written self-closed
SELF_CLOSED = {"rect", "path", "line", "circle"}


class Page(HTMLParser):
    """The parts of a report the tests read: tag balance, URLs, and every cell with data-* attributes."""

    def __init__(self, text: str):
        super().__init__(convert_charrefs=True)
        self.stack: list[str] = []
        self.errors: list[str] = []
        self.urls: list[str] = []
        self.elements: list[tuple[str, dict]] = []
        self.text_of: dict[int, str] = {}
        self._open: list[int] = []
        self.feed(text)
        self.close()

    def handle_starttag(self, tag, attrs):
        attributes = dict(attrs)
        for name, value in attributes.items():
            if name in ("src", "href", "xlink:href") and value and not value.startswith("#"):
                self.urls.append(value)
        self.elements.append((tag, attributes))
        if tag not in VOID:
            self.stack.append(tag)
            self._open.append(len(self.elements) - 1)
            self.text_of[len(self.elements) - 1] = ""

    def handle_startendtag(self, tag, attrs):
        self.elements.append((tag, dict(attrs)))

    def handle_endtag(self, tag):
        if tag in VOID:
            return
        if not self.stack or self.stack[-1] != tag:
            self.errors.append(f"</{tag}> closes <{self.stack[-1] if self.stack else None}>")
            return
        self.stack.pop()
        self._open.pop()

    def handle_data(self, data):
        for index in self._open:
            self.text_of[index] += data

    def cells(self, **wanted) -> list[tuple[dict, str]]:
        """Elements whose attributes include ``wanted`` (``data_key`` means ``data-key``), with their text."""
        want = {k.replace("_", "-"): v for k, v in wanted.items()}
        return [(attributes, self.text_of.get(i, "")) for i, (tag, attributes) in enumerate(self.elements)
                if all(attributes.get(k) == v for k, v in want.items())]


def run(*args) -> str:
    result = CliRunner().invoke(app, [str(a) for a in args])
    assert result.exit_code == 0, result.output
    return result.stdout


def html_and_json(tmp_path: Path, path: Path, *options) -> tuple[str, dict]:
    out = tmp_path / "report.html"
    run("analyze", path, *options, "-o", out)
    document = json.loads(run("analyze", path, *options, "--format", "json"))
    return out.read_text(encoding="utf-8"), document


@pytest.fixture(scope="module")
def transpose_page(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("transpose")
    return html_and_json(tmp, TRANSPOSE, *TRANSPOSE_LAUNCH, "--level", "ptx", "-d", "sm_90", "-d", "sm_1x",
                         "--suggest")


def test_the_page_is_well_formed_and_self_contained(transpose_page):
    text, _ = transpose_page
    page = Page(text)
    assert page.errors == [] and page.stack == []
    assert not re.search(r"https?://", text)               # no URL at all: nothing to fetch, no CDN
    assert page.urls == []
    assert not [a for tag, a in page.elements if tag in ("link", "img", "iframe") or (tag == "script" and "src" in a)]
    tags = [tag for tag, _ in page.elements]
    assert tags.count("script") == 1 and tags.count("style") == 1


def _numbers(page: Page) -> dict:
    """(kernel/instruction, device, key) → the number in the instruction tables' cells."""
    return {(a["data-row"], a["data-device"], a["data-key"]): int(value.replace(",", "")) for a, value in page.cells()
            if "data-row" in a and "data-device" in a}


def _json_numbers(document: dict) -> dict:
    return {(f"{r['kernel']}/{i['instruction']}", r["device"], key): i[key] for r in document["results"]
            for i in r["instructions"] for key in ("wavefronts", "ideal_wavefronts", "excess_wavefronts")}


@pytest.fixture(scope="module")
def unresolved_page(tmp_path_factory):
    """The 256-bin histogram without its data: its atomics' addresses are unknown (unresolved, with a reason)."""
    return html_and_json(tmp_path_factory.mktemp("datadep"), FIXTURES / "cuda" / "datadep.sm_90.ptx", "-k", "hist256",
                         "--block", "256", "--grid", "2", "--param", "2=8192", "--level", "ptx")


@pytest.mark.parametrize("name", ["transpose_page", "unresolved_page"])
def test_numbers_in_the_page_are_the_json_numbers(name, request):
    text, document = request.getfixturevalue(name)
    page = Page(text)
    assert _numbers(page) == _json_numbers(document)
    # each instruction as the JSON locates it: its pc (SASS) or PTX line, then its text
    where = {a["data-row"]: value.strip() for a, value in page.cells(data_key="instruction")}
    for result in document["results"]:
        for instruction in result["instructions"]:
            place = (f"pc {instruction['pc']:#x}" if instruction["pc"] is not None
                     else f"L{instruction['ptx_line']}")
            assert where[f"{result['kernel']}/{instruction['instruction']}"].startswith(
                f"{place} {' '.join(instruction['ptx'].split())}")
    assert name == "transpose_page" or all(result["unresolved"] for result in document["results"])
    for result in document["results"]:
        for entry in result["unresolved"]:                           # the reason is beside the instruction
            assert f"unresolved ({result['device']}): {escape(entry['reason'])}" in text


SASS_DATA = Path(__file__).resolve().parent / "data" / "sass"
TRANSPOSE_TILE = ["--block", "32,8", "--grid", "32,32"]
INPUT_KINDS = [
    pytest.param(SASS_DATA / "transpose.sm_90.nvdisasm.sass", TRANSPOSE_TILE, None, id="nvdisasm listing"),
    pytest.param(SASS_DATA / "transpose.sm_90.json", TRANSPOSE_TILE, None, id="nvdisasm json"),
    pytest.param(SASS_DATA / "transpose.sm_90.cubin", [*TRANSPOSE_TILE, "--param", "2=1024"], "cuobjdump", id="cubin"),
    pytest.param(SASS_DATA / "libtranspose.sm_90.so", [*TRANSPOSE_TILE, "--param", "2=1024"], "cuobjdump",
                 id="shared library"),
    pytest.param(("traces", "microgpusim-matrixmul", "kernelslist.g"), [], None, id="accel-sim trace"),
]


@pytest.mark.parametrize("path, options, tool", INPUT_KINDS)
def test_every_input_kind_gets_a_page_with_the_json_numbers(tmp_path, path, options, tool):
    if tool is not None and (tools.locate(tool) is None or tools.locate("nvdisasm") is None):
        pytest.skip(f"needs {tool} and nvdisasm (CUDA toolkit or NVIDIA pip wheels)")
    if isinstance(path, tuple):
        from conftest import shared_path
        path = shared_path(*path)
    text, document = html_and_json(tmp_path, path, *options)
    page = Page(text)
    assert page.errors == [] and not re.search(r"https?://", text)
    assert _json_numbers(document) and _numbers(page) == _json_numbers(document)
    sections = {a["data-kernel"] for tag, a in page.elements if tag == "section"}
    assert sections == {r["kernel"] for r in document["results"]}


def test_hotspot_rows_are_in_the_terminal_tables_order_and_the_source_heat_sums_them(transpose_page):
    text, document = transpose_page
    page = Page(text)
    for result in document["results"]:
        if result["device"] != "sm_90":
            continue
        kernel = result["kernel"]
        order = [int(a["data-instruction"]) for a, _ in page.cells() if a.get("data-kernel-of") == kernel
                 and "data-rank" in a and "data-instruction" in a]
        excess = {i["instruction"]: i["excess_wavefronts"] for i in result["instructions"]}
        # worst excess over both devices first (sm_1x and sm_90 agree on the order here)
        assert [excess[i] for i in order] == sorted(excess.values(), reverse=True)
        total = sum(excess.values())
        lines = {}
        for instruction in result["instructions"]:
            line = int(instruction["source"].rsplit(":", 1)[1])
            lines[line] = lines.get(line, 0) + instruction["excess_wavefronts"]
        heat = {int(a["data-line"]): value for a, value in page.cells() if a.get("data-kernel-of") == kernel
                and "data-line" in a}
        assert set(heat) == set(lines)
        for attributes, _ in page.cells(data_key="share", data_device="sm_90"):
            if attributes.get("data-kernel-of") == kernel and "data-line" in attributes:
                share = float(attributes["data-v"])
                assert share == pytest.approx(100.0 * lines[int(attributes["data-line"])] / total if total else 0,
                                              abs=1e-4)


def test_the_page_shows_notes_suggestions_pictures_and_device_differences(transpose_page):
    text, _ = transpose_page
    page = Page(text)
    assert "<dt>level</dt><dd>ptx</dd>" in text                     # the level, at the top
    figures = [a for tag, a in page.elements if tag == "figure"]
    assert {a["data-device"] for a in figures} == {"sm_90", "sm_1x"}
    assert all(a["data-kernel-of"] == "transpose_unpadded" for a in figures)   # the padded kernel has no excess
    assert "pad tile row 32→33 words: 32-way → 1-way" in text
    assert re.search(r"declaration to edit: <code>transpose\.cu:\d+</code> <code>__shared__ float tile\[", text)
    # sm_1x (half-warp phases) counts other wavefronts than sm_90 for the same instructions: marked
    assert page.cells(data_device="sm_1x", data_key="wavefronts")
    assert any("differs" in a.get("class", "") for a, _ in page.cells(data_device="sm_1x"))
    assert not any("differs" in a.get("class", "") for a, _ in page.cells(data_device="sm_90"))


def test_source_lines_expand_to_their_instructions(transpose_page):
    text, document = transpose_page
    page = Page(text)
    result = next(r for r in document["results"] if r["kernel"] == "transpose_unpadded" and r["device"] == "sm_90")
    details = [a for tag, a in page.elements if tag == "details" and a.get("data-kernel-of") == "transpose_unpadded"]
    assert sorted(int(a["data-line"]) for a in details) == sorted(
        {int(i["source"].rsplit(":", 1)[1]) for i in result["instructions"]})
    assert "tile[threadIdx.x][threadIdx.y + j]" in text


def test_text_is_escaped_and_relative_sources_resolve_beside_the_input(tmp_path):
    ptx = tmp_path / "transpose.ptx"
    ptx.write_text(TRANSPOSE.read_text().replace('"/work/main/tests/fixtures/emulate/transpose.cu"', '"evil.cu"'))
    lines = (FIXTURES / "emulate" / "transpose.cu").read_text().splitlines()
    lines[16] = lines[16] + " // </code></details><script>alert(1)</script> & <b>"
    (tmp_path / "evil.cu").write_text("\n".join(lines) + "\n")
    out = tmp_path / "r.html"
    run("analyze", ptx, *TRANSPOSE_LAUNCH, "--level", "ptx", "-o", out)
    text = out.read_text()
    assert "<script>alert(1)</script>" not in text and "&lt;script&gt;alert(1)&lt;/script&gt; &amp; &lt;b&gt;" in text
    assert Page(text).errors == []
    (tmp_path / "evil.cu").unlink()
    run("analyze", ptx, *TRANSPOSE_LAUNCH, "--level", "ptx", "-o", out)
    text = out.read_text()
    assert "source not found: evil.cu (looked for: " in text
    assert "the instruction listing" in text                        # the lines fall back to the instructions


def test_format_html_prints_the_same_page(transpose_page, tmp_path):
    out = tmp_path / "r.html"
    run("analyze", TRANSPOSE, *TRANSPOSE_LAUNCH, "--level", "ptx", "-o", out)
    printed = run("analyze", TRANSPOSE, *TRANSPOSE_LAUNCH, "--level", "ptx", "--format", "html")
    assert printed == out.read_text()
    assert printed.startswith("<!DOCTYPE html>")


def test_bad_html_pictures_is_one_line(tmp_path):
    result = CliRunner().invoke(app, ["analyze", str(TRANSPOSE), *TRANSPOSE_LAUNCH, "-o", str(tmp_path / "r.html"),
                                      "--html-pictures", "many"])
    assert result.exit_code == 2 and "--html-pictures" in result.output and not (tmp_path / "r.html").exists()


def test_the_4096_cubed_gemm_report_is_under_5_mb_with_every_picture(tmp_path):
    out = tmp_path / "gemm.html"
    run("analyze", HGEMM, *HGEMM_LAUNCH, "--level", "ptx", "-d", "sm_90", "-d", "sm_75", "--suggest",
        "--html-pictures", "all", "-o", out)
    text = out.read_text()
    assert out.stat().st_size <= 5 * 1024 * 1024
    page = Page(text)
    assert page.errors == [] and not re.search(r"https?://", text)
    assert len([a for tag, a in page.elements if tag == "figure"]) >= 2 * 16      # 16 ldmatrix × 2 devices at least
    assert "hgemm_mma_stages_tn&lt;2, 0&gt;" in text                 # the demangled name, escaped
    assert "p3 wf1" in text                                          # ldmatrix.x4: a phase per matrix, drawn


@pytest.mark.skipif(tools.locate("ptxas") is None or tools.locate("nvdisasm") is None,
                    reason="the SASS level needs ptxas (CUDA toolkit) and nvdisasm (nvidia-cuda-nvdisasm)")
def test_sass_level_lines_show_what_ptxas_did(tmp_path):
    out = tmp_path / "m.html"
    run("analyze", FIXTURES / "cuda" / "matmul.sm_90.ptx", "-k", ".*Li32.*", "--block", "32,32", "--grid", "4,4",
        "--param", "3=128", "-o", out)
    text = out.read_text()
    assert "<dt>level</dt><dd>sass</dd>" in text and "SASS level: ptxas -arch=sm_90" in text
    # the line's instruction rows say, beside the pc, what ptxas did
    assert re.search(r'pc 0x2e0 \(PTX L\d+\)</span> LDS\.128 [^<]*<div class="rewrite">ptxas fused 4 ld\.shared\.f32 '
                     r'\(PTX lines 253, 256, 259, 262, matmul\.cu:17\) into LDS\.128', text)


@pytest.mark.skipif(tools.locate("ptxas") is None or tools.locate("nvdisasm") is None,
                    reason="the SASS level needs ptxas (CUDA toolkit) and nvdisasm (nvidia-cuda-nvdisasm)")
def test_sass_level_suggestions_name_the_tile_the_line_indexes(tmp_path):
    out = tmp_path / "s.html"
    run("analyze", TRANSPOSE, *TRANSPOSE_LAUNCH, "-k", "transpose_unpadded", "--suggest", "-o", out)
    text = out.read_text()
    assert "<dt>level</dt><dd>sass</dd>" in text
    assert ("declaration to edit: <code>transpose.cu:8</code> <code>__shared__ float tile[TILE_DIM][TILE_DIM];"
            "</code>") in text


@pytest.mark.skipif(tools.locate("ptxas") is None or tools.locate("nvdisasm") is None,
                    reason="the SASS level needs ptxas (CUDA toolkit) and nvdisasm (nvidia-cuda-nvdisasm)")
def test_devices_of_several_architectures_get_a_section_per_program(tmp_path):
    """sm_90 counts the SASS, sm_80 the PTX (ptxas cannot assemble sm_90 PTX for it): two analyses per kernel,
    each section with its own devices and suggestions, the numbers still the JSON's."""
    text, document = html_and_json(tmp_path, TRANSPOSE, *TRANSPOSE_LAUNCH, "-d", "sm_90", "-d", "sm_80", "--suggest")
    page = Page(text)
    assert page.errors == [] and _numbers(page) == _json_numbers(document)
    sections = [a["data-kernel"] for tag, a in page.elements if tag == "section"]
    assert sorted(sections) == sorted(["transpose_unpadded", "transpose_padded"] * 2)
    assert text.count("<h3>Suggestions (sm_90)</h3>") == 2 and text.count("<h3>Suggestions (sm_80)</h3>") == 2
    assert {a["data-device"] for tag, a in page.elements if tag == "figure"} == {"sm_90", "sm_80"}


def test_compare_ncu_page_marks_mismatches(tmp_path):
    report = tmp_path / "float4_column.csv"
    text = (NCU / "float4_column.csv").read_text()
    report.write_text(text)
    ptx = FIXTURES / "cuda" / "wide.sm_90.ptx"
    options = ["-k", "_Z13float4_columnPK6float4PS_", "--block", "64"]
    out = tmp_path / "n.html"
    run("compare-ncu", report, ptx, *options, "-o", out)
    page = Page(out.read_text())
    assert page.errors == []
    assert [a for a, _ in page.cells() if "data-mismatch" in a] == []
    assert page.cells(data_pc="0x0150 LDS.128 R8, [R8]")
    # the same report with one measured count changed: that instruction (and the totals) are marked
    rows = list(csv.reader(io.StringIO(text)))
    header = next(r for r in rows if "L1 Wavefronts Shared" in r)
    load = next(r for r in rows if len(r) > 1 and r[1].strip() == "LDS.128 R8, [R8]")
    load[header.index("L1 Wavefronts Shared")] = "65"
    changed = io.StringIO()
    csv.writer(changed, quoting=csv.QUOTE_ALL, lineterminator="\n").writerows(rows)
    report.write_text(changed.getvalue())
    run("compare-ncu", report, ptx, *options, "-o", out)
    page = Page(out.read_text())
    marked = {next(k for k in a if k.startswith("data-") and k not in ("data-rank", "data-mismatch"))
              for a, _ in page.cells() if "data-mismatch" in a}
    assert {"data-pc", "data-total", "data-kind"} <= marked
    assert any("mismatch" in a.get("class", "") for a, _ in page.cells(data_key="wavefronts"))


def test_compare_ncu_refuses_other_outputs(tmp_path):
    result = CliRunner().invoke(app, ["compare-ncu", str(NCU / "float4_column.csv"),
                                      str(FIXTURES / "cuda" / "wide.sm_90.ptx"), "-o", str(tmp_path / "n.csv")])
    assert result.exit_code == 2 and "n.csv" in result.output and ".html" in result.output


def test_explain_header_and_svg_title_name_the_demangled_kernel_and_the_source_line(tmp_path):
    svg = tmp_path / "x.svg"
    shutil.copy(FIXTURES / "scale" / "hgemm_stages.cu", tmp_path / "hgemm_stages.cu")
    out = run("explain", HGEMM, *HGEMM_LAUNCH[:2], *HGEMM_LAUNCH[2:], "-i", ":61", "--level", "ptx", "--svg", svg)
    first = out.splitlines()[0]
    assert first.startswith("explain hgemm_mma_stages_tn<2, 0> [") and "_Z19" not in first
    assert "at hgemm_stages.cu:61: LDMATRIX_X4(" in out
    title = re.search(r"<title>(.*?)</title>", svg.read_text()).group(1)
    assert title.startswith("hgemm_mma_stages_tn&lt;2, 0&gt; [") and title.endswith("at hgemm_stages.cu:61")


def test_triton_kernels_show_their_python_source(tmp_path, monkeypatch):
    """A Triton kernel's line info names its Python file: the view reads it like a .cu (here a stand-in whose
    line k says so, since the fixture's script has changed since its PTX was compiled)."""
    ptx = tmp_path / "tt_transpose.ptx"
    text = (FIXTURES / "triton" / "tt_transpose.ptx").read_text()
    ptx.write_text(re.sub(r'(\.file\s+1\s+)"[^"]*"', r'\1"triton_ptx.py"', text))
    (tmp_path / "triton_ptx.py").write_text("".join(f"x = tl.load(p + {k})  # python line {k}\n"
                                                    for k in range(1, 400)))
    monkeypatch.chdir(tmp_path)
    out = tmp_path / "t.html"
    run("analyze", "tt_transpose.ptx", "--grid", "4,4", "--level", "ptx", "-o", out)
    page = Page(out.read_text())
    assert [a["data-file"] for tag, a in page.elements if tag == "div" and "data-file" in a] == ["triton_ptx.py"]
    lines = {int(a["data-line"]) for tag, a in page.elements if tag == "details"}
    assert lines
    written = out.read_text()
    for line in lines:
        assert f"x = tl.load(p + {line})  # python line {line}</code></summary>" in written