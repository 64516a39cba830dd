"""What countersign-google-adk's tests share: a real `countersign serve` on
SQLite or PostgreSQL with caller-executed actions, the backend the tools
change (it counts every execution it receives: at most once is read off
it), a scripted model (ADK's own BaseLlm; no network, no key) and the
agent with its runner.

Imported by the tests and by adk_child.py, the second process of the
cross-process tests; the child finds the backend through CS_ADK_BACKEND and
what its tool does through CS_ADK_MODE. Both processes share the session
through ADK's SqliteSessionService on one file."""

from __future__ import annotations

import asyncio
import http.server
import json
import os
import threading
import time
import unittest
import urllib.request
from typing import Any, AsyncGenerator, Dict, List, Optional, Sequence

from google.adk.agents import LlmAgent
from google.adk.models.base_llm import BaseLlm
from google.adk.models.llm_request import LlmRequest
from google.adk.models.llm_response import LlmResponse
from google.adk.runners import Runner
from google.adk.sessions import BaseSessionService, InMemorySessionService
from google.genai import types

from countersign import Client, NotApplied
from countersign_google_adk import CONFIRMATION_CALL, current_execution, gated

APP = "countersign-adk-tests"
USER = "u1"

#: The test servers' lease: short, so that lapses are quick to see.
LEASE = 2.0


def config(store: str, backend: str) -> str:
    return f"""\
store: {store}
auto_migrate: true
auth:
  api_keys:
    - {{key: ck_adk_agent, tenant: acme, actor: alice, kind: agent}}
    - {{key: ck_adk_alice, tenant: acme, actor: alice, kind: human}}
    - {{key: ck_adk_bob, tenant: acme, actor: bob, roles: [finance, operator], kind: human}}
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
        """How many executions of a customer's refunds the backend received."""
        with self.lock:
            return sum(1 for e in self.executed if (e.get("input") or {}).get("customer") == customer)

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


def _execute(customer: str, amount: float) -> str:
    """The refund's side effect: one POST to the backend, with the
    operation id as its idempotency key; then what CS_ADK_MODE asks."""
    run = current_execution()
    op = run.operation_id if run is not None else "none"
    body = json.dumps({"operation_id": op, "input": {"amount": amount, "customer": customer}}).encode()
    req = urllib.request.Request(os.environ["CS_ADK_BACKEND"] + "/execute", data=body, headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=30) as r:
        receipt = json.loads(r.read())["receipt"]
    mode = os.environ.get("CS_ADK_MODE", "")
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
    if os.environ.get("CS_ADK_MODE") == "not_applied":
        raise NotApplied("the payment was already settled")
    return _execute(customer, 0.5)


def mail(to: str) -> str:
    """Send a mail."""
    return _execute(to, 0.1)


def call(name: str, args: Dict[str, Any], cid: str) -> Dict[str, Any]:
    return {"name": name, "args": args, "id": cid}


class ScriptedModel(BaseLlm):
    """ADK's model interface answering from a script: its function calls
    until the tools answered after the last user text, then a text naming
    each tool's response. No network."""

    calls: List[Dict[str, Any]] = []

    async def generate_content_async(self, llm_request: LlmRequest, stream: bool = False) -> AsyncGenerator[LlmResponse, None]:
        contents = list(llm_request.contents or [])
        last_text = max((i for i, c in enumerate(contents) if c.role == "user" and any(p.text for p in c.parts or [])), default=-1)
        answered = [
            p.function_response
            for c in contents[last_text + 1 :]
            for p in c.parts or []
            if p.function_response is not None and p.function_response.name != CONFIRMATION_CALL
        ]
        if answered:
            text = "; ".join(f"{r.name}: {json.dumps(r.response, sort_keys=True)}" for r in answered)
            yield LlmResponse(content=types.Content(role="model", parts=[types.Part(text=text)]))
            return
        parts = [types.Part(function_call=types.FunctionCall(name=c["name"], args=c["args"], id=c["id"])) for c in self.calls]
        yield LlmResponse(content=types.Content(role="model", parts=parts))


def agent(client: Client, calls: Sequence[Dict[str, Any]], resume_wait_seconds: float = 1) -> LlmAgent:
    """An LlmAgent with the scripted model and the three gated tools (an
    early confirmation waits 1 s for the approvers unless told: tests stay short)."""
    return LlmAgent(
        name="payments",
        model=ScriptedModel(model="scripted", calls=list(calls)),
        instruction="Make the tool calls you are asked for.",
        tools=[
            gated(refund, client, action="payments.refund", resume_wait_seconds=resume_wait_seconds),
            gated(hold, client, action="payments.hold", resume_wait_seconds=resume_wait_seconds),
            gated(mail, client, action="mail.send", resume_wait_seconds=resume_wait_seconds),
        ],
    )


def runner(root: Any, sessions: Optional[BaseSessionService] = None) -> Runner:
    return Runner(app_name=APP, agent=root, session_service=sessions or InMemorySessionService())


async def run_async(r: Runner, session_id: str, message: types.Content) -> List[Any]:
    """One run of the session with a new message: the events it made."""
    return [ev async for ev in r.run_async(user_id=USER, session_id=session_id, new_message=message)]


def run(r: Runner, session_id: str, message: Any) -> List[Any]:
    """run_async, from synchronous code; a str is a user's text message."""
    if isinstance(message, str):
        message = types.Content(role="user", parts=[types.Part(text=message)])
    return asyncio.run(run_async(r, session_id, message))


def new_session(r: Runner, session_id: str) -> Any:
    return asyncio.run(r.session_service.create_session(app_name=APP, user_id=USER, session_id=session_id))


def session(r: Runner, session_id: str) -> Any:
    s = asyncio.run(r.session_service.get_session(app_name=APP, user_id=USER, session_id=session_id))
    assert s is not None
    return s


def responses(events: Sequence[Any], name: Optional[str] = None) -> List[Dict[str, Any]]:
    """The function responses of the tools in events (not confirmations), in order."""
    out = []
    for ev in events:
        for fr in ev.get_function_responses():
            if fr.name != CONFIRMATION_CALL and (name is None or fr.name == name):
                out.append(dict(fr.response or {}))
    return out


def final_text(events: Sequence[Any]) -> str:
    texts = [p.text for ev in events if ev.content for p in ev.content.parts or [] if p.text]
    return texts[-1] if texts else ""


def wait_until(test: unittest.TestCase, ok: Any, within: float, what: str) -> None:
    """Polls ok() every 50 ms until it is true, failing the test after ``within`` s."""
    deadline = time.monotonic() + within
    while not ok():
        if time.monotonic() > deadline:
            test.fail(f"after {within}s: {what}")
        time.sleep(0.05)


def sqlite_sessions(path: str) -> BaseSessionService:
    """ADK's SQLite session service on a file: two processes share it."""
    from google.adk.sessions.sqlite_session_service import SqliteSessionService

    return SqliteSessionService(path)
