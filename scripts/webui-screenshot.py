#!/usr/bin/env python3
"""Screenshot of llama-server's built-in web UI answering a chat message over an oscar2 cache.

Starts our llama-server on 127.0.0.1 with the given model and `-ctk oscar2 -ctv oscar2`, opens
the page in Debian's headless Chromium (selenium + chromedriver, as tests/test_webui.py does),
sends one message, waits until the answer has finished streaming and saves a PNG.

    .venv/bin/python scripts/webui-screenshot.py MODEL.gguf OUT.png [--message TEXT] [-- SERVER ARGS]
"""
from __future__ import annotations

import argparse
import json
import sys
import time
import urllib.request
from pathlib import Path

from oscar.eval import llama_server

CHROMIUM = "/usr/bin/chromium"
CHROMEDRIVER = "/usr/bin/chromedriver"


def _busy(url: str) -> bool:
    with urllib.request.urlopen(url + "/slots", timeout=10) as r:
        return any(s.get("is_processing") for s in json.loads(r.read()))


def main(argv: list[str]) -> int:
    extra: list[str] = []
    if "--" in argv:
        i = argv.index("--")
        argv, extra = argv[:i], argv[i + 1:]
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("model", type=Path, help="GGUF to serve (a converted one carries its rotations)")
    ap.add_argument("out", type=Path, help="PNG to write")
    ap.add_argument("--message", default="Write a Python function that returns the n-th Fibonacci number.")
    ap.add_argument("--size", default="1000,760", help="window size in pixels, W,H")
    a = ap.parse_args(argv)
    if not a.model.is_file():
        ap.error(f"{a.model}: no such model file")
    for exe, pkg in ((CHROMIUM, "chromium"), (CHROMEDRIVER, "chromium-driver")):
        if not Path(exe).exists():
            ap.error(f"{exe} is missing: install Debian's {pkg} (scripts/test-deps.sh does)")

    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service
    from selenium.webdriver.common.by import By
    from selenium.webdriver.common.keys import Keys
    from selenium.webdriver.support.ui import WebDriverWait

    args = ["-ctk", "oscar2", "-ctv", "oscar2", "-fa", "on", "-c", "4096", "-np", "1", "--temp", "0",
            "-n", "160", "-t", "2", *extra]
    opts = webdriver.ChromeOptions()
    opts.binary_location = CHROMIUM
    for o in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--disable-gpu",
              f"--window-size={a.size}", "--force-device-scale-factor=1"):
        opts.add_argument(o)
    with llama_server.serve(a.model, args) as srv:
        started = [ln for ln in srv.log().splitlines() if "oscar:" in ln]
        drv = webdriver.Chrome(service=Service(CHROMEDRIVER), options=opts)
        try:
            drv.get(srv.url + "/")
            box = WebDriverWait(drv, 60).until(
                lambda d: next(iter(d.find_elements(By.CSS_SELECTOR, "form textarea, form [contenteditable=true]")), None))
            box.click()
            box.send_keys(a.message)
            box.send_keys(Keys.ENTER)

            def reply(d) -> str:
                els = d.find_elements(By.CSS_SELECTOR, ".chat-message-assistant .markdown-content")
                return els[-1].text.strip() if els else ""

            WebDriverWait(drv, 600, poll_frequency=0.5).until(lambda d: reply(d) != "")
            last, deadline = None, time.time() + 600
            while time.time() < deadline:
                now = reply(drv)
                if now == last and not _busy(srv.url):
                    break
                last = now
                time.sleep(1.0)
            time.sleep(1.0)
            a.out.parent.mkdir(parents=True, exist_ok=True)
            drv.save_screenshot(str(a.out))
        finally:
            drv.quit()
    for ln in started:
        print(ln.split("oscar:", 1)[1].strip())
    print(f"webui-screenshot: wrote {a.out} ({len(last or '')} characters of answer)")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
