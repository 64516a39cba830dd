package mcpgateway

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/countersign/countersign"
	"github.com/countersign/countersign/cstype"
	"github.com/countersign/countersign/internal/redact"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Tasks (the io.modelcontextprotocol/tasks extension of MCP 2026-07-28,
// docs/api.md Part 3, "MCP 2026-07-28"): a gated call of a client that
// declares the extension answers with a task whose id is its proposal's,
// and the client polls it with tasks/get. A task is nothing but its
// proposal: it is durable as soon as the proposal is, any process serving
// the store answers for it, and an approved one is executed by the
// workers (the proposal is made in independent mode), never by a request.

// TasksExtension is the extension's identifier, under which a client
// declares it in a request's capabilities and server/discover lists it.
const TasksExtension = "io.modelcontextprotocol/tasks"

// Codes of the JSON-RPC errors about tasks.
const (
	// CodeMissingCapability answers a tasks/* request from a client that
	// did not declare the extension on it (the extension's -32021).
	CodeMissingCapability = -32021
	// CodeCallNotRun is the error of a failed task: its call was rejected,
	// expired, failed, or its outcome is unknown; data.reason says which.
	CodeCallNotRun = -32031
)

// taskPollInterval is the pollIntervalMs a task suggests: a human decides
// in seconds at best, and polls cost a store read each.
const taskPollInterval = time.Second

// The tasks/* methods.
const (
	methodTasksGet    = "tasks/get"
	methodTasksCancel = "tasks/cancel"
	methodTasksUpdate = "tasks/update"
	methodTasksList   = "tasks/list"
)

// taskParams are the params of every tasks/* request.
type taskParams struct {
	mcp.ParamsBase
	TaskID string `json:"taskId,omitempty"`
	// InputResponses (tasks/update) answer input requests; the gateway's
	// tasks ask none, so every one is ignored, as the extension says.
	InputResponses map[string]json.RawMessage `json:"inputResponses,omitempty"`
	// Cursor (tasks/list) continues a listing.
	Cursor string `json:"cursor,omitempty"`
}

// task is a task as tasks/get shows it (the extension's DetailedTask).
type task struct {
	TaskID         string          `json:"taskId"`
	Status         string          `json:"status"`
	StatusMessage  string          `json:"statusMessage,omitempty"`
	CreatedAt      string          `json:"createdAt"`
	LastUpdatedAt  string          `json:"lastUpdatedAt"`
	TTLMs          int64           `json:"ttlMs"`
	PollIntervalMs int64           `json:"pollIntervalMs,omitempty"`
	Result         json.RawMessage `json:"result,omitempty"`
	Error          *taskError      `json:"error,omitempty"`
}

// taskError is a failed task's JSON-RPC error.
type taskError struct {
	Code    int            `json:"code"`
	Message string         `json:"message"`
	Data    map[string]any `json:"data,omitempty"`
}

// taskResult answers tasks/get.
type taskResult struct {
	mcp.ResultBase
	ResultType string `json:"resultType"`
	task
}

// ackResult answers tasks/cancel and tasks/update: an empty acknowledgement.
type ackResult struct {
	mcp.ResultBase
	ResultType string `json:"resultType"`
}

// taskList answers tasks/list.
type taskList struct {
	mcp.ResultBase
	ResultType string `json:"resultType"`
	Tasks      []task `json:"tasks"`
	NextCursor string `json:"nextCursor,omitempty"`
}

// createdTask is a tools/call answered with a task (CreateTaskResult):
// the call's handler returns a result marked with the task (see
// markTask), which the receiving middleware (withoutContent) turns into
// this.
type createdTask struct {
	*mcp.CallToolResult
	task task
}

func (c createdTask) MarshalJSON() ([]byte, error) {
	return json.Marshal(struct {
		ResultType string `json:"resultType"`
		task
	}{"task", c.task})
}

// taskMark is the _meta key that marks a handler's result as a task for
// the middleware; it never reaches the client.
const taskMark = "countersign.internal/task"

// markTask is the handler's answer that becomes p's CreateTaskResult.
func markTask(p *cstype.Proposal) *mcp.CallToolResult {
	return &mcp.CallToolResult{Meta: mcp.Meta{taskMark: taskOf(p, nil)}}
}

// asCreatedTask turns a marked result into the CreateTaskResult.
func asCreatedTask(r *mcp.CallToolResult) (createdTask, bool) {
	if r == nil || r.Meta == nil {
		return createdTask{}, false
	}
	t, ok := r.Meta[taskMark].(task)
	return createdTask{CallToolResult: r, task: t}, ok
}

// wantsTask reports whether a tools/call may be answered with a task: the
// gateway's workers execute tasks (Options.Tasks), the request is of
// 2026-07-28 or later, and it declares the extension.
func (g *Gateway) wantsTask(req *mcp.CallToolRequest) bool {
	return g.tasks && req.ProtocolVersion() >= multiRoundTripVersion && declaresTasks(req.ClientCapabilities())
}

func declaresTasks(c *mcp.ClientCapabilities) bool {
	if c == nil {
		return false
	}
	_, ok := c.Extensions[TasksExtension]
	return ok
}

// taskOf is p as a task. render, when set, renders a succeeded proposal's
// result; without it (a task just made) none is shown.
func taskOf(p *cstype.Proposal, render func(*cstype.Proposal) json.RawMessage) task {
	// createdAt + ttlMs is the proposal's expiry exactly (the contract),
	// so createdAt is the expiry less the whole milliseconds of the TTL: at
	// most a millisecond after the proposal's creation.
	ttl := max(p.ExpiresAt.Sub(p.CreatedAt).Round(time.Millisecond), 0)
	created := p.ExpiresAt.Add(-ttl)
	t := task{
		TaskID:         p.ID,
		CreatedAt:      created.UTC().Format(time.RFC3339Nano),
		LastUpdatedAt:  created.UTC().Format(time.RFC3339Nano),
		TTLMs:          ttl.Milliseconds(),
		PollIntervalMs: taskPollInterval.Milliseconds(),
	}
	if p.UpdatedAt.After(created) {
		t.LastUpdatedAt = p.UpdatedAt.UTC().Format(time.RFC3339Nano)
	}
	notRun := func(reason, message string) {
		t.Status = "failed"
		t.StatusMessage = message
		t.Error = &taskError{Code: CodeCallNotRun, Message: message,
			Data: map[string]any{"reason": reason, "proposal_id": p.ID, "status": string(p.Status)}}
		t.PollIntervalMs = 0
	}
	switch p.Status {
	case cstype.StatusPending:
		t.Status, t.StatusMessage = "working", "Awaiting a human decision."
	case cstype.StatusApproved:
		t.Status, t.StatusMessage = "working", "Approved; it runs next."
	case cstype.StatusExecuting:
		t.Status, t.StatusMessage = "working", "Approved; running."
	case cstype.StatusReconciling:
		t.Status, t.StatusMessage = "working", "The call may or may not have run; its outcome is being reconciled."
	case cstype.StatusSucceeded:
		t.Status, t.PollIntervalMs = "completed", 0
		if render != nil {
			t.Result = render(p)
		}
	case cstype.StatusRejected:
		msg := "A human rejected this call; it was not run."
		if reason := rejectReason(p); reason != "" {
			msg += " Reason: " + reason
		}
		notRun("rejected", msg)
	case cstype.StatusExpired:
		notRun("expired", expiredText(p))
	case cstype.StatusFailed:
		msg := "The call failed"
		if o := p.Outcome; o != nil && o.Error != nil && *o.Error != "" {
			msg += ": " + *o.Error
		}
		notRun("failed", msg+".")
	case cstype.StatusUnknown:
		notRun("unknown", "The outcome is unknown: the call may or may not have been applied. Do not retry automatically.")
	case cstype.StatusCancelled:
		t.Status, t.StatusMessage, t.PollIntervalMs = "cancelled", "This call was withdrawn; it was not run.", 0
	case cstype.StatusSuperseded:
		t.Status, t.StatusMessage, t.PollIntervalMs = "cancelled", "A newer call replaced this one; it was not run.", 0
	default:
		t.Status, t.StatusMessage = "working", fmt.Sprintf("The call is %s.", p.Status)
	}
	return t
}

// taskOutput is a succeeded task's result: the upstream tool's own result,
// as a tools/call that ran it would have answered.
func taskOutput(p *cstype.Proposal) json.RawMessage {
	var raw json.RawMessage
	var summary string
	if o := p.Outcome; o != nil {
		raw, summary = o.Result, o.Summary
	}
	// A CallToolResult of 2026-07-28 says it is complete (resultType), as
	// the tools/call that ran the tool would have.
	fallback := json.RawMessage(`{"content":[{"type":"text","text":"Done."}],"resultType":"complete"}`)
	out, err := json.Marshal(succeededResult(raw, summary))
	if err != nil {
		return fallback
	}
	var m map[string]json.RawMessage
	if json.Unmarshal(out, &m) != nil {
		return fallback
	}
	m["resultType"] = json.RawMessage(`"complete"`)
	if out, err = json.Marshal(m); err != nil {
		return fallback
	}
	return out
}

// addTaskMethods serves the tasks/* methods on f's server.
func (f *front) addTaskMethods() {
	g := f.g
	for method, handle := range map[string]func(context.Context, caller, *taskParams) (mcp.Result, error){
		methodTasksGet:    g.taskGet,
		methodTasksCancel: g.taskCancel,
		methodTasksUpdate: g.taskUpdate,
		methodTasksList:   g.taskList,
	} {
		// The names are not the SDK's own methods, the only refusal.
		_ = mcp.AddReceivingCustomMethod(f.server, method, func(ctx context.Context, _ *mcp.ServerSession, p *taskParams) (mcp.Result, error) {
			who, ok := ctx.Value(taskCallerKey{}).(caller)
			if !ok {
				return nil, &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: "countersign could not identify the caller"}
			}
			return handle(ctx, who, p)
		})
	}
	f.server.AddReceivingMiddleware(f.taskGate)
}

type taskCallerKey struct{}

// taskGate admits a tasks/* request only under 2026-07-28 or later and
// from a client that declares the extension on it (else -32021, as the
// extension says), and hands the handler its caller.
func (f *front) taskGate(next mcp.MethodHandler) mcp.MethodHandler {
	return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
		if !strings.HasPrefix(method, "tasks/") {
			return next(ctx, method, req)
		}
		r, ok := req.(*mcp.ServerRequest[*taskParams])
		if !ok || r.ProtocolVersion() < multiRoundTripVersion || !declaresTasks(r.ClientCapabilities()) {
			return nil, &jsonrpc.Error{Code: CodeMissingCapability, Message: "Missing required client capability: " + TasksExtension,
				Data: json.RawMessage(`{"requiredCapabilities":{"extensions":{"` + TasksExtension + `":{}}}}`)}
		}
		who, err := f.identify(r.Extra)
		if err != nil {
			return nil, err
		}
		return next(context.WithValue(ctx, taskCallerKey{}, who), method, req)
	}
}

// unknownTask answers a task id that is not the caller's: not one, or
// another requester's, or another tenant's, alike.
func unknownTask() error {
	return &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: "Failed to retrieve task: Task not found"}
}

// ownTask reads the caller's task, or answers the error its request gets.
func (g *Gateway) ownTask(ctx context.Context, who caller, p *taskParams) (*cstype.Proposal, error) {
	if p == nil || p.TaskID == "" {
		return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: "taskId is required"}
	}
	prop, err := g.engine.OwnProposal(ctx, who.id, p.TaskID)
	switch {
	case errors.Is(err, countersign.ErrNotFound):
		return nil, unknownTask()
	case err != nil:
		g.log.Error("mcp gateway: a task could not be read", "task", p.TaskID, "err", redact.Error(err))
		return nil, &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: "countersign could not read the task; retry"}
	}
	return prop, nil
}

// taskGet answers tasks/get: the task as its proposal stands. It never
// executes anything.
func (g *Gateway) taskGet(ctx context.Context, who caller, p *taskParams) (mcp.Result, error) {
	prop, err := g.ownTask(ctx, who, p)
	if err != nil {
		return nil, err
	}
	return &taskResult{ResultType: "complete", task: taskOf(prop, taskOutput)}, nil
}

// taskCancel answers tasks/cancel: the requester withdraws a pending
// proposal. A task past pending is acknowledged all the same (cancellation
// is cooperative: the task ends as its proposal does).
func (g *Gateway) taskCancel(ctx context.Context, who caller, p *taskParams) (mcp.Result, error) {
	prop, err := g.ownTask(ctx, who, p)
	if err != nil {
		return nil, err
	}
	if prop.Status == cstype.StatusPending {
		_, err := g.engine.Cancel(ctx, who.id, prop.ID, countersign.ViaMCP, "cancelled by the MCP client (tasks/cancel)")
		switch {
		case err == nil, errors.Is(err, cstype.ErrConflict):
			// Withdrawn, or decided meanwhile: the task ends as it does.
		default:
			g.log.Error("mcp gateway: a task could not be cancelled", "task", prop.ID, "err", redact.Error(err))
			return nil, &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: "countersign could not cancel the task; retry"}
		}
	}
	return &ackResult{ResultType: "complete"}, nil
}

// taskUpdate answers tasks/update: a task of the gateway never asks for
// input (the approval is asked before the task is made), so every
// response is one to no outstanding request, ignored as the extension
// says; the task must still be the caller's.
func (g *Gateway) taskUpdate(ctx context.Context, who caller, p *taskParams) (mcp.Result, error) {
	if _, err := g.ownTask(ctx, who, p); err != nil {
		return nil, err
	}
	return &ackResult{ResultType: "complete"}, nil
}

// taskList answers tasks/list: the tasks of the caller's credential thread
// (mcp:<fingerprint>, which only its actor owns and reads in full), a page
// at a time.
func (g *Gateway) taskList(ctx context.Context, who caller, p *taskParams) (mcp.Result, error) {
	params := countersign.ListParams{}
	if p != nil {
		params.After = p.Cursor
	}
	page, err := g.engine.ThreadProposals(ctx, who.id, "mcp:"+who.fingerprint, params)
	switch {
	case errors.Is(err, countersign.ErrNotFound):
		return &taskList{ResultType: "complete", Tasks: []task{}}, nil
	case errors.Is(err, cstype.ErrInvalidCursor):
		return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: "cursor: not one tasks/list gave"}
	case err != nil:
		g.log.Error("mcp gateway: tasks could not be listed", "err", redact.Error(err))
		return nil, &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: "countersign could not list the tasks; retry"}
	}
	out := &taskList{ResultType: "complete", Tasks: []task{}, NextCursor: page.Next}
	for _, prop := range page.Proposals {
		if isTask(prop) {
			out.Tasks = append(out.Tasks, taskOf(prop, taskOutput))
		}
	}
	return out, nil
}

// isTask reports whether p was made for a client that follows it as a
// task: the gateway makes only those in independent mode.
func isTask(p *cstype.Proposal) bool { return p.Mode == cstype.ModeIndependent }
