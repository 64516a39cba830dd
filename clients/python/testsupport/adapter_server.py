"""What every adapter package's agent tests share, once: a real `countersign
serve` on SQLite or PostgreSQL with caller-executed actions, the backend the
tools change (it counts every execution it receives: at most once is read
off it), the side effects of the three tools, and the set-up of the test
class that drives them.

Every adapter runs its scenarios against the same configuration:
payments.refund asks finance and is reconciled against the backend,
payments.hold asks and expires after 2 s, mail.send is allowed, and
payments.wire is executed by the server's webhook. The tools refund, hold
and mail POST to the backend with the operation id as the idempotency key;
the environment names the backend (CS_LG_BACKEND for the adapter lg) and
what else the tool does (CS_LG_MODE: slow, hang, crash or not_applied), so
that the second process of a cross-process test (lg_child.py) does the same.

An adapter's harness makes its Adapter, wraps Adapter.tools() in its
framework's tools and builds its agent (see langgraph/tests/lg_harness.py);
its test_*_agent.py mixes AdapterScenarios into a unittest.TestCase and
names its Adapter and its child process."""

from __future__ import annotations

import http.server
import itertools
import json
import os
import queue
import signal
import subprocess
import sys
import threading
import time
import unittest
import urllib.request
from typing import Any, Callable, Dict, List, Sequence, Tuple

from server import Server, drop_pg_schema, pg_schema_url

from countersign import Client, NotApplied

#: The lease config() gives: short, so that lapses are quick to see.
LEASE = 2.0


class Adapter:
    """One adapter's side of the harness: its short name and how its tools
    find the execution they run under."""

    def __init__(self, short: str, current_execution: Callable[[], Any], wire_input_schema: bool = False) -> None:
        #: lg, oa, pai or adk: the API keys are ck_<short>_agent, _alice and
        #: _bob, and the environment CS_<SHORT>_BACKEND and CS_<SHORT>_MODE.
        self.short = short
        self.backend_env = f"CS_{short.upper()}_BACKEND"
        self.mode_env = f"CS_{short.upper()}_MODE"
        #: The adapter's current_execution: the claimed execution a tool
        #: runs under (its operation id is the backend's idempotency key).
        self.current_execution = current_execution
        #: Whether payments.wire declares its input ({customer}): an adapter
        #: that makes a tool of the action itself reads it from there.
        self.wire_input_schema = wire_input_schema

    def key(self, who: str) -> str:
        """The API key of agent (alice's agent credential), alice (a human)
        or bob (a human of finance, who decides)."""
        return f"ck_{self.short}_{who}"

    def config(self, store: str, backend: str) -> str:
        """The server's configuration on ``store``, with ``backend`` the URL
        of the Backend that reconciles refunds and executes wires."""
        wire_schema = (
            """
    input_schema:
      type: object
      required: [customer]
      properties: {customer: {type: string}}"""
            if self.wire_input_schema
            else ""
        )
        return f"""\
store: {store}
auto_migrate: true
auth:
  api_keys:
    - {{key: {self.key("agent")}, tenant: acme, actor: alice, kind: agent}}
    - {{key: {self.key("alice")}, tenant: acme, actor: alice, kind: human}}
    - {{key: {self.key("bob")}, tenant: acme, actor: bob, roles: [finance, operator], kind: human}}
worker: {{poll_interval: 100ms, lease: 2s, max_attempts: 3}}
policy:
  rules:
    - {{match: payments.refund, effect: ask, approvers: ["role:finance"], remember: [thread]}}
    - {{match: payments.hold, effect: ask, approvers: ["role:finance"], ttl: 2s}}
    - {{match: payments.wire, effect: ask, approvers: ["role:finance"]}}
    - {{match: "mail.*", effect: allow}}
actions:
  - name: payments.refund
    description: Refund a payment
    input_schema:
      type: object
      required: [amount, customer]
      additionalProperties: false
      properties: {{amount: {{type: number, exclusiveMinimum: 0}}, customer: {{type: string}}}}
    confirmation: {{title: "Refund {{amount}} EUR to {{customer}}", verb: Refund}}
    execute: {{by: caller}}
    reconcile: {{url: {backend}/reconcile, timeout: 5s}}
  - name: payments.hold
    description: Put a payment on hold
    execute: {{by: caller}}
  - name: mail.send
    execute: {{by: caller}}
  - name: payments.wire
    description: A wire the server executes (a webhook action){wire_schema}
    execute: {{url: {backend}/execute, timeout: 5s}}
"""

    def execute(self, customer: str, amount: float) -> str:
        """A tool's side effect: one POST to the backend, with the operation
        id as its idempotency key; then what CS_<SHORT>_MODE asks."""
        run = self.current_execution()
        op = run.operation_id if run is not None else "none"
        body = json.dumps({"operation_id": op, "input": {"amount": amount, "customer": customer}}).encode()
        req = urllib.request.Request(os.environ[self.backend_env] + "/execute", data=body, headers={"Content-Type": "application/json"})
        with urllib.request.urlopen(req, timeout=30) as r:
            receipt = json.loads(r.read())["receipt"]
        mode = os.environ.get(self.mode_env, "")
        if mode == "slow":
            time.sleep(LEASE * 1.25)  # past the lease: it runs under renewals
        elif mode == "hang":
            print("RAN " + op, flush=True)  # the parent kills this process now
            while True:
                time.sleep(60)
        elif mode == "crash":
            raise ConnectionResetError("the backend's answer was lost")
        return f"refunded {amount:g} to {customer} ({receipt})"

    def tools(self) -> Tuple[Callable[..., str], Callable[..., str], Callable[..., str]]:
        """refund, hold and mail: plain functions, with the names, types and
        descriptions a framework reads, for the harness to make its tools of."""
        adapter = self

        def refund(amount: float, customer: str) -> str:
            """Refund a payment."""
            return adapter.execute(customer, amount)

        def hold(customer: str) -> str:
            """Put a payment on hold."""
            if os.environ.get(adapter.mode_env) == "not_applied":
                raise NotApplied("the payment was already settled")
            return adapter.execute(customer, 0.5)

        def mail(to: str) -> str:
            """Send a mail."""
            return adapter.execute(to, 0.1)

        return refund, hold, mail


class Backend:
    """The system of record the tools change: POST /execute records the
    operation and answers a receipt; POST /reconcile answers whether an
    operation id was applied (the server asks it for a lapsed lease).
    ``executed`` lists every execution received, repeats included."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.executed: List[Dict[str, Any]] = []
        self.reconciled: List[str] = []
        backend = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802
                n = int(self.headers.get("Content-Length") or 0)
                req = json.loads(self.rfile.read(n) or b"{}")
                op = str(req.get("operation_id"))
                with backend.lock:
                    if self.path == "/execute":
                        backend.executed.append(req)
                        body: Dict[str, Any] = {"receipt": "rf_" + op}
                    elif self.path == "/reconcile":
                        backend.reconciled.append(op)
                        done = any(e.get("operation_id") == op for e in backend.executed)
                        body = {"status": "applied", "receipt": "rf_" + op} if done else {"status": "not_applied"}
                    else:
                        self.send_error(404)
                        return
                raw = json.dumps(body).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(raw)))
                self.end_headers()
                self.wfile.write(raw)

            def log_message(self, *args: object) -> None:
                pass

        self.httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def count(self, customer: str) -> int:
        """How many executions for a customer (or a mail's recipient) the backend received."""
        with self.lock:
            return sum(1 for e in self.executed if (e.get("input") or {}).get("customer") == customer)

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


def wait_until(test: unittest.TestCase, ok: Any, within: float, what: str) -> None:
    """Polls ok() every 50 ms until it is true, failing the test after ``within`` s."""
    deadline = time.monotonic() + within
    while not ok():
        if time.monotonic() > deadline:
            test.fail(f"after {within}s: {what}")
        time.sleep(0.05)


#: Numbers the names unique() makes, across every adapter's classes.
_unique = itertools.count(1)


class AdapterScenarios:
    """The set-up of one adapter's scenarios; mixed into a unittest.TestCase,
    whose SQLite and PostgreSQL subclasses set ``store``. For the class: a
    Backend and a server on the store (PostgreSQL on a schema of its own,
    dropped after), agent_client (the adapter's agent credential, which
    never decides) and bob (a human of finance, who decides over HTTP).
    For each test: no mode left in the environment by another."""

    #: The adapter whose scenarios these are.
    adapter: Adapter
    #: The second process of the cross-process tests (<short>_child.py): its
    #: arguments are the server's URL, then spawn()'s.
    child: str
    #: sqlite or postgres.
    store = "sqlite"

    backend: Backend
    server: Server
    schema: str
    agent_client: Client
    bob: Client

    @classmethod
    def setUpClass(cls) -> None:
        cls.backend = Backend()
        os.environ[cls.adapter.backend_env] = cls.backend.url
        cls.schema = ""
        url = "sqlite:countersign.db"
        if cls.store == "postgres":
            url, cls.schema = pg_schema_url()
        try:
            secret = f"{cls.adapter.short}-test-secret-0123456789abcdef"
            cls.server = Server(cls.adapter.config(url, cls.backend.url), env={"COUNTERSIGN_WEBHOOK_SECRET": secret})
        except BaseException:
            cls.backend.close()
            raise
        cls.agent_client = Client(cls.server.url, cls.adapter.key("agent"))
        cls.bob = Client(cls.server.url, cls.adapter.key("bob"))

    @classmethod
    def tearDownClass(cls) -> None:
        cls.server.close()
        cls.backend.close()
        if cls.schema:
            drop_pg_schema(cls.schema)

    def setUp(self) -> None:
        os.environ.pop(self.adapter.mode_env, None)
        self.addCleanup(os.environ.pop, self.adapter.mode_env, None)

    def unique(self, prefix: str) -> str:
        """A name no other test of this run uses (a thread, a customer)."""
        return f"{prefix}_{self.store}_{next(_unique)}_{os.getpid()}"

    # -- at most once, across processes --------------------------------------

    def spawn(self, mode: str, *args: str) -> subprocess.Popen:
        """The child process on this server and backend, its tools doing
        what ``mode`` says."""
        env = {**os.environ, self.adapter.backend_env: self.backend.url, self.adapter.mode_env: mode}
        return subprocess.Popen(
            [sys.executable, self.child, self.server.url, *args],
            env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        )

    def last_lines(self, kids: Sequence[subprocess.Popen]) -> List[Any]:
        """What each child printed last, as JSON, once it exited 0."""
        outs = []
        for k in kids:
            stdout, stderr = k.communicate(timeout=120)
            self.assertEqual(k.returncode, 0, stderr)
            outs.append(json.loads(stdout.strip().splitlines()[-1]))
        return outs

    def executed_once(self, pid: str, p: Dict[str, Any], customer: str) -> None:
        """Checks, after two processes resumed the approved proposal ``p``
        at once, that one of them claimed and executed it, under a lease
        renewed until it settled."""
        self.assertEqual(self.backend.count(customer), 1)
        self.assertEqual(p["status"], "succeeded", "the renewed lease was never lost")
        claims = [e for e in self.bob.proposal_events(pid) if e["type"] == "proposal.claimed"]
        self.assertEqual(len(claims), 1)

    def killed_after_its_side_effect(self, kid: subprocess.Popen, pid: str) -> Dict[str, Any]:
        """Kills the child (mode hang) once its tool's side effect is done
        and before it settles, then waits for the server to reconcile the
        lapsed lease with the backend: the proposal, succeeded."""
        lines: "queue.Queue[str]" = queue.Queue()
        assert kid.stdout is not None
        threading.Thread(target=lambda: [lines.put(x) for x in kid.stdout], daemon=True).start()  # type: ignore[union-attr]
        try:
            try:
                line = lines.get(timeout=60)  # the side effect is done, nothing settled
            except queue.Empty:
                line = "(nothing)"
            if not line.startswith("RAN op_"):
                kid.kill()
                self.fail(f"the child did not run the tool: {line}\n{kid.communicate()[1]}")
            self.assertEqual(self.bob.get_proposal(pid)["status"], "executing")
        finally:
            kid.send_signal(signal.SIGKILL)
            kid.communicate(timeout=30)
        # The lease lapses; the server asks the backend, which holds the operation.
        wait_until(self, lambda: self.bob.get_proposal(pid)["status"] == "succeeded", 60, "reconciled applied")
        p = self.bob.get_proposal(pid)
        self.assertEqual(p["outcome"]["receipt"], "rf_" + p["operation_id"])
        self.assertIn(p["operation_id"], self.backend.reconciled)
        return p

    def ran_once_decided_by_bob(self, pid: str, p: Dict[str, Any], customer: str) -> None:
        """Checks that the backend executed the customer's call once, under
        the proposal's operation id, and that the only decision was bob's, a
        human's, over the API: the agent only claimed and settled."""
        self.assertEqual(self.backend.count(customer), 1)
        self.assertEqual([e["operation_id"] for e in self.backend.executed if e["input"]["customer"] == customer], [p["operation_id"]])
        self.assertEqual([(d["actor"], d["actor_kind"], d["via"]) for d in p["decisions"]], [("bob", "human", "api")])
        events = self.bob.proposal_events(pid)
        self.assertEqual(sum(e["type"] == "proposal.claimed" for e in events), 1)
        self.assertEqual(sum(e["type"] == "proposal.settled" for e in events), 1)
