"""The real server for the tests: `go build ./cmd/countersign` once, then
`countersign serve` on a free port with a configuration and a SQLite file of
its own, for each test class.

COUNTERSIGN_BIN names a binary to use instead of building one.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import time
import unittest
import urllib.request
from typing import List, Optional

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.abspath(os.path.join(HERE, "..", "..", ".."))
sys.path.insert(0, os.path.abspath(os.path.join(HERE, "..")))

from countersign import Client  # noqa: E402

#: The lease the test servers give: short, so that lapses are quick to see.
LEASE = 2.0

CONFIG = """\
store: sqlite:countersign.db
auto_migrate: true
auth:
  api_keys:
    - {key: ck_py_alice, tenant: acme, actor: alice, roles: [agent]}
    - {key: ck_py_bob, tenant: acme, actor: bob, roles: [finance, operator]}
    - {key: ck_py_dave, tenant: acme, actor: dave, roles: [agent]}
worker: {poll_interval: 100ms, lease: 2s, max_attempts: 3}
policy:
  rules:
    - {match: "payments.*", effect: ask, approvers: ["role:finance"]}
    - {match: "mail.*", effect: allow}
actions:
  - name: payments.refund
    description: Refund a payment
    input_schema:
      type: object
      required: [amount, customer]
      additionalProperties: false
      properties: {amount: {type: number, exclusiveMinimum: 0}, customer: {type: string}}
    confirmation: {title: "Refund {amount} EUR to {customer}", verb: Refund}
    execute: {by: caller}
  - name: mail.send
    execute: {by: caller}
  - name: mail.sync
    idempotent: true
    execute: {by: caller}
"""

_bin_lock = threading.Lock()
_bin: Optional[str] = None
_bin_dir: Optional[str] = None


def binary() -> str:
    """The countersign binary: COUNTERSIGN_BIN, or one built from this checkout."""
    global _bin, _bin_dir
    with _bin_lock:
        if _bin:
            return _bin
        env = os.environ.get("COUNTERSIGN_BIN")
        if env:
            _bin = env
            return _bin
        if shutil.which("go") is None:
            raise unittest.SkipTest("go is not installed: set COUNTERSIGN_BIN to a countersign binary")
        _bin_dir = tempfile.mkdtemp(prefix="countersign-py-bin-")
        out = os.path.join(_bin_dir, "countersign")
        subprocess.run(["go", "build", "-o", out, "./cmd/countersign"], cwd=ROOT, check=True)
        _bin = out
        return _bin


_listening = re.compile(r"countersign listening on (http://127\.0\.0\.1:[0-9]+)")


class Server:
    """One `countersign serve`, stopped by close()."""

    def __init__(self, config: str = CONFIG) -> None:
        self.dir = tempfile.mkdtemp(prefix="countersign-py-")
        path = os.path.join(self.dir, "countersign.yaml")
        with open(path, "w") as f:
            f.write(config)
        self.proc = subprocess.Popen(
            [binary(), "serve", "--config", path, "--listen", "127.0.0.1:0"],
            cwd=self.dir, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
        )
        self.logs: List[str] = []
        found = threading.Event()
        self.url = ""

        def read() -> None:
            assert self.proc.stdout is not None
            for line in self.proc.stdout:
                self.logs.append(line)
                m = _listening.search(line)
                if m and not found.is_set():
                    self.url = m.group(1)
                    found.set()

        self._reader = threading.Thread(target=read, daemon=True)
        self._reader.start()
        if not found.wait(60) or self.proc.poll() is not None and not self.url:
            self.close()
            raise RuntimeError("countersign serve did not start:\n" + "".join(self.logs))
        deadline = time.monotonic() + 30
        while True:
            try:
                with urllib.request.urlopen(self.url + "/readyz", timeout=5) as r:
                    if r.status == 200:
                        break
            except OSError:
                pass
            if time.monotonic() > deadline:
                self.close()
                raise RuntimeError("countersign serve is not ready:\n" + "".join(self.logs))
            time.sleep(0.05)

    def client(self, who: str) -> Client:
        return Client(self.url, "ck_py_" + who)

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self._reader.join(5)
        if self.proc.stdout is not None:
            self.proc.stdout.close()
        shutil.rmtree(self.dir, ignore_errors=True)


class ServerTest(unittest.TestCase):
    """A test class with a server of its own (self.server), and clients for
    alice (an agent), bob (finance and operator) and dave (an agent)."""

    server: Server

    @classmethod
    def setUpClass(cls) -> None:
        cls.server = Server()
        cls.alice = cls.server.client("alice")
        cls.bob = cls.server.client("bob")
        cls.dave = cls.server.client("dave")

    @classmethod
    def tearDownClass(cls) -> None:
        cls.server.close()

    _n = 0
    _n_lock = threading.Lock()

    def unique(self, prefix: str) -> str:
        with ServerTest._n_lock:
            ServerTest._n += 1
            return f"{prefix}_{ServerTest._n}_{os.getpid()}"

    def wait_status(self, client: Client, proposal_id: str, want: str, within: float) -> dict:
        deadline = time.monotonic() + within
        while True:
            p = client.get_proposal(proposal_id)
            if p["status"] == want:
                return p
            if time.monotonic() > deadline:
                self.fail(f"proposal {proposal_id} is {p['status']} after {within}s, want {want}")
            time.sleep(0.05)
