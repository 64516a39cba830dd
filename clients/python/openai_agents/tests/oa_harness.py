"""What countersign-openai-agents' tests share: a real `countersign serve` on
SQLite or PostgreSQL with caller-executed actions, the backend the tools
change (it counts every execution it receives: at most once is read off
it), the SDK's own scripted model (agents.testing.ScriptedModel: no
network, no key) and the agent.

Imported by the tests and by oa_child.py, the second process of the
cross-process tests; the child finds the backend through CS_OA_BACKEND and
what its tool does through CS_OA_MODE."""

from __future__ import annotations

import http.server
import json
import os
import threading
import time
import unittest
import urllib.request
from typing import Any, Dict, List, Sequence

from agents import Agent, ToolCallOutputItem, function_tool, set_tracing_disabled
from agents.testing import ModelStep, ScriptedModel, assistant_message, function_call

from countersign import Client, NotApplied
from countersign_openai_agents import current_execution, gated

# No network: the SDK's traces go nowhere.
set_tracing_disabled(True)

#: The test servers' lease: short, so that lapses are quick to see.
LEASE = 2.0


def config(store: str, backend: str) -> str:
    return f"""\
store: {store}
auto_migrate: true
auth:
  api_keys:
    - {{key: ck_oa_agent, tenant: acme, actor: alice, kind: agent}}
    - {{key: ck_oa_alice, tenant: acme, actor: alice, kind: human}}
    - {{key: ck_oa_bob, tenant: acme, actor: bob, roles: [finance, operator], kind: human}}
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
    description: A wire the server executes (a webhook action)
    execute: {{url: {backend}/execute, timeout: 5s}}
"""


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
        """How many executions of a customer's calls the backend received."""
        with self.lock:
            return sum(1 for e in self.executed if (e.get("input") or {}).get("customer") == customer)

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


def _execute(customer: str, amount: float) -> str:
    """The side effect: one POST to the backend, with the operation id as
    its idempotency key; then what CS_OA_MODE asks."""
    run = current_execution()
    op = run.operation_id if run is not None else "none"
    body = json.dumps({"operation_id": op, "input": {"amount": amount, "customer": customer}}).encode()
    req = urllib.request.Request(os.environ["CS_OA_BACKEND"] + "/execute", data=body, headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=30) as r:
        receipt = json.loads(r.read())["receipt"]
    mode = os.environ.get("CS_OA_MODE", "")
    if mode == "slow":
        time.sleep(LEASE * 1.25)  # past the lease: it runs under renewals
    elif mode == "hang":
        print("RAN " + op, flush=True)  # the parent kills this process now
        while True:
            time.sleep(60)
    elif mode == "crash":
        raise ConnectionResetError("the backend's answer was lost")
    return f"refunded {amount:g} to {customer} ({receipt})"


@function_tool
def refund(amount: float, customer: str) -> str:
    """Refund a payment."""
    return _execute(customer, amount)


@function_tool
def hold(customer: str) -> str:
    """Put a payment on hold."""
    if os.environ.get("CS_OA_MODE") == "not_applied":
        raise NotApplied("the payment was already settled")
    return _execute(customer, 0.5)


@function_tool
def mail(to: str) -> str:
    """Send a mail."""
    return _execute(to, 0.1)


def call(name: str, args: Dict[str, Any], cid: str) -> Any:
    """One tool call the scripted model makes."""
    return function_call(name, args, call_id=cid)


def model(calls: Sequence[Any]) -> ScriptedModel:
    """The SDK's ScriptedModel: each turn makes ``calls``, unless tools have
    answered since the last user message, then it says "done" with their
    outputs. Enough steps for a run and several resumes of it."""

    def respond(mc: Any) -> Any:
        items = mc.input if isinstance(mc.input, list) else []
        last_user = max((i for i, it in enumerate(items) if _get(it, "role") == "user"), default=-1)
        outputs = [str(_get(it, "output")) for it in items[last_user + 1 :] if _get(it, "type") == "function_call_output"]
        if outputs:
            return [assistant_message("done: " + " | ".join(outputs))]
        return list(calls)

    return ScriptedModel([ModelStep.respond(respond) for _ in range(16)])


def _get(item: Any, key: str) -> Any:
    return item.get(key) if isinstance(item, dict) else getattr(item, key, None)


def tools(client: Client) -> List[Any]:
    return [
        gated(refund, client, action="payments.refund"),
        gated(hold, client, action="payments.hold"),
        gated(mail, client, action="mail.send"),
    ]


def agent(client: Client, calls: Sequence[Any]) -> Agent:
    """The agent: the scripted model and the gated tools."""
    return Agent(name="support", instructions="Refund what is asked.", model=model(calls), tools=tools(client))


def outputs(result: Any) -> List[str]:
    """The tool outputs of a run's new items, in order."""
    return [str(i.output) for i in result.new_items if isinstance(i, ToolCallOutputItem)]


def wait_until(test: unittest.TestCase, ok: Any, within: float, what: str) -> None:
    """Polls ok() every 50 ms until it is true, failing the test after ``within`` s."""
    deadline = time.monotonic() + within
    while not ok():
        if time.monotonic() > deadline:
            test.fail(f"after {within}s: {what}")
        time.sleep(0.05)
