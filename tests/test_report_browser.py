"""The HTML report in a real browser, as a user opens it: headless Chromium (Debian's ``chromium`` and
``chromium-driver``) driven by Selenium.  Skipped, with the reason, where no browser is installed; CI installs
it (.ci/run).  ``TRACECONF_SCREENSHOT=docs/report.png`` makes the screenshot test write the README's picture.

Every page is opened from disk (``file://``), as a report is: nothing is served.
"""

from __future__ import annotations

import json
import os
import re
import shutil
from pathlib import Path

import pytest

from test_report_html import HGEMM, HGEMM_LAUNCH, NCU, TRANSPOSE, TRANSPOSE_LAUNCH, _json_numbers, run
from conftest import FIXTURES

webdriver = pytest.importorskip("selenium.webdriver", reason="selenium is not installed (pip install -e '.[test]')")
from selenium.webdriver.chrome.options import Options  # noqa: E402
from selenium.webdriver.chrome.service import Service  # noqa: E402
from selenium.webdriver.common.by import By  # noqa: E402
from selenium.webdriver.support.ui import Select  # noqa: E402

BROWSER = next((found for name in ("chromium", "chromium-browser", "google-chrome") if (found := shutil.which(name))),
               None)
DRIVER = shutil.which("chromedriver")
pytestmark = pytest.mark.skipif(BROWSER is None or DRIVER is None,
                                reason="no headless browser: apt-get install chromium chromium-driver")
PNG = b"\x89PNG\r\n\x1a\n"


def open_browser(javascript: bool = True):
    options = Options()
    options.binary_location = BROWSER
    for argument in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--disable-gpu",
                     "--window-size=1400,1600", "--force-device-scale-factor=1"):
        options.add_argument(argument)
    if not javascript:
        options.add_experimental_option("prefs", {"profile.managed_default_content_settings.javascript": 2})
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    # the driver is named: Selenium must not look for (download) one
    return webdriver.Chrome(service=Service(DRIVER), options=options)


@pytest.fixture(scope="module")
def browser():
    driver = open_browser()
    yield driver
    driver.quit()


def errors(driver) -> list:
    return [entry for entry in driver.get_log("browser") if entry["level"] in ("SEVERE", "ERROR")]


def show(driver, path: Path) -> None:
    driver.get(path.resolve().as_uri())
    assert driver.execute_script("return document.readyState") == "complete"


@pytest.fixture(scope="module")
def transpose(tmp_path_factory):
    """Two kernels (one conflicted, one padded) on two devices, with suggestions: page and JSON of one run."""
    folder = tmp_path_factory.mktemp("browser")
    options = [*TRANSPOSE_LAUNCH, "--level", "ptx", "-d", "sm_90", "-d", "sm_1x"]
    run("analyze", TRANSPOSE, *options, "--suggest", "-o", folder / "transpose.html")
    return folder / "transpose.html", json.loads(run("analyze", TRANSPOSE, *options, "--format", "json"))


def shown_numbers(driver) -> dict:
    """(kernel/instruction, device, key) → the number as the page shows it (rendered text, commas removed)."""
    cells = driver.execute_script(
        "return Array.from(document.querySelectorAll('table.hotspots td[data-row][data-device]')).map("
        "c => [c.dataset.row, c.dataset.device, c.dataset.key, c.innerText])")
    return {(row, device, key): int(text.replace(",", "")) for row, device, key, text in cells}


def test_console_errors_are_seen(browser, tmp_path):
    """The check below can fail: an error in a page does reach the log it reads."""
    page = tmp_path / "broken.html"
    page.write_text("<!DOCTYPE html><html><body><script>console.error('probe'); undefinedCall();</script>"
                    "</body></html>")
    show(browser, page)
    assert len(errors(browser)) == 2


def test_report_opens_without_errors_and_shows_the_json_numbers(browser, transpose):
    page, document = transpose
    show(browser, page)
    assert errors(browser) == []
    assert shown_numbers(browser) == _json_numbers(document)
    # the pictures render (inline SVG laid out with a size)
    sizes = browser.execute_script("return Array.from(document.querySelectorAll('figure svg')).map("
                                   "s => s.getBoundingClientRect().width)")
    assert sizes and min(sizes) > 500


def test_numbers_are_readable_without_javascript(transpose):
    page, document = transpose
    driver = open_browser(javascript=False)
    try:
        show(driver, page)
        cells = driver.find_elements(By.CSS_SELECTOR, "table.hotspots td[data-row][data-key=excess_wavefronts]")
        shown = {(c.get_attribute("data-row"), c.get_attribute("data-device")): int(c.text.replace(",", ""))
                 for c in cells}
        expected = {(row, device): value for (row, device, key), value in _json_numbers(document).items()
                    if key == "excess_wavefronts"}
        assert shown == expected
        assert not driver.find_element(By.ID, "kernel-filter").is_displayed()   # the filter needs the script
    finally:
        driver.quit()


def test_heat_follows_the_hotspot_order(browser, tmp_path):
    """The GEMM at 4096³ on one device: the rows come in the JSON's excess order, the heat bars shrink down
    the table, and the source lines' heat is the order of their summed excess."""
    page = tmp_path / "gemm.html"
    run("analyze", HGEMM, *HGEMM_LAUNCH, "--level", "ptx", "-o", page)
    (result,) = json.loads(run("analyze", HGEMM, *HGEMM_LAUNCH, "--level", "ptx", "--format", "json"))["results"]
    show(browser, page)
    assert errors(browser) == []
    rows = browser.execute_script(
        "return Array.from(document.querySelectorAll('table.hotspots tbody tr')).map(r => ["
        "Number(r.dataset.instruction), r.querySelector('td.heat .bar') ? "
        "r.querySelector('td.heat .bar').getBoundingClientRect().width : 0])")
    by_id = {i["instruction"]: i for i in result["instructions"]}
    ranked = sorted(by_id.values(), key=lambda i: (-i["excess_wavefronts"], -i["wavefronts"], i["instruction"]))
    assert [ident for ident, _ in rows] == [i["instruction"] for i in ranked]
    widths = [width for _, width in rows]
    assert widths == sorted(widths, reverse=True) and widths[0] > widths[-1]
    lines = browser.execute_script(
        "return Array.from(document.querySelectorAll('details.line')).map(d => ["
        "Number(d.dataset.line), d.querySelector('.bar').getBoundingClientRect().width])")
    excess: dict[int, int] = {}
    for instruction in result["instructions"]:
        line = int(instruction["source"].rsplit(":", 1)[1])
        excess[line] = excess.get(line, 0) + instruction["excess_wavefronts"]
    hottest = [line for line, _ in sorted(lines, key=lambda item: -item[1])]
    # then the A and B copies (lines 53, 54: 16 wavefronts per execution from their global sources, the pointers
    # taken at cudaMalloc's alignment, as the Source page counts them), alike
    order = sorted(excess, key=lambda line: -excess[line])
    assert hottest[0] == order[0] == 61 and set(hottest[1:3]) == set(order[1:3]) == {53, 54}


def test_sorting_and_the_kernel_filter(browser, transpose):
    page, _ = transpose
    show(browser, page)
    table = browser.find_element(By.CSS_SELECTOR, "section[data-kernel=transpose_unpadded] table.hotspots")
    headers = table.find_elements(By.CSS_SELECTOR, "thead tr:last-child th")
    wavefronts = next(h for h in headers if h.text == "wavefronts")          # sm_90's, the first device
    column = headers.index(wavefronts)

    def values():
        return [int(r.find_elements(By.TAG_NAME, "td")[column].text.replace(",", ""))
                for r in table.find_elements(By.CSS_SELECTOR, "tbody tr")]

    wavefronts.click()
    assert values() == sorted(values(), reverse=True) and wavefronts.get_attribute("aria-sort") == "descending"
    wavefronts.click()
    assert values() == sorted(values()) and values()[0] < values()[-1]
    kind = next(h for h in headers if h.text == "kind")
    kind.click()
    kinds = [r.find_elements(By.TAG_NAME, "td")[headers.index(kind)].text for r in
             table.find_elements(By.CSS_SELECTOR, "tbody tr")]
    assert kinds == sorted(kinds, reverse=True)

    Select(browser.find_element(By.CSS_SELECTOR, "#kernel-filter select")).select_by_value("transpose_padded")
    assert browser.find_element(By.ID, "k0").is_displayed() != browser.find_element(By.ID, "k1").is_displayed()
    padded = browser.find_element(By.CSS_SELECTOR, "section[data-kernel=transpose_padded]")
    assert padded.is_displayed() and not table.is_displayed()
    assert errors(browser) == []


def test_a_source_line_opens_to_its_instructions(browser, transpose):
    page, _ = transpose
    show(browser, page)
    line = browser.find_element(By.CSS_SELECTOR, "section[data-kernel=transpose_unpadded] details.line[data-line='17']")
    instructions = line.find_element(By.CSS_SELECTOR, "table.instructions")
    assert not instructions.is_displayed()
    line.find_element(By.TAG_NAME, "summary").click()
    assert instructions.is_displayed() and len(instructions.find_elements(By.CSS_SELECTOR, "tbody tr")) == 4
    link = instructions.find_element(By.PARTIAL_LINK_TEXT, "picture (sm_90)")
    link.click()
    target = browser.execute_script("return location.hash")
    assert target.startswith("#pic-") and browser.find_element(By.ID, target[1:]).is_displayed()


def test_compare_ncu_page_in_the_browser(browser, tmp_path):
    page = tmp_path / "ncu.html"
    run("compare-ncu", NCU / "float4_column.csv", FIXTURES / "cuda" / "wide.sm_90.ptx",
        "-k", "_Z13float4_columnPK6float4PS_", "--block", "64", "-o", page)
    show(browser, page)
    assert errors(browser) == []
    verdicts = [c.text for c in browser.find_elements(By.CSS_SELECTOR, "table.compare tbody tr td:last-child")]
    assert verdicts and set(verdicts) == {"="}


def test_screenshot(browser, tmp_path, monkeypatch):
    """The README's picture: the transpose's report, the conflicted kernel's source line opened."""
    page = tmp_path / "report.html"
    # the kernel as a user has it: the .ptx nvcc wrote beside its .cu, the line info naming the .cu
    text = TRANSPOSE.read_text()
    (tmp_path / "transpose.ptx").write_text(re.sub(r'(\.file\s+1\s+)"[^"]*"', r'\1"transpose.cu"', text))
    shutil.copy(TRANSPOSE.with_suffix(".cu"), tmp_path / "transpose.cu")
    monkeypatch.chdir(tmp_path)
    run("analyze", "transpose.ptx", *TRANSPOSE_LAUNCH, "-k", "transpose_unpadded", "--suggest", "-o", page)
    show(browser, page)
    browser.set_window_size(1280, 1500)
    browser.find_element(By.CSS_SELECTOR, "details.line[data-line='17'] summary").click()
    browser.execute_script("document.querySelector('section.kernel h2').scrollIntoView()")
    target = Path(os.environ.get("TRACECONF_SCREENSHOT") or tmp_path / "report.png")
    assert browser.save_screenshot(str(target))
    data = target.read_bytes()
    assert data.startswith(PNG) and int.from_bytes(data[16:20], "big") >= 1000
    assert errors(browser) == []
