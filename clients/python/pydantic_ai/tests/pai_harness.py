"""What countersign-pydantic-ai's tests share: a real `countersign serve` on
SQLite or PostgreSQL with caller-executed actions, the backend the tools
change (it counts every execution it receives: at most once is read off
it), Pydantic AI's own FunctionModel playing a script (no network, no key)
and the agent.

Imported by the tests and by pai_child.py, the second process of the
cross-process tests; the child finds the backend through CS_PAI_BACKEND and
what its tools do through CS_PAI_MODE."""

from __future__ import annotations

import http.server
import json
import os
import threading
import time
import unittest
import urllib.request
from typing import Any, Dict, List, Sequence, Tuple

from pydantic_ai import Agent, DeferredToolRequests
from pydantic_ai.messages import ModelMessage, ModelRequest, ModelResponse, TextPart, ToolCallPart, ToolReturnPart, UserPromptPart
from pydantic_ai.models.function import AgentInfo, FunctionModel

from countersign import Client, NotApplied
from countersign_pydantic_ai import Countersign, current_execution

#: The test servers' lease: short, so that lapses are quick to see.
LEASE = 2.0

#: The gated tools and their actions.
ACTIONS = {"refund": "payments.refund", "hold": "payments.hold", "mail": "mail.send"}


def config(store: str, backend: str) -> str:
    return f"""\
store: {store}
auto_migrate: true
auth:
  api_keys:
    - {{key: ck_pai_agent, tenant: acme, actor: alice, kind: agent}}
    - {{key: ck_pai_alice, tenant: acme, actor: alice, kind: human}}
    - {{key: ck_pai_bob, tenant: acme, actor: bob, roles: [finance, operator], kind: human}}
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
    input_schema:
      type: object
      required: [customer]
      properties: {{customer: {{type: string}}}}
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
        """How many executions for a customer the backend received."""
        with self.lock:
            return sum(1 for e in self.executed if (e.get("input") or {}).get("customer") == customer)

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


def _execute(customer: str, amount: float) -> str:
    """The side effect: one POST to the backend, with the operation id as
    its idempotency key; then what CS_PAI_MODE asks."""
    run = current_execution()
    op = run.operation_id if run is not None else "none"
    body = json.dumps({"operation_id": op, "input": {"amount": amount, "customer": customer}}).encode()
    req = urllib.request.Request(os.environ["CS_PAI_BACKEND"] + "/execute", data=body, headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=30) as r:
        receipt = json.loads(r.read())["receipt"]
    mode = os.environ.get("CS_PAI_MODE", "")
    if mode == "slow":
        time.sleep(LEASE * 1.25)  # past the lease: it runs under renewals
    elif mode == "hang":
        print("RAN " + op, flush=True)  # the parent kills this process now
        while True:
            time.sleep(60)
    elif mode == "crash":
        raise ConnectionResetError("the backend's answer was lost")
    return f"refunded {amount:g} to {customer} ({receipt})"


def refund(amount: float, customer: str) -> str:
    """Refund a payment."""
    return _execute(customer, amount)


def hold(customer: str) -> str:
    """Put a payment on hold."""
    if os.environ.get("CS_PAI_MODE") == "not_applied":
        raise NotApplied("the payment was already settled")
    return _execute(customer, 0.5)


def mail(to: str) -> str:
    """Send a mail."""
    return _execute(to, 0.1)


Call = Tuple[str, Dict[str, Any], str]


def script(calls: Sequence[Call]) -> FunctionModel:
    """Pydantic AI's FunctionModel answering from a script: the tool calls
    after each user prompt, then, once tools answered, "done". No network."""

    def respond(messages: List[ModelMessage], info: AgentInfo) -> ModelResponse:
        last_prompt = max(
            i for i, m in enumerate(messages) if isinstance(m, ModelRequest) and any(isinstance(p, UserPromptPart) for p in m.parts)
        )
        answered = any(
            isinstance(m, ModelRequest) and any(isinstance(p, ToolReturnPart) for p in m.parts) for m in messages[last_prompt + 1 :]
        )
        if answered:
            return ModelResponse(parts=[TextPart("done")])
        return ModelResponse(parts=[ToolCallPart(name, dict(args), tool_call_id=cid) for name, args, cid in calls])

    return FunctionModel(respond)


def agent(client: Client, calls: Sequence[Call], **options: Any) -> Agent[None, Any]:
    """An agent with the scripted model, the three tools and Countersign gating them."""
    return Agent(
        script(calls),
        tools=[refund, hold, mail],
        output_type=[str, DeferredToolRequests],
        capabilities=[Countersign(client, ACTIONS, **options)],
    )


def returns(messages: Sequence[ModelMessage]) -> Dict[str, Tuple[str, Any]]:
    """Each tool call's answer in the messages: {tool_call_id: (outcome, content)},
    the last one a call got."""
    out: Dict[str, Tuple[str, Any]] = {}
    for m in messages:
        if isinstance(m, ModelRequest):
            for p in m.parts:
                if isinstance(p, ToolReturnPart):
                    out[p.tool_call_id] = (p.outcome, p.content)
    return out


def wait_until(test: unittest.TestCase, ok: Any, within: float, what: str) -> None:
    """Polls ok() every 50 ms until it is true, failing the test after ``within`` s."""
    deadline = time.monotonic() + within
    while not ok():
        if time.monotonic() > deadline:
            test.fail(f"after {within}s: {what}")
        time.sleep(0.05)
