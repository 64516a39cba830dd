package cstype

import (
	"encoding/json"
	"slices"
	"time"
)

// RunStatus is where a run is in its life.
type RunStatus string

// The run statuses (docs/api.md, Messages and runs).
const (
	RunRunning   RunStatus = "running"
	RunParked    RunStatus = "parked"
	RunFinished  RunStatus = "finished"
	RunFailed    RunStatus = "failed"
	RunCancelled RunStatus = "cancelled"
)

// Ended reports whether the run is over: it holds its thread no more.
func (s RunStatus) Ended() bool {
	return s == RunFinished || s == RunFailed || s == RunCancelled
}

// Valid reports whether s is a run status.
func (s RunStatus) Valid() bool {
	return s == RunRunning || s == RunParked || s.Ended()
}

// The message roles.
const (
	RoleUser      = "user"
	RoleAssistant = "assistant"
	RoleTool      = "tool"
)

// ToolCall is one tool an assistant message called.
type ToolCall struct {
	ID string
	// Action is the action's name, or a client tool's (with Client).
	Action string
	Input  json.RawMessage
	// Client marks a call of one of the run's ClientTools: the caller
	// executes it, and its result comes back with the thread's next message.
	Client bool
}

// ClientTool is a tool the caller executes (the tools of an AG-UI run's
// input): offered to the run's model besides the agent's actions. A call of
// one ends the run with the call pending (store.PendingClientCalls); its result is
// a tool message posted with the next run (store.PostMessageParams.Results).
type ClientTool struct {
	Name        string
	Description string
	// Parameters is the JSON Schema of the tool's arguments, an object.
	Parameters json.RawMessage
}

// Run is one turn of an agent in a thread.
type Run struct {
	ID       string
	Tenant   string
	ThreadID string
	Agent    string
	// Roles are the roles of the thread's owner when the run started: the
	// identity its calls are made with.
	Roles []string
	// ClientTools are the tools the caller who started the run executes.
	ClientTools []ClientTool
	Status      RunStatus
	// ProposalIDs are the proposals the run's calls created or replayed,
	// in order.
	ProposalIDs []string
	// Awaiting is the proposal a parked run waits for.
	Awaiting string
	// Steps counts the model calls the run has made (max_steps).
	Steps int
	// Error says why a failed run failed.
	Error string
	// Lease is the process that runs it, while it is running.
	Lease     *Lease
	Version   int64
	StartedAt time.Time
	UpdatedAt time.Time
	EndedAt   *time.Time
}

// Clone returns a deep copy.
func (r *Run) Clone() *Run {
	if r == nil {
		return nil
	}
	c := *r
	c.ProposalIDs = slices.Clone(r.ProposalIDs)
	c.Roles = slices.Clone(r.Roles)
	if r.ClientTools != nil {
		c.ClientTools = make([]ClientTool, len(r.ClientTools))
		for i, t := range r.ClientTools {
			t.Parameters = slices.Clone(t.Parameters)
			c.ClientTools[i] = t
		}
	}
	c.Lease = clonePtr(r.Lease)
	c.EndedAt = clonePtr(r.EndedAt)
	return &c
}
