"""The client as the base of the adapters: typed results, errors by kind,
the credential's kind (GET /v1/me) and the execute lease as a context
manager, against `countersign serve` (and, for the error classes, without
one)."""

from __future__ import annotations

import time
import unittest

from server import LEASE, CountingProxy, ServerTest

from countersign import (
    AgentCannotDecide,
    CallResult,
    Client,
    Conflict,
    CountersignError,
    Forbidden,
    Invalid,
    InvalidResponse,
    LeaseLost,
    NotAnAgent,
    NotApplied,
    NotFound,
    Proposal,
    RateLimited,
    ServerFault,
    Unauthenticated,
    Unavailable,
    Uncertain,
)


def refund(amount: float = 40, customer: str = "c_9") -> dict:
    return {"amount": amount, "customer": customer}


class ErrorKinds(unittest.TestCase):
    def test_each_code_has_its_family(self) -> None:
        cases = [
            (401, "UNAUTHENTICATED", Unauthenticated),
            (403, "FORBIDDEN", Forbidden),
            (403, "STEP_UP_REQUIRED", Forbidden),
            (403, "AGENT_CANNOT_DECIDE", AgentCannotDecide),
            (404, "NOT_FOUND", NotFound),
            (404, "ACTION_NOT_FOUND", NotFound),
            (400, "INVALID_INPUT", Invalid),
            (400, "INVALID_CURSOR", Invalid),
            (400, "INVALID_REMEMBER", Invalid),
            (405, "METHOD_NOT_ALLOWED", Invalid),
            (413, "BODY_TOO_LARGE", Invalid),
            (415, "UNSUPPORTED_MEDIA_TYPE", Invalid),
            (409, "INVALID_STATE", Conflict),
            (409, "CALL_MISMATCH", Conflict),
            (409, "THREAD_BUSY", Conflict),
            (409, "MESSAGE_ID_TAKEN", Conflict),
            (429, "TOO_MANY_REQUESTS", RateLimited),
            (503, "UNAVAILABLE", Unavailable),
            (500, "INTERNAL", ServerFault),
            # A code this client does not know yet: its status decides.
            (409, "SOMETHING_NEW", Conflict),
            (403, "SOMETHING_NEW", Forbidden),
            (502, "SOMETHING_NEW", Unavailable),
        ]
        for status, code, cls in cases:
            body = ('{"error":{"code":"%s","message":"m","details":[{"path":"/x"}]}}' % code).encode()
            e = CountersignError.from_response(status, {"Retry-After": "3"}, body)
            self.assertIs(type(e), cls, code)
            self.assertIsInstance(e, CountersignError)
            self.assertEqual((e.status, e.code, e.details, e.retry_after), (status, code, [{"path": "/x"}], 3))
            self.assertEqual(e.transient, status == 429 or status >= 500, code)

    def test_an_answer_that_is_not_the_apis(self) -> None:
        e = CountersignError.from_response(502, {}, b"<html>bad gateway</html>")
        self.assertIsInstance(e, InvalidResponse)
        self.assertTrue(e.transient)
        e = CountersignError.from_response(200, {}, b"nope")
        self.assertIsInstance(e, InvalidResponse)
        self.assertFalse(e.transient)

    def test_typed_results_read_the_json(self) -> None:
        ans = CallResult.from_json(
            {
                "status": "execute", "proposal_id": "prp_1", "operation_id": "op_1", "input": {"a": 1},
                "lease": {"token": "tok", "expires_at": "2030-01-01T00:00:00Z", "attempt": 2},
                "proposal": {"id": "prp_1", "status": "executing", "decisions": [{"actor": "bob", "decision": "approved"}], "extra": 1},
            }
        )
        self.assertEqual((ans.status, ans.proposal_id, ans.operation_id, ans.input), ("execute", "prp_1", "op_1", {"a": 1}))
        assert ans.lease is not None and ans.proposal is not None
        self.assertEqual((ans.lease.token, ans.lease.attempt), ("tok", 2))
        self.assertEqual(ans.proposal.decisions[0].actor, "bob")
        self.assertEqual(ans.proposal.raw["extra"], 1, "fields the client does not name are kept")
        with self.assertRaises(InvalidResponse) as cm:
            CallResult.from_json({"status": "execute", "proposal_id": "prp_1"})
        self.assertIn("without a lease", str(cm.exception))
        with self.assertRaises(InvalidResponse) as cm:
            Proposal.from_json({"id": "prp_1", "status": 7})
        self.assertIn("status is not a str", str(cm.exception))


class Typed(ServerTest):
    def test_me_and_the_agent_check(self) -> None:
        me = self.agent.me()
        self.assertEqual((me.tenant, me.actor, me.kind, me.is_agent), ("acme", "alice", "agent", True))
        self.assertEqual(self.bob.me().kind, "human")
        with self.assertRaises(NotAnAgent) as cm:
            self.alice.require_agent()
        self.assertIsInstance(cm.exception, Forbidden)
        self.assertIn("not kind agent", str(cm.exception))
        # Read once and kept: a second check asks nothing.
        proxy = CountingProxy(self.server.url)
        self.addCleanup(proxy.close)
        agent = Client(proxy.url, "ck_py_agent")
        agent.require_agent()
        agent.require_agent()
        self.assertEqual(len(proxy.requests("GET", "/v1/me")), 1)

    def test_errors_by_kind_from_the_server(self) -> None:
        thread, tool = self.unique("t"), self.unique("call")
        first = self.agent.submit(thread, tool, "payments.refund", refund(), wait_seconds=0)
        self.assertEqual(first.status, "pending")
        assert first.proposal_id is not None
        with self.assertRaises(AgentCannotDecide):
            self.agent.approve(first.proposal_id)
        with self.assertRaises(NotFound):
            self.agent.proposal("prp_00000000000000000000000000000000")
        with self.assertRaises(Invalid) as ci:
            self.agent.submit(thread, self.unique("call"), "payments.refund", {"amount": -1, "customer": "c"})
        self.assertEqual(ci.exception.code, "INVALID_INPUT")
        with self.assertRaises(Conflict) as cc:
            self.agent.submit(thread, tool, "payments.refund", refund(41))
        self.assertEqual(cc.exception.code, "CALL_MISMATCH")
        with self.assertRaises(Unauthenticated):
            Client(self.server.url, "ck_nobody").me()
        with self.assertRaises(Forbidden):
            self.dave.submit(thread, self.unique("call"), "payments.refund", refund())
        self.assertEqual(self.agent.cancel(first.proposal_id)["status"], "applied")
        self.assertIsNone(self.agent.find_call("no_such_thread_" + thread, tool), "an unknown thread has no call")

    def test_find_call(self) -> None:
        thread, tool = self.unique("t"), self.unique("call")
        a = self.agent.submit(thread, tool, "payments.refund", refund(), wait_seconds=0)
        found = self.agent.find_call(thread, tool)
        assert found is not None
        self.assertEqual((found.id, found.status, found.tool_call_id), (a.proposal_id, "pending", tool))
        self.assertIsNone(self.agent.find_call(thread, "call_never_made"))

    def test_lease_settles_once_with_the_result(self) -> None:
        thread, tool = self.unique("t"), self.unique("call")
        pending = self.agent.submit(thread, tool, "payments.refund", refund(), wait_seconds=0)
        assert pending.proposal_id is not None
        self.bob.approve(pending.proposal_id)
        claim = self.agent.submit(thread, tool, "payments.refund", refund(), wait_seconds=0)
        self.assertEqual(claim.status, "execute")
        assert claim.lease is not None
        self.assertEqual(claim.lease.attempt, 1)
        with self.agent.lease(claim) as run:
            self.assertEqual((run.proposal_id, run.operation_id, run.input), (pending.proposal_id, claim.operation_id, refund()))
            again = self.agent.submit(thread, tool, "payments.refund", refund(), wait_seconds=0)
            self.assertEqual(again.status, "executing", "no second lease while this one is held")
            time.sleep(LEASE * 1.25)  # past the lease's length: the renewals keep it
            run.succeeded(result={"refunded": 40}, receipt="rf_9")
        assert run.settled is not None
        self.assertEqual((run.settled.status, run.settled.outcome.receipt if run.settled.outcome else None), ("succeeded", "rf_9"))
        replay = self.agent.submit(thread, tool, "payments.refund", refund(), wait_seconds=0)
        self.assertEqual((replay.status, replay.result, replay.receipt), ("succeeded", {"refunded": 40}, "rf_9"))
        events = [e["type"] for e in self.agent.proposal_events(pending.proposal_id)]
        self.assertEqual((events.count("proposal.claimed"), events.count("proposal.settled")), (1, 1))

    def test_lease_not_applied_settles_failed(self) -> None:
        claim = self.agent.submit(self.unique("t"), self.unique("call"), "mail.send", {"to": "x"}, wait_seconds=0)
        self.assertEqual(claim.status, "execute", "the policy allows mail.*: the answer is the claim")
        with self.assertRaises(NotApplied):
            with self.agent.lease(claim) as run:
                raise NotApplied("the mailbox does not exist")
        assert run.settled is not None and run.settled.outcome is not None
        self.assertEqual((run.settled.status, run.settled.outcome.error), ("failed", "the mailbox does not exist"))

    def test_lease_left_uncertain_by_any_other_exception(self) -> None:
        for exc in (Uncertain("the answer was lost"), RuntimeError("boom")):
            claim = self.agent.submit(self.unique("t"), self.unique("call"), "mail.send", {"to": "y"}, wait_seconds=0)
            with self.assertRaises(type(exc)):
                with self.agent.lease(claim) as run:
                    raise exc
            self.assertIsNone(run.settled)
            assert claim.proposal_id is not None
            self.assertEqual(self.agent.proposal(claim.proposal_id).status, "executing", "nothing settled on a guess")
            # The lease lapses; mail.send has no reconcile and is not idempotent: unknown.
            p = self.wait_status(self.agent, claim.proposal_id, "unknown", LEASE * 10)
            self.assertEqual(Proposal.from_json(p).uncertain, True)

    def test_lease_lost_raises(self) -> None:
        claim = self.agent.submit(self.unique("t"), self.unique("call"), "mail.send", {"to": "z"}, wait_seconds=0)
        ctx = self.agent.lease(claim)
        ctx._renewer.lease = 60.0  # renew too late to keep it: the lease lapses under the body
        with self.assertRaises(LeaseLost):
            with ctx as run:
                assert claim.proposal_id is not None
                self.wait_status(self.agent, claim.proposal_id, "unknown", LEASE * 10)
        self.assertIsNone(run.settled)

    def test_lease_refuses_an_answer_that_is_not_a_claim(self) -> None:
        pending = self.agent.submit(self.unique("t"), self.unique("call"), "payments.refund", refund(), wait_seconds=0)
        with self.assertRaises(ValueError) as cm:
            self.agent.lease(pending)
        self.assertIn("'pending', not an execute claim", str(cm.exception))


if __name__ == "__main__":
    unittest.main()
