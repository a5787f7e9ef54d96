"""A headless Chromium driven over the DevTools protocol (--remote-debugging-pipe: NUL-separated
JSON on file descriptors 3 and 4, so no websocket package is needed).  Used by the report test
to click through Snakemake's single-page report as a user would and take screenshots."""
from __future__ import annotations

import base64
import io
import json
import os
import select
import shutil
import subprocess
import tempfile
import time

import numpy as np

WIDTH, HEIGHT = 1400, 900

# Page helpers: click a menu link by its text, click a result row's n-th button (0: view,
# 1: info), wait until the report's runtime-generated styles stop changing, an element's box.
HELPERS = r"""
window.__t = {
  clickText(txt) {
    const a = [...document.querySelectorAll('nav a')].find(a => a.innerText.trim() === txt);
    if (!a) throw new Error('no link ' + txt); a.click(); return true;
  },
  row(label) {
    return [...document.querySelectorAll('nav table tbody tr')]
      .find(tr => [...tr.querySelectorAll('td')].some(td => td.innerText.trim() === label));
  },
  clickRow(label, n) {
    const row = this.row(label);
    if (!row) throw new Error('no result row ' + label);
    row.querySelectorAll('a[type=button]')[n].click(); return true;
  },
  settle(quiet = 400, max = 5000) {
    const sig = () => [...document.querySelectorAll('style')].reduce((n, s) => n + s.textContent.length, 0);
    return new Promise(done => {
      const t0 = performance.now(); let last = sig(), since = t0;
      (function tick() { requestAnimationFrame(() => {
        const now = performance.now(), cur = sig();
        if (cur !== last) { last = cur; since = now; }
        if (now - since >= quiet || now - t0 >= max) done(true); else setTimeout(tick, 50);
      }); })();
    });
  },
  rect(sel) {
    const el = document.querySelector(sel); if (!el) return null;
    const r = el.getBoundingClientRect(); return [r.left, r.top, r.right, r.bottom];
  },
};
true
"""


def find_chromium() -> str | None:
    return shutil.which("chromium") or shutil.which("chromium-browser") or shutil.which("google-chrome")


class Browser:
    def __init__(self, executable: str):
        self.profile = tempfile.mkdtemp(prefix="pabench-chromium-")
        to_r, self._w = os.pipe()
        self._r, from_w = os.pipe()

        def child_fds():  # the protocol pipes must be the child's fds 3 and 4
            a, b = os.dup(to_r), os.dup(from_w)
            os.dup2(a, 3)
            os.dup2(b, 4)

        self.proc = subprocess.Popen(
            [executable, "--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
             "--hide-scrollbars", "--no-first-run", "--remote-debugging-pipe",
             f"--user-data-dir={self.profile}", "about:blank"],
            preexec_fn=child_fds, close_fds=False, stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        os.close(to_r)
        os.close(from_w)
        self._buf, self._id, self._events, self.session = b"", 0, [], None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        try:
            self.send("Browser.close", session=False, timeout=5)
        except Exception:  # noqa: BLE001 - closing a browser that is gone
            pass
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
        shutil.rmtree(self.profile, ignore_errors=True)

    def _message(self, timeout: float) -> dict:
        deadline = time.monotonic() + timeout
        while b"\0" not in self._buf:
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError("no answer from Chromium")
            if select.select([self._r], [], [], left)[0]:
                chunk = os.read(self._r, 1 << 20)
                if not chunk:
                    raise RuntimeError("Chromium closed the protocol pipe")
                self._buf += chunk
        msg, self._buf = self._buf.split(b"\0", 1)
        return json.loads(msg)

    def send(self, method: str, params=None, session=True, timeout=30) -> dict:
        self._id += 1
        msg = {"id": self._id, "method": method, "params": params or {}}
        if session and self.session:
            msg["sessionId"] = self.session
        data = json.dumps(msg).encode() + b"\0"
        while data:
            data = data[os.write(self._w, data):]
        while True:
            answer = self._message(timeout)
            if answer.get("id") == self._id:
                if "error" in answer:
                    raise RuntimeError(f"{method}: {answer['error']}")
                return answer["result"]
            self._events.append(answer)

    def open(self, url: str) -> None:
        target = self.send("Target.createTarget", {"url": "about:blank"}, session=False)["targetId"]
        self.session = self.send("Target.attachToTarget", {"targetId": target, "flatten": True},
                                 session=False)["sessionId"]
        self.send("Page.enable")
        self.send("Emulation.setDeviceMetricsOverride",
                  {"width": WIDTH, "height": HEIGHT, "deviceScaleFactor": 1, "mobile": False})
        self.send("Page.navigate", {"url": url})
        deadline = time.monotonic() + 60
        while not any(e.get("method") == "Page.loadEventFired" for e in self._events):
            self._events.append(self._message(max(0.01, deadline - time.monotonic())))
        self.js(HELPERS)

    def js(self, expression: str, context=None):
        params = {"expression": expression, "returnByValue": True, "awaitPromise": True}
        if context is not None:
            params["contextId"] = context
        result = self.send("Runtime.evaluate", params)
        if "exceptionDetails" in result:
            raise RuntimeError(f"{expression[:60]!r}: {result['exceptionDetails'].get('text')} "
                               f"{result['exceptionDetails'].get('exception', {}).get('description', '')}")
        return result["result"].get("value")

    def wait(self, expression: str, what: str, timeout: float = 20) -> None:
        deadline = time.monotonic() + timeout
        while not self.js(expression):
            if time.monotonic() > deadline:
                raise TimeoutError(f"timed out waiting for {what}")
            time.sleep(0.1)

    def frame_text(self) -> str:
        """The text of the page's first iframe (an opaque data: origin, read in its own world)."""
        for child in self.send("Page.getFrameTree")["frameTree"].get("childFrames", []):
            world = self.send("Page.createIsolatedWorld", {"frameId": child["frame"]["id"]})
            return self.js("document.body ? document.body.innerText : ''",
                           context=world["executionContextId"]) or ""
        return ""

    def screenshot(self, path) -> np.ndarray:
        """Save a PNG screenshot; returns its pixels (H, W, 3)."""
        from PIL import Image

        self.js("__t.settle()")
        raw = base64.b64decode(self.send("Page.captureScreenshot", {"format": "png"})["data"])
        with open(path, "wb") as f:
            f.write(raw)
        return np.asarray(Image.open(io.BytesIO(raw)).convert("RGB"))
