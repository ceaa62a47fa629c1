"""Headless Chromium from Debian (``chromium``, ``chromium-driver``) driven by Selenium.

Nothing is downloaded: the driver is ``/usr/bin/chromedriver`` and Selenium
Manager is kept offline. ``browser()`` skips the test with the reason when
the Debian packages are missing (``scripts/setup.sh --dev`` installs them).
Screenshots go to ``build/test-artefacts/console/`` (or
``$STREAMSEG_TEST_ARTEFACTS``), kept after the run.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

__all__ = ["ARTEFACTS", "available", "browser"]

REPO = Path(__file__).resolve().parents[2]
ARTEFACTS = Path(os.environ.get("STREAMSEG_TEST_ARTEFACTS", REPO / "build" / "test-artefacts"))
CHROMEDRIVER = "/usr/bin/chromedriver"


def _chromium() -> str | None:
    for name in ("chromium", "chromium-browser"):
        path = shutil.which(name)
        if path:
            return path
    return None


def available() -> bool:
    """Whether Debian's chromium and chromium-driver are installed."""
    return _chromium() is not None and Path(CHROMEDRIVER).exists()


@contextmanager
def browser(width: int = 1100, height: int = 800) -> Iterator[Any]:
    """A headless Chromium WebDriver; closed afterwards."""
    binary = _chromium()
    if binary is None or not available():
        pytest.skip("needs Debian's chromium and chromium-driver (scripts/setup.sh --dev)")
    os.environ["SE_OFFLINE"] = "true"  # Selenium Manager must not fetch a driver or a browser
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = binary
    for arg in (
        "--headless=new",
        "--no-sandbox",  # tests run as root
        "--disable-gpu",
        "--disable-dev-shm-usage",
        f"--window-size={width},{height}",
    ):
        options.add_argument(arg)
    driver = webdriver.Chrome(service=Service(executable_path=CHROMEDRIVER), options=options)
    try:
        yield driver
    finally:
        driver.quit()


def screenshot(driver: Any, name: str) -> Path:
    """Save a PNG of the page as a test artefact; its path."""
    folder = ARTEFACTS / "console"
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{name}.png"
    driver.save_screenshot(str(path))
    return path
