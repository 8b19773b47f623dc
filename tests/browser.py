"""A headless Chromium driven through the DevTools protocol, for tests of what participants see.

The protocol runs over a pipe (--remote-debugging-pipe: Chromium reads commands on fd 3 and
writes replies on fd 4, each JSON message ended by a NUL byte), so no websocket library and no
port are needed. One browser serves every page of a test session; starting one costs about a
second, which a browser per page would pay some forty times.
"""
from __future__ import annotations

import base64
import fcntl
import json
import math
import os
import select
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

# As root in a container Chromium needs --no-sandbox; without the background-networking flags it
# opens connections at start (updates, sync, field trials) that this machine refuses many at a time.
FLAGS = ("--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync",
         "--disable-dev-shm-usage", "--hide-scrollbars", "--mute-audio")
CANDIDATES = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable")


def find_chromium() -> str | None:
    """The browser's path: $CHROMIUM if set, else the first of CANDIDATES on PATH."""
    wanted = os.environ.get("CHROMIUM")
    if wanted:
        return shutil.which(wanted)
    return next((path for path in map(shutil.which, CANDIDATES) if path), None)


class BrowserError(RuntimeError):
    pass


class Browser:
    """One headless browser; `visit` loads a page and returns its visible text and a screenshot."""

    def __init__(self, executable: str, width: int = 1200, height: int = 900, timeout: float = 30.0):
        self.width, self.height, self.timeout = width, height, timeout
        self.profile = tempfile.mkdtemp(prefix="chromium-profile-")   # fresh: no state between runs
        commands_read, self._commands = os.pipe()
        self._replies, replies_write = os.pipe()

        def wire_pipes():   # in the child, before exec: the protocol's fds 3 and 4
            # Move both ends above 4 first, so that placing one cannot overwrite the other.
            high_read = fcntl.fcntl(commands_read, fcntl.F_DUPFD, 10)
            high_write = fcntl.fcntl(replies_write, fcntl.F_DUPFD, 10)
            os.dup2(high_read, 3)
            os.dup2(high_write, 4)

        # Its log goes to a file: a pipe nobody reads could fill up and stall the browser.
        self._log = open(Path(self.profile) / "chromium.log", "w+b")
        self.process = subprocess.Popen(
            [executable, *FLAGS, "--remote-debugging-pipe", f"--user-data-dir={self.profile}",
             f"--window-size={width},{height}", "about:blank"],
            stdin=subprocess.DEVNULL, stdout=self._log, stderr=self._log,
            preexec_fn=wire_pipes, close_fds=False)    # close_fds would close fds 3 and 4 again
        os.close(commands_read)
        os.close(replies_write)
        self._buffer = b""
        self._next_id = 0
        self._events: list[dict] = []

    # -- the protocol -------------------------------------------------------------------------
    def _send(self, method: str, params: dict | None = None, session: str | None = None) -> int:
        self._next_id += 1
        message = {"id": self._next_id, "method": method, "params": params or {}}
        if session:
            message["sessionId"] = session
        data = json.dumps(message).encode() + b"\0"
        while data:
            data = data[os.write(self._commands, data):]
        return self._next_id

    def _receive(self, deadline: float) -> dict:
        while b"\0" not in self._buffer:
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([self._replies], [], [], left)[0]:
                raise BrowserError("Chromium did not answer in time")
            chunk = os.read(self._replies, 1 << 20)
            if not chunk:
                raise BrowserError("Chromium closed the DevTools pipe: "
                                   + self._stderr_tail())
            self._buffer += chunk
        message, self._buffer = self._buffer.split(b"\0", 1)
        return json.loads(message)

    def call(self, method: str, params: dict | None = None, session: str | None = None) -> dict:
        wanted = self._send(method, params, session)
        deadline = time.monotonic() + self.timeout
        while True:
            message = self._receive(deadline)
            if message.get("id") == wanted:
                if "error" in message:
                    raise BrowserError(f"{method}: {message['error']}")
                return message.get("result", {})
            if "method" in message:
                self._events.append(message)

    def wait_for(self, method: str, session: str) -> dict:
        deadline = time.monotonic() + self.timeout
        while True:
            for index, event in enumerate(self._events):
                if event["method"] == method and event.get("sessionId") == session:
                    return self._events.pop(index)
            message = self._receive(deadline)
            if "method" in message:
                self._events.append(message)

    def _stderr_tail(self) -> str:
        self._log.flush()
        return (Path(self.profile) / "chromium.log").read_bytes().decode(errors="replace")[-2000:]

    # -- pages --------------------------------------------------------------------------------
    def visit(self, url: str, screenshot: Path | None = None) -> str:
        """Load `url` in a new tab; return document.body.innerText (the text a reader sees:
        rendered, entities decoded, hidden elements left out) and save a full-page PNG."""
        target = self.call("Target.createTarget", {"url": "about:blank"})["targetId"]
        session = self.call("Target.attachToTarget", {"targetId": target, "flatten": True})["sessionId"]
        try:
            self.call("Page.enable", session=session)
            self.call("Emulation.setDeviceMetricsOverride",
                      {"width": self.width, "height": self.height, "deviceScaleFactor": 1,
                       "mobile": False}, session)
            self._events.clear()
            self.call("Page.navigate", {"url": url}, session)
            self.wait_for("Page.loadEventFired", session)
            text = self.call("Runtime.evaluate", {"expression": "document.body.innerText",
                                                  "returnByValue": True}, session)["result"]["value"]
            if screenshot is not None:
                # The page's own height: the whole page, without the viewport's blank tail
                # (the layout's content size is never smaller than the viewport).
                height = self.call("Runtime.evaluate", {
                    "expression": "document.documentElement.getBoundingClientRect().height",
                    "returnByValue": True}, session)["result"]["value"]
                height = max(1, math.ceil(height))
                self.call("Emulation.setDeviceMetricsOverride",
                          {"width": self.width, "height": height, "deviceScaleFactor": 1,
                           "mobile": False}, session)
                image = self.call("Page.captureScreenshot", {"format": "png"}, session)["data"]
                screenshot.parent.mkdir(parents=True, exist_ok=True)
                screenshot.write_bytes(base64.b64decode(image))
            return text
        finally:
            self.call("Target.closeTarget", {"targetId": target})

    def close(self) -> None:
        try:
            if self.process.poll() is None:
                try:
                    self._send("Browser.close")
                    self.process.wait(timeout=10)
                except (OSError, subprocess.TimeoutExpired):
                    self.process.kill()
                    self.process.wait()
        finally:
            for fd in (self._commands, self._replies):
                try:
                    os.close(fd)
                except OSError:
                    pass
            self._log.close()
            shutil.rmtree(self.profile, ignore_errors=True)


def browser_or_skip() -> "Browser":
    """A started Chromium for a test's fixture, or the test skipped with what to install."""
    import pytest
    executable = find_chromium()
    if executable is None:
        pytest.skip("no Chromium found (looked for $CHROMIUM, chromium, chromium-browser, "
                    "google-chrome): run scripts/bootstrap.sh as root, or apt-get install chromium")
    try:
        return Browser(executable)
    except (OSError, BrowserError) as error:
        pytest.skip(f"Chromium at {executable} could not be started: {error}")
