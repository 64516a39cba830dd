"""The polling schedule on a fake clock (no countersign server): the pauses
grow from 0.5 s to 30 s with jitter, two requests for one thing never start
less than a second apart, Retry-After (seconds or an HTTP date) holds the
next one back, and gated, wait_for_proposal, watch_proposals and the event
stream's reconnects follow it. An HTTP answer the server gives at once
cannot make a tight loop.

The gated tests stand a scripted server (FakeServer) where the HTTP client
would be: it records when, on the fake clock, each request was made."""

from __future__ import annotations

import calendar
import email.utils
import http.server
import json
import threading
import time
import unittest
from types import SimpleNamespace
from typing import Any, Callable, Dict, List, Optional, Tuple

from countersign import (
    Client,
    Conflict,
    CountersignError,
    Failed,
    Pacing,
    ServerExecuted,
    StillPending,
    gated,
)
from countersign.errors import RateLimited, Unavailable, parse_retry_after
from countersign.lease import CALLER_OWNER, await_holder, claimed_by_caller
from countersign.polling import MAX_DELAY, MIN_DELAY, RETRIES, delay, reconnect_pause, retried


class FakeClock:
    """A monotonic clock that moves only when someone sleeps on it."""

    def __init__(self) -> None:
        self.now = 0.0
        self.sleeps: List[float] = []

    def clock(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)
        self.now += seconds

    def pacing(self, rand: float = 0.5) -> Pacing:
        return Pacing(clock=self.clock, sleep=self.sleep, random=lambda: rand, wall=lambda: 1_800_000_000 + self.now)


Answer = Callable[[int, float], Dict[str, Any]]


class FakeServer:
    """Stands where the HTTP client would: call(...) answers from a script
    (given the call's number and its wait_seconds; a script may raise, or
    move the clock to play a long-poll the server held), and each request's
    fake time is recorded."""

    def __init__(self, clock: FakeClock, answer: Answer, events: Optional[List[Dict[str, Any]]] = None) -> None:
        self.fake, self.answer = clock, answer
        self.pacing = clock.pacing()
        self.calls: List[float] = []
        self.event_reads: List[float] = []
        self.events = events or []

    def call(self, thread_id: str, tool_call_id: str, action: str, input: Any, **kw: Any) -> Dict[str, Any]:
        self.calls.append(self.fake.now)
        return self.answer(len(self.calls), kw["wait_seconds"])

    def proposal_events(self, proposal_id: str) -> List[Dict[str, Any]]:
        self.event_reads.append(self.fake.now)
        return self.events


def pending(mode: str = "wait") -> Dict[str, Any]:
    return {"status": "pending", "executed": False, "proposal_id": "prp_1", "proposal": {"id": "prp_1", "mode": mode, "status": "pending"}}


def gaps(times: List[float]) -> List[float]:
    return [round(b - a, 6) for a, b in zip(times, times[1:])]


class Schedule(unittest.TestCase):
    def test_delay_doubles_from_half_a_second_to_thirty(self) -> None:
        self.assertEqual([delay(n) for n in range(9)], [0.5, 1, 2, 4, 8, 16, 30, 30, 30])
        self.assertEqual(delay(10_000), MAX_DELAY)

    def test_jitter_stays_within_a_quarter_and_the_bounds(self) -> None:
        for n in range(12):
            step = min(MAX_DELAY, MIN_DELAY * 2**n)
            for r in (0.0, 0.1, 0.5, 0.9, 0.999999):
                d = delay(n, r)
                self.assertGreaterEqual(d, max(MIN_DELAY, 0.75 * step) - 1e-9, (n, r))
                self.assertLessEqual(d, min(MAX_DELAY, 1.25 * step) + 1e-9, (n, r))
        self.assertNotEqual(delay(3, 0.0), delay(3, 0.9), "the jitter moves the pause")

    def test_pacer_instant_answers_never_twice_a_second(self) -> None:
        fc = FakeClock()
        pacer = fc.pacing().pacer()
        starts = []
        for _ in range(9):
            self.assertTrue(pacer.wait())
            starts.append(fc.now)
        # 0.5 and 1 s pauses are held to the 1 s floor, then they double.
        self.assertEqual(starts, [0, 1, 2, 4, 8, 16, 32, 62, 92])

    def test_pacer_counts_a_long_poll_as_waited(self) -> None:
        fc = FakeClock()
        pacer = fc.pacing().pacer()
        starts = []
        for _ in range(10):
            pacer.wait()
            starts.append(fc.now)
            fc.now += 25  # the server held the long-poll 25 s
        # No pause on top of a 25 s long-poll until the schedule's pause is
        # longer (30 s): then 5 s more.
        self.assertEqual(gaps(starts), [25] * 6 + [30] * 3)

    def test_pacer_reset_and_deadline(self) -> None:
        fc = FakeClock()
        pacer = fc.pacing().pacer()
        for _ in range(6):
            pacer.wait()
        self.assertEqual(fc.now, 16)
        pacer.reset()
        pacer.wait()
        self.assertEqual(fc.now, 17, "after progress the pauses start again, the 1 s floor kept")
        slept = len(fc.sleeps)
        self.assertFalse(pacer.wait(deadline=17.5), "no request fits before the deadline")
        self.assertEqual(len(fc.sleeps), slept, "nor is the time slept away")

    def test_the_first_request_goes_whatever_the_deadline(self) -> None:
        fc = FakeClock()
        pacer = fc.pacing().pacer()
        self.assertTrue(pacer.wait(deadline=-1), "a timeout of 0 still asks once")
        self.assertFalse(pacer.wait(deadline=0.5))

    def test_retry_after_holds_the_next_request_back(self) -> None:
        fc = FakeClock()
        pacer = fc.pacing().pacer()
        pacer.wait()
        fc.now += 0.2
        pacer.retry_after(7)
        pacer.wait()
        self.assertAlmostEqual(fc.now, 7.2)
        pacer.retry_after(0)  # "now" cannot beat the floor
        pacer.wait()
        self.assertAlmostEqual(fc.now, 8.2)

    def test_min_interval_cannot_be_lowered(self) -> None:
        with self.assertRaises(ValueError):
            Pacing(min_interval=0.1)
        with self.assertRaises(ValueError):
            Pacing(base=0)

    def test_reconnect_pause(self) -> None:
        p = FakeClock().pacing()
        self.assertEqual(reconnect_pause(None, None, None, 1, p), 2.0)
        self.assertEqual(reconnect_pause(None, None, 1.5, 1, p), 1.5)
        self.assertEqual(reconnect_pause(None, 3, 1.5, 1, p), 3)
        self.assertEqual(reconnect_pause(7, 3, 1.5, 1, p), 7)
        # A server that stays down is asked less and less often.
        self.assertEqual([reconnect_pause(None, None, None, n, p) for n in range(1, 9)], [2, 2, 2, 2, 4, 8, 16, 30])


class RetryAfter(unittest.TestCase):
    def test_seconds_and_http_dates(self) -> None:
        self.assertEqual(parse_retry_after("7"), 7)
        self.assertEqual(parse_retry_after(" 120 "), 120)
        when = calendar.timegm((2027, 3, 1, 12, 0, 0))
        date = email.utils.formatdate(when, usegmt=True)  # "Mon, 01 Mar 2027 12:00:00 GMT"
        self.assertEqual(parse_retry_after(date, now=when - 10), 10)
        self.assertEqual(parse_retry_after(date, now=when - 9.5), 10, "rounded up")
        self.assertEqual(parse_retry_after(date, now=when + 60), 0, "a date past: at once")
        self.assertIsNone(parse_retry_after("soon"))
        self.assertIsNone(parse_retry_after("-3"))
        self.assertIsNone(parse_retry_after(None))

    def test_error_answer_reads_an_http_date(self) -> None:
        date = email.utils.formatdate(time.time() + 5, usegmt=True)
        e = CountersignError.from_response(503, {"retry-after": date}, b'{"error":{"code":"UNAVAILABLE","message":"down"}}')
        self.assertIsNotNone(e.retry_after)
        self.assertTrue(4 <= e.retry_after <= 6, e.retry_after)


class GatedOnAFakeClock(unittest.TestCase):
    def gate(self, server: FakeServer, fc: FakeClock, **kw: Any) -> Tuple[Any, List[Any]]:
        runs: List[Any] = []

        def fn(amount: int) -> str:
            runs.append(amount)
            return "ran"

        return gated(server, "payments.refund", thread_id="t1", pacing=fc.pacing(), **kw)(fn), runs  # type: ignore[arg-type]

    def test_a_pending_call_answered_at_once_is_not_a_flood(self) -> None:
        fc = FakeClock()
        srv = FakeServer(fc, lambda n, wait: pending())
        refund, runs = self.gate(srv, fc, wait_seconds=0, timeout=60)
        with self.assertRaises(StillPending):
            refund("call_1", amount=1)
        self.assertEqual(srv.calls, [0, 1, 2, 4, 8, 16, 32])
        self.assertEqual(len([t for t in srv.calls if t < 5]), 4, "left pending ~5 s: at most one request a second")
        self.assertEqual(runs, [])
        self.assertEqual(fc.now, 32, "StillPending as soon as no request fits in the timeout")

    def test_jittered_calls_stay_a_second_apart(self) -> None:
        for r in (0.0, 0.3, 0.999):
            fc = FakeClock()
            srv = FakeServer(fc, lambda n, wait: pending())
            refund, _ = self.gate(srv, fc, wait_seconds=0, timeout=600)
            refund.pacing = fc.pacing(rand=r)
            with self.assertRaises(StillPending):
                refund("call_1", amount=1)
            g = gaps(srv.calls)
            self.assertTrue(all(x >= 1 for x in g), (r, g))
            self.assertTrue(all(x <= MAX_DELAY for x in g), (r, g))
            # Ten minutes pending: a few dozen requests (the pauses settle at 22.5–30 s).
            self.assertLessEqual(len(srv.calls), 35, (r, len(srv.calls)))

    def test_long_polls_the_server_holds_follow_each_other(self) -> None:
        fc = FakeClock()

        def held(n: int, wait: float) -> Dict[str, Any]:
            fc.now += wait  # the server held the call wait_seconds
            return pending()

        srv = FakeServer(fc, held)
        refund, _ = self.gate(srv, fc, wait_seconds=25, timeout=200)
        with self.assertRaises(StillPending):
            refund("call_1", amount=1)
        self.assertEqual(gaps(srv.calls)[:6], [25] * 6)

    def test_failures_back_off_and_honour_retry_after(self) -> None:
        fc = FakeClock()

        def script(n: int, wait: float) -> Dict[str, Any]:
            if n == 1:
                raise CountersignError(503, "UNAVAILABLE", "down", retry_after=7)
            if n in (2, 3, 4):
                raise ConnectionRefusedError("refused")
            if n == 5:
                raise CountersignError(429, "TOO_MANY_REQUESTS", "slow down", retry_after=0)
            return {"status": "execute", "proposal_id": "prp_1", "operation_id": "op_1", "input": {"amount": 3},
                    "lease": {"token": "l", "expires_at": "2030-01-01T00:00:00Z", "attempt": 1},
                    "proposal": {"id": "prp_1", "mode": "wait", "updated_at": "2030-01-01T00:00:00Z"}}

        srv = FakeServer(fc, script)
        srv.settle = lambda *a, **k: {"status": "applied", "proposal": {"outcome": {"result": "ran"}}}  # type: ignore[attr-defined]
        srv.renew = lambda *a, **k: {"status": "applied"}  # type: ignore[attr-defined]
        refund, runs = self.gate(srv, fc)
        self.assertEqual(refund("call_1", amount=3), "ran")
        self.assertEqual(runs, [3])
        # 7 s (Retry-After), then the schedule: 1 (floor), 2, 4 and, Retry-After 0
        # notwithstanding, 8.
        self.assertEqual(gaps(srv.calls), [7, 1, 2, 4, 8])

    def test_a_non_transient_error_is_raised(self) -> None:
        fc = FakeClock()

        def script(n: int, wait: float) -> Dict[str, Any]:
            raise CountersignError(403, "FORBIDDEN", "not yours")

        srv = FakeServer(fc, script)
        refund, _ = self.gate(srv, fc)
        with self.assertRaises(CountersignError):
            refund("call_1", amount=1)
        self.assertEqual(len(srv.calls), 1)

    def test_independent_proposal_refused_at_once(self) -> None:
        fc = FakeClock()
        srv = FakeServer(fc, lambda n, wait: pending("independent"))
        refund, runs = self.gate(srv, fc)
        with self.assertRaises(ServerExecuted) as cm:
            refund("call_1", amount=1)
        self.assertEqual(len(srv.calls), 1)
        self.assertEqual(runs, [])
        self.assertIn("independent", str(cm.exception))

    def test_a_settled_outcome_is_returned_only_when_a_caller_claimed_it(self) -> None:
        done = {"status": "succeeded", "executed": True, "result": {"x": 1}, "receipt": "r",
                "proposal": {"id": "prp_1", "mode": "wait", "status": "succeeded"}}
        fc = FakeClock()
        worker = [{"type": "proposal.created", "actor": "alice"}, {"type": "proposal.claimed", "actor": "worker-1"}]
        srv = FakeServer(fc, lambda n, wait: dict(done), events=worker)
        refund, runs = self.gate(srv, fc)
        with self.assertRaises(ServerExecuted) as cm:
            refund("call_1", amount=1)
        self.assertEqual(cm.exception.answer["result"], {"x": 1})
        self.assertEqual(runs, [])

        caller = worker[:1] + [{"type": "proposal.claimed", "actor": "caller:alice"}]
        srv = FakeServer(fc, lambda n, wait: dict(done), events=caller)
        refund, runs = self.gate(srv, fc)
        self.assertEqual(refund("call_1", amount=1), {"x": 1}, "a replay of the function's own run")
        self.assertEqual(len(srv.event_reads), 1)

        failed = {"status": "failed", "executed": True, "error": "declined", "proposal": {"id": "prp_1", "mode": "wait"}}
        srv = FakeServer(fc, lambda n, wait: dict(failed), events=caller)
        refund, _ = self.gate(srv, fc)
        with self.assertRaises(Failed):
            refund("call_1", amount=1)
        srv = FakeServer(fc, lambda n, wait: dict(failed), events=worker)
        refund, _ = self.gate(srv, fc)
        with self.assertRaises(ServerExecuted):
            refund("call_1", amount=1)

        read = {"status": "succeeded", "executed": True, "result": {"tier": "gold"}, "proposal": None}
        srv = FakeServer(fc, lambda n, wait: dict(read))
        refund, _ = self.gate(srv, fc)
        with self.assertRaises(ServerExecuted):
            refund("call_1", amount=1)
        self.assertEqual(srv.event_reads, [], "a read has no proposal to look at")

    def test_executing_elsewhere_is_asked_on_the_schedule(self) -> None:
        fc = FakeClock()
        claimed = [{"type": "proposal.claimed", "actor": "caller:alice"}]

        def script(n: int, wait: float) -> Dict[str, Any]:
            if n < 6:
                return {"status": "executing", "executed": None, "proposal_id": "prp_1", "proposal": {"id": "prp_1", "mode": "wait"}}
            return {"status": "succeeded", "executed": True, "result": 5, "proposal": {"id": "prp_1", "mode": "wait"}}

        srv = FakeServer(fc, script, events=claimed)
        refund, runs = self.gate(srv, fc)
        self.assertEqual(refund("call_1", amount=1), 5)
        self.assertEqual(runs, [])
        self.assertEqual(gaps(srv.calls), [1, 1, 2, 4, 8])

    def test_timeout_zero_asks_once(self) -> None:
        fc = FakeClock()
        srv = FakeServer(fc, lambda n, wait: pending())
        refund, _ = self.gate(srv, fc, timeout=0)
        with self.assertRaises(StillPending) as cm:
            refund("call_1", amount=1)
        self.assertEqual(len(srv.calls), 1)
        self.assertIn("no decision yet (proposal prp_1)", str(cm.exception))

    def test_arguments_checked_when_decorating(self) -> None:
        fc = FakeClock()
        srv = FakeServer(fc, lambda n, wait: pending())
        with self.assertRaises(ValueError):
            gated(srv, "payments.refund", wait_seconds=61)  # type: ignore[arg-type]
        with self.assertRaises(TypeError):
            gated(srv, "")  # type: ignore[arg-type]


class ScriptedHTTP:
    """A local HTTP server (not countersign) answering each request from a
    list of (status, headers, body), the last one repeated; it records the
    paths asked."""

    def __init__(self, answers: List[Tuple[int, Dict[str, str], Any]]) -> None:
        self.answers, self.paths = list(answers), []
        outer = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self) -> None:  # noqa: N802
                outer.paths.append(self.path)
                code, headers, doc = outer.answers.pop(0) if len(outer.answers) > 1 else outer.answers[0]
                body = json.dumps(doc).encode()
                self.send_response(code)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                for k, v in headers.items():
                    self.send_header(k, v)
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args: object) -> None:
                pass

        self.httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


def error(code: int, name: str) -> Tuple[int, Dict[str, str], Any]:
    return (code, {}, {"error": {"code": name, "message": "x"}})


class ClientHelpersOnAFakeClock(unittest.TestCase):
    def serve(self, answers: List[Tuple[int, Dict[str, str], Any]]) -> ScriptedHTTP:
        s = ScriptedHTTP(answers)
        self.addCleanup(s.close)
        return s

    def test_wait_for_proposal_answered_early_is_paced(self) -> None:
        # A proxy that cuts every long-poll short: the proposal is asked for
        # on the schedule, not in a loop.
        s = self.serve([(200, {}, {"id": "prp_1", "status": "pending"})])
        fc = FakeClock()
        c = Client(s.url, "t", pacing=fc.pacing())
        p = c.wait_for_proposal("prp_1", timeout_seconds=10)
        self.assertEqual(p["status"], "pending")
        self.assertEqual(len(s.paths), 5)  # at 0, 1, 2, 4 and 8 s
        self.assertEqual(fc.sleeps, [1, 1, 2, 4])
        self.assertTrue(s.paths[0].endswith("wait_seconds=10"))

    def test_watch_backs_off_then_stops_when_unsupported(self) -> None:
        # Failing three times (503, the second with a Retry-After 5 s after
        # the fake time of day it is answered at, as an HTTP date), then
        # lacking the route (404).
        fc = FakeClock()
        date = email.utils.formatdate(fc.pacing().wall() + 1 + 5, usegmt=True)
        s = self.serve([error(503, "UNAVAILABLE"), (503, {"Retry-After": date}, {"error": {"code": "UNAVAILABLE", "message": "x"}}),
                        error(503, "UNAVAILABLE"), error(404, "NOT_FOUND")])
        errors: List[tuple] = []
        c = Client(s.url, "t", pacing=fc.pacing())
        snaps = list(c.watch_proposals("t1", on_error=lambda e, unsupported: errors.append((e.status, unsupported))))
        self.assertEqual(snaps, [])
        self.assertEqual(fc.sleeps, [1, 5, 2])  # the floor, Retry-After, the schedule
        self.assertEqual(errors, [(503, False), (404, True)])  # the failure reported once, then unsupported

    def test_watch_slows_down_while_nothing_changes(self) -> None:
        listing = (200, {}, {"proposals": [{"id": "prp_1", "status": "pending", "updated_at": "a"}]})
        thread = (200, {}, {"thread": {"id": "t1"}, "messages": []})
        s = self.serve([listing, thread] * 6 + [(200, {}, {"proposals": [{"id": "prp_1", "status": "rejected", "updated_at": "b", "outcome": None}]})])
        fc = FakeClock()
        c = Client(s.url, "t", pacing=fc.pacing())
        snaps = list(c.watch_proposals("t1"))
        self.assertEqual([p.proposals[0]["status"] for p in snaps], ["pending", "rejected"])
        self.assertEqual(fc.sleeps, [1, 1, 2, 4, 8, 16])

    def test_events_reconnects_less_often_while_the_server_is_down(self) -> None:
        s = self.serve([error(503, "UNAVAILABLE")] * 5 + [error(401, "UNAUTHENTICATED")])
        fc = FakeClock()
        c = Client(s.url, "t", pacing=fc.pacing())
        with self.assertRaises(CountersignError) as cm:
            list(c.events())
        self.assertEqual(cm.exception.status, 401)
        self.assertEqual(fc.sleeps, [2, 2, 2, 2, 4])


if __name__ == "__main__":
    unittest.main()


class Retried(unittest.TestCase):
    """polling.retried, what the framework adapters ask every request through."""

    def test_transient_failures_are_asked_again_on_the_schedule(self) -> None:
        fc = FakeClock()
        tries: List[float] = []

        def fn() -> str:
            tries.append(fc.now)
            if len(tries) == 1:
                raise Unavailable(503, "UNAVAILABLE", "down", retry_after=7)
            if len(tries) in (2, 3):
                raise ConnectionRefusedError("refused")
            return "ok"

        self.assertEqual(retried(fc.pacing(), fn), "ok")
        # Retry-After 7 s, then the schedule: the 1 s floor, then 2 s.
        self.assertEqual(gaps(tries), [7, 1, 2])

    def test_a_verdict_is_raised_at_once(self) -> None:
        fc = FakeClock()
        tries: List[float] = []

        def fn() -> str:
            tries.append(fc.now)
            raise Conflict(409, "INVALID_STATE", "decided")

        with self.assertRaises(Conflict):
            retried(fc.pacing(), fn)
        self.assertEqual(len(tries), 1)

    def test_gives_up_after_its_tries(self) -> None:
        fc = FakeClock()
        for tries, fail in ((RETRIES, ConnectionRefusedError("refused")), (3, RateLimited(429, "TOO_MANY_REQUESTS", "slow"))):
            asked: List[float] = []

            def fn() -> str:
                asked.append(fc.now)
                raise fail

            with self.assertRaises(type(fail)):
                retried(fc.pacing(), fn, tries=tries)
            self.assertEqual(len(asked), tries)


    def test_until_ends_the_tries(self) -> None:
        # A settlement: no count of tries, asked again until the lease is over.
        fc = FakeClock()
        asked: List[float] = []

        def fn() -> str:
            asked.append(fc.now)
            raise Unavailable(503, "UNAVAILABLE", "down")

        with self.assertRaises(Unavailable):
            retried(fc.pacing(), fn, tries=None, until=lambda: fc.now >= 20)
        # Tries at 0, 1, 2, 4, 8, 16 and 32 s (the pauses 0.5 → the 1 s
        # floor, then 1, 2, 4, 8, 16): the one at 32 s is the first after
        # the end, and its failure is raised.
        self.assertEqual(gaps(asked), [1, 1, 2, 4, 8, 16])
        self.assertGreaterEqual(asked[-1], 20)
        self.assertLess(asked[-2], 20)


class LeaseHolders(unittest.TestCase):
    """lease.claimed_by_caller and lease.await_holder, on a fake clock."""

    def test_claimed_by_caller_reads_the_claims_owner(self) -> None:
        self.assertTrue(claimed_by_caller([{"type": "proposal.created"}, {"type": "proposal.claimed", "actor": CALLER_OWNER + "bot"}]))
        for events in (
            [],
            [{"type": "proposal.claimed", "actor": "worker:w1"}],
            [{"type": "proposal.claimed"}],
            [{"type": "proposal.settled", "actor": CALLER_OWNER + "bot"}],
        ):
            self.assertFalse(claimed_by_caller(events), events)

    def client(self, fc: FakeClock, answers: List[Any]) -> Any:
        """A client whose wait(id, timeout_seconds) is a long-poll the server
        holds to its end, answering the next of answers (a status, or an
        exception to raise)."""
        polls: List[float] = []

        def wait(pid: str, timeout_seconds: float) -> Any:
            polls.append(timeout_seconds)
            a = answers.pop(0)
            if isinstance(a, Exception):
                raise a
            fc.now += timeout_seconds
            return SimpleNamespace(id=pid, status=a)

        return SimpleNamespace(pacing=fc.pacing(), wait=wait, polls=polls)

    def test_waits_until_the_holder_settles(self) -> None:
        fc = FakeClock()
        c = self.client(fc, ["executing", Unavailable(503, "UNAVAILABLE", "down"), "succeeded"])
        p = await_holder(c, SimpleNamespace(id="prp_1", status="executing"), 120)  # type: ignore[arg-type]
        self.assertEqual(p.status, "succeeded")
        self.assertEqual(c.polls, [25, 25, 25])

    def test_gives_up_at_its_timeout(self) -> None:
        fc = FakeClock()
        c = self.client(fc, ["executing"] * 5)
        p = await_holder(c, SimpleNamespace(id="prp_1", status="executing"), 60)  # type: ignore[arg-type]
        self.assertEqual(p.status, "executing")
        # Long-polls of 25 s, the last cut to what is left of the 60 s; a
        # held long-poll is time already waited, so the next follows at once.
        self.assertEqual(c.polls, [25, 25, 10])
        self.assertEqual(fc.now, 60)

    def test_not_held_asks_nothing(self) -> None:
        fc = FakeClock()
        c = self.client(fc, [])
        p = await_holder(c, SimpleNamespace(id="prp_1", status="succeeded"), 60)  # type: ignore[arg-type]
        self.assertEqual(p.status, "succeeded")
        self.assertEqual(c.polls, [])

    def test_done_ends_the_wait_early(self) -> None:
        fc = FakeClock()
        c = self.client(fc, ["approved", "executing"])
        p = await_holder(
            c, SimpleNamespace(id="prp_1", status="executing"), 60,  # type: ignore[arg-type]
            statuses=("executing", "approved"), done=lambda q: q.status == "approved",
        )
        self.assertEqual(p.status, "approved")
        self.assertEqual(len(c.polls), 1)
