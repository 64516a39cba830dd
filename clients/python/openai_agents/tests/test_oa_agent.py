"""countersign-openai-agents against a real `countersign serve`, on SQLite
and on PostgreSQL: an Agent with gated function tools, the SDK's own
ScriptedModel (no network, no key), the tools changing a backend that
counts every execution it receives. Every test ends by reading that count:
at most once is what the backend saw, not what the adapter says. Decisions
are a human's (bob, over HTTP); the adapter's agent credential never
decides, and the SDK's approve and reject are only records."""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import tempfile
import unittest
from typing import Any, Callable, Dict, List, Optional, Tuple, Type

from agents import Agent, Runner, RunState, ToolGuardrailFunctionOutput, function_tool, tool_input_guardrail
from agents.exceptions import ModelBehaviorError

from adapter_server import AdapterScenarios, wait_until
from countersign import Client, NotAnAgent
from countersign_openai_agents import CONTEXT_KEY, ForgedResume, NotDecided, gated, proposal_id
from oa_harness import OA, agent, call, model, outputs, refund

HERE = os.path.dirname(os.path.abspath(__file__))


def run(a: Agent, inp: Any, context: Optional[Dict[str, Any]] = None) -> Any:
    """Runner.run to its end or its interruption, in a fresh event loop."""
    return asyncio.run(Runner.run(a, inp, context=context))


def from_string(a: Agent, saved: str) -> Any:
    return asyncio.run(RunState.from_string(a, saved))


def raised(test: unittest.TestCase, kind: Type[BaseException], fn: Callable[[], Any]) -> BaseException:
    """fn's exception of ``kind``, as raised or as the cause of what was raised."""
    try:
        fn()
    except BaseException as e:  # noqa: BLE001 - looked through below
        seen = e
        while seen is not None:
            if isinstance(seen, kind):
                return seen
            seen = seen.__cause__ or seen.__context__
        raise
    test.fail(f"{kind.__name__} was not raised")


def edit_args(saved: str, old: str, new: str, drop_ledger: bool = False) -> str:
    """The saved state with every serialized copy of the call's arguments
    ``old`` replaced by ``new`` (what a forger would do); ``drop_ledger``
    also removes the SDK's own record of each call's fingerprint, which
    would give the forgery away."""

    def walk(v: Any) -> Any:
        if isinstance(v, dict):
            return {k: walk(x) for k, x in v.items()}
        if isinstance(v, list):
            return [walk(x) for x in v]
        if isinstance(v, str) and v == old:
            return new
        return v

    doc = json.loads(saved)
    forged = walk(doc)
    if drop_ledger:
        forged["context"]["tool_invocations"] = {}
    out = json.dumps(forged)
    assert out != json.dumps(doc), "the arguments are in the state"
    return out


class Scenarios(AdapterScenarios, unittest.TestCase):
    """The scenarios; SQLite and PostgreSQL below run them on their store
    (testsupport/adapter_server.py sets up the server, the backend and bob)."""

    __test__ = False
    adapter = OA
    child = os.path.join(HERE, "oa_child.py")

    def start(self, calls: List[Any]) -> Tuple[Agent, Dict[str, Any], Any]:
        """Runs a new thread's agent up to its interruption: (agent, context, result)."""
        a = agent(self.agent_client, calls)
        ctx: Dict[str, Any] = {"thread_id": self.unique("oa")}
        result = run(a, "go", ctx)
        self.assertTrue(result.interruptions, "the run pauses for the decision")
        return a, ctx, result

    def approved(self, a: Agent, state: Any) -> Any:
        """The state with every interruption approved in the SDK, resumed."""
        for item in state.get_interruptions():
            state.approve(item)
        return run(a, state)

    # -- approve, reject, cancel, expire, grants -----------------------------

    def test_approve_runs_once_and_a_second_resume_does_not(self) -> None:
        customer = self.unique("c")
        a, ctx, result = self.start([call("refund", {"amount": 12, "customer": customer}, "call_1")])
        self.assertEqual(len(result.interruptions), 1)
        item = result.interruptions[0]
        self.assertEqual(item.tool_name, "refund")
        pid = proposal_id(result, item)
        assert pid is not None
        p = self.bob.get_proposal(pid)
        self.assertEqual((p["status"], p["action"], p["thread_id"], p["tool_call_id"]), ("pending", "payments.refund", ctx["thread_id"], "call_1"))
        self.assertEqual(p["preview"], f"Refund 12 EUR to {customer}")
        self.assertEqual(p["requester_kind"], "agent")
        self.assertEqual(self.backend.count(customer), 0, "nothing ran before the decision")
        # The RunState carries the proposal id and nothing else of Countersign's.
        saved = result.to_state().to_string()
        doc = json.loads(saved)
        self.assertEqual(doc["context"]["context"][CONTEXT_KEY], {"proposals": {"call_1": pid}})
        self.assertNotIn("ck_oa_", saved)
        self.assertNotIn("lease", json.dumps(doc["context"]["context"]))

        self.assertEqual(self.bob.approve(pid, reason="ok")["status"], "applied")
        out = self.approved(a, result.to_state())
        p = self.bob.get_proposal(pid)
        want = f"refunded 12 to {customer} (rf_{p['operation_id']})"
        self.assertEqual(outputs(out), [want])
        self.assertEqual(out.final_output, "done: " + want)
        self.assertEqual(p["status"], "succeeded")
        self.assertEqual(p["outcome"]["result"], want, "the tool's output is the recorded result")
        self.ran_once_decided_by_bob(pid, p, customer)

        # The saved state resumed again (a retried request, another worker): no second run.
        again = self.approved(a, from_string(a, saved))
        self.assertEqual(outputs(again), [want])
        self.assertEqual(self.backend.count(customer), 1, "resumed twice, executed once")

    def test_two_calls_in_one_turn_are_answered_by_call(self) -> None:
        x, y = self.unique("c"), self.unique("c")
        a, ctx, result = self.start(
            [call("refund", {"amount": 1, "customer": x}, "call_a"), call("refund", {"amount": 2, "customer": y}, "call_b")]
        )
        self.assertEqual(len(result.interruptions), 2)
        pids = {i.raw_item.call_id: proposal_id(result, i) for i in result.interruptions}
        self.assertEqual(len(set(pids.values())), 2, "one proposal per call")
        self.bob.approve(pids["call_a"])
        self.bob.reject(pids["call_b"], reason="not b")
        out = self.approved(a, result.to_state())
        got = outputs(out)
        self.assertEqual(len(got), 2, got)
        self.assertTrue(got[0].startswith(f"refunded 1 to {x}"), got)
        self.assertEqual(got[1], "refund was rejected by bob (not b); it was not executed")
        self.assertEqual((self.backend.count(x), self.backend.count(y)), (1, 0))

    def test_rejected_in_countersign_never_runs(self) -> None:
        customer = self.unique("c")
        a, ctx, result = self.start([call("refund", {"amount": 7, "customer": customer}, "call_1")])
        pid = proposal_id(result, result.interruptions[0])
        assert pid is not None
        self.assertEqual(self.bob.reject(pid, reason="no")["status"], "applied")
        out = self.approved(a, result.to_state())
        self.assertEqual(outputs(out), ["refund was rejected by bob (no); it was not executed"])
        self.assertEqual(self.backend.count(customer), 0, "an SDK approval of a rejected proposal runs nothing")

    def test_framework_reject_cancels_the_pending_proposal(self) -> None:
        customer = self.unique("c")
        a, ctx, result = self.start([call("refund", {"amount": 3, "customer": customer}, "call_1")])
        item = result.interruptions[0]
        pid = proposal_id(result, item)
        assert pid is not None
        state = result.to_state()
        state.reject(item, rejection_message="wrong customer")
        out = run(a, state)
        self.assertEqual(outputs(out), ["wrong customer"], "the model hears the SDK's rejection")
        p = self.bob.get_proposal(pid)
        self.assertEqual(p["status"], "cancelled")
        self.assertEqual(p["decisions"], [], "a cancel is the requester's withdrawal, not a decision")
        # An approval that comes after is too late: the proposal is past deciding.
        self.assertEqual(self.bob.approve(pid)["status"], "conflict")
        self.assertEqual(self.backend.count(customer), 0)

    def test_expired_never_runs(self) -> None:
        customer = self.unique("c")
        a, ctx, result = self.start([call("hold", {"customer": customer}, "call_1")])
        pid = proposal_id(result, result.interruptions[0])
        assert pid is not None
        wait_until(self, lambda: self.bob.get_proposal(pid)["status"] == "expired", 30, "the proposal expires (ttl 2s)")
        out = self.approved(a, result.to_state())
        self.assertEqual(len(outputs(out)), 1)
        self.assertIn("hold was nobody decided before", outputs(out)[0])
        self.assertEqual(self.backend.count(customer), 0)

    def test_grant_runs_the_next_call_without_a_pause(self) -> None:
        customer = self.unique("c")
        a, ctx, result = self.start([call("refund", {"amount": 5, "customer": customer}, "call_1")])
        pid = proposal_id(result, result.interruptions[0])
        assert pid is not None
        self.assertEqual(self.bob.approve(pid, remember="thread")["status"], "applied")
        self.approved(a, result.to_state())
        self.assertEqual(self.backend.count(customer), 1)
        # The same refund asked again in the thread (a new tool call): the
        # grant, bound to the action and its input, approves it; no pause.
        a2 = agent(self.agent_client, [call("refund", {"amount": 5, "customer": customer}, "call_2")])
        out = run(a2, "again", ctx)
        self.assertEqual(out.interruptions, [])
        self.assertTrue(outputs(out)[0].startswith(f"refunded 5 to {customer}"), outputs(out))
        self.assertEqual(self.backend.count(customer), 2, "two calls, each executed once")
        self.assertEqual(len(self.bob.list_grants(thread_id=ctx["thread_id"])), 1)

    def test_allowed_action_runs_at_once_and_settles_once(self) -> None:
        to = self.unique("to")
        a = agent(self.agent_client, [call("mail", {"to": to}, "call_m")])
        ctx = {"thread_id": self.unique("oa")}
        out = run(a, "mail", ctx)
        self.assertEqual(out.interruptions, [], "the policy allows mail.*: no pause")
        p = self.agent_client.find_call(ctx["thread_id"], "call_m")
        assert p is not None
        self.assertEqual((p.status, p.outcome.result if p.outcome else None), ("succeeded", outputs(out)[0]))
        events = [e["type"] for e in self.agent_client.proposal_events(p.id)]
        self.assertEqual((events.count("proposal.claimed"), events.count("proposal.settled")), (1, 1))
        self.assertEqual(self.backend.count(to), 1)

    def test_allowed_call_the_sdk_does_not_execute_is_settled_failed(self) -> None:
        to = self.unique("to")

        @tool_input_guardrail
        def no_mail(data: Any) -> ToolGuardrailFunctionOutput:
            return ToolGuardrailFunctionOutput.reject_content("mail is off today")

        @function_tool(tool_input_guardrails=[no_mail])
        def mail(to: str) -> str:
            """Send a mail."""
            return "sent"

        a = Agent(name="support", model=model([call("mail", {"to": to}, "call_m")]), tools=[gated(mail, self.agent_client, action="mail.send")])
        ctx = {"thread_id": self.unique("oa")}
        out = run(a, "mail", ctx)
        self.assertEqual(outputs(out), ["mail is off today"], "the guardrail answered, the tool never ran")
        p = self.agent_client.find_call(ctx["thread_id"], "call_m")
        assert p is not None
        # needs_approval's call was the claim; the SDK never executed it, so it
        # is settled failed (certain: nothing ran) before the lease lapses.
        wait_until(self, lambda: self.agent_client.get_proposal(p.id)["status"] == "failed", 30, "the unexecuted claim is settled")
        self.assertEqual(self.agent_client.get_proposal(p.id)["outcome"]["error"], "mail: the agent did not execute the approved call")
        self.assertEqual(self.backend.count(to), 0)

    def test_a_context_that_is_not_a_mapping_finds_the_call_by_thread(self) -> None:
        customer = self.unique("c")
        thread = self.unique("oa")
        a = Agent(
            name="support",
            model=model([call("refund", {"amount": 6, "customer": customer}, "call_1")]),
            tools=[gated(refund, self.agent_client, action="payments.refund", thread=thread)],
        )
        result = asyncio.run(Runner.run(a, "go"))  # no context at all: nothing recorded
        item = result.interruptions[0]
        self.assertIsNone(proposal_id(result, item))
        p = self.agent_client.find_call(thread, "call_1")
        assert p is not None
        self.bob.approve(p.id)
        out = self.approved(a, result.to_state())
        self.assertTrue(outputs(out)[0].startswith(f"refunded 6 to {customer}"), outputs(out))
        self.assertEqual(self.backend.count(customer), 1)

    def test_input_the_action_refuses_is_told_to_the_model(self) -> None:
        customer = self.unique("c")
        a = agent(self.agent_client, [call("refund", {"amount": -5, "customer": customer}, "call_1")])
        ctx = {"thread_id": self.unique("oa")}
        out = run(a, "go", ctx)
        self.assertEqual(out.interruptions, [], "nothing to decide: the server refused the input")
        self.assertEqual(len(outputs(out)), 1)
        self.assertTrue(outputs(out)[0].startswith("refund: invalid input (INVALID_INPUT)"), outputs(out))
        self.assertIn("it was not executed", outputs(out)[0])
        self.assertIsNone(self.agent_client.find_call(ctx["thread_id"], "call_1"), "nothing stored")
        self.assertEqual(self.backend.count(customer), 0)

    def test_not_applied_settles_failed(self) -> None:
        customer = self.unique("c")
        a, ctx, result = self.start([call("hold", {"customer": customer}, "call_1")])
        pid = proposal_id(result, result.interruptions[0])
        assert pid is not None
        self.bob.approve(pid)
        os.environ["CS_OA_MODE"] = "not_applied"
        out = self.approved(a, result.to_state())
        self.assertEqual(outputs(out), ["hold failed: not applied: the payment was already settled"])
        p = self.bob.get_proposal(pid)
        self.assertEqual((p["status"], p["outcome"]["error"]), ("failed", "the payment was already settled"))

    def test_gated_refuses_a_server_executed_action(self) -> None:
        customer = self.unique("c")
        ran: List[str] = []

        @function_tool
        def wire(customer: str) -> str:
            """Wire money."""
            ran.append(customer)
            return "wired here"

        a = Agent(name="support", model=model([call("wire", {"customer": customer}, "call_w")]), tools=[gated(wire, self.agent_client, action="payments.wire")])
        ctx = {"thread_id": self.unique("oa")}
        result = run(a, "go", ctx)
        pid = proposal_id(result, result.interruptions[0])
        assert pid is not None
        self.bob.approve(pid)
        out = self.approved(a, result.to_state())
        self.assertEqual(len(outputs(out)), 1)
        self.assertIn("payments.wire is executed by the server, not by this process, so wire was not run here", outputs(out)[0])
        self.assertEqual(self.backend.count(customer), 1, "the server's webhook ran it, once")
        self.assertEqual(ran, [], "the local tool never ran")

    # -- at most once, across processes --------------------------------------

    def _saved(self, calls: List[Any]) -> Tuple[Agent, Dict[str, Any], Any, str, str]:
        """A run paused and its state saved to a file: (agent, context, result, pid, path)."""
        a, ctx, result = self.start(calls)
        pid = proposal_id(result, result.interruptions[0])
        assert pid is not None
        tmp = tempfile.mkdtemp(prefix="cs-oa-")
        self.addCleanup(shutil.rmtree, tmp, True)
        path = os.path.join(tmp, "state.json")
        with open(path, "w") as f:
            f.write(result.to_state().to_string())
        return a, ctx, result, pid, path

    def test_two_processes_resume_at_once_one_execution(self) -> None:
        customer = self.unique("c")
        spec = [{"name": "refund", "args": {"amount": 9, "customer": customer}, "id": "call_1"}]
        a, ctx, result, pid, path = self._saved([call(c["name"], c["args"], c["id"]) for c in spec])
        self.bob.approve(pid)
        # Both processes resume the same saved state; the tool outlasts the
        # 2 s lease, so the second finds it executing and waits for the outcome.
        kids = [self.spawn("slow", path, json.dumps(spec)) for _ in range(2)]
        outs = self.last_lines(kids)
        p = self.bob.get_proposal(pid)
        want = f"refunded 9 to {customer} (rf_{p['operation_id']})"
        self.assertEqual(outs, [[want], [want]], "both resumes answer with the one execution's result")
        self.executed_once(pid, p, customer)

    def test_killed_between_claim_and_settle_goes_to_reconcile(self) -> None:
        customer = self.unique("c")
        spec = [{"name": "refund", "args": {"amount": 4, "customer": customer}, "id": "call_1"}]
        a, ctx, result, pid, path = self._saved([call(c["name"], c["args"], c["id"]) for c in spec])
        self.bob.approve(pid)
        p = self.killed_after_its_side_effect(self.spawn("hang", path, json.dumps(spec)), pid)
        # Resumed here afterwards: the reconciled outcome, never a second run.
        with open(path) as f:
            out = self.approved(a, from_string(a, f.read()))
        self.assertEqual(outputs(out), [f"refund succeeded (receipt rf_{p['operation_id']})"])
        self.assertEqual(self.backend.count(customer), 1, "killed after the side effect, never re-run")

    def test_uncertain_failure_is_left_to_reconcile(self) -> None:
        customer = self.unique("c")
        a, ctx, result = self.start([call("refund", {"amount": 2, "customer": customer}, "call_1")])
        pid = proposal_id(result, result.interruptions[0])
        assert pid is not None
        self.bob.approve(pid)
        os.environ["CS_OA_MODE"] = "crash"
        out = self.approved(a, result.to_state())
        self.assertIn("refund: the outcome is uncertain (ConnectionResetError", outputs(out)[0])
        self.assertEqual(self.bob.get_proposal(pid)["status"], "executing", "nothing was settled on a guess")
        wait_until(self, lambda: self.bob.get_proposal(pid)["status"] == "succeeded", 60, "reconciled applied")
        self.assertEqual(self.backend.count(customer), 1)

    # -- forged resumes --------------------------------------------------------

    def test_sdk_approval_without_a_decision_runs_nothing(self) -> None:
        customer = self.unique("c")
        a, ctx, result = self.start([call("refund", {"amount": 8, "customer": customer}, "call_1")])
        pid = proposal_id(result, result.interruptions[0])
        assert pid is not None
        saved = result.to_state().to_string()
        # state.approve() with nobody's approval behind it: refused, nothing decided.
        e = raised(self, NotDecided, lambda: self.approved(a, result.to_state()))
        self.assertIn(f"proposal {pid} is still pending in Countersign", str(e))
        self.assertEqual(self.bob.get_proposal(pid)["status"], "pending")
        # Resumed without any SDK decision: the SDK's own pause, again.
        out = run(a, from_string(a, saved))
        self.assertEqual(len(out.interruptions), 1)
        self.assertEqual(proposal_id(out, out.interruptions[0]), pid)
        self.assertEqual(self.backend.count(customer), 0)
        # Approved for real: the saved state's resume runs it, once.
        self.bob.approve(pid)
        out = self.approved(a, from_string(a, saved))
        self.assertTrue(outputs(out)[0].startswith(f"refunded 8 to {customer}"), outputs(out))
        self.assertEqual(self.backend.count(customer), 1)

    def test_forged_state_runs_nothing_and_says_why(self) -> None:
        customer = self.unique("c")
        a, ctx, result = self.start([call("refund", {"amount": 12, "customer": customer}, "call_1")])
        pid = proposal_id(result, result.interruptions[0])
        assert pid is not None
        saved = result.to_state().to_string()
        # Another call, approved: a forger points this call's record at it.
        other_customer = self.unique("c")
        b, bctx, bresult = self.start([call("refund", {"amount": 1, "customer": other_customer}, "call_9")])
        other = proposal_id(bresult, bresult.interruptions[0])
        assert other is not None
        self.bob.approve(other)
        self.bob.approve(pid)
        forged = saved.replace(pid, other)
        e = raised(self, ForgedResume, lambda: self.approved(a, from_string(a, forged)))
        self.assertIn(f"names proposal {other} for call call_1, but that proposal is payments.refund's call call_9", str(e))
        unknown = saved.replace(pid, "prp_forged")
        e = raised(self, ForgedResume, lambda: self.approved(a, from_string(a, unknown)))
        self.assertIn("prp_forged", str(e))
        # The arguments made larger after the approval: the server's copy differs.
        old = json.dumps({"amount": 12, "customer": customer}, separators=(",", ":"))
        larger = old.replace('"amount":12', '"amount":12000')
        # The SDK's own ledger of the call's fingerprint refuses the naive forgery ...
        raised(self, ModelBehaviorError, lambda: self.approved(a, from_string(a, edit_args(saved, old, larger))))
        # ... and without the ledger, Countersign's copy of the arguments does.
        e = raised(self, ForgedResume, lambda: self.approved(a, from_string(a, edit_args(saved, old, larger, drop_ledger=True))))
        self.assertIn("other arguments than the ones proposed", str(e))
        self.assertEqual((self.backend.count(customer), self.backend.count(other_customer)), (0, 0))
        self.assertEqual(self.bob.get_proposal(other)["status"], "approved", "the other call's proposal is untouched")
        # The genuine state: it runs, once, as approved.
        out = self.approved(a, from_string(a, saved))
        self.assertTrue(outputs(out)[0].startswith(f"refunded 12 to {customer}"), outputs(out))
        self.assertEqual(self.backend.count(customer), 1)

    def test_human_credential_is_refused(self) -> None:
        customer = self.unique("c")
        human = Client(self.server.url, "ck_oa_alice")
        a = agent(human, [call("refund", {"amount": 1, "customer": customer}, "call_1")])
        ctx = {"thread_id": self.unique("oa")}
        e = raised(self, NotAnAgent, lambda: run(a, "go", ctx))
        self.assertIn("not kind agent", str(e))
        self.assertEqual(self.bob.list_proposals(thread_id=ctx["thread_id"]), [], "nothing was called")
        self.assertEqual(self.backend.count(customer), 0)


class SQLite(Scenarios):
    __test__ = True
    store = "sqlite"


class PostgreSQL(Scenarios):
    __test__ = True
    store = "postgres"


if __name__ == "__main__":
    unittest.main()
