"""The real server for the tests: `go build ./cmd/countersign` once, then
`countersign serve` on a free port with a configuration and a SQLite file of
its own, for each test class. CountingProxy stands between a client and it
and records every request (how the tests count what a client sent), and
Backend is a webhook backend for the actions the server executes itself.

COUNTERSIGN_BIN names a binary to use instead of building one.
"""

from __future__ import annotations

import http.client
import http.server
import json
import os
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time
import unittest
import urllib.parse
import urllib.request
from typing import Any, Dict, List, Mapping, Optional, Tuple

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
    - {key: ck_py_agent, tenant: acme, actor: alice, kind: agent}
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


#: The PostgreSQL server the tests use (COUNTERSIGN_TEST_POSTGRES, as the Go tests).
PG_DSN = os.environ.get("COUNTERSIGN_TEST_POSTGRES", "postgres://postgres@127.0.0.1:5432/test?sslmode=disable")


def pg_schema_url() -> Tuple[str, str]:
    """A store URL on a schema of its own (cs_t_py_ and random hex, so that
    leftovers of a killed run are found like the Go tests'), and the
    schema's name. The server creates the schema; drop_pg_schema drops it.
    Skips the test when PostgreSQL cannot be reached, except in CI (the
    environment variable CI set), where that fails it."""
    u = urllib.parse.urlsplit(PG_DSN)
    try:
        socket.create_connection((u.hostname or "127.0.0.1", u.port or 5432), timeout=5).close()
    except OSError as e:
        msg = f"PostgreSQL is not reachable at {u.hostname}:{u.port or 5432} ({e}): `make services` starts one"
        if os.environ.get("CI"):
            raise AssertionError(msg) from None
        raise unittest.SkipTest(msg) from None
    schema = "cs_t_py_" + os.urandom(6).hex()
    sep = "&" if u.query else "?"
    return PG_DSN + sep + "schema=" + schema, schema


def drop_pg_schema(schema: str) -> None:
    """Drops a schema pg_schema_url named, with psql when it is installed
    (the client has no PostgreSQL driver: it is standard library only)."""
    if not re.fullmatch(r"cs_t_py_[0-9a-f]+", schema) or shutil.which("psql") is None:
        return
    dsn = re.sub(r"([?&])schema=[^&]*&?", r"\1", PG_DSN).rstrip("?&")
    subprocess.run(["psql", dsn, "-q", "-c", f"DROP SCHEMA IF EXISTS {schema} CASCADE"], capture_output=True, timeout=60)


_listening = re.compile(r"countersign listening on (http://127\.0\.0\.1:[0-9]+)")


class Server:
    """One `countersign serve`, stopped by close()."""

    def __init__(self, config: Optional[str] = CONFIG, env: Optional[Mapping[str, str]] = None) -> None:
        """config None: the demo (serve without --config), on a SQLite file in a folder of its own."""
        self.dir = tempfile.mkdtemp(prefix="countersign-py-")
        args = [binary(), "serve", "--listen", "127.0.0.1:0"]
        if config is not None:
            path = os.path.join(self.dir, "countersign.yaml")
            with open(path, "w") as f:
                f.write(config)
            args += ["--config", path]
        self.proc = subprocess.Popen(
            args,
            cwd=self.dir, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
            env={**os.environ, **(env or {})},
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


class CountingProxy:
    """An HTTP proxy in front of upstream that records each request it
    forwards: (monotonic time it arrived, method, path without the query).
    Stopped by close()."""

    def __init__(self, upstream: str) -> None:
        u = urllib.parse.urlsplit(upstream)
        host, port = u.hostname or "127.0.0.1", u.port or 80
        self.lock = threading.Lock()
        self.seen: List[Tuple[float, str, str]] = []
        proxy = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def _forward(self) -> None:
                with proxy.lock:
                    proxy.seen.append((time.monotonic(), self.command, self.path.split("?", 1)[0]))
                n = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(n) if n else None
                skip = {"host", "connection", "content-length", "transfer-encoding"}
                headers = {k: v for k, v in self.headers.items() if k.lower() not in skip}
                conn = http.client.HTTPConnection(host, port, timeout=120)
                try:
                    conn.request(self.command, self.path, body=body, headers=headers)
                    resp = conn.getresponse()
                    data = resp.read()
                finally:
                    conn.close()
                self.send_response(resp.status)
                for k, v in resp.getheaders():
                    if k.lower() not in skip | {"date", "server"}:
                        self.send_header(k, v)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            do_GET = do_POST = do_DELETE = _forward

            def log_message(self, *args: object) -> None:
                pass

        self.httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        self._thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self._thread.start()

    def requests(self, method: str, path: str) -> List[float]:
        """When each request of method to path arrived (monotonic seconds)."""
        with self.lock:
            return [t for t, m, p in self.seen if m == method and p == path]

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


class Backend:
    """A webhook backend for the actions the server executes: each POST
    /execute is recorded and answered 2xx with a receipt and the result
    {"paid_by": "the server", "input": …}. It does not check signatures (the
    Go tests do). Stopped by close()."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.executed: List[Dict[str, Any]] = []
        backend = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802
                n = int(self.headers.get("Content-Length") or 0)
                req = json.loads(self.rfile.read(n) or b"{}")
                if self.path != "/execute":
                    self.send_error(404)
                    return
                with backend.lock:
                    backend.executed.append(req)
                body = json.dumps({"receipt": "wh_" + str(req.get("operation_id")), "result": {"paid_by": "the server", "input": req.get("input")}}).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args: object) -> None:
                pass

        self.httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


class ServerTest(unittest.TestCase):
    """A test class with a server of its own (self.server), and clients for
    alice (a human, the owner of the threads she calls in), agent (alice's
    agent credential, kind agent), bob (finance and operator) and dave."""

    server: Server

    @classmethod
    def setUpClass(cls) -> None:
        cls.server = Server()
        cls.alice = cls.server.client("alice")
        cls.agent = cls.server.client("agent")
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


class WebhookServerTest(unittest.TestCase):
    """A test class with a server of its own on ``config`` (a template whose
    ``{backend}`` names the Backend it starts for the webhook and read
    actions; its webhook secret is in PY_WEBHOOK_SECRET), and clients for
    agent and bob."""

    config: str
    server: Server
    backend: Backend

    @classmethod
    def setUpClass(cls) -> None:
        cls.backend = Backend()
        try:
            cls.server = Server(cls.config.format(backend=cls.backend.url), env={"PY_WEBHOOK_SECRET": "py-test-webhook-secret"})
        except BaseException:
            cls.backend.close()
            raise
        cls.agent = cls.server.client("agent")
        cls.bob = cls.server.client("bob")

    @classmethod
    def tearDownClass(cls) -> None:
        cls.server.close()
        cls.backend.close()
