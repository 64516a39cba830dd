"""gated against `countersign serve`: the function runs once when approved,
never when rejected, once for identical calls at once and for repeats, under
a lease it renews; an uncertain failure is routed by the server. A pending
call is asked again at most once a second. An action the server executes
(a webhook action, an independent rule's, a read) raises ServerExecuted and
never runs the function."""

from __future__ import annotations

import os
import threading
import time
import unittest
from typing import Any, Dict, List

from server import LEASE, CountingProxy, ServerTest, WebhookServerTest  # noqa: F401  (sets sys.path)

from countersign import (
    Client,
    Execution,
    Failed,
    NotApplied,
    NotExecuted,
    OutcomeUnknown,
    Receipt,
    ServerExecuted,
    StillPending,
    gated,
)


class Ledger:
    """What the gated functions did: each run's operation id and attempt."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.runs: List[tuple] = []

    def add(self, ex: Execution) -> None:
        with self.lock:
            self.runs.append((ex.operation_id, ex.attempt))


class Gated(ServerTest):
    def approve_when_pending(self, thread: str) -> threading.Thread:
        """Approves, as bob, the first pending proposal of thread once it exists."""

        def run() -> None:
            deadline = time.monotonic() + 20
            while time.monotonic() < deadline:
                ps = self.bob.list_proposals(status="pending", thread_id=thread)
                if ps:
                    self.bob.approve(ps[0]["id"], reason="looks right")
                    return
                time.sleep(0.05)

        t = threading.Thread(target=run, daemon=True)
        t.start()
        return t

    def test_approved_runs_once(self) -> None:
        thread, tool = self.unique("t"), self.unique("call")
        led = Ledger()

        # alice's agent credential (kind agent) makes the call, as agents do.
        @gated(self.agent, "payments.refund", thread_id=thread, wait_seconds=1)
        def refund(amount: float, customer: str, execution: Execution) -> Receipt:
            led.add(execution)
            return Receipt(id="rf_" + customer, result={"refunded": amount})

        approver = self.approve_when_pending(thread)
        self.assertEqual(refund(tool, amount=40, customer="c_9"), {"refunded": 40})
        approver.join()
        # A repeat (a resumed graph, a retried step, another process) replays
        # the outcome: the audit trail shows the caller's claim.
        self.assertEqual(refund(tool, amount=40, customer="c_9"), {"refunded": 40})
        again = gated(self.agent, "payments.refund", thread_id=thread)(lambda **kw: led.runs.append(("again", 0)))
        self.assertEqual(again(tool, amount=40, customer="c_9"), {"refunded": 40})
        self.assertEqual(len(led.runs), 1)
        p = self.alice.list_thread_proposals(thread)[0]
        self.assertEqual((p["status"], p["outcome"]["receipt"]), ("succeeded", "rf_c_9"))
        self.assertEqual(led.runs[0], (p["operation_id"], 1))

    def test_rejected_never_runs(self) -> None:
        thread, tool = self.unique("t"), self.unique("call")
        runs: List[Any] = []

        @gated(self.alice, "payments.refund", thread_id=thread, wait_seconds=1)
        def refund(amount: float, customer: str) -> None:
            runs.append(amount)

        def reject() -> None:
            deadline = time.monotonic() + 20
            while time.monotonic() < deadline:
                ps = self.bob.list_proposals(status="pending", thread_id=thread)
                if ps:
                    self.bob.reject(ps[0]["id"], reason="no")
                    return
                time.sleep(0.05)

        threading.Thread(target=reject, daemon=True).start()
        with self.assertRaises(NotExecuted) as cm:
            refund(tool, amount=40, customer="c_9")
        self.assertEqual(cm.exception.status, "rejected")
        with self.assertRaises(NotExecuted):
            refund(tool, amount=40, customer="c_9")
        self.assertEqual(runs, [])

    def test_timeout_is_still_pending(self) -> None:
        thread = self.unique("t")

        @gated(self.alice, "payments.refund", thread_id=thread, wait_seconds=0.2, timeout=0.5)
        def refund(amount: float, customer: str) -> None:
            self.fail("ran without a decision")

        with self.assertRaises(StillPending):
            refund(self.unique("call"), amount=1, customer="c")

    def test_identical_calls_at_once_run_once(self) -> None:
        thread, tool = self.unique("t"), self.unique("call")
        led = Ledger()

        @gated(self.alice, "mail.send", thread_id=thread)
        def send(to: str, execution: Execution) -> Dict[str, str]:
            led.add(execution)
            time.sleep(0.5)
            return {"sent_to": to}

        results: List[Any] = [None] * 4
        threads = [threading.Thread(target=lambda i=i: results.__setitem__(i, send(tool, to="x@example.com"))) for i in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        self.assertEqual(results, [{"sent_to": "x@example.com"}] * 4)
        self.assertEqual(len(led.runs), 1)

    def test_renews_while_running(self) -> None:
        thread = self.unique("t")

        @gated(self.alice, "mail.send", thread_id=thread)
        def slow(to: str, execution: Execution) -> str:
            time.sleep(LEASE * 2.5)  # outlives the lease: renewals keep it
            self.assertFalse(execution.lost.is_set())
            return "done"

        self.assertEqual(slow(self.unique("call"), to="y"), "done")
        self.assertEqual(self.alice.list_thread_proposals(thread)[0]["status"], "succeeded")

    def test_not_applied_fails(self) -> None:
        thread, tool = self.unique("t"), self.unique("call")

        @gated(self.alice, "mail.send", thread_id=thread)
        def bounce(to: str) -> None:
            raise NotApplied("mailbox full")

        with self.assertRaises(Failed) as cm:
            bounce(tool, to="z")
        self.assertIn("mailbox full", str(cm.exception))
        with self.assertRaises(Failed):
            bounce(tool, to="z")  # the repeat answers the recorded failure
        p = self.alice.list_thread_proposals(thread)[0]
        self.assertEqual((p["status"], p["outcome"]["error"], p["outcome"]["executed"]), ("failed", "mailbox full", True))

    def test_uncertain_is_unknown_and_never_runs_again(self) -> None:
        thread, tool = self.unique("t"), self.unique("call")
        runs: List[str] = []

        @gated(self.alice, "mail.send", thread_id=thread)
        def flaky(to: str) -> None:
            runs.append(to)
            raise ConnectionResetError("the SMTP connection broke after DATA")

        with self.assertRaises(ConnectionResetError):
            flaky(tool, to="w")
        with self.assertRaises(OutcomeUnknown):
            flaky(tool, to="w")  # waits out the lease, then hears unknown
        self.assertEqual(runs, ["w"])

    def test_idempotent_uncertain_runs_again_same_operation(self) -> None:
        thread, tool = self.unique("t"), self.unique("call")
        led = Ledger()

        @gated(self.alice, "mail.sync", thread_id=thread)
        def sync(box: str, execution: Execution) -> Dict[str, int]:
            led.add(execution)
            if execution.attempt == 1:
                raise TimeoutError("the backend did not answer")
            return {"synced": execution.attempt}

        with self.assertRaises(TimeoutError):
            sync(tool, box="inbox")
        # The next identical call waits for the lapse, then claims attempt 2.
        self.assertEqual(sync(tool, box="inbox"), {"synced": 2})
        self.assertEqual([a for _, a in led.runs], [1, 2])
        self.assertEqual(len({op for op, _ in led.runs}), 1, "both attempts carry the same operation id")

    def test_pending_call_asks_at_most_once_a_second(self) -> None:
        # The flood: a call the server answers at once (wait_seconds 0, as a
        # long-poll cut short) was asked again at once, thousands of times a
        # second. Left pending for 5 s it now makes at most one request a
        # second, fewer as the pauses grow.
        proxy = CountingProxy(self.server.url)
        self.addCleanup(proxy.close)
        thread = self.unique("t")
        runs: List[Any] = []

        @gated(Client(proxy.url, "ck_py_agent"), "payments.refund", thread_id=thread, wait_seconds=0, timeout=5)
        def refund(amount: float, customer: str) -> None:
            runs.append(amount)

        began = time.monotonic()
        with self.assertRaises(StillPending) as cm:
            refund(self.unique("call"), amount=5, customer="c_5")
        took = time.monotonic() - began
        self.assertLessEqual(took, 6, "StillPending comes once no request fits in the timeout")
        calls = proxy.requests("POST", "/v1/calls")
        self.assertGreaterEqual(len(calls), 2)
        self.assertLessEqual(len(calls), 6, f"{len(calls)} calls in {took:.1f} s")
        gaps = [b - a for a, b in zip(calls, calls[1:])]
        self.assertTrue(all(g >= 0.95 for g in gaps), f"gaps between calls: {gaps}")
        self.assertEqual(runs, [])
        self.assertEqual(cm.exception.status, "pending")
        self.assertEqual(self.alice.get_proposal(cm.exception.answer["proposal_id"])["status"], "pending")


#: The server-executed actions: payments.wire (a webhook, wait mode),
#: payouts.send (a webhook under an independent rule, as the demo's refunds)
#: and crm.lookup (a read), beside a caller-executed one.
SERVER_CONFIG = """\
store: sqlite:countersign.db
auto_migrate: true
auth:
  api_keys:
    - {{key: ck_py_agent, tenant: acme, actor: alice, kind: agent}}
    - {{key: ck_py_bob, tenant: acme, actor: bob, roles: [finance], kind: human}}
webhook_secret_env: PY_WEBHOOK_SECRET
worker: {{poll_interval: 100ms, lease: 2s}}
policy:
  rules:
    - {{match: "payments.*", effect: ask, approvers: ["role:finance"]}}
    - {{match: "payouts.*", effect: ask, approvers: ["role:finance"], mode: independent}}
actions:
  - name: payments.wire
    execute: {{url: "{backend}/execute", timeout: 5s}}
  - name: payouts.send
    execute: {{url: "{backend}/execute", timeout: 5s}}
  - name: crm.lookup
    kind: read
    execute: {{url: "{backend}/execute", timeout: 5s}}
"""


class ServerExecutedActions(WebhookServerTest):
    """@gated over actions the server runs: it says so, and never runs the
    function or hands back the server's result as the function's."""

    config = SERVER_CONFIG

    def thread(self, name: str) -> str:
        return f"{name}_{os.getpid()}_{time.monotonic_ns()}"

    def approve_when_pending(self, thread: str) -> threading.Thread:
        def run() -> None:
            deadline = time.monotonic() + 20
            while time.monotonic() < deadline:
                ps = self.bob.list_proposals(status="pending", thread_id=thread)
                if ps:
                    self.bob.approve(ps[0]["id"], reason="fine")
                    return
                time.sleep(0.05)

        t = threading.Thread(target=run, daemon=True)
        t.start()
        return t

    def test_independent_action_refused_on_the_first_answer(self) -> None:
        # The demo's refunds: an independent rule, the worker executes. The
        # first answer says so; nothing is asked again, nothing runs here.
        proxy = CountingProxy(self.server.url)
        self.addCleanup(proxy.close)
        thread, runs = self.thread("t"), []

        @gated(Client(proxy.url, "ck_py_agent"), "payouts.send", thread_id=thread)
        def send(amount: int) -> str:
            runs.append(amount)
            return "sent by the function"

        with self.assertRaises(ServerExecuted) as cm:
            send("call_1", amount=7)
        self.assertIn("executed by the server", str(cm.exception))
        self.assertIn("execute: {by: caller}", str(cm.exception))
        self.assertEqual(cm.exception.status, "pending")
        self.assertEqual(len(proxy.requests("POST", "/v1/calls")), 1)
        # Approved, the worker executes it: still never the function.
        pid = cm.exception.answer["proposal_id"]
        self.assertEqual(self.bob.approve(pid)["status"], "applied")
        p = self.agent.wait_for_proposal(pid, timeout_seconds=20)
        self.assertEqual(p["status"], "succeeded")
        self.assertEqual(p["outcome"]["result"]["paid_by"], "the server")
        with self.assertRaises(ServerExecuted):
            send("call_1", amount=7)  # the repeat: the server's outcome is not the function's
        self.assertEqual(runs, [])

    def test_webhook_result_is_not_returned_as_the_functions(self) -> None:
        thread, runs = self.thread("t"), []

        @gated(self.agent, "payments.wire", thread_id=thread, wait_seconds=5)
        def wire(amount: int) -> str:
            runs.append(amount)
            return "wired by the function"

        approver = self.approve_when_pending(thread)
        with self.assertRaises(ServerExecuted) as cm:
            wire("call_1", amount=9)
        approver.join()
        self.assertEqual(cm.exception.status, "succeeded")
        self.assertEqual(cm.exception.answer["result"]["paid_by"], "the server")
        self.assertIn("no caller ever claimed it", str(cm.exception))
        with self.assertRaises(ServerExecuted):
            wire("call_1", amount=9)
        self.assertEqual(runs, [])
        with self.backend.lock:
            self.assertEqual(sum(1 for r in self.backend.executed if r.get("action") == "payments.wire"), 1)

    def test_read_action_refused(self) -> None:
        runs: List[Any] = []

        @gated(self.agent, "crm.lookup", thread_id=self.thread("t"))
        def lookup(customer: str) -> str:
            runs.append(customer)
            return "looked up by the function"

        with self.assertRaises(ServerExecuted) as cm:
            lookup("call_1", customer="c_1")
        self.assertEqual(cm.exception.status, "succeeded")
        self.assertIsNone(cm.exception.answer.get("proposal"))
        self.assertEqual(runs, [])


if __name__ == "__main__":
    unittest.main()
