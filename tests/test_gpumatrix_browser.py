"""The "By GPU model" section in headless Chromium: a merge of a second model's results, seen on the built page.

Two GPU models' claims (ours on the H200, a lab's merged B200 store) render as one matrix; a claim stated for the
H200 shows "not applicable" on the B200, never a failure; a merged figure names its origin.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

pytestmark = pytest.mark.browser

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
if CHROMIUM is None:
    pytest.skip("Debian's chromium is not installed (apt-get install chromium; .ci/run installs it)",
                allow_module_level=True)
from playwright import sync_api as playwright  # noqa: E402  (after the skip: CI without chromium needs no driver)

from kwiki.results.merge import merge  # noqa: E402
from kwiki.site.stage import build_site  # noqa: E402

FIXTURES = Path(__file__).resolve().parent / "fixtures" / "merge"
SHOTS = Path(__file__).resolve().parent.parent / "test-output" / "site"
ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
        "--disable-component-update", "--disable-sync", "--no-first-run"]





def test_the_page_shows_each_claim_per_gpu_model_with_its_origin(tmp_path, served):
    root = tmp_path / "project"
    shutil.copytree(FIXTURES / "project", root)
    merge(root, "lab-b", [FIXTURES / "incoming" / "nvidia-b200.jsonl", FIXTURES / "incoming" / "nvidia-h200.jsonl"])
    build_site(root, root / "site", strict=True)
    SHOTS.mkdir(parents=True, exist_ok=True)
    with served(root / "site") as url, playwright.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        try:
            page = browser.new_page()
            page.goto(url + "nap/")
            table = page.locator("#by-gpu-model + .kw-gpu-matrix table")
            table.scroll_into_view_if_needed()
            assert table.locator("th").all_inner_texts() == ["claim", "B200", "H200"]
            rows = {r.locator("td").first.inner_text(): r.locator("td").all_inner_texts()[1:]
                    for r in table.locator("tbody tr").all()}
            b200, h200 = rows["nap-time"]
            assert b200.startswith("not applicable") and "stated for H200" in b200
            assert h200.startswith("reproduced") and "5.000 us" in h200 and "from" not in h200
            b200, h200 = rows["nap-vs-nap2"]
            assert b200.startswith("worse") and "from lab-b" in b200
            assert h200.startswith("reproduced")  # their H200 run ('worse', 6 us) never stands in for ours
            not_applicable = table.locator(".kw-v-none").first
            assert not_applicable.is_visible()
            page.screenshot(path=str(SHOTS / "gpu-matrix.png"), full_page=True)
        finally:
            browser.close()
