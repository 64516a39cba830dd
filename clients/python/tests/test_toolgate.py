"""countersign.toolgate against `countersign serve`: what every framework
adapter's gate shares. A call's answer is read as a Claim (run it here), a
Pending proposal, or a Verdict with the words the model reads; a claim the
gate cannot run is settled failed at once; a success is the tool's only when
the audit trail shows this caller's claim."""

from __future__ import annotations

import os
import time
import unittest
from dataclasses import dataclass
from typing import Any

from server import WebhookServerTest  # (sets sys.path)

from countersign import NotApplied
from countersign.toolgate import (
    EXECUTION,
    Claim,
    Pending,
    ToolGate,
    Verdict,
    content,
    current_execution,
    lease_lost,
    not_applied,
    still_executing,
    summary,
    uncertain,
)

CONFIG = """\
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
    - {{match: "transfers.*", effect: ask, approvers: ["role:finance"], mode: two_phase}}
    - {{match: "mail.blocked", effect: deny}}
    - {{match: "mail.*", effect: allow}}
actions:
  - name: payments.refund
    execute: {{by: caller}}
  - name: mail.send
    execute: {{by: caller}}
  - name: mail.blocked
    execute: {{by: caller}}
  - name: transfers.move
    execute: {{by: caller}}
  - name: payments.wire
    execute: {{url: "{backend}/execute", timeout: 5s}}
  - name: crm.lookup
    kind: read
    execute: {{url: "{backend}/execute", timeout: 5s}}
"""


@dataclass(frozen=True)
class Call:
    thread_id: str
    tool_call_id: str
    name: str
    action: str
    args: Any


class HintedGate(ToolGate):
    package = "countersign_example"
    gate_hint = "gate it with example.gate()"
    action_hint = "offer it with example.action()"


class ToolGateTest(WebhookServerTest):
    config = CONFIG

    def call(self, action: str, args: Any = None, name: str = "tool") -> Call:
        return Call(f"t_{os.getpid()}_{time.monotonic_ns()}", "call_1", name, action, args if args is not None else {"n": 1})

    def gate(self, **kw: Any) -> ToolGate:
        return ToolGate(self.agent, **kw)

    def test_options_are_checked_and_named(self) -> None:
        with self.assertRaisesRegex(TypeError, "countersign_example: client must be a countersign.Client"):
            HintedGate("http://x")  # type: ignore[arg-type]
        with self.assertRaisesRegex(ValueError, "countersign_example: wait_seconds must be from 0 to"):
            HintedGate(self.agent, wait_seconds=-1)
        with self.assertRaisesRegex(ValueError, "wait_seconds must be from 0 to"):
            HintedGate(self.agent, wait_seconds=float("nan"))
        with self.assertRaisesRegex(ValueError, "countersign_example: executing_timeout must be >= 0"):
            HintedGate(self.agent, executing_timeout=float("nan"))
        g = HintedGate(self.agent, wait_seconds=2, executing_timeout=0, local=False)
        self.assertEqual((g.wait_seconds, g.executing_timeout, g.local), (2, 0, False))

    def test_allowed_call_is_a_claim_and_its_repeat_the_recorded_result(self) -> None:
        g, c = self.gate(), self.call("mail.send", {"to": "x@example.com"}, name="mail")
        step = g.classify(c, g.submit(c, 0), runnable=True)
        self.assertIsInstance(step, Claim)
        assert isinstance(step, Claim)
        self.assertIsNone(current_execution())
        with self.agent.lease(step.answer) as run:
            token = EXECUTION.set(run)
            try:
                got = current_execution()
            finally:
                EXECUTION.reset(token)
            self.assertIs(got, run)
            run.succeeded(result={"sent": 1}, receipt="m1")
        self.assertIsNone(current_execution())
        # The repeat: this caller's claim is in the audit trail, so the
        # recorded result is the tool's.
        again = g.classify(c, g.submit(c, 0), runnable=True)
        self.assertEqual(again, Verdict('{"sent": 1}', False, again.proposal, {"sent": 1}, True))  # type: ignore[union-attr]
        assert isinstance(again, Verdict) and again.proposal is not None
        self.assertEqual(again.proposal.status, "succeeded")
        self.assertEqual(g.find(c).id, again.proposal.id)  # type: ignore[union-attr]
        self.assertTrue(g.caller_claimed(again.proposal))

    def test_success_without_a_result_says_what_is_known(self) -> None:
        g, c = self.gate(), self.call("mail.send", name="mail")
        step = g.classify(c, g.submit(c, 0), runnable=True)
        assert isinstance(step, Claim)
        with self.agent.lease(step.answer) as run:
            run.succeeded(receipt="m_42")
        v = g.settled(c, g.read(step.answer.proposal_id or ""))
        self.assertEqual((v.text, v.error, v.recorded, v.result), ("mail succeeded (receipt m_42)", False, False, None))

    def test_failed_and_held_claims(self) -> None:
        g, c = self.gate(), self.call("mail.send", name="mail")
        step = g.classify(c, g.submit(c, 0), runnable=True)
        assert isinstance(step, Claim)
        # While this claim's lease runs, another resume waits at most
        # executing_timeout (0 here), then hears that nobody knows yet.
        quick = self.gate(executing_timeout=0)
        held = quick.classify(c, quick.submit(c, 0), runnable=True)
        self.assertEqual(held, Verdict(still_executing("mail"), True, held.proposal))  # type: ignore[union-attr]
        with self.assertRaises(NotApplied):
            with self.agent.lease(step.answer):
                raise NotApplied("the mailbox is full")
        v = g.classify(c, g.submit(c, 0), runnable=True)
        assert isinstance(v, Verdict)
        self.assertTrue(v.error)
        self.assertEqual(v.text, "mail failed: the mailbox is full")

    def test_pending_withdrawn_then_not_executed(self) -> None:
        g, c = self.gate(), self.call("payments.refund", name="refund")
        step = g.classify(c, g.submit(c, 0), runnable=True)
        self.assertIsInstance(step, Pending)
        assert isinstance(step, Pending)
        self.assertEqual(step.proposal.status, "pending")
        # What a framework's pause shows of it.
        shown = summary(step.proposal)
        self.assertEqual(
            (shown["proposal_id"], shown["action"], shown["thread_id"], shown["status"], shown["proposal"]["id"]),
            (step.proposal.id, "payments.refund", c.thread_id, "pending", step.proposal.id),
        )
        self.assertEqual(shown["approvers"], step.proposal.approvers)
        self.assertTrue(shown["input_digest"] and shown["expires_at"])
        p = g.withdraw(step.proposal, "the user changed their mind")
        self.assertEqual(p.status, "cancelled")
        v = g.classify(c, g.submit(c, 0), runnable=True)
        assert isinstance(v, Verdict)
        self.assertTrue(v.error)
        self.assertTrue(v.text.startswith("refund was "), v.text)
        self.assertTrue(v.text.endswith("; it was not executed"), v.text)
        # A withdrawal after a decision changes nothing: the decision stands.
        c2 = self.call("payments.refund", name="refund")
        pending = g.classify(c2, g.submit(c2, 0), runnable=True)
        assert isinstance(pending, Pending)
        self.bob.approve(pending.proposal.id)
        self.assertEqual(g.withdraw(pending.proposal, "too late").status, "approved")

    def test_denied_and_two_phase(self) -> None:
        g = self.gate()
        c = self.call("mail.blocked", name="blocked")
        v = g.classify(c, g.submit(c, 0), runnable=True)
        assert isinstance(v, Verdict)
        self.assertTrue(v.error)
        self.assertRegex(v.text, r"^blocked was denied \([A-Z_]+\): .*; it was not executed$")
        c = self.call("transfers.move", name="move")
        v = g.classify(c, g.submit(c, 0), runnable=True)
        assert isinstance(v, Verdict)
        self.assertEqual(v.text, "move: the rule is two-phase (confirmation_required), which this adapter does not drive; it was not executed")

    def test_unrunnable_claim_is_settled_failed(self) -> None:
        g, c = HintedGate(self.agent), self.call("mail.send", name="mail")
        v = g.classify(c, g.submit(c, 0), runnable=False)
        assert isinstance(v, Verdict) and v.proposal is not None
        self.assertEqual(v.text, "mail.send is executed by its caller, and mail has no tool here to run it: gate it with example.gate()")
        self.assertEqual(v.proposal.status, "failed")
        self.assertEqual(g.read(v.proposal.id).status, "failed")
        # A gate of server-executed actions (local=False) cannot run a claim either.
        c2 = self.call("mail.send", name="mail")
        v2 = HintedGate(self.agent, local=False).classify(c2, g.submit(c2, 0), runnable=True)
        assert isinstance(v2, Verdict) and v2.proposal is not None
        self.assertEqual(v2.proposal.status, "failed")

    def test_server_executed_actions(self) -> None:
        local, remote = HintedGate(self.agent), HintedGate(self.agent, local=False)
        # A read leaves no proposal: the server ran it.
        c = self.call("crm.lookup", {"id": "c_1"}, name="lookup")
        v = local.classify(c, local.submit(c, 0), runnable=True)
        self.assertEqual(
            v,
            Verdict(
                "crm.lookup is executed by the server, not by this process, so lookup was not run here: "
                "gate only actions configured execute: {by: caller}; offer it with example.action()",
                True,
            ),
        )
        r = remote.classify(c, remote.submit(c, 0), runnable=False)
        assert isinstance(r, Verdict)
        self.assertEqual((r.error, r.recorded, r.result["paid_by"]), (False, True, "the server"))
        self.assertEqual(r.text, content(r.result))
        # A webhook action: approved, the server executes it when its
        # requester calls again (the rule's mode is wait). Its success is
        # the server's: a local gate never hands it back as the tool's.
        c = self.call("payments.wire", {"amount": 3}, name="wire")
        pending = remote.classify(c, remote.submit(c, 0), runnable=False)
        assert isinstance(pending, Pending)
        self.bob.approve(pending.proposal.id)
        r = remote.classify(c, remote.submit(c, 5), runnable=False)
        assert isinstance(r, Verdict) and r.proposal is not None
        self.assertEqual((r.error, r.recorded, r.result["paid_by"], r.proposal.status), (False, True, "the server", "succeeded"))
        done = r.proposal
        self.assertFalse(local.caller_claimed(done))
        v = local.classify(c, local.submit(c, 0), runnable=True)
        assert isinstance(v, Verdict)
        self.assertTrue(v.error)
        self.assertIn(f"so wire was not run here (proposal {done.id}, succeeded)", v.text)
        # local overrides the gate's own, call by call.
        self.assertFalse(local.settled(c, done, local=False).error)

    def test_words(self) -> None:
        self.assertEqual(content("plain"), "plain")
        self.assertEqual(content(None), "")
        self.assertEqual(content({"a": [1, 2]}), '{"a": [1, 2]}')
        self.assertEqual(content(0), "0")
        e = ConnectionResetError("gone")
        self.assertEqual(
            uncertain("refund", e),
            "refund: the outcome is uncertain (ConnectionResetError: gone); nothing was recorded, and "
            "Countersign reconciles it. Do not call it again: it may have been applied",
        )
        self.assertEqual(not_applied("refund", NotApplied("already settled")), "refund failed: not applied: already settled")
        self.assertIn("lease was lost", lease_lost("refund"))


if __name__ == "__main__":
    unittest.main()
