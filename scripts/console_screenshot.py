"""Screenshot of the console serving the default pipeline, for the README.

    .venv/bin/python scripts/console_screenshot.py [--out docs/images/console.png]

Starts a throw-away redis-server and ``streamseg serve pipeline.yaml`` on
free loopback ports, waits until both cameras stream and an alert is in
the timeline, then opens the console in Debian's headless Chromium (the
``chromium`` and ``chromium-driver`` packages of ``scripts/setup.sh
--dev``; nothing is downloaded) and saves a PNG of the page once every live
tile has painted a frame (not before: an image that has not painted yet is
an empty tile), with the newest event open beside its snapshot.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def get_json(url: str) -> dict:  # type: ignore[type-arg]
    try:
        with urllib.request.urlopen(url, timeout=5) as resp:
            return dict(json.loads(resp.read()))
    except Exception:
        return {}


def wait(predicate, timeout: float, what: str) -> None:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(0.5)
    sys.exit(f"console_screenshot: timed out waiting for {what}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--out", default=str(REPO / "docs" / "images" / "console.png"))
    parser.add_argument("--pipeline", default=str(REPO / "pipeline.yaml"))
    args = parser.parse_args()
    redis_exe, chromium = shutil.which("redis-server"), shutil.which("chromium")
    if redis_exe is None or chromium is None or not Path("/usr/bin/chromedriver").exists():
        sys.exit("console_screenshot: needs redis-server, chromium and chromium-driver")
    redis_port, http_port = free_port(), free_port()
    with tempfile.TemporaryDirectory() as tmp:
        redis = subprocess.Popen(
            [redis_exe, "--port", str(redis_port), "--bind", "127.0.0.1", "--save", "",
             "--dir", tmp],
            stdout=subprocess.DEVNULL,
        )  # fmt: skip
        env = {
            **os.environ,
            "STREAMSEG_REDIS_URL": f"redis://127.0.0.1:{redis_port}/0",
            "STREAMSEG_HTTP_PORT": str(http_port),
            "STREAMSEG_HTTP_TOKEN": "",
        }
        serve = subprocess.Popen(
            [sys.executable, "-m", "streamseg", "serve", args.pipeline, "--no-status"],
            cwd=REPO,
            env=env,
            start_new_session=True,
        )
        base = f"http://127.0.0.1:{http_port}"
        try:
            wait(lambda: get_json(f"{base}/readyz").get("ready"), 300, "serve to be ready")
            wait(lambda: get_json(f"{base}/api/events").get("events"), 120, "an alert")
            time.sleep(3)  # a few more frames and health samples
            shoot(chromium, base, Path(args.out))
        finally:
            os.killpg(serve.pid, signal.SIGTERM)
            serve.wait(60)
            redis.terminate()
            redis.wait(10)
    print(f"console_screenshot: wrote {args.out}")
    return 0


# True once every live tile's image has painted a frame that is not one flat colour.
PAINTED_JS = """
const imgs = Array.from(document.querySelectorAll("article.tile img"));
if (imgs.length === 0) return false;
return imgs.every((img) => {
  if (!img.complete || !img.naturalWidth) return false;
  const c = document.createElement("canvas");
  c.width = img.naturalWidth; c.height = img.naturalHeight;
  const g = c.getContext("2d");
  g.drawImage(img, 0, 0);
  const d = g.getImageData(0, 0, c.width, c.height).data;
  for (let i = 4; i < d.length; i += 4) {
    if (d[i] !== d[0] || d[i + 1] !== d[1] || d[i + 2] !== d[2]) return true;
  }
  return false;
});
"""


def shoot(chromium: str, url: str, out: Path) -> None:
    """The page once every live tile has painted, an event is open and its snapshot shown."""
    os.environ["SE_OFFLINE"] = "true"
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = chromium
    for arg in ("--headless=new", "--no-sandbox", "--disable-gpu", "--window-size=1100,900"):
        options.add_argument(arg)
    driver = webdriver.Chrome(service=Service("/usr/bin/chromedriver"), options=options)
    try:
        driver.get(url)
        wait(lambda: driver.execute_script(PAINTED_JS), 30, "the live tiles to paint")
        wait(lambda: driver.find_elements("css selector", "#event-list li"), 30, "an event")
        first = driver.find_elements("css selector", "#event-list li")[0]
        driver.execute_script("arguments[0].click()", first)  # no mouse left hovering a row
        snap = driver.find_element("id", "event-snapshot")
        wait(lambda: driver.execute_script("return arguments[0].naturalWidth", snap), 30,
             "the event's snapshot")  # fmt: skip
        time.sleep(1.0)  # the health charts take their second sample
        wait(lambda: driver.execute_script(PAINTED_JS), 10, "the live tiles")  # still painted
        out.parent.mkdir(parents=True, exist_ok=True)
        driver.save_screenshot(str(out))
    finally:
        driver.quit()


if __name__ == "__main__":
    raise SystemExit(main())
