"""A small Chrome DevTools Protocol client: headless Chromium for the browser tests.

`Browser()` starts Debian's `chromium` headless with a throw-away profile, opens one page
target and talks to it over its websocket (websocket-client). `navigate`, `evaluate`,
`wait_for(js)` (polls with a deadline; the failure shows what the page does show),
`screenshot`, `close` (kills the browser and its children, also after a failure).
"""

from __future__ import annotations

import base64
import json
import shutil
import subprocess
import tempfile
import time
import urllib.request
from pathlib import Path

import websocket


def chromium_path() -> str | None:
    return shutil.which("chromium") or shutil.which("chromium-browser")


class Browser:
    def __init__(self, width: int = 1400, height: int = 1000, timeout_s: float = 30.0):
        exe = chromium_path()
        if exe is None:
            raise FileNotFoundError("chromium not found (Debian: apt-get install chromium)")
        self.profile = Path(tempfile.mkdtemp(prefix="rlbench-chromium-"))
        self.proc = subprocess.Popen(
            [exe, "--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--no-first-run",
             "--disable-site-isolation-trials", "--disable-features=IsolateOrigins,site-per-process",  # iframes in-process
             "--remote-debugging-port=0", f"--user-data-dir={self.profile}", f"--window-size={width},{height}",
             "about:blank"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        self._id = 0
        try:
            port = self._port(timeout_s)
            req = urllib.request.Request(f"http://127.0.0.1:{port}/json/new?about:blank", method="PUT")
            target = json.loads(urllib.request.urlopen(req, timeout=10).read())
            self.ws = websocket.create_connection(target["webSocketDebuggerUrl"], timeout=timeout_s,
                                                  suppress_origin=True)
            self.call("Page.enable")
            self.call("Emulation.setDeviceMetricsOverride", width=width, height=height, deviceScaleFactor=1,
                      mobile=False)
        except BaseException:
            self.close()
            raise

    def _port(self, timeout_s: float) -> int:
        active = self.profile / "DevToolsActivePort"
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if active.exists() and active.read_text().strip():
                return int(active.read_text().split()[0])
            if self.proc.poll() is not None:
                raise RuntimeError(f"chromium exited with {self.proc.returncode} before opening DevTools")
            time.sleep(0.05)  # polling a file the browser writes; no event to wait on
        raise TimeoutError(f"chromium opened no DevTools port within {timeout_s} s")

    def call(self, method: str, **params):
        self._id += 1
        self.ws.send(json.dumps({"id": self._id, "method": method, "params": params}))
        while True:
            msg = json.loads(self.ws.recv())
            if msg.get("id") == self._id:
                if "error" in msg:
                    raise RuntimeError(f"{method}: {msg['error']}")
                return msg.get("result", {})

    def navigate(self, url: str) -> None:
        self.call("Page.navigate", url=url)

    def evaluate(self, js: str):
        result = self.call("Runtime.evaluate", expression=js, returnByValue=True, awaitPromise=True)
        if "exceptionDetails" in result:
            raise RuntimeError(f"{js[:80]}: {result['exceptionDetails'].get('text')}")
        return result["result"].get("value")

    def evaluate_in_frames(self, js: str) -> list:
        """`js` evaluated in every child frame (iframes, sandboxed ones too: through an isolated world)."""
        tree = self.call("Page.getFrameTree")["frameTree"]
        values = []
        for child in tree.get("childFrames", []):
            world = self.call("Page.createIsolatedWorld", frameId=child["frame"]["id"], worldName="rlbench-test")
            result = self.call("Runtime.evaluate", expression=js, returnByValue=True,
                               contextId=world["executionContextId"])
            values.append(result.get("result", {}).get("value"))
        return values

    def text(self) -> str:
        return self.evaluate("document.body ? document.body.innerText : ''") or ""

    def wait_for(self, js: str, timeout_s: float = 30.0, what: str = "") -> object:
        """Poll `js` until it is truthy; on timeout fail with the page's visible text."""
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            value = self.evaluate(js)
            if value:
                return value
            time.sleep(0.2)  # the page renders asynchronously; DevTools offers no event for "shows X"
        raise AssertionError(f"page never showed {what or js} within {timeout_s} s; it shows:\n{self.text()[:3000]}")

    def wait_for_text(self, text: str, timeout_s: float = 30.0) -> None:
        self.wait_for(f"document.body && document.body.innerText.includes({json.dumps(text)})", timeout_s,
                      repr(text))

    def screenshot(self, path: Path) -> Path:
        data = self.call("Page.captureScreenshot", format="png", captureBeyondViewport=False)["data"]
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(base64.b64decode(data))
        return path

    def close(self) -> None:
        try:
            if getattr(self, "ws", None) is not None:
                self.ws.close()
        finally:
            if self.proc.poll() is None:
                self.proc.kill()
            self.proc.wait(timeout=10)
            shutil.rmtree(self.profile, ignore_errors=True)
