"""What countersign-langgraph's tests share: a real `countersign serve` on
SQLite or PostgreSQL with caller-executed actions, the backend the tools
change (it counts every execution it receives: at most once is read off
it), a scripted chat model (no network, no key) and the agent.

Imported by the tests and by lg_child.py, the second process of the
cross-process tests; the child finds the backend through CS_LG_BACKEND and
what its tool does through CS_LG_MODE."""

from __future__ import annotations

import http.server
import json
import os
import sqlite3
import threading
import time
import unittest
import urllib.request
from typing import Any, Dict, List, Optional, Sequence

from langchain.agents import create_agent
from langchain_core.language_models.chat_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage, ToolMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from langchain_core.tools import tool
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.checkpoint.sqlite import SqliteSaver
from langgraph.graph import END, START, MessagesState, StateGraph
from langgraph.prebuilt import ToolNode, tools_condition

from countersign import Client, NotApplied
from countersign_langgraph import CountersignMiddleware, current_execution

#: The test servers' lease: short, so that lapses are quick to see.
LEASE = 2.0


def config(store: str, backend: str) -> str:
    return f"""\
store: {store}
auto_migrate: true
auth:
  api_keys:
    - {{key: ck_lg_agent, tenant: acme, actor: alice, kind: agent}}
    - {{key: ck_lg_alice, tenant: acme, actor: alice, kind: human}}
    - {{key: ck_lg_bob, tenant: acme, actor: bob, roles: [finance, operator], kind: human}}
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
    operation id as its idempotency key; then what CS_LG_MODE asks."""
    run = current_execution()
    op = run.operation_id if run is not None else "none"
    body = json.dumps({"operation_id": op, "input": {"amount": amount, "customer": customer}}).encode()
    req = urllib.request.Request(os.environ["CS_LG_BACKEND"] + "/execute", data=body, headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=30) as r:
        receipt = json.loads(r.read())["receipt"]
    mode = os.environ.get("CS_LG_MODE", "")
    if mode == "slow":
        time.sleep(LEASE * 1.25)  # past the lease: it runs under renewals
    elif mode == "hang":
        print("RAN " + op, flush=True)  # the parent kills this process now
        while True:
            time.sleep(60)
    elif mode == "crash":
        raise ConnectionResetError("the backend's answer was lost")
    return f"refunded {amount:g} to {customer} ({receipt})"


@tool
def refund(amount: float, customer: str) -> str:
    """Refund a payment."""
    return _execute(customer, amount)


@tool
def hold(customer: str) -> str:
    """Put a payment on hold."""
    if os.environ.get("CS_LG_MODE") == "not_applied":
        raise NotApplied("the payment was already settled")
    return _execute(customer, 0.5)


@tool
def mail(to: str) -> str:
    """Send a mail."""
    return _execute(to, 0.1)


class ScriptedModel(BaseChatModel):
    """A chat model that answers from a script: its tool calls until a tool
    answered, then "done". No network."""

    calls: List[Dict[str, Any]]

    @property
    def _llm_type(self) -> str:
        return "scripted"

    def bind_tools(self, tools: Any, **kwargs: Any) -> "ScriptedModel":
        return self

    def _generate(self, messages: List[BaseMessage], stop: Any = None, run_manager: Any = None, **kwargs: Any) -> ChatResult:
        # The turn after the last human message: tool calls, unless tools answered.
        last_human = max(i for i, m in enumerate(messages) if m.type == "human")
        answered = any(isinstance(m, ToolMessage) for m in messages[last_human:])
        msg = AIMessage(content="done") if answered else AIMessage(content="", tool_calls=self.calls)
        return ChatResult(generations=[ChatGeneration(message=msg)])


def call(name: str, args: Dict[str, Any], cid: str) -> Dict[str, Any]:
    return {"name": name, "args": args, "id": cid, "type": "tool_call"}


def agent(
    client: Client,
    calls: Sequence[Dict[str, Any]],
    checkpointer: Any = None,
    interrupt_on: Optional[Dict[str, Any]] = None,
) -> Any:
    """create_agent with the scripted model, the tools and CountersignMiddleware."""
    mw = CountersignMiddleware(
        client,
        interrupt_on if interrupt_on is not None else {"refund": True, "hold": True, "mail": True},
        actions={"refund": "payments.refund", "hold": "payments.hold", "mail": "mail.send"},
    )
    return create_agent(
        ScriptedModel(calls=list(calls)),
        tools=[refund, hold, mail],
        middleware=[mw],
        checkpointer=checkpointer if checkpointer is not None else InMemorySaver(),
    )


def tool_graph(tools: Sequence[Any], calls: Sequence[Dict[str, Any]], checkpointer: Any = None) -> Any:
    """A graph of one's own: a node that makes the tool calls (then says
    "done" once they answered) and a ToolNode with the tools."""

    def model(state: MessagesState) -> Dict[str, Any]:
        if isinstance(state["messages"][-1], ToolMessage):
            return {"messages": [AIMessage(content="done")]}
        return {"messages": [AIMessage(content="", tool_calls=list(calls))]}

    return (
        StateGraph(MessagesState)
        .add_node("model", model)
        .add_node("tools", ToolNode(list(tools)))
        .add_edge(START, "model")
        .add_conditional_edges("model", tools_condition, ["tools", END])
        .add_edge("tools", "model")
        .compile(checkpointer=checkpointer if checkpointer is not None else InMemorySaver())
    )


def sqlite_saver(path: str) -> SqliteSaver:
    """LangGraph's SQLite checkpointer on a file: two processes share it."""
    return SqliteSaver(sqlite3.connect(path, check_same_thread=False, timeout=30))


def tool_messages(state: Dict[str, Any]) -> List[ToolMessage]:
    return [m for m in state["messages"] if isinstance(m, ToolMessage)]


def wait_until(test: unittest.TestCase, ok: Any, within: float, what: str) -> None:
    """Polls ok() every 50 ms until it is true, failing the test after ``within`` s."""
    deadline = time.monotonic() + within
    while not ok():
        if time.monotonic() > deadline:
            test.fail(f"after {within}s: {what}")
        time.sleep(0.05)
