"""The chat page in headless Chromium, driven over the DevTools protocol on a pipe.

usage: python chat_page.py CHROMIUM URL
Loads the page, sends a message, waits until the reply is streaming into the page, presses
Stop, and waits for the page to say it stopped. Prints a JSON line with what it saw.
Chromium's --remote-debugging-pipe speaks JSON messages ending in a NUL byte on file
descriptors 3 (to the browser) and 4 (from it): no websocket library needed.
"""

import json
import os
import subprocess
import sys
import tempfile
import time

chromium, url = sys.argv[1], sys.argv[2]
to_browser_r, to_browser_w = os.pipe()
from_browser_r, from_browser_w = os.pipe()
profile = tempfile.mkdtemp(prefix="ch11-chromium-")


def child_fds():
    # dup first: a pipe end may itself be fd 3 or 4
    a, b = os.dup(to_browser_r), os.dup(from_browser_w)
    os.dup2(a, 3)
    os.dup2(b, 4)


proc = subprocess.Popen(
    [chromium, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
     "--disable-dev-shm-usage", "--remote-debugging-pipe", f"--user-data-dir={profile}",
     "about:blank"],
    preexec_fn=child_fds, close_fds=False,
    stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
)
os.close(to_browser_r)
os.close(from_browser_w)
out = os.fdopen(to_browser_w, "wb", buffering=0)
inp = os.fdopen(from_browser_r, "rb", buffering=0)
buffer = b""
next_id = 0


def call(method, params=None, session=None, timeout=30):
    global buffer, next_id
    next_id += 1
    msg = {"id": next_id, "method": method, "params": params or {}}
    if session:
        msg["sessionId"] = session
    out.write(json.dumps(msg).encode() + b"\0")
    deadline = time.time() + timeout
    while time.time() < deadline:
        while b"\0" in buffer:
            raw, buffer = buffer.split(b"\0", 1)
            reply = json.loads(raw)
            if reply.get("id") == next_id:
                if "error" in reply:
                    raise RuntimeError(f"{method}: {reply['error']}")
                return reply["result"]
        data = inp.read(65536)
        if not data:
            raise RuntimeError("chromium closed the pipe")
        buffer += data
    raise RuntimeError(f"{method}: no answer in {timeout} s")


def evaluate(session, expr):
    r = call("Runtime.evaluate", {"expression": expr, "returnByValue": True, "awaitPromise": True}, session)
    return r["result"].get("value")


def wait_for(session, expr, timeout):
    deadline = time.time() + timeout
    while time.time() < deadline:
        v = evaluate(session, expr)
        if v:
            return v
        time.sleep(0.1)
    raise RuntimeError(f"timed out waiting for: {expr}")


seen = {}
try:
    target = call("Target.createTarget", {"url": url})["targetId"]
    session = call("Target.attachToTarget", {"targetId": target, "flatten": True})["sessionId"]
    call("Runtime.enable", session=session)
    wait_for(session, "document.readyState === 'complete' && document.getElementById('model').textContent !== '?'", 30)
    seen["model"] = evaluate(session, "document.getElementById('model').textContent")
    # a long reply, so there is time to stop it
    evaluate(session, "window.chatOptions = {ignore_eos: true}; document.getElementById('max-tokens').value = 3000;"
                      "document.getElementById('prompt').value = 'Tell me a long story.';"
                      "document.getElementById('send').click(); true")
    seen["streamed"] = wait_for(
        session, "(() => { const a = document.querySelectorAll('.assistant'); const t = a.length ? a[a.length-1].textContent : '';"
                 " return t.length > 20 && document.getElementById('status').textContent === 'streaming' ? t : null })()", 60)
    seen["stop_enabled"] = evaluate(session, "!document.getElementById('stop').disabled")
    evaluate(session, "document.getElementById('stop').click(); true")
    seen["status"] = wait_for(session, "document.getElementById('status').textContent === 'stopped' ? 'stopped' : null", 15)
    seen["send_enabled"] = evaluate(session, "!document.getElementById('send').disabled")
    print(json.dumps(seen), flush=True)
finally:
    proc.kill()
    proc.wait()
