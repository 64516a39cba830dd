"""gated: a function that runs as a caller-executed action, at most once.

The action is configured ``execute: {by: caller}`` on the server. Calling the
wrapped function makes a Countersign call (thread, tool call id, action,
input); when the call is approved its answer is the claim of a lease, and the
function runs under it, with the operation id as its idempotency key; its
result is then settled under the lease, which is renewed while the function
runs. Repeating the same call (the same tool call id) never runs the function
again: it answers the recorded outcome, or, while another process holds the
lease, waits for it.
"""

from __future__ import annotations

import functools
import inspect
import json
import threading
import time
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any, Callable, Dict, Optional, TypeVar, Union

from . import polling as _backoff
from .client import Client
from .errors import CountersignError

__all__ = [
    "gated",
    "Gated",
    "Execution",
    "Receipt",
    "NotApplied",
    "GateError",
    "Denied",
    "NotExecuted",
    "Failed",
    "OutcomeUnknown",
    "StillPending",
    "ConfirmationRequired",
    "LeaseLost",
]


class GateError(Exception):
    """A gated call that did not come to a result. ``answer`` is the call's (or the settlement's) body."""

    def __init__(self, message: str, answer: Dict[str, Any]) -> None:
        super().__init__(message)
        self.answer = answer
        self.status = answer.get("status")
        self.proposal = answer.get("proposal")


class Denied(GateError):
    """The policy, authorization or preflight said no; nothing was stored."""


class NotExecuted(GateError):
    """A human rejected it, nobody decided in time, or it was replaced or withdrawn."""


class Failed(GateError):
    """It ran and failed (the function raised NotApplied), or a check before it failed."""


class OutcomeUnknown(GateError):
    """Nobody knows whether it was applied (unknown, reconciling): do not retry automatically."""


class StillPending(GateError):
    """The wait ran out before a decision: call again (same tool call id) to go on waiting."""


class ConfirmationRequired(GateError):
    """A two-phase rule asks for the confirmation's evidence: call again with ``evidence``."""


class LeaseLost(GateError):
    """The function ran, but its lease was lost before the outcome could be settled (the fence decided)."""


class NotApplied(Exception):
    """Raise it from a gated function when the change certainly did not happen:
    the call is settled ``failed``. Any other exception leaves the outcome
    uncertain: nothing is settled, and the lease is left to lapse, for the
    server to reconcile it, let an idempotent action be claimed again, or
    record it as unknown."""


@dataclass
class Receipt:
    """What a gated function may return: the change's id in the backend, and a result."""

    id: str = ""
    result: Any = None


@dataclass
class Execution:
    """The claim a gated function runs under."""

    proposal_id: str
    #: The idempotency key of this proposal's execution: the same on every attempt.
    operation_id: str
    #: 1, then one more each time an idempotent action's lapsed lease is claimed again.
    attempt: int
    input: Any
    lease_token: str
    #: Set once a renewal was refused: the lease is someone else's now.
    lost: threading.Event = field(default_factory=threading.Event)


F = TypeVar("F", bound=Callable[..., Any])

ThreadID = Union[str, Callable[[], str]]


def gated(
    client: Client,
    action: str,
    *,
    thread_id: Optional[ThreadID] = None,
    wait_seconds: float = 25,
    timeout: Optional[float] = None,
    poll_interval: float = 1.0,
) -> Callable[[F], "Gated"]:
    """Decorates ``fn`` to run as the caller-executed action ``action``.

    The wrapper is called ``wrapper(tool_call_id, /, **input)`` (the default
    thread) or ``wrapper.call(input, tool_call_id=..., thread_id=...)``; ``fn``
    receives the input's fields as keyword arguments, and ``execution`` too
    when it takes it. It returns what the settled call recorded: the
    function's result (as JSON gave it back), or, on a repeat, the recorded
    one. Other outcomes raise a GateError.

    ``wait_seconds`` bounds each long-poll of the call; ``timeout`` (None:
    no bound) the whole wait for a decision, after which StillPending is
    raised. Failing requests (429, 5xx, the network) are retried after
    ``poll_interval`` doubled for each failure in a row, up to 30 s, as the
    TypeScript client polls (see countersign.polling)."""

    def wrap(fn: F) -> Gated:
        return Gated(client, action, fn, thread_id=thread_id, wait_seconds=wait_seconds, timeout=timeout, poll_interval=poll_interval)

    return wrap


class Gated:
    """A function gated by Countersign (see gated)."""

    def __init__(
        self,
        client: Client,
        action: str,
        fn: Callable[..., Any],
        *,
        thread_id: Optional[ThreadID],
        wait_seconds: float,
        timeout: Optional[float],
        poll_interval: float,
    ) -> None:
        self.client, self.action, self.fn = client, action, fn
        self.thread_id = thread_id
        self.wait_seconds = min(wait_seconds, _backoff.MAX_WAIT_SECONDS)
        self.timeout = timeout
        self.poll_interval = poll_interval
        params = inspect.signature(fn).parameters
        self._takes_execution = "execution" in params or any(p.kind is p.VAR_KEYWORD for p in params.values())
        functools.update_wrapper(self, fn)

    def __call__(self, tool_call_id: str, /, **input: Any) -> Any:
        return self.call(input, tool_call_id=tool_call_id)

    def call(
        self,
        input: Any,
        *,
        tool_call_id: str,
        thread_id: Optional[str] = None,
        run_id: Optional[str] = None,
        evidence: Optional[str] = None,
    ) -> Any:
        """Makes the call and, once it may run, runs the function under the lease."""
        thread = thread_id or (self.thread_id() if callable(self.thread_id) else self.thread_id)
        if not thread:
            raise TypeError(f"gated {self.action}: no thread_id")
        deadline = None if self.timeout is None else time.monotonic() + self.timeout
        failures = 0
        executing_waits = 0
        while True:
            left = None if deadline is None else max(0.0, deadline - time.monotonic())
            wait = self.wait_seconds if left is None else min(self.wait_seconds, left)
            try:
                ans = self.client.call(
                    thread, tool_call_id, self.action, input, run_id=run_id, evidence=evidence, wait_seconds=wait
                )
            except CountersignError as e:
                if not _backoff.transient(e.status):
                    raise
                failures += 1
                self._pause(e.retry_after, failures, deadline)
                continue
            except OSError:
                failures += 1
                self._pause(None, failures, deadline)
                continue
            failures = 0
            status = ans.get("status")
            if status == "execute":
                return self._run(ans)
            if status == "succeeded":
                return ans.get("result")
            if status == "executing":
                # Someone holds the lease (another process, or this one's
                # earlier attempt): wait for it to settle, or to lapse and be
                # released to the next identical call, then ask again.
                executing_waits += 1
                if deadline is not None and time.monotonic() >= deadline:
                    raise StillPending(f"{self.action}: still executing under another lease", ans)
                span = _backoff.backoff(self.poll_interval, executing_waits - 1)
                if deadline is not None:
                    span = min(span, max(0.0, deadline - time.monotonic()))
                try:
                    self.client.wait_for_proposal(ans["proposal_id"], timeout_seconds=span)
                except (CountersignError, OSError):
                    time.sleep(span)
                continue
            executing_waits = 0
            if status == "pending":
                if deadline is not None and time.monotonic() >= deadline:
                    raise StillPending(f"{self.action}: no decision yet (proposal {ans.get('proposal_id')})", ans)
                continue
            raise _error(self.action, ans)

    def _pause(self, retry_after: Optional[int], failures: int, deadline: Optional[float]) -> None:
        span = float(retry_after) if retry_after is not None else _backoff.backoff(self.poll_interval, failures)
        if deadline is not None:
            left = deadline - time.monotonic()
            if left <= 0:
                raise StillPending(f"{self.action}: the server could not be reached in time", {"status": "pending"})
            span = min(span, left)
        time.sleep(span)

    def _run(self, ans: Dict[str, Any]) -> Any:
        lease = ans["lease"]
        ex = Execution(
            proposal_id=ans["proposal_id"], operation_id=ans["operation_id"], attempt=int(lease["attempt"]),
            input=ans.get("input"), lease_token=lease["token"],
        )
        renewer = _Renewer(self.client, ex, _lease_seconds(lease["expires_at"], (ans.get("proposal") or {}).get("updated_at")))
        renewer.start()
        try:
            kwargs = dict(ans.get("input") or {}) if isinstance(ans.get("input"), dict) else {}
            if self._takes_execution:
                kwargs["execution"] = ex
            try:
                out = self.fn(**kwargs)
            except NotApplied as e:
                return self._settle(ex, renewer, "failed", error=str(e) or "not applied")
            except BaseException:
                # Uncertain: nothing is settled, and the lease is left to lapse.
                renewer.stop()
                raise
            receipt = out if isinstance(out, Receipt) else Receipt(result=out)
            result = json.loads(json.dumps(receipt.result))
            return self._settle(ex, renewer, "succeeded", receipt=receipt.id or None, result=result)
        finally:
            renewer.stop()

    def _settle(self, ex: Execution, renewer: "_Renewer", outcome: str, **fields: Any) -> Any:
        # The work is done: record it while the lease may still be held,
        # retrying failures that are not verdicts. The fence decides.
        failures = 0
        while True:
            try:
                res = self.client.settle(ex.proposal_id, ex.lease_token, outcome, **fields)
                break
            except CountersignError as e:
                if not _backoff.transient(e.status) or renewer.expired():
                    raise
                failures += 1
                time.sleep(float(e.retry_after) if e.retry_after is not None else _backoff.backoff(0.1, failures))
            except OSError:
                if renewer.expired():
                    raise
                failures += 1
                time.sleep(_backoff.backoff(0.1, failures))
        if res.get("status") != "applied":
            raise LeaseLost(f"{self.action}: the lease was lost; the outcome was not recorded", res)
        if outcome == "failed":
            raise Failed(f"{self.action}: {fields.get('error')}", res)
        return (res.get("proposal") or {}).get("outcome", {}).get("result")


def _error(action: str, ans: Dict[str, Any]) -> GateError:
    status = ans.get("status")
    if status == "denied":
        return Denied(f"{action}: denied: {ans.get('reason')}", ans)
    if status == "failed":
        return Failed(f"{action}: failed: {ans.get('error')}", ans)
    if status in ("unknown", "reconciling"):
        return OutcomeUnknown(f"{action}: outcome {status}: {ans.get('error')}", ans)
    if status in ("rejected", "expired", "superseded", "cancelled"):
        return NotExecuted(f"{action}: {status}; it was not executed", ans)
    if status in ("confirmation_required", "confirmation_invalid"):
        return ConfirmationRequired(f"{action}: {status}", ans)
    return GateError(f"{action}: unexpected answer {status!r}", ans)


def _parse_time(s: str) -> datetime:
    # fromisoformat takes "Z" only from Python 3.11.
    if s.endswith("Z"):
        s = s[:-1] + "+00:00"
    head, sep, tail = s.partition(".")
    if sep:
        # At most microseconds.
        n = 0
        while n < len(tail) and tail[n].isdigit():
            n += 1
        digits, zone = tail[:n], tail[n:]
        s = head + "." + digits[:6] + zone
    return datetime.fromisoformat(s)


def _lease_seconds(expires_at: str, claimed_at: Optional[str] = None) -> float:
    """How long the lease lasts (at least a second): from the claim's own
    stamp (the proposal's updated_at, the server's clock) to expires_at, so
    that this machine's clock, which may be off, does not count; without the
    stamp, from the local now."""
    start = datetime.now(timezone.utc)
    if claimed_at:
        try:
            start = _parse_time(claimed_at)
        except ValueError:
            pass
    return max(1.0, (_parse_time(expires_at) - start).total_seconds())


class _Renewer:
    """Renews a lease every third of its length while the function runs; a
    refused renewal marks the execution lost."""

    def __init__(self, client: Client, ex: Execution, lease: float) -> None:
        self.client, self.ex = client, ex
        self.lease = lease
        self.until = time.monotonic() + lease
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name=f"countersign-renew-{ex.proposal_id}", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread.is_alive() and threading.current_thread() is not self._thread:
            self._thread.join()

    def expired(self) -> bool:
        return time.monotonic() >= self.until

    def _loop(self) -> None:
        every = self.lease / 3
        while not self._stop.wait(every):
            asked = time.monotonic()
            try:
                res = self.client.renew(self.ex.proposal_id, self.ex.lease_token)
            except (CountersignError, OSError):
                every = self.lease / 10  # not a verdict: try again soon
                continue
            if res.get("status") != "applied":
                self.ex.lost.set()
                return
            self.until = asked + self.lease
            every = self.lease / 3

