"""End to end in a real browser: `streamlit run` on a loopback port, headless Chromium via
selenium, wait for a chart, move the p_s slider with the keyboard, check E[tau] follows; open the
Cost tab and come back (only the open tab is drawn; the slider's value stays).

Set GOOSE_APP_SCREENSHOT=docs/app-screenshot.png to also keep the screenshot in the repo.
"""
from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import urllib.request
from pathlib import Path

import pytest

from goose_theory.acceptance import Acceptance
from goose_theory.optimize import build_topology
from goose_theory.yields import exact_yield

pytestmark = [pytest.mark.browser, pytest.mark.slow]

ROOT = Path(__file__).resolve().parent.parent
CHROMIUM, CHROMEDRIVER = "/usr/bin/chromium", "/usr/bin/chromedriver"
CHROME_FLAGS = ("--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                "--disable-component-update", "--disable-sync", "--no-first-run", "--window-size=1500,2400")
START_TIMEOUT = 120  # cold start: python imports, numba cache loads, first script run


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _healthy(url: str) -> bool:
    try:
        with urllib.request.urlopen(f"{url}/_stcore/health", timeout=2) as r:
            return r.status == 200
    except OSError:
        return False


@pytest.fixture
def server(tmp_path):
    """The app under `streamlit run`, headless, on a free loopback port; stopped by its pid."""
    port = _free_port()
    log = open(tmp_path / "streamlit.log", "wb")
    proc = subprocess.Popen(
        [sys.executable, "-m", "streamlit", "run", str(ROOT / "app" / "explorer.py"),
         "--server.port", str(port), "--server.address", "127.0.0.1", "--server.headless", "true",
         "--browser.gatherUsageStats", "false", "--server.fileWatcherType", "none"],
        cwd=ROOT, stdout=log, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}"
    try:
        from selenium.webdriver.support.ui import WebDriverWait
        # poll the server's own health endpoint (an event to wait for, not a fixed sleep)
        WebDriverWait(None, START_TIMEOUT, poll_frequency=0.2).until(
            lambda _: _healthy(url) or proc.poll() is not None)
        assert proc.poll() is None, (tmp_path / "streamlit.log").read_text(errors="replace")
        yield url
    finally:
        os.kill(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            os.kill(proc.pid, signal.SIGKILL)
            proc.wait(timeout=20)
        log.close()


@pytest.fixture
def driver(tmp_path):
    if not (os.path.exists(CHROMIUM) and os.path.exists(CHROMEDRIVER)):
        pytest.fail("chromium and chromedriver are required (Debian packages chromium, chromium-driver; `make browser`, which `make test` runs)")
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for flag in CHROME_FLAGS:
        options.add_argument(flag)
    options.add_argument(f"--user-data-dir={tmp_path / 'chrome-profile'}")
    drv = webdriver.Chrome(service=Service(CHROMEDRIVER), options=options)
    try:
        yield drv
    finally:
        drv.quit()


def _metric(drv, label: str) -> str:
    """The value text of the st.metric whose label is ``label`` ('' while it is not drawn)."""
    from selenium.webdriver.common.by import By

    for m in drv.find_elements(By.CSS_SELECTOR, '[data-testid="stMetric"]'):
        labels = m.find_elements(By.CSS_SELECTOR, '[data-testid="stMetricLabel"]')
        if labels and labels[0].text.strip() == label:
            values = m.find_elements(By.CSS_SELECTOR, '[data-testid="stMetricValue"]')
            return values[0].text.strip() if values else ""
    return ""


def _tab(drv, label: str):
    from selenium.webdriver.common.by import By

    return next(t for t in drv.find_elements(By.CSS_SELECTOR, '[data-testid="stTab"]') if t.text.strip() == label)


def test_slider_moves_expected_tau_in_a_real_browser(server, driver, tmp_path):
    from selenium.webdriver.common.action_chains import ActionChains
    from selenium.common.exceptions import StaleElementReferenceException
    from selenium.webdriver.common.by import By
    from selenium.webdriver.common.keys import Keys
    from selenium.webdriver.support import expected_conditions as EC
    from selenium.webdriver.support.ui import WebDriverWait

    driver.get(server)
    # a rerun replaces elements while _metric reads them: a stale one means "not settled yet"
    wait = WebDriverWait(driver, START_TIMEOUT, ignored_exceptions=(StaleElementReferenceException,))
    # a chart is drawn once vega-embed has rendered its canvas (or svg)
    wait.until(EC.presence_of_element_located(
        (By.CSS_SELECTOR, '[data-testid="stVegaLiteChart"] canvas, [data-testid="stVegaLiteChart"] svg')))
    wait.until(lambda d: _metric(d, "exact E[tau]") != "")
    before = _metric(driver, "exact E[tau]")
    acc0 = Acceptance.parse(0.5, 0.05)
    assert before == f"{exact_yield(build_topology('optimal', acc0, budget=60).topology, acc0).expected_tau:.4f}"

    slider = driver.find_element(By.CSS_SELECTOR, '[data-testid="stSidebar"] [data-testid="stSlider"]')
    assert "p_s" in slider.text
    value_input = slider.find_element(By.CSS_SELECTOR, 'input[type="range"]')  # react-aria's hidden input
    thumb = value_input.find_element(By.XPATH, "../..")  # the visible thumb that wraps it
    ActionChains(driver).click(thumb).perform()  # focuses the thumb without moving it
    for _ in range(5):
        ActionChains(driver).send_keys(Keys.ARROW_RIGHT).perform()
    wait.until(lambda d: _metric(d, "exact E[tau]") not in ("", before))
    p_s = float(value_input.get_attribute("value"))
    assert p_s == pytest.approx(0.55)
    acc = Acceptance.parse(p_s, 0.05)
    want = f"{exact_yield(build_topology('optimal', acc, budget=60).topology, acc).expected_tau:.4f}"
    wait.until(lambda d: _metric(d, "exact E[tau]") == want)  # the page settles on the library's value

    # only the open tab runs: a click on a tab reruns the page with that tab's contents
    _tab(driver, "Cost").click()
    wait.until(lambda d: _metric(d, "best budget") != "" and _metric(d, "exact E[tau]") == "")
    _tab(driver, "What-if").click()
    wait.until(lambda d: _metric(d, "exact E[tau]") == want and _metric(d, "best budget") == "")

    assert not driver.find_elements(By.CSS_SELECTOR, '[data-testid="stException"]'), \
        driver.find_element(By.CSS_SELECTOR, '[data-testid="stException"]').text
    shot = tmp_path / "app.png"
    assert driver.save_screenshot(str(shot)) and shot.stat().st_size > 10_000
    keep = os.environ.get("GOOSE_APP_SCREENSHOT")
    if keep:
        shutil.copyfile(shot, ROOT / keep)
