"""Client: one method per route of Countersign's HTTP API (standard library only)."""

from __future__ import annotations

import http.client
import json
import math
import socket
import threading
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import dataclass
from typing import AbstractSet, Any, Callable, Dict, Iterator, List, Mapping, Optional, Sequence, Union

from . import polling as _polling
from .errors import CountersignError, NotAnAgent, make_error
from .lease import LeaseContext
from .polling import Pacing
from .types import CallResult, Me, Proposal

__all__ = ["Client", "Response", "ProposalEvent", "WatchSnapshot", "NEXT_HEADER", "SETTLED"]

#: The header that carries a listing's next cursor, escaped like encodeURIComponent.
NEXT_HEADER = "X-Action-Proposals-Next"

#: Statuses a long-poll returns at: terminal, or reconciling (which only an operator moves on).
SETTLED = frozenset(
    ["succeeded", "failed", "reconciling", "unknown", "rejected", "expired", "superseded", "cancelled"]
)

#: Statuses in which a proposal is still moving toward its outcome.
LIVE = frozenset(["pending", "approved", "executing", "reconciling"])

Query = Mapping[str, Union[str, int, float, None]]


@dataclass
class Response:
    """An answer read whole."""

    status: int
    headers: Mapping[str, str]
    body: bytes

    def json(self) -> Any:
        try:
            return json.loads(self.body)
        except ValueError:
            raise make_error(
                self.status, "INVALID_RESPONSE", "the answer is not JSON: " + self.body[:200].decode("utf-8", "replace")
            ) from None


@dataclass
class ProposalEvent:
    """One event of GET /v1/events."""

    #: The event's id: resume after it with events(after=id).
    id: str
    #: What happened: proposal.created, .decided, .settled, .expired, .superseded.
    type: str
    #: The proposal as it stands when the event is delivered.
    proposal: Dict[str, Any]


@dataclass
class WatchSnapshot:
    """One read of a thread by watch_proposals."""

    proposals: List[Dict[str, Any]]
    messages: List[Dict[str, Any]]
    #: Whether any proposal is still unsettled (so the watcher keeps polling).
    active: bool


def _seg(s: str) -> str:
    if not isinstance(s, str) or s == "":
        raise TypeError("an id must be a non-empty string")
    return urllib.parse.quote(s, safe="")


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, *args: Any, **kwargs: Any) -> None:  # noqa: D401
        return None


class Client:
    """A client of one server as one token's holder.

    Every method returns the answer's body (parsed JSON) and raises
    :class:`CountersignError` for an error answer; a server that cannot be
    reached raises the ``OSError`` urllib raised.

    ``pacing`` is the schedule every waiting method follows (and ``gated``,
    unless given its own): see :mod:`countersign.polling`.
    """

    def __init__(self, base_url: str, token: str, *, timeout: float = 90.0, pacing: Optional[Pacing] = None) -> None:
        if not isinstance(base_url, str) or not base_url:
            raise TypeError("Client: base_url is required")
        if not isinstance(token, str) or not token:
            raise TypeError("Client: token is required")
        self.base_url = base_url.rstrip("/")
        self._token = token
        #: Bounds one request; a long-poll asks the server for less.
        self.timeout = timeout
        #: The schedule of every poll and retry (countersign.polling).
        self.pacing = pacing if pacing is not None else Pacing()
        self._opener = urllib.request.build_opener(_NoRedirect())
        self._me: Optional[Me] = None
        self._me_lock = threading.Lock()

    # -- who ---------------------------------------------------------------

    def me(self) -> Me:
        """Who this client's credential is: GET /v1/me (tenant, actor, kind, roles)."""
        return Me.from_json(self._json("GET", "/v1/me"))

    def require_agent(self) -> Me:
        """This credential's /v1/me, read once and kept, if it is ``kind:
        agent``; else NotAnAgent, before anything is called. Adapters call it
        first: they act for an agent, and a human's credential in an agent's
        process could decide what the agent asked for."""
        with self._me_lock:
            if self._me is None:
                self._me = self.me()
            me = self._me
        if not me.is_agent:
            raise NotAnAgent(
                403,
                "NOT_AN_AGENT",
                f"this credential is {me.actor}'s, kind {me.kind or 'unknown'}, not kind agent: "
                "an agent acts with an agent credential (auth.api_keys[].kind: agent), and never decides",
                me.raw,
            )
        return me

    # -- typed calls -------------------------------------------------------

    def submit(
        self,
        thread_id: str,
        tool_call_id: str,
        action: str,
        input: Any,
        *,
        run_id: Optional[str] = None,
        mode: Optional[str] = None,
        evidence: Optional[str] = None,
        wait_seconds: Optional[float] = None,
    ) -> CallResult:
        """POST /v1/calls, typed: a CallResult. Repeating it (same thread
        and tool call id) is how a caller resumes: an approved proposal's
        answer is then ``execute``, the claim of its lease (see lease())."""
        return CallResult.from_json(
            self.call(thread_id, tool_call_id, action, input, run_id=run_id, mode=mode, evidence=evidence, wait_seconds=wait_seconds)
        )

    def proposal(self, proposal_id: str) -> Proposal:
        """GET /v1/proposals/{id}, typed."""
        return Proposal.from_json(self.get_proposal(proposal_id))

    def wait(self, proposal_id: str, timeout_seconds: float = 25) -> Proposal:
        """wait_for_proposal, typed: the proposal once terminal or
        reconciling, or as it stands when ``timeout_seconds`` have passed."""
        return Proposal.from_json(self.wait_for_proposal(proposal_id, timeout_seconds))

    def find_call(self, thread_id: str, tool_call_id: str) -> Optional[Proposal]:
        """The proposal of a tool call in a thread, if one was made: the
        thread's proposals (GET /v1/threads/{id}/proposals), read page after
        page until it is found. None for a thread or a call that has none (a
        read action's call leaves no proposal)."""
        try:
            for p in self._pages(f"/v1/threads/{_seg(thread_id)}/proposals", {}):
                if p.get("tool_call_id") == tool_call_id:
                    return Proposal.from_json(p)
        except CountersignError as e:
            if e.status == 404:
                return None
            raise
        return None

    def lease(self, claim: Union[CallResult, Mapping[str, Any]]) -> LeaseContext:
        """``with client.lease(claim) as run``: runs a caller-executed action
        under the lease an ``execute`` answer claimed, renewing it, and
        settles the outcome on leaving the block (see countersign.lease)."""
        return LeaseContext(self, claim)

    # -- calls -------------------------------------------------------------

    def call(
        self,
        thread_id: str,
        tool_call_id: str,
        action: str,
        input: Any,
        *,
        run_id: Optional[str] = None,
        mode: Optional[str] = None,
        evidence: Optional[str] = None,
        wait_seconds: Optional[float] = None,
    ) -> Dict[str, Any]:
        """Asks for an action: POST /v1/calls. The answer, by ``status``."""
        body: Dict[str, Any] = {"thread_id": thread_id, "tool_call_id": tool_call_id, "action": action, "input": input}
        for k, v in (("run_id", run_id), ("mode", mode), ("evidence", evidence), ("wait_seconds", wait_seconds)):
            if v is not None:
                body[k] = v
        return self._json("POST", "/v1/calls", body=body)

    # -- proposals ---------------------------------------------------------

    def get_proposal(self, proposal_id: str) -> Dict[str, Any]:
        """Reads one proposal: GET /v1/proposals/{id}."""
        return self._json("GET", f"/v1/proposals/{_seg(proposal_id)}")

    def wait_for_proposal(self, proposal_id: str, timeout_seconds: float = 25) -> Dict[str, Any]:
        """Long-polls a proposal (GET /v1/proposals/{id}?wait_seconds=N) until it is
        terminal or reconciling, or ``timeout_seconds`` have passed, and returns it
        as it was last read. Each long-poll waits at most 60 s; one the server
        answers early is asked again on the client's schedule (at most one
        request a second, see countersign.polling), and the last read is
        returned once no further request fits before the deadline."""
        if not (timeout_seconds >= 0) or timeout_seconds == float("inf"):
            raise TypeError("wait_for_proposal: timeout_seconds must be a finite number >= 0")
        clock = self.pacing.clock
        deadline = clock() + timeout_seconds
        pacer = self.pacing.pacer()
        p: Optional[Dict[str, Any]] = None
        while True:
            if not pacer.wait(deadline) and p is not None:
                return p
            left = max(0.0, deadline - clock())
            wait = min(_polling.MAX_WAIT_SECONDS, math.ceil(left))
            p = self._json("GET", f"/v1/proposals/{_seg(proposal_id)}", query={"wait_seconds": wait})
            if p.get("status") in SETTLED or clock() >= deadline or wait == 0:
                return p

    def iter_proposals(
        self,
        *,
        status: Union[str, Sequence[str], None] = None,
        action: Optional[str] = None,
        thread_id: Optional[str] = None,
        limit: Optional[int] = None,
    ) -> Iterator[Dict[str, Any]]:
        """The proposals the caller may see, newest first, page after page:
        GET /v1/proposals, then each page's X-Action-Proposals-Next (decoded
        like decodeURIComponent) as ``after``. ``limit`` is the page size."""
        if status is not None and not isinstance(status, str):
            status = ",".join(status)
        return self._pages("/v1/proposals", {"status": status or None, "action": action, "thread_id": thread_id, "limit": limit})

    def list_proposals(self, **params: Any) -> List[Dict[str, Any]]:
        """Every page of iter_proposals, as one list."""
        return list(self.iter_proposals(**params))

    def list_thread_proposals(self, thread_id: str, *, limit: Optional[int] = None) -> List[Dict[str, Any]]:
        """One thread's proposals, every page: GET /v1/threads/{id}/proposals."""
        return list(self._pages(f"/v1/threads/{_seg(thread_id)}/proposals", {"limit": limit}))

    def proposal_events(self, proposal_id: str) -> List[Dict[str, Any]]:
        """A proposal's audit trail: GET /v1/proposals/{id}/events."""
        return self._list("GET", f"/v1/proposals/{_seg(proposal_id)}/events", "events")

    # -- decisions ---------------------------------------------------------

    def approve(self, proposal_id: str, *, reason: Optional[str] = None, remember: Optional[str] = None) -> Dict[str, Any]:
        """POST /v1/proposals/{id}/approve: {status: applied | unchanged | conflict | expired, proposal}."""
        return self._decide(proposal_id, "approve", reason=reason, remember=remember)

    def reject(self, proposal_id: str, *, reason: Optional[str] = None) -> Dict[str, Any]:
        """POST /v1/proposals/{id}/reject."""
        return self._decide(proposal_id, "reject", reason=reason)

    def cancel(self, proposal_id: str, *, reason: Optional[str] = None) -> Dict[str, Any]:
        """POST /v1/proposals/{id}/cancel (the requester, pending only)."""
        return self._decide(proposal_id, "cancel", reason=reason)

    def resolve(self, proposal_id: str, outcome: str, note: str, *, receipt: Optional[str] = None) -> Dict[str, Any]:
        """POST /v1/proposals/{id}/resolve (role operator, reconciling or unknown only)."""
        return self._decide(proposal_id, "resolve", outcome=outcome, note=note, receipt=receipt)

    def _decide(self, proposal_id: str, verb: str, **fields: Any) -> Dict[str, Any]:
        body = {k: v for k, v in fields.items() if v is not None}
        return self._json("POST", f"/v1/proposals/{_seg(proposal_id)}/{verb}", body=body)

    # -- caller-executed actions ------------------------------------------

    def settle(
        self,
        proposal_id: str,
        lease_token: str,
        outcome: str,
        *,
        receipt: Optional[str] = None,
        result: Any = None,
        error: Optional[str] = None,
    ) -> Dict[str, Any]:
        """POST /v1/proposals/{id}/settle: records the outcome of a caller-executed
        action under its lease. {status: applied | conflict, proposal}."""
        body: Dict[str, Any] = {"lease_token": lease_token, "outcome": outcome}
        for k, v in (("receipt", receipt), ("result", result), ("error", error)):
            if v is not None:
                body[k] = v
        return self._json("POST", f"/v1/proposals/{_seg(proposal_id)}/settle", body=body)

    def renew(self, proposal_id: str, lease_token: str) -> Dict[str, Any]:
        """POST /v1/proposals/{id}/renew: {status: applied, lease, proposal} or {status: conflict, proposal}."""
        return self._json("POST", f"/v1/proposals/{_seg(proposal_id)}/renew", body={"lease_token": lease_token})

    # -- threads, messages, runs, grants -----------------------------------

    def get_thread(self, thread_id: str) -> Dict[str, Any]:
        """GET /v1/threads/{id}: {thread, messages (oldest first), runs}."""
        return self._json("GET", f"/v1/threads/{_seg(thread_id)}")

    def post_message(self, thread_id: str, text: str, *, agent: Optional[str] = None) -> Dict[str, Any]:
        """POST /v1/threads/{id}/messages (JSON): a text decision's result, a run
        with its new messages, or the stored message (202)."""
        body: Dict[str, Any] = {"text": text}
        if agent is not None:
            body["agent"] = agent
        return self._json("POST", f"/v1/threads/{_seg(thread_id)}/messages", body=body)

    def get_run(self, thread_id: str, run_id: str) -> Dict[str, Any]:
        """GET /v1/threads/{id}/runs/{run_id}: the run."""
        return self._run(self._json("GET", f"/v1/threads/{_seg(thread_id)}/runs/{_seg(run_id)}"))

    def cancel_run(self, thread_id: str, run_id: str, *, reason: Optional[str] = None) -> Dict[str, Any]:
        """POST /v1/threads/{id}/runs/{run_id}/cancel (the thread's owner): the run."""
        body = {"reason": reason} if reason is not None else {}
        return self._run(self._json("POST", f"/v1/threads/{_seg(thread_id)}/runs/{_seg(run_id)}/cancel", body=body))

    def list_actions(self) -> List[Dict[str, Any]]:
        """GET /v1/actions: every action the caller may call (name, version,
        kind, description, input_schema, confirmation, effect)."""
        return self._list("GET", "/v1/actions", "actions")

    def list_grants(self, *, thread_id: Optional[str] = None) -> List[Dict[str, Any]]:
        """GET /v1/grants."""
        return self._list("GET", "/v1/grants", "grants", query={"thread_id": thread_id})

    def revoke_grant(self, grant_id: str) -> Dict[str, Any]:
        """DELETE /v1/grants/{id}."""
        return self._json("DELETE", f"/v1/grants/{_seg(grant_id)}")

    # -- events --------------------------------------------------------------

    def events(
        self,
        *,
        after: Union[str, int, None] = None,
        reconnect_delay: Optional[float] = None,
        on_reconnect: Optional[Callable[[Optional[BaseException], Optional[str]], None]] = None,
        stop: Optional[threading.Event] = None,
        read_timeout: float = 60.0,
    ) -> Iterator[ProposalEvent]:
        """Follows GET /v1/events: the proposal events the caller may see,
        reconnecting after a dropped connection with Last-Event-ID, each event
        once. An answer the server gives for good (401, 403, 400 INVALID_CURSOR,
        ...) raises CountersignError; 429, 5xx, a network failure or a stream
        that ends are followed by a reconnect (countersign.polling's
        reconnect_pause: Retry-After, else ``reconnect_delay``, else the
        server's ``retry:``, else 2 s; longer on the client's schedule while
        connections keep failing, and never two connections less than a
        second apart). Stop by leaving the loop, or by setting ``stop`` (seen
        at the next event, reconnect or read timeout)."""
        last_id = None if after is None else str(after)
        last_num = _event_number(last_id)
        server_retry: Optional[float] = None
        pacing = self.pacing
        failures = 0  # connections in a row that delivered no event
        while not (stop and stop.is_set()):
            opened = pacing.clock()
            delivered = False
            failure: Optional[BaseException] = None
            retry_after: Optional[float] = None
            headers = {"Accept": "text/event-stream", "Cache-Control": "no-store"}
            if last_id is not None:
                headers["Last-Event-ID"] = last_id
            try:
                resp = self._open("GET", "/v1/events", headers=headers, timeout=read_timeout)
            except CountersignError as e:
                if not _polling.transient(e.status):
                    raise
                failure, retry_after = e, (float(e.retry_after) if e.retry_after is not None else None)
            except OSError as e:
                failure = e
            else:
                try:
                    for frame in _sse_frames(resp):
                        if frame.retry is not None:
                            server_retry = frame.retry
                        if not frame.id:
                            continue  # the API's events all carry ids
                        n = _event_number(frame.id)
                        # Ids grow: one at or before the last yielded was heard already.
                        if n is not None and last_num is not None and n <= last_num:
                            continue
                        try:
                            proposal = json.loads(frame.data)
                        except ValueError:
                            continue
                        last_id, last_num = frame.id, n
                        delivered = True
                        yield ProposalEvent(id=frame.id, type=frame.event, proposal=proposal)
                        if stop and stop.is_set():
                            return
                except (OSError, http.client.HTTPException) as e:
                    failure = e
                finally:
                    resp.close()
            if stop and stop.is_set():
                return
            if on_reconnect is not None:
                on_reconnect(failure, last_id)
            failures = 0 if delivered else failures + 1
            wait = _polling.reconnect_pause(retry_after, reconnect_delay, server_retry, max(1, failures), pacing)
            wait = max(wait, opened + pacing.min_interval - pacing.clock())
            if pacing.pause(wait, stop):
                return

    # -- polling -------------------------------------------------------------

    def watch_proposals(
        self,
        thread_id: str,
        *,
        on_error: Optional[Callable[[BaseException, bool], None]] = None,
        stop: Optional[threading.Event] = None,
    ) -> Iterator[WatchSnapshot]:
        """Reads a thread's proposals and messages now, then again while any
        proposal is unsettled, and yields each read that differs from the one
        before (the first included); it ends once nothing is unsettled. The
        reads follow the client's schedule (countersign.polling): the pause
        doubles from 0.5 s to 30 s (jittered, never under 1 s) while nothing
        changes or reads fail (429, 5xx, the network; Retry-After honoured),
        and a read that shows a change starts it again. ``on_error(err,
        False)`` hears the first failure of each run. A 404, 405 or 501 means
        the server lacks the routes: ``on_error(err, True)``, and it ends.
        For prompt news, follow events() instead."""
        pacer = self.pacing.pacer()
        reported, last = False, None
        while pacer.wait(stop=stop):
            try:
                proposals = self.list_thread_proposals(thread_id)
                messages = self.get_thread(thread_id).get("messages") or []
            except CountersignError as e:
                if _polling.unsupported(e.status):
                    if on_error:
                        on_error(e, True)
                    return
                if not _polling.transient(e.status):
                    raise
                pacer.retry_after(e.retry_after)
                failure: Optional[BaseException] = e
            except OSError as e:
                failure = e
            else:
                failure = None
            if failure is not None:
                if not reported:
                    reported = True
                    if on_error:
                        on_error(failure, False)
                continue
            reported = False
            admitted = {m["outcome"]["proposal_id"] for m in messages if (m.get("outcome") or {}).get("proposal_id")}
            active = any(unsettled(p, admitted) for p in proposals)
            snap = WatchSnapshot(proposals=proposals, messages=messages, active=active)
            sig = json.dumps(
                [[[p.get("id"), p.get("status"), p.get("updated_at")] for p in proposals], [m.get("id") for m in messages]]
            )
            if sig != last:
                last = sig
                pacer.reset()
                yield snap
            if not active:
                return

    # -- the wire ------------------------------------------------------------

    def request(
        self,
        method: str,
        path: str,
        *,
        query: Optional[Query] = None,
        body: Any = None,
        headers: Optional[Mapping[str, str]] = None,
        timeout: Optional[float] = None,
    ) -> Response:
        """Sends one request and reads the answer whole; an error answer raises CountersignError."""
        resp = self._open(method, path, query=query, body=body, headers=headers, timeout=timeout)
        try:
            return Response(resp.status, dict(resp.headers.items()), resp.read())
        finally:
            resp.close()

    def _open(
        self,
        method: str,
        path: str,
        *,
        query: Optional[Query] = None,
        body: Any = None,
        headers: Optional[Mapping[str, str]] = None,
        timeout: Optional[float] = None,
    ) -> http.client.HTTPResponse:
        url = self.base_url + path
        if query:
            q = {k: str(v) for k, v in query.items() if v is not None}
            if q:
                url += "?" + urllib.parse.urlencode(q, quote_via=urllib.parse.quote)
        h = {"Authorization": f"Bearer {self._token}", "Accept": "application/json"}
        data = None
        if body is not None:
            data = json.dumps(body).encode()
            h["Content-Type"] = "application/json"
        if headers:
            h.update(headers)
        req = urllib.request.Request(url, data=data, headers=h, method=method)
        try:
            resp: http.client.HTTPResponse = self._opener.open(req, timeout=self.timeout if timeout is None else timeout)
            return resp
        except urllib.error.HTTPError as e:
            try:
                raw = e.read()
            except (OSError, http.client.HTTPException):
                raw = b""
            finally:
                e.close()
            raise CountersignError.from_response(e.code, dict(e.headers.items()), raw, self.pacing.wall()) from None

    def _json(self, method: str, path: str, *, query: Optional[Query] = None, body: Any = None) -> Dict[str, Any]:
        """The answer's body, which every route of the API gives as a JSON object."""
        r = self.request(method, path, query=query, body=body)
        doc = r.json()
        if not isinstance(doc, dict):
            raise make_error(r.status, "INVALID_RESPONSE", f"{method} {path}: the answer is not a JSON object")
        return doc

    @staticmethod
    def _run(doc: Dict[str, Any]) -> Dict[str, Any]:
        run = doc.get("run")
        if not isinstance(run, dict):
            raise make_error(200, "INVALID_RESPONSE", "no run in the answer")
        return run

    def _list(self, method: str, path: str, key: str, *, query: Optional[Query] = None) -> List[Dict[str, Any]]:
        """The list under ``key`` of the answer's body."""
        items = self._json(method, path, query=query).get(key)
        if not isinstance(items, list):
            raise make_error(200, "INVALID_RESPONSE", f"{method} {path}: no {key} in the answer")
        return items

    def _pages(self, path: str, query: Dict[str, Any]) -> Iterator[Dict[str, Any]]:
        after: Optional[str] = None
        while True:
            r = self.request("GET", path, query={**query, "after": after})
            page = r.json()
            if not isinstance(page, dict) or not isinstance(page.get("proposals"), list):
                raise make_error(r.status, "INVALID_RESPONSE", f"GET {path}: no proposals in the answer")
            yield from page["proposals"]
            nxt = _header(r.headers, NEXT_HEADER)
            if not nxt:
                return
            decoded = urllib.parse.unquote(nxt, errors="strict")
            if decoded == after:
                # A server that hands back the cursor it was given would loop forever.
                raise make_error(r.status, "INVALID_RESPONSE", f"{NEXT_HEADER} repeats the cursor sent")
            after = decoded


def unsettled(p: Mapping[str, Any], admitted: AbstractSet[str]) -> bool:
    """Whether p is still to be watched: pending, approved, executing or
    reconciling, or with an outcome the thread does not hold yet as a message."""
    return p.get("status") in LIVE or (p.get("outcome") is not None and p.get("id") not in admitted)


def _header(headers: Mapping[str, str], name: str) -> Optional[str]:
    for k, v in headers.items():
        if k.lower() == name.lower():
            return v
    return None


def _event_number(event_id: Optional[str]) -> Optional[int]:
    if event_id is None or not event_id.isdigit() or len(event_id) > 15:
        return None
    return int(event_id)


@dataclass
class _Frame:
    event: str
    data: str
    id: Optional[str]
    retry: Optional[float]


def _sse_frames(resp: http.client.HTTPResponse) -> Iterator[_Frame]:
    """Parses a text/event-stream (the WHATWG rules the API uses)."""
    event, eid, retry = "", None, None
    data: List[str] = []
    while True:
        try:
            raw = resp.readline()
        except socket.timeout:
            raise TimeoutError("the event stream was silent too long") from None
        if not raw:
            return
        line = raw.decode("utf-8", "replace").rstrip("\r\n")
        if line == "":
            if data or eid is not None or retry is not None:
                yield _Frame(event or "message", "\n".join(data), eid, retry)
            event, data, eid, retry = "", [], None, None
            continue
        if line.startswith(":"):
            continue
        field, _, value = line.partition(":")
        if value.startswith(" "):
            value = value[1:]
        if field == "event":
            event = value
        elif field == "data":
            data.append(value)
        elif field == "id":
            eid = value
        elif field == "retry" and value.isdigit():
            retry = int(value) / 1000.0
