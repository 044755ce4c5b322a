"""llama-server's built-in web UI over an oscar2 cache, driven in headless Chromium.

The server (-ctk oscar2 -ctv oscar2, small 16-bit windows so that the conversation's cells
reach the 2-bit tier) serves the page embedded at build time (scripts/build-ui.sh). Selenium
drives Debian's Chromium through its chromedriver: it opens the page, types a message, sends
it with Enter and reads the answer the page shows. The reference is the same conversation sent
to /v1/chat/completions directly: the server's defaults are greedy (--temp 0) with a fixed
answer length, which the page takes over from /props, so the page must show that answer.
"""
from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import time
import urllib.request
from pathlib import Path

import pytest

from oscar.core import paths
from server import llama_server

CHROMIUM = "/usr/bin/chromium"
CHROMEDRIVER = "/usr/bin/chromedriver"
MESSAGE = "Name three fruits that are red."
N_PREDICT = 24
SERVER_ARGS = ("-ctk", "oscar2", "-ctv", "oscar2", "-fa", "on", "-c", "1024", "-np", "1", "--temp", "0",
               "-n", str(N_PREDICT), "--kv-sink", "4", "--kv-recent", "8", "-t", "2")


def _words(text: str) -> list[str]:
    """The words of a text with markdown marks and punctuation dropped (the page renders
    the model's markdown: '**Apple**' is shown as 'Apple')."""
    return re.findall(r"[A-Za-z0-9']+", text)


def _api_answer(url: str, message: str) -> str:
    req = urllib.request.Request(url + "/v1/chat/completions", method="POST",
                                 headers={"Content-Type": "application/json"},
                                 data=json.dumps({"messages": [{"role": "user", "content": message}]}).encode())
    with urllib.request.urlopen(req, timeout=300) as r:
        return json.loads(r.read())["choices"][0]["message"]["content"]


def _busy(url: str) -> bool:
    with urllib.request.urlopen(url + "/slots", timeout=10) as r:
        return any(s.get("is_processing") for s in json.loads(r.read()))


@pytest.fixture(scope="module")
def chrome():
    for exe, pkg in ((CHROMIUM, "chromium"), (CHROMEDRIVER, "chromium-driver")):
        if not os.access(exe, os.X_OK):
            pytest.fail(f"{exe} is missing: install Debian's {pkg} (scripts/test-deps.sh does)")
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service
    opts = webdriver.ChromeOptions()
    opts.binary_location = CHROMIUM
    for a in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--disable-gpu",
              "--window-size=1000,720", "--force-device-scale-factor=1"):
        opts.add_argument(a)
    drv = webdriver.Chrome(service=Service(CHROMEDRIVER), options=opts)
    yield drv
    drv.quit()


def test_webui_chat_over_oscar2(bin_dir, smollm2, tmp_path, chrome):
    from selenium.webdriver.common.by import By
    from selenium.webdriver.common.keys import Keys
    from selenium.webdriver.support.ui import WebDriverWait

    log = tmp_path / "server.log"
    with llama_server(bin_dir, smollm2, *SERVER_ARGS, log=log) as url:
        started = log.read_text(errors="replace")
        assert "oscar: K and V in oscar2" in started, "the server did not start with an oscar2 cache"

        # the page itself: our build embeds the UI (without it llama-server answers with an error page)
        # (assets are embedded gzip-compressed: a client that does not accept gzip gets 415)
        with urllib.request.urlopen(urllib.request.Request(url + "/", headers={"Accept-Encoding": "gzip"}),
                                    timeout=10) as r:
            assert r.status == 200 and "text/html" in r.headers["Content-Type"]

        chrome.get(url + "/")
        wait = WebDriverWait(chrome, 60)
        box = wait.until(lambda d: next(iter(d.find_elements(By.CSS_SELECTOR, "form textarea, form [contenteditable=true]")), None))
        wait.until(lambda d: box.is_enabled())
        box.click()
        box.send_keys(MESSAGE)
        box.send_keys(Keys.ENTER)

        def reply_text(d) -> str:
            els = d.find_elements(By.CSS_SELECTOR, ".chat-message-assistant .markdown-content")
            return els[-1].text.strip() if els else ""

        # the answer streams in; it is complete once the server is idle and the text stops changing
        WebDriverWait(chrome, 300, poll_frequency=0.5).until(lambda d: reply_text(d) != "")
        deadline, last = time.time() + 300, None
        while time.time() < deadline:
            now = reply_text(chrome)
            if now == last and not _busy(url):
                break
            last = now
            time.sleep(1.0)
        shown = reply_text(chrome)
        shot = tmp_path / "webui.png"
        chrome.save_screenshot(str(shot))
        if os.environ.get("OSCAR_WEBUI_SCREENSHOT"):
            shutil.copyfile(shot, os.environ["OSCAR_WEBUI_SCREENSHOT"])

        assert [u.text.splitlines()[0] for u in chrome.find_elements(By.CSS_SELECTOR, ".chat-message-user")] \
            == [MESSAGE], "the page does not show the message sent"

        reference = _api_answer(url, MESSAGE)
    assert _words(reference), f"the API's answer has no words: {reference!r}"
    assert _words(shown) == _words(reference), f"page shows {shown!r}, the API answers {reference!r}"


def test_build_ui_without_npm_names_the_fix(tmp_path):
    """scripts/build-ui.sh on a machine without Node.js/npm stops with one message that names
    what to install and how to build without the UI instead."""
    bin_ = tmp_path / "bin"
    bin_.mkdir()
    for tool in ("dirname", "cat", "find", "sort", "xargs", "sha256sum", "cut", "sed", "tail"):
        (bin_ / tool).symlink_to(shutil.which(tool))
    r = subprocess.run(["/bin/bash", str(paths.ROOT / "scripts" / "build-ui.sh"), str(tmp_path / "build")],
                       env={"PATH": str(bin_), "HOME": str(tmp_path)}, capture_output=True, text=True, timeout=60)
    assert r.returncode == 1, r.stdout + r.stderr
    assert "build-ui: error:" in r.stderr and "npm" in r.stderr and "Node.js" in r.stderr
    assert "OSCAR_UI=0" in r.stderr
    assert not (tmp_path / "build").exists(), "nothing may be written when the build cannot run"
