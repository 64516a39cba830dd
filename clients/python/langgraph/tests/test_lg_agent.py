"""countersign-langgraph against a real `countersign serve`, on SQLite and
on PostgreSQL: langchain's create_agent with CountersignMiddleware, the
scripted model (no network), the tools changing a backend that counts
every execution it receives. Every test ends by reading that count: at
most once is what the backend saw, not what the adapter says. Decisions
are a human's (bob, over HTTP); the adapter's agent credential never
decides."""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import tempfile
import unittest
from typing import Any, Dict, List

import pydantic
from langchain_core.runnables import RunnableConfig
from langchain_core.tools import tool as lc_tool
from langgraph.types import Command

from adapter_server import AdapterScenarios, wait_until
from countersign import Client, NotAnAgent
from countersign_langgraph import REQUEST_TYPE, UnknownInterrupt, gated, resume
from lg_harness import LG, agent, call, refund, sqlite_saver, tool_graph, tool_messages

HERE = os.path.dirname(os.path.abspath(__file__))


class Scenarios(AdapterScenarios, unittest.TestCase):
    """The scenarios; SQLite and PostgreSQL below run them on their store
    (testsupport/adapter_server.py sets up the server, the backend and bob)."""

    __test__ = False
    adapter = LG
    child = os.path.join(HERE, "lg_child.py")

    def start(self, calls: List[Dict[str, Any]], checkpointer: Any = None) -> Any:
        """Runs a new thread's agent up to its first pause; (graph, config, interrupts)."""
        graph = agent(self.agent_client, calls, checkpointer)
        cfg = {"configurable": {"thread_id": self.unique("lg")}}
        out = graph.invoke({"messages": [{"role": "user", "content": "go"}]}, cfg)
        self.assertIn("__interrupt__", out, "the run pauses for the decision")
        return graph, cfg, list(graph.get_state(cfg).interrupts)

    # -- approve, reject, cancel, expire, grants -----------------------------

    def test_approve_runs_once_and_a_second_resume_does_not(self) -> None:
        customer = self.unique("c")
        graph, cfg, ints = self.start([call("refund", {"amount": 12, "customer": customer}, "call_1")])
        self.assertEqual(len(ints), 1)
        v = ints[0].value
        self.assertEqual((v["type"], v["name"], v["tool_call_id"], v["args"]), (REQUEST_TYPE, "refund", "call_1", {"amount": 12, "customer": customer}))
        cs = v["countersign"]
        self.assertEqual((cs["status"], cs["action"], cs["thread_id"]), ("pending", "payments.refund", cfg["configurable"]["thread_id"]))
        self.assertEqual(cs["proposal"]["preview"], f"Refund 12 EUR to {customer}")
        self.assertEqual(cs["proposal"]["requester_kind"], "agent")
        self.assertEqual(self.backend.count(customer), 0, "nothing ran before the decision")

        self.assertEqual(self.bob.approve(cs["proposal_id"], reason="ok")["status"], "applied")
        out = graph.invoke(resume(graph, cfg, {ints[0].id: {"type": "approve"}}), cfg)
        p = self.bob.get_proposal(cs["proposal_id"])
        tm = tool_messages(out)
        self.assertEqual([m.content for m in tm], [f"refunded 12 to {customer} (rf_{p['operation_id']})"])
        self.assertEqual(out["messages"][-1].content, "done")
        self.assertEqual(p["status"], "succeeded")
        self.assertEqual(p["outcome"]["result"], tm[0].content, "the tool's answer is the recorded result")
        self.ran_once_decided_by_bob(cs["proposal_id"], p, customer)

        # The same answer again (a retried request, another worker): no second run.
        again = graph.invoke(Command(resume={ints[0].id: {"type": "approve"}}), cfg)
        self.assertEqual(tool_messages(again)[-1].content, tm[0].content)
        # Replayed from the checkpoint before the tools ran (time travel): the recorded outcome.
        before = next(s for s in graph.get_state_history(cfg) if "tools" in s.next)
        replay = graph.invoke(Command(resume={ints[0].id: {"type": "approve"}}), before.config)
        self.assertEqual(tool_messages(replay)[-1].content, tm[0].content)
        self.assertEqual(self.backend.count(customer), 1, "resumed three times, executed once")

    def test_two_calls_in_one_turn_are_answered_by_id(self) -> None:
        a, b = self.unique("c"), self.unique("c")
        graph, cfg, ints = self.start(
            [call("refund", {"amount": 1, "customer": a}, "call_a"), call("refund", {"amount": 2, "customer": b}, "call_b")]
        )
        self.assertEqual(len({i.id for i in ints}), 2, "one interrupt per gated call, each with its own id")
        by_call = {i.value["tool_call_id"]: i for i in ints}
        self.bob.approve(by_call["call_a"].value["countersign"]["proposal_id"])
        self.bob.reject(by_call["call_b"].value["countersign"]["proposal_id"], reason="not b")
        out = graph.invoke(resume(graph, cfg, {i.id: {"type": "approve"} for i in ints}), cfg)
        got = {m.tool_call_id: (m.status, m.content) for m in tool_messages(out)}
        self.assertTrue(got["call_a"][1].startswith(f"refunded 1 to {a}"), got)
        self.assertEqual(got["call_b"][0], "error")
        self.assertIn("rejected by bob (not b)", got["call_b"][1])
        self.assertEqual((self.backend.count(a), self.backend.count(b)), (1, 0))

    def test_rejected_in_countersign_never_runs(self) -> None:
        customer = self.unique("c")
        graph, cfg, ints = self.start([call("refund", {"amount": 7, "customer": customer}, "call_1")])
        pid = ints[0].value["countersign"]["proposal_id"]
        self.assertEqual(self.bob.reject(pid, reason="no")["status"], "applied")
        out = graph.invoke(resume(graph, cfg, {ints[0].id: {"type": "approve"}}), cfg)
        tm = tool_messages(out)
        self.assertEqual(tm[0].status, "error")
        self.assertIn("rejected by bob (no); it was not executed", tm[0].content)
        self.assertEqual(self.backend.count(customer), 0, "an approve resume of a rejected proposal runs nothing")

    def test_framework_reject_cancels_the_pending_proposal(self) -> None:
        customer = self.unique("c")
        graph, cfg, ints = self.start([call("refund", {"amount": 3, "customer": customer}, "call_1")])
        pid = ints[0].value["countersign"]["proposal_id"]
        out = graph.invoke(resume(graph, cfg, {ints[0].id: {"type": "reject", "message": "wrong customer"}}), cfg)
        p = self.bob.get_proposal(pid)
        self.assertEqual(p["status"], "cancelled")
        self.assertEqual(p["decisions"], [], "a cancel is the requester's withdrawal, not a decision")
        tm = tool_messages(out)
        self.assertEqual(tm[0].status, "error")
        self.assertIn("cancelled", tm[0].content)
        # An approval that comes after is too late: the proposal is past deciding.
        self.assertEqual(self.bob.approve(pid)["status"], "conflict")
        self.assertEqual(self.backend.count(customer), 0)

    def test_expired_never_runs(self) -> None:
        customer = self.unique("c")
        graph, cfg, ints = self.start([call("hold", {"customer": customer}, "call_1")])
        pid = ints[0].value["countersign"]["proposal_id"]
        wait_until(self, lambda: self.bob.get_proposal(pid)["status"] == "expired", 30, "the proposal expires (ttl 2s)")
        out = graph.invoke(resume(graph, cfg, {ints[0].id: {"type": "approve"}}), cfg)
        tm = tool_messages(out)
        self.assertEqual(tm[0].status, "error")
        self.assertIn("nobody decided before", tm[0].content)
        self.assertEqual(self.backend.count(customer), 0)

    def test_grant_runs_the_next_call_without_a_pause(self) -> None:
        customer = self.unique("c")
        graph, cfg, ints = self.start([call("refund", {"amount": 5, "customer": customer}, "call_1")])
        pid = ints[0].value["countersign"]["proposal_id"]
        self.assertEqual(self.bob.approve(pid, remember="thread")["status"], "applied")
        graph.invoke(resume(graph, cfg, {ints[0].id: {"type": "approve"}}), cfg)
        self.assertEqual(self.backend.count(customer), 1)
        # The same refund asked again in the thread (a new tool call): the
        # grant, bound to the action and its input, approves it; no pause.
        graph2 = agent(self.agent_client, [call("refund", {"amount": 5, "customer": customer}, "call_2")], graph.checkpointer)
        out = graph2.invoke({"messages": [{"role": "user", "content": "again"}]}, cfg)
        self.assertNotIn("__interrupt__", out)
        self.assertTrue(tool_messages(out)[-1].content.startswith(f"refunded 5 to {customer}"))
        self.assertEqual(self.backend.count(customer), 2, "two calls, each executed once")
        grants = self.bob.list_grants(thread_id=cfg["configurable"]["thread_id"])
        self.assertEqual(len(grants), 1)

    def test_allowed_action_runs_at_once_and_settles_once(self) -> None:
        to = self.unique("to")
        graph = agent(self.agent_client, [call("mail", {"to": to}, "call_m")])
        cfg = {"configurable": {"thread_id": self.unique("lg")}}
        out = graph.invoke({"messages": [{"role": "user", "content": "mail"}]}, cfg)
        self.assertNotIn("__interrupt__", out, "the policy allows mail.*: no pause")
        p = self.agent_client.find_call(cfg["configurable"]["thread_id"], "call_m")
        assert p is not None
        self.assertEqual((p.status, p.outcome.result if p.outcome else None), ("succeeded", tool_messages(out)[0].content))
        events = [e["type"] for e in self.agent_client.proposal_events(p.id)]
        self.assertEqual((events.count("proposal.claimed"), events.count("proposal.settled")), (1, 1))
        self.assertEqual(self.backend.count(to), 1)

    def test_not_applied_settles_failed(self) -> None:
        customer = self.unique("c")
        graph, cfg, ints = self.start([call("hold", {"customer": customer}, "call_1")])
        pid = ints[0].value["countersign"]["proposal_id"]
        self.bob.approve(pid)
        os.environ["CS_LG_MODE"] = "not_applied"
        out = graph.invoke(resume(graph, cfg, {ints[0].id: {"type": "approve"}}), cfg)
        self.assertIn("not applied: the payment was already settled", tool_messages(out)[0].content)
        p = self.bob.get_proposal(pid)
        self.assertEqual((p["status"], p["outcome"]["error"]), ("failed", "the payment was already settled"))

    # -- gated() in a graph of one's own; the async paths ----------------------

    def test_gated_tool_in_a_tool_node(self) -> None:
        customer = self.unique("c")
        seen: List[Any] = []

        @lc_tool
        def pay(amount: float, customer: str, config: RunnableConfig) -> str:
            """Refund a payment."""
            seen.append(config["configurable"]["countersign"])
            return refund.invoke({"amount": amount, "customer": customer})

        graph = tool_graph([gated(pay, self.agent_client, action="payments.refund")], [call("pay", {"amount": 11, "customer": customer}, "call_g")])
        cfg = {"configurable": {"thread_id": self.unique("lg")}}
        out = graph.invoke({"messages": [{"role": "user", "content": "go"}]}, cfg)
        ints = list(graph.get_state(cfg).interrupts)
        self.assertEqual(len(ints), 1, out)
        v = ints[0].value
        self.assertEqual((v["type"], v["name"], v["tool_call_id"]), (REQUEST_TYPE, "pay", "call_g"))
        pid = v["countersign"]["proposal_id"]
        self.bob.approve(pid)
        out = graph.invoke(resume(graph, cfg, {ints[0].id: {"type": "approve"}}), cfg)
        p = self.bob.get_proposal(pid)
        self.assertEqual(tool_messages(out)[0].content, f"refunded 11 to {customer} (rf_{p['operation_id']})")
        self.assertEqual([r.operation_id for r in seen], [p["operation_id"]], "the tool got the claim in its config")
        again = graph.invoke(Command(resume={ints[0].id: {"type": "approve"}}), cfg)
        self.assertEqual(tool_messages(again)[0].content, tool_messages(out)[0].content)
        self.assertEqual(self.backend.count(customer), 1)

    def test_gated_refuses_a_server_executed_action(self) -> None:
        customer = self.unique("c")
        ran: List[str] = []

        @lc_tool
        def wire(customer: str) -> str:
            """Wire money."""
            ran.append(customer)
            return "wired here"

        graph = tool_graph([gated(wire, self.agent_client, action="payments.wire")], [call("wire", {"customer": customer}, "call_w")])
        cfg = {"configurable": {"thread_id": self.unique("lg")}}
        graph.invoke({"messages": [{"role": "user", "content": "go"}]}, cfg)
        ints = list(graph.get_state(cfg).interrupts)
        self.bob.approve(ints[0].value["countersign"]["proposal_id"])
        out = graph.invoke(resume(graph, cfg, {ints[0].id: {"type": "approve"}}), cfg)
        tm = tool_messages(out)[0]
        self.assertEqual(tm.status, "error")
        self.assertIn("payments.wire is executed by the server, not by this process, so wire was not run here", tm.content)
        self.assertEqual(ran, [], "the local tool never ran")
        self.assertEqual(self.backend.count(customer), 1, "the server's webhook ran it, once")

    def test_async_middleware_and_gated_tool(self) -> None:
        customer = self.unique("c")

        async def scenario() -> None:
            for graph in (
                agent(self.agent_client, [call("refund", {"amount": 13, "customer": customer}, "call_a")]),
                tool_graph([gated(refund, self.agent_client, action="payments.refund")], [call("refund", {"amount": 14, "customer": customer}, "call_b")]),
            ):
                cfg = {"configurable": {"thread_id": self.unique("lg")}}
                out = await graph.ainvoke({"messages": [{"role": "user", "content": "go"}]}, cfg)
                self.assertIn("__interrupt__", out)
                ints = list((await graph.aget_state(cfg)).interrupts)
                self.bob.approve(ints[0].value["countersign"]["proposal_id"])
                out = await graph.ainvoke(Command(resume={ints[0].id: {"type": "approve"}}), cfg)
                self.assertTrue(tool_messages(out)[0].content.startswith("refunded 1"), tool_messages(out))
                again = await graph.ainvoke(Command(resume={ints[0].id: {"type": "approve"}}), cfg)
                self.assertEqual(tool_messages(again)[0].content, tool_messages(out)[0].content)

        asyncio.run(scenario())
        self.assertEqual(self.backend.count(customer), 2, "two graphs, one execution each")

    # -- at most once, across processes --------------------------------------

    def test_two_processes_resume_at_once_one_execution(self) -> None:
        customer = self.unique("c")
        tmp = tempfile.mkdtemp(prefix="cs-lg-")
        self.addCleanup(shutil.rmtree, tmp, True)
        db = os.path.join(tmp, "checkpoints.db")
        calls = [call("refund", {"amount": 9, "customer": customer}, "call_1")]
        graph, cfg, ints = self.start(calls, sqlite_saver(db))
        pid = ints[0].value["countersign"]["proposal_id"]
        self.bob.approve(pid)
        # Both processes answer the same interrupt; the tool outlasts the 2 s
        # lease, so the second finds it executing and waits for the outcome.
        kids = [self.spawn("slow", cfg["configurable"]["thread_id"], db, ints[0].id, json.dumps(calls)) for _ in range(2)]
        outs = self.last_lines(kids)
        p = self.bob.get_proposal(pid)
        want = f"refunded 9 to {customer} (rf_{p['operation_id']})"
        self.assertEqual(outs, [[want], [want]], "both resumes answer with the one execution's result")
        self.executed_once(pid, p, customer)

    def test_killed_between_claim_and_settle_goes_to_reconcile(self) -> None:
        customer = self.unique("c")
        tmp = tempfile.mkdtemp(prefix="cs-lg-")
        self.addCleanup(shutil.rmtree, tmp, True)
        db = os.path.join(tmp, "checkpoints.db")
        calls = [call("refund", {"amount": 4, "customer": customer}, "call_1")]
        graph, cfg, ints = self.start(calls, sqlite_saver(db))
        pid = ints[0].value["countersign"]["proposal_id"]
        self.bob.approve(pid)
        kid = self.spawn("hang", cfg["configurable"]["thread_id"], db, ints[0].id, json.dumps(calls))
        self.killed_after_its_side_effect(kid, pid)
        # Resumed here afterwards: the reconciled outcome, never a second run.
        out = graph.invoke(Command(resume={ints[0].id: {"type": "approve"}}), cfg)
        self.assertEqual(tool_messages(out)[0].status, "success")
        self.assertEqual(self.backend.count(customer), 1, "killed after the side effect, never re-run")

    def test_uncertain_failure_is_left_to_reconcile(self) -> None:
        customer = self.unique("c")
        graph, cfg, ints = self.start([call("refund", {"amount": 2, "customer": customer}, "call_1")])
        pid = ints[0].value["countersign"]["proposal_id"]
        self.bob.approve(pid)
        os.environ["CS_LG_MODE"] = "crash"
        out = graph.invoke(resume(graph, cfg, {ints[0].id: {"type": "approve"}}), cfg)
        tm = tool_messages(out)
        self.assertEqual(tm[0].status, "error")
        self.assertIn("the outcome is uncertain (ConnectionResetError", tm[0].content)
        self.assertEqual(self.bob.get_proposal(pid)["status"], "executing", "nothing was settled on a guess")
        wait_until(self, lambda: self.bob.get_proposal(pid)["status"] == "succeeded", 60, "reconciled applied")
        self.assertEqual(self.backend.count(customer), 1)

    # -- forged, unknown and stale resumes -----------------------------------

    def test_forged_resume_runs_nothing_and_says_why(self) -> None:
        customer = self.unique("c")
        graph, cfg, ints = self.start([call("refund", {"amount": 8, "customer": customer}, "call_1")])
        pid = ints[0].value["countersign"]["proposal_id"]
        # An "approve" that names another proposal, with nobody's approval behind it.
        out = graph.invoke(Command(resume={ints[0].id: {"type": "approve", "proposal_id": "prp_forged", "status": "approved"}}), cfg)
        self.assertIn("__interrupt__", out, "still paused: a resume does not approve")
        again = list(graph.get_state(cfg).interrupts)
        self.assertEqual(len(again), 1)
        self.assertNotEqual(again[0].id, ints[0].id, "asked again, under a new id")
        self.assertEqual(again[0].value["countersign"]["proposal_id"], pid)
        self.assertIn("a resume does not approve", again[0].value["countersign"]["note"])
        self.assertEqual(self.bob.get_proposal(pid)["status"], "pending")
        # A value that is no answer at all: LangGraph refuses it before anything runs.
        with self.assertRaises(pydantic.ValidationError):
            graph.invoke(Command(resume={again[0].id: {"approved": True}}), cfg)
        # An unknown id, and the first question's id (stale): refused by resume(), naming them.
        with self.assertRaises(UnknownInterrupt) as cm:
            resume(graph, cfg, {"0" * 32: {"type": "approve"}})
        self.assertEqual(cm.exception.pending, [again[0].id])
        with self.assertRaises(UnknownInterrupt) as cm:
            resume(graph, cfg, {ints[0].id: {"type": "approve"}})
        self.assertEqual(cm.exception.unknown, [ints[0].id])
        self.assertIn("not an interrupt this thread is paused at", str(cm.exception))
        # Sent past resume() anyway, an unknown id leaves the graph paused as it was.
        out = graph.invoke(Command(resume={"f" * 32: {"type": "approve"}}), cfg)
        self.assertIn("__interrupt__", out)
        self.assertEqual(self.backend.count(customer), 0)
        # Approved for real: the current question's answer runs it, once.
        self.bob.approve(pid)
        cur = list(graph.get_state(cfg).interrupts)
        out = graph.invoke(resume(graph, cfg, {cur[0].id: {"type": "approve"}}), cfg)
        self.assertTrue(tool_messages(out)[-1].content.startswith(f"refunded 8 to {customer}"))
        self.assertEqual(self.backend.count(customer), 1)

    def test_human_credential_is_refused(self) -> None:
        customer = self.unique("c")
        human = Client(self.server.url, "ck_lg_alice")
        graph = agent(human, [call("refund", {"amount": 1, "customer": customer}, "call_1")])
        cfg = {"configurable": {"thread_id": self.unique("lg")}}
        with self.assertRaises(NotAnAgent) as cm:
            graph.invoke({"messages": [{"role": "user", "content": "go"}]}, cfg)
        self.assertIn("not kind agent", str(cm.exception))
        self.assertEqual(self.bob.list_proposals(thread_id=cfg["configurable"]["thread_id"]), [], "nothing was called")
        self.assertEqual(self.backend.count(customer), 0)


class SQLite(Scenarios):
    __test__ = True
    store = "sqlite"


class PostgreSQL(Scenarios):
    __test__ = True
    store = "postgres"


if __name__ == "__main__":
    unittest.main()

