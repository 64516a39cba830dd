"""gated against `countersign serve`: the function runs once when approved,
never when rejected, once for identical calls at once and for repeats, under
a lease it renews; an uncertain failure is routed by the server."""

from __future__ import annotations

import threading
import time
import unittest
from typing import Any, Dict, List

from server import LEASE, ServerTest  # noqa: F401  (sets sys.path)

from countersign import Execution, Failed, NotApplied, NotExecuted, OutcomeUnknown, Receipt, StillPending, gated


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

        @gated(self.alice, "payments.refund", thread_id=thread, wait_seconds=1)
        def refund(amount: float, customer: str, execution: Execution) -> Receipt:
            led.add(execution)
            return Receipt(id="rf_" + customer, result={"refunded": amount})

        approver = self.approve_when_pending(thread)
        self.assertEqual(refund(tool, amount=40, customer="c_9"), {"refunded": 40})
        approver.join()
        # A repeat (a resumed graph, a retried step) replays the outcome.
        self.assertEqual(refund(tool, amount=40, customer="c_9"), {"refunded": 40})
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

        @gated(self.alice, "mail.send", thread_id=thread, poll_interval=0.05)
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

        @gated(self.alice, "mail.send", thread_id=thread, poll_interval=0.1)
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

        @gated(self.alice, "mail.sync", thread_id=thread, poll_interval=0.1)
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


if __name__ == "__main__":
    unittest.main()
