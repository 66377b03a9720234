"""A headless Chromium driven over the DevTools protocol on a pipe (`--remote-debugging-pipe`: JSON messages,
NUL-separated, on fds 3 and 4): real mouse events (`Input.dispatchMouseEvent`) with no websocket library and no
Playwright, offline. Used by tests/search/report/test_report_browser.py."""
from __future__ import annotations

import json
import os
import subprocess
import time
from pathlib import Path
from typing import Any


class Browser:
    """`with Browser(exe, profile, 1280, 900) as b: b.open(url); b.js("1 + 1"); b.click(x, y)`."""

    def __init__(self, exe: str, profile: Path, width: int = 1280, height: int = 900) -> None:
        self.exe, self.profile, self.size = exe, profile, (width, height)
        self.ids, self.buf, self.events, self.session = 0, b"", [], None

    def __enter__(self) -> "Browser":
        to_child, self.w = os.pipe()
        self.r, from_child = os.pipe()

        def fds() -> None:  # the child's fds 3 (commands in) and 4 (replies out), kept across exec
            a, b = os.dup(to_child), os.dup(from_child)  # out of the way first: a pipe end may sit on 3 or 4
            os.dup2(a, 3)
            os.dup2(b, 4)

        self.proc = subprocess.Popen(
            [self.exe, "--headless", "--no-sandbox", "--disable-gpu", "--remote-debugging-pipe", "--no-first-run",
             "--disable-background-networking", "--disable-component-update", "--disable-sync",
             f"--window-size={self.size[0]},{self.size[1]}", f"--user-data-dir={self.profile}", "about:blank"],
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, close_fds=False,
            preexec_fn=fds)
        os.close(to_child)
        os.close(from_child)
        page = next(t for t in self.call("Target.getTargets")["targetInfos"] if t["type"] == "page")
        self.session = self.call("Target.attachToTarget", targetId=page["targetId"], flatten=True)["sessionId"]
        self.call("Page.enable")
        self.call("Runtime.enable")
        self.call("Emulation.setDeviceMetricsOverride", width=self.size[0], height=self.size[1],
                  deviceScaleFactor=1, mobile=False)
        return self

    def __exit__(self, *exc: Any) -> None:
        self.proc.kill()
        self.proc.wait(30)
        os.close(self.w)
        os.close(self.r)

    def _read(self) -> dict[str, Any]:
        while b"\0" not in self.buf:
            chunk = os.read(self.r, 1 << 20)
            if not chunk:
                raise RuntimeError("chromium closed its DevTools pipe")
            self.buf += chunk
        msg, self.buf = self.buf.split(b"\0", 1)
        return json.loads(msg)

    def call(self, method: str, **params: Any) -> dict[str, Any]:
        """One DevTools command, on the page's session once attached; its result (events are kept)."""
        self.ids += 1
        msg = {"id": self.ids, "method": method, "params": params,
               **({"sessionId": self.session} if self.session and not method.startswith("Target.") else {})}
        os.write(self.w, json.dumps(msg).encode() + b"\0")
        while True:
            reply = self._read()
            if reply.get("id") == self.ids:
                if "error" in reply:
                    raise RuntimeError(f"{method}: {reply['error']}")
                return reply.get("result", {})
            self.events.append(reply)

    def js(self, expr: str) -> Any:
        """The value of a page expression (promises awaited)."""
        res = self.call("Runtime.evaluate", expression=expr, returnByValue=True, awaitPromise=True)
        if "exceptionDetails" in res:
            raise RuntimeError(f"{expr[:80]}: {res['exceptionDetails']}")
        return res["result"].get("value")

    def open(self, url: str, ready: str = "document.readyState === 'complete'", timeout: float = 60) -> None:
        self.call("Page.navigate", url=url)
        t0 = time.time()
        while not self.js(f"!!({ready})"):
            if time.time() - t0 > timeout:
                raise TimeoutError(f"{url}: not ready ({ready}) after {timeout} s")
            time.sleep(0.1)

    def click(self, x: float, y: float) -> None:
        """A real left click at viewport pixel (x, y): the pointer moves there, then presses and releases."""
        for kind, extra in (("mouseMoved", {}), ("mousePressed", {"button": "left", "clickCount": 1}),
                            ("mouseReleased", {"button": "left", "clickCount": 1})):
            self.call("Input.dispatchMouseEvent", type=kind, x=x, y=y, **extra)
            time.sleep(0.03)  # plotly throttles hover (50 ms) and picks the clicked point from the last hover
        time.sleep(0.32)  # plotly takes a second press within 300 ms for a double click (it resets the zoom)
