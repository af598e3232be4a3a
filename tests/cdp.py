"""A small Chrome DevTools Protocol client: headless Chromium for the browser tests.

`Browser()` starts Debian's `chromium` headless with a throw-away profile, opens one page
target and talks to it over its websocket (websocket-client). `navigate`, `evaluate`,
`wait_for(js)` / `wait_for_text` (poll with a deadline; the failure shows what the page does
show and saves a screenshot), `screenshot`, `close` (kills the browser's whole process group,
also after a failure).
"""

from __future__ import annotations

import base64
import contextlib
import json
import os
import shutil
import signal
import subprocess
import tempfile
import time
import urllib.request
from pathlib import Path

import websocket


def chromium_path() -> str | None:
    return shutil.which("chromium") or shutil.which("chromium-browser")


class Browser:
    def __init__(
        self, width: int = 1400, height: int = 1000, timeout_s: float = 30.0, failure_screenshot: Path | None = None
    ):
        exe = chromium_path()
        if exe is None:
            raise FileNotFoundError("chromium not found (Debian: apt-get install chromium)")
        self.failure_screenshot, self.ws, self._id = failure_screenshot, None, 0
        self.profile = Path(tempfile.mkdtemp(prefix="rlbench-chromium-"))
        self.proc = subprocess.Popen(
            [
                exe,
                "--headless=new",
                "--no-sandbox",
                "--disable-gpu",
                "--disable-dev-shm-usage",
                "--no-first-run",
                # iframes (the artifact viewer's sandboxed one too) in the page's process, reachable from its target
                "--disable-site-isolation-trials",
                "--disable-features=IsolateOrigins,site-per-process",
                "--remote-debugging-port=0",
                f"--user-data-dir={self.profile}",
                f"--window-size={width},{height}",
                "about:blank",
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
        )  # its own process group: close() kills renderers and helpers too
        try:
            port = self._port(timeout_s)
            req = urllib.request.Request(f"http://127.0.0.1:{port}/json/new?about:blank", method="PUT")
            with urllib.request.urlopen(req, timeout=10) as r:
                target = json.loads(r.read())
            self.ws = websocket.create_connection(
                target["webSocketDebuggerUrl"], timeout=timeout_s, suppress_origin=True
            )
            self.call("Page.enable")
            self.call(
                "Emulation.setDeviceMetricsOverride", width=width, height=height, deviceScaleFactor=1, mobile=False
            )
        except BaseException:
            self.close()
            raise

    def _port(self, timeout_s: float) -> int:
        """The DevTools port chromium picked (--remote-debugging-port=0), from the profile's DevToolsActivePort."""
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
        """One DevTools command and its result (events arriving meanwhile are dropped)."""
        self._id += 1
        self.ws.send(json.dumps({"id": self._id, "method": method, "params": params}))
        while True:
            msg = json.loads(self.ws.recv())
            if msg.get("id") == self._id:
                if "error" in msg:
                    raise RuntimeError(f"{method}: {msg['error']}")
                return msg.get("result", {})

    def navigate(self, url: str) -> None:
        """Load `url` as a new document (through about:blank: a single-page app's hash route would
        otherwise change in place, and a wait could pass on the previous page's text)."""
        self.call("Page.navigate", url="about:blank")
        self.call("Page.navigate", url=url)

    def evaluate(self, js: str, context_id: int | None = None):
        params = {"contextId": context_id} if context_id is not None else {}
        result = self.call("Runtime.evaluate", expression=js, returnByValue=True, awaitPromise=True, **params)
        if "exceptionDetails" in result:
            details = result["exceptionDetails"]
            raise RuntimeError(f"{js[:80]}: {details.get('exception', {}).get('description', details.get('text'))}")
        return result["result"].get("value")

    def evaluate_in_frames(self, js: str) -> list:
        """`js` evaluated in every child frame (iframes, sandboxed ones too: through an isolated world)."""
        values = []
        for child in self.call("Page.getFrameTree")["frameTree"].get("childFrames", []):
            world = self.call("Page.createIsolatedWorld", frameId=child["frame"]["id"], worldName="rlbench-test")
            values.append(self.evaluate(js, world["executionContextId"]))
        return values

    def text(self) -> str:
        return self.evaluate("document.body ? document.body.innerText : ''") or ""

    def wait_for(self, js: str, timeout_s: float = 30.0, what: str = "", frames: bool = False):
        """Poll `js` (in the page, or with frames=True in its iframes) until it is truthy and return
        its value; on timeout save a screenshot and fail with the text the page shows."""
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            value = any(self.evaluate_in_frames(js)) if frames else self.evaluate(js)
            if value:
                return value
            time.sleep(0.2)  # the page renders asynchronously; DevTools offers no event for "shows X"
        shown = self.text()[:3000]
        if frames:
            shown += f"\nits frames show: {self.evaluate_in_frames('document.body?.innerText.slice(0, 1000)')}"
        shot = f" (screenshot: {self.screenshot(self.failure_screenshot)})" if self.failure_screenshot else ""
        raise AssertionError(f"page never showed {what or js} within {timeout_s} s{shot}; it shows:\n{shown}")

    def wait_for_text(self, text: str, timeout_s: float = 30.0) -> None:
        self.wait_for(f"document.body && document.body.innerText.includes({json.dumps(text)})", timeout_s, repr(text))

    def screenshot(self, path: Path) -> Path:
        data = self.call("Page.captureScreenshot", format="png")["data"]
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(base64.b64decode(data))
        return path

    def close(self) -> None:
        try:
            if self.ws is not None:
                self.ws.close()
        finally:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait(timeout=10)
            shutil.rmtree(self.profile, ignore_errors=True)
