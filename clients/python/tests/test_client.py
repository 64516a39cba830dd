"""The HTTP client against `countersign serve`: calls, proposals with
pagination, decisions, caller-executed settlements, messages, events and
polling."""

from __future__ import annotations

import threading
import time
import unittest
from typing import List

from server import LEASE, ServerTest  # noqa: F401  (sets sys.path)

import countersign
from countersign import Client, CountersignError


def refund(amount: float = 40, customer: str = "c_9") -> dict:
    return {"amount": amount, "customer": customer}


class CallsAndDecisions(ServerTest):
    def test_call_approve_execute_settle(self) -> None:
        thread, tool = self.unique("t"), self.unique("call")
        first = self.alice.call(thread, tool, "payments.refund", refund(), wait_seconds=0)
        self.assertEqual(first["status"], "pending")
        pid = first["proposal_id"]
        self.assertEqual(first["proposal"]["preview"], "Refund 40 EUR to c_9")
        pending = self.bob.list_proposals(status=["pending"], thread_id=thread)
        self.assertEqual([p["id"] for p in pending], [pid])
        d = self.bob.approve(pid, reason="ok")
        self.assertEqual((d["status"], d["proposal"]["status"]), ("applied", "approved"))
        self.assertEqual(self.bob.approve(pid)["status"], "unchanged")

        claim = self.alice.call(thread, tool, "payments.refund", refund(), wait_seconds=0)
        self.assertEqual(claim["status"], "execute")
        self.assertEqual(claim["lease"]["attempt"], 1)
        self.assertEqual(claim["input"], refund())
        again = self.alice.call(thread, tool, "payments.refund", refund(), wait_seconds=0)
        self.assertEqual((again["status"], again["executed"]), ("executing", None))
        renewed = self.alice.renew(pid, claim["lease"]["token"])
        self.assertEqual(renewed["status"], "applied")
        self.assertEqual(renewed["lease"]["token"], claim["lease"]["token"])
        self.assertEqual(self.alice.settle(pid, "not-the-token", "succeeded")["status"], "conflict")
        with self.assertRaises(CountersignError) as cm:
            self.bob.settle(pid, claim["lease"]["token"], "succeeded")
        self.assertEqual((cm.exception.status, cm.exception.code), (403, "FORBIDDEN"))

        done = self.alice.settle(pid, claim["lease"]["token"], "succeeded", receipt="rf_1", result={"refunded": 40})
        self.assertEqual((done["status"], done["proposal"]["status"]), ("applied", "succeeded"))
        replay = self.alice.call(thread, tool, "payments.refund", refund(), wait_seconds=0)
        self.assertEqual((replay["status"], replay["receipt"], replay["result"]), ("succeeded", "rf_1", {"refunded": 40}))
        self.assertEqual(self.alice.wait_for_proposal(pid, timeout_seconds=1)["status"], "succeeded")
        types = [e["type"] for e in self.alice.proposal_events(pid)]
        for want in ("proposal.created", "proposal.decided", "proposal.claimed", "proposal.settled"):
            self.assertIn(want, types)

    def test_reject_cancel_and_errors(self) -> None:
        thread = self.unique("t")
        a = self.alice.call(thread, self.unique("call"), "payments.refund", refund(1, "a"), wait_seconds=0)
        b = self.alice.call(thread, self.unique("call"), "payments.refund", refund(2, "b"), wait_seconds=0)
        r = self.bob.reject(a["proposal_id"], reason="no")
        self.assertEqual((r["status"], r["proposal"]["status"]), ("applied", "rejected"))
        self.assertEqual(self.bob.approve(a["proposal_id"])["status"], "conflict")
        c = self.alice.cancel(b["proposal_id"], reason="changed my mind")
        self.assertEqual(c["proposal"]["status"], "cancelled")

        with self.assertRaises(CountersignError) as cm:
            self.alice.call(thread, self.unique("call"), "payments.refund", {"amount": -1}, wait_seconds=0)
        self.assertEqual((cm.exception.status, cm.exception.code), (400, "INVALID_INPUT"))
        self.assertTrue({p["path"] for p in cm.exception.details} >= {"/amount", "/customer"} or cm.exception.details)
        with self.assertRaises(CountersignError) as cm:
            self.dave.call(thread, self.unique("call"), "payments.refund", refund(), wait_seconds=0)
        self.assertEqual((cm.exception.status, cm.exception.code), (403, "FORBIDDEN"))
        with self.assertRaises(CountersignError) as cm:
            self.alice.get_proposal("prp_nope")
        self.assertEqual((cm.exception.status, cm.exception.code), (404, "NOT_FOUND"))
        with self.assertRaises(CountersignError) as cm:
            self.alice.call(thread, self.unique("call"), "no.such", {}, wait_seconds=0)
        self.assertEqual(cm.exception.code, "ACTION_NOT_FOUND")
        with self.assertRaises(CountersignError) as cm:
            Client(self.server.url, "wrong").get_proposal(a["proposal_id"])
        self.assertEqual(cm.exception.status, 401)

    def test_pagination(self) -> None:
        thread = self.unique("t")
        made = [self.alice.call(thread, self.unique("call"), "payments.refund", refund(i + 1, f"c{i}"), wait_seconds=0)["proposal_id"] for i in range(5)]
        got = self.alice.list_thread_proposals(thread, limit=2)
        self.assertEqual([p["id"] for p in got], list(reversed(made)))  # newest first, every page
        pages = self.alice.request("GET", f"/v1/threads/{thread}/proposals", query={"limit": 2})
        self.assertEqual(len(pages.json()["proposals"]), 2)
        self.assertIn(countersign.NEXT_HEADER.lower(), {k.lower() for k in pages.headers})
        listed = list(self.alice.iter_proposals(status="pending", thread_id=thread, limit=2))
        self.assertEqual([p["id"] for p in listed], list(reversed(made)))
        with self.assertRaises(CountersignError) as cm:
            self.alice.request("GET", "/v1/proposals", query={"after": "forged"})
        self.assertEqual(cm.exception.code, "INVALID_CURSOR")

    def test_lapse_unknown_then_resolve(self) -> None:
        thread, tool = self.unique("t"), self.unique("call")
        claim = self.alice.call(thread, tool, "mail.send", {"to": "x"}, wait_seconds=0)
        self.assertEqual(claim["status"], "execute")
        # The caller never settles: the workers notice the lapse.
        p = self.wait_status(self.alice, claim["proposal_id"], "unknown", within=LEASE * 5)
        self.assertIsNone(p["outcome"]["executed"])
        self.assertEqual(self.alice.call(thread, tool, "mail.send", {"to": "x"}, wait_seconds=0)["status"], "unknown")
        res = self.bob.resolve(claim["proposal_id"], "succeeded", "the mail server's log shows it", receipt="m_1")
        self.assertEqual((res["status"], res["proposal"]["status"]), ("applied", "succeeded"))


class MessagesEventsPolling(ServerTest):
    def test_messages(self) -> None:
        thread = self.unique("t")
        ans = self.alice.post_message(thread, "hello there")
        self.assertEqual(ans["message"]["text"], "hello there")
        t = self.alice.get_thread(thread)
        self.assertEqual(t["thread"]["owner"], "alice")
        self.assertEqual([m["text"] for m in t["messages"]], ["hello there"])

    def test_events(self) -> None:
        thread = self.unique("t")
        stop = threading.Event()
        seen: List[countersign.ProposalEvent] = []
        got = threading.Event()

        def follow() -> None:
            for ev in self.bob.events(stop=stop, read_timeout=5):
                if ev.proposal.get("thread_id") == thread:
                    seen.append(ev)
                    if ev.type == "proposal.decided":
                        got.set()
                        return

        t = threading.Thread(target=follow, daemon=True)
        t.start()
        time.sleep(0.5)  # the stream starts from now
        a = self.alice.call(thread, self.unique("call"), "payments.refund", refund(), wait_seconds=0)
        self.bob.approve(a["proposal_id"])
        self.assertTrue(got.wait(15), f"events seen: {[e.type for e in seen]}")
        stop.set()
        self.assertEqual([e.type for e in seen], ["proposal.created", "proposal.decided"])
        self.assertEqual(seen[1].proposal["status"], "approved")
        # Resuming after the first event replays the second, and only it.
        resumed = []
        for ev in self.bob.events(after=seen[0].id, read_timeout=5):
            if ev.proposal.get("thread_id") == thread:
                resumed.append(ev)
                break
        self.assertEqual([e.id for e in resumed], [seen[1].id])

    def test_watch_until_settled(self) -> None:
        thread = self.unique("t")
        a = self.alice.call(thread, self.unique("call"), "payments.refund", refund(), wait_seconds=0)
        threading.Timer(0.5, lambda: self.bob.reject(a["proposal_id"])).start()
        snaps = list(self.alice.watch_proposals(thread))
        self.assertEqual(snaps[0].proposals[0]["status"], "pending")
        last = snaps[-1]
        self.assertFalse(last.active)
        self.assertEqual(last.proposals[0]["status"], "rejected")
        self.assertEqual(last.messages[-1]["outcome"]["proposal_id"], a["proposal_id"])


class LeaseClock(unittest.TestCase):
    def test_lease_is_reckoned_on_the_servers_clock(self) -> None:
        from countersign.gated import _lease_seconds

        # The claim's stamp and the expiry are both the server's: a local
        # clock an hour off does not change the lease.
        self.assertAlmostEqual(_lease_seconds("2020-01-01T00:00:30.5Z", "2020-01-01T00:00:00.5Z"), 30.0)
        self.assertAlmostEqual(_lease_seconds("2020-01-01T00:00:30.123456789Z", "2020-01-01T00:00:00.123456789Z"), 30.0)
        self.assertEqual(_lease_seconds("2020-01-01T00:00:30Z"), 1.0)  # long past by the local clock: at least a second


if __name__ == "__main__":
    unittest.main()
