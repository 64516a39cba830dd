package countersign

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"strings"

	"github.com/countersign/countersign/cstype"
	"github.com/countersign/countersign/internal/canonjson"
	"github.com/countersign/countersign/internal/schema"
	"github.com/google/jsonschema-go/jsonschema"
)

// Kind says whether an action only reads or may change the world. Unmatched
// read actions are allowed; unmatched write actions ask.
type Kind string

// The action kinds.
const (
	KindRead  Kind = "read"
	KindWrite Kind = "write"
)

// Confirmation is the copy an approver reads. Title may hold {path}
// placeholders (a dot-separated path into the input, such as {customer} or
// {order.id}) that are filled from the validated input.
type Confirmation = cstype.Confirmation

// Phase says where in a call's path a hook runs.
type Phase string

// The phases hooks see.
const (
	PhasePropose Phase = "propose" // Authorize, before anything is stored
	PhasePrepare Phase = "prepare" // Preflight, before Prepare
	PhaseExecute Phase = "execute" // Authorize and Preflight, just before Execute
)

// AuthorizeRequest is what an Authorize hook judges. Returning a non-nil error
// denies; its message is the reason given to the caller.
type AuthorizeRequest struct {
	Identity   Identity
	Phase      Phase
	Action     string
	Input      json.RawMessage
	ProposalID string // empty in PhasePropose
}

// PreflightVerdict is a preflight hook's answer.
type PreflightVerdict string

// The preflight verdicts.
const (
	// PreflightReady lets the call go on (and may override the confirmation copy).
	PreflightReady PreflightVerdict = "ready"
	// PreflightDenied stops the call: before a proposal, nothing is stored;
	// before execution, the proposal fails without executing.
	PreflightDenied PreflightVerdict = "denied"
	// PreflightCompleted settles the call with an existing result: the change
	// already exists, so nothing is executed.
	PreflightCompleted PreflightVerdict = "completed"
)

// PreflightRequest is what a Preflight hook checks.
type PreflightRequest struct {
	Identity     Identity
	Phase        Phase // PhasePrepare or PhaseExecute
	Action       string
	Input        json.RawMessage
	ProposalID   string
	StateVersion string
}

// Preflight is a Preflight hook's answer.
type Preflight struct {
	Verdict PreflightVerdict
	// Reason explains a denial.
	Reason string
	// Confirmation overrides the action's copy when Verdict is ready.
	Confirmation *Confirmation
	// Receipt and Result describe the existing change when Verdict is completed.
	Receipt string
	Result  json.RawMessage
}

// PrepareRequest is what a Prepare hook describes. Prepare must not mutate.
type PrepareRequest struct {
	Identity Identity
	Action   string
	Input    json.RawMessage
}

// Prepared describes the exact change a proposal stands for.
type Prepared struct {
	// Preview describes the change in words for the approver.
	Preview string
	// StateVersion names the backend state the proposal depends on; Execute
	// receives it and must refuse to apply the change on any other state.
	StateVersion string
}

// ExecuteRequest is what Execute receives.
type ExecuteRequest struct {
	Identity Identity
	Action   string
	// ActionVersion is the version the call was checked against: the
	// proposal's, or for a call run at once, the registered action's. A hook
	// that can see its backend's own current version compares them and fails
	// with NotExecuted(CodeActionVersionChanged, …) when they differ.
	ActionVersion string
	Input         json.RawMessage
	// OperationID is the idempotency key of this proposal's execution: the
	// same across retries and recoveries. Use it as the backend's key.
	OperationID  string
	StateVersion string
	ProposalID   string // empty when no approval was needed
	Attempt      int    // 1, then 2, … for idempotent retries
}

// Receipt is a successful execution's answer.
type Receipt struct {
	// ID identifies the change in the backend (a refund id, a message id).
	ID     string
	Result json.RawMessage
}

// ReconcileStatus is what the backend knows of an operation.
type ReconcileStatus string

// The reconcile answers.
const (
	ReconcileApplied    ReconcileStatus = "applied"
	ReconcileNotApplied ReconcileStatus = "not_applied"
	ReconcileUnknown    ReconcileStatus = "unknown"
)

// ReconcileRequest asks the backend what became of an operation.
type ReconcileRequest struct {
	Identity    Identity
	Action      string
	OperationID string
	ProposalID  string
}

// Reconciliation is the backend's authoritative answer about an operation.
type Reconciliation struct {
	Status  ReconcileStatus
	Receipt string
	Result  json.RawMessage
}

// Outcome is a proposal's recorded result.
type Outcome = cstype.Outcome

// Hooks are an action's callbacks over raw (validated) JSON input. Typed
// actions wrap their typed hooks into these.
type Hooks struct {
	// Authorize runs when a call is proposed and again before execution.
	Authorize func(ctx context.Context, req *AuthorizeRequest) error
	// Preflight runs before Prepare (PhasePrepare) and before Execute (PhaseExecute).
	Preflight func(ctx context.Context, req *PreflightRequest) (*Preflight, error)
	// Prepare previews the change and names the state it depends on.
	Prepare func(ctx context.Context, req *PrepareRequest) (*Prepared, error)
	// Execute applies the change. An error means the outcome is uncertain,
	// unless it wraps ErrNotApplied (see NotApplied): then the change
	// definitely did not happen.
	Execute func(ctx context.Context, req *ExecuteRequest) (*Receipt, error)
	// Reconcile answers, after an uncertain outcome, whether the operation was
	// applied. With it, uncertain outcomes go to reconciling, not unknown.
	Reconcile func(ctx context.Context, req *ReconcileRequest) (*Reconciliation, error)
	// Present writes the text of the outcome message admitted to the thread.
	Present func(ctx context.Context, o *Outcome) string
}

// RawActionSpec describes an action whose input schema is given as JSON.
type RawActionSpec struct {
	Name        string
	Version     string // default "1"
	Description string
	Kind        Kind // default KindWrite
	InputSchema json.RawMessage
	// Idempotent declares that executing twice with the same operation id is
	// safe, so an uncertain outcome may be retried with that id.
	Idempotent bool
	// CallerExecuted declares an action the calling agent runs itself: an
	// approved call answers ResultExecute, the claim of a lease under which
	// the caller runs the change and then settles it (Engine.Settle).
	// Hooks.Execute must be nil, and the kind write.
	CallerExecuted bool
	Confirmation   Confirmation
	// ReplacementKey is a template ("{customer}") or, if ReplacementKeyFunc is
	// set, ignored. A new proposal with the same requester, thread, action and
	// key supersedes the pending ones.
	ReplacementKey     string
	ReplacementKeyFunc func(input json.RawMessage) (string, error)
	Hooks              Hooks
}

// ActionSpec describes a typed action: its input schema is inferred from In,
// and hooks receive the decoded input.
type ActionSpec[In any] struct {
	Name               string
	Version            string // default "1"
	Description        string
	Kind               Kind // default KindWrite
	Idempotent         bool
	CallerExecuted     bool // see RawActionSpec.CallerExecuted; Execute must be nil
	Confirmation       Confirmation
	ReplacementKey     string
	ReplacementKeyFunc func(in In) string
	Authorize          func(ctx context.Context, req *AuthorizeRequest, in In) error
	Preflight          func(ctx context.Context, req *PreflightRequest, in In) (*Preflight, error)
	Prepare            func(ctx context.Context, req *PrepareRequest, in In) (*Prepared, error)
	Execute            func(ctx context.Context, req *ExecuteRequest, in In) (*Receipt, error)
	Reconcile          func(ctx context.Context, req *ReconcileRequest) (*Reconciliation, error)
	Present            func(ctx context.Context, o *Outcome) string
}

// Action is a registered tool. Build one with NewAction or NewRawAction.
type Action struct {
	name, version, description string
	kind                       Kind
	idempotent                 bool
	callerExecuted             bool // the calling agent executes it
	confirmOnly                bool // made by ConfirmTool: always asks
	confirmation               Confirmation
	replacementKey             string
	replacementKeyFunc         func(json.RawMessage) (string, error)
	schemaJSON                 json.RawMessage
	validator                  *schema.Validator
	// normalize turns validated raw input into the snapshot: for typed
	// actions, decoded into In and encoded again, so that a change of In
	// shows as drift.
	normalize func(json.RawMessage) (json.RawMessage, error)
	hooks     Hooks
}

// Name is the action's registered name.
func (a *Action) Name() string { return a.name }

// Version is the action's version. A proposal executes only under the
// version it was approved for.
func (a *Action) Version() string { return a.version }

// Description is shown to the model.
func (a *Action) Description() string { return a.description }

// Kind says whether the action reads or writes.
func (a *Action) Kind() Kind { return a.kind }

// Idempotent reports whether uncertain outcomes may be retried.
func (a *Action) Idempotent() bool { return a.idempotent }

// CallerExecuted reports whether the calling agent runs the action itself,
// under the lease its call's answer gives it.
func (a *Action) CallerExecuted() bool { return a.callerExecuted }

// Confirmation is the copy an approver reads, its {path} placeholders
// unfilled. An empty Title is, on a proposal, the name and the input.
func (a *Action) Confirmation() Confirmation { return a.confirmation }

// InputSchema is the JSON Schema of the action's input.
func (a *Action) InputSchema() json.RawMessage { return bytes.Clone(a.schemaJSON) }

var namePattern = regexp.MustCompile(`^[A-Za-z0-9_][A-Za-z0-9_.:/-]{0,127}$`)

// NewRawAction builds an action from a JSON Schema.
func NewRawAction(spec RawActionSpec) (*Action, error) {
	if !namePattern.MatchString(spec.Name) {
		return nil, fmt.Errorf("countersign: action name %q: want 1-128 of [A-Za-z0-9_.:/-]", spec.Name)
	}
	switch {
	case spec.CallerExecuted && spec.Hooks.Execute != nil:
		return nil, fmt.Errorf("countersign: action %s: a caller-executed action has no Hooks.Execute", spec.Name)
	case !spec.CallerExecuted && spec.Hooks.Execute == nil:
		return nil, fmt.Errorf("countersign: action %s: Hooks.Execute is required", spec.Name)
	}
	kind := spec.Kind
	if kind == "" {
		kind = KindWrite
	}
	if kind != KindRead && kind != KindWrite {
		return nil, fmt.Errorf("countersign: action %s: kind %q: want read or write", spec.Name, kind)
	}
	if spec.CallerExecuted && kind != KindWrite {
		// A read leaves no record, so there is nothing to lease or settle.
		return nil, fmt.Errorf("countersign: action %s: a caller-executed action is a write", spec.Name)
	}
	schemaJSON := spec.InputSchema
	if len(schemaJSON) == 0 {
		schemaJSON = json.RawMessage(`{"type":"object"}`)
	}
	v, err := schema.Compile(schemaJSON)
	if err != nil {
		return nil, fmt.Errorf("countersign: action %s: input schema: %w", spec.Name, err)
	}
	a := &Action{
		name:               spec.Name,
		version:            spec.Version,
		description:        spec.Description,
		kind:               kind,
		idempotent:         spec.Idempotent,
		callerExecuted:     spec.CallerExecuted,
		confirmation:       spec.Confirmation,
		replacementKey:     spec.ReplacementKey,
		replacementKeyFunc: spec.ReplacementKeyFunc,
		schemaJSON:         bytes.Clone(schemaJSON),
		validator:          v,
		normalize:          func(in json.RawMessage) (json.RawMessage, error) { return in, nil },
		hooks:              spec.Hooks,
	}
	if a.version == "" {
		a.version = "1"
	}
	if err := checkTemplate(a.confirmation.Title); err != nil {
		return nil, fmt.Errorf("countersign: action %s: confirmation title: %w", spec.Name, err)
	}
	if err := checkTemplate(a.replacementKey); err != nil {
		return nil, fmt.Errorf("countersign: action %s: replacement key: %w", spec.Name, err)
	}
	return a, nil
}

// NewAction builds a typed action. Its input schema is inferred from In
// (exported fields by their JSON names; fields without omitempty are
// required; unknown properties are refused).
func NewAction[In any](spec ActionSpec[In]) (*Action, error) {
	s, err := jsonschema.For[In](nil)
	if err != nil {
		return nil, fmt.Errorf("countersign: action %s: infer input schema: %w", spec.Name, err)
	}
	schemaJSON, err := json.Marshal(s)
	if err != nil {
		return nil, fmt.Errorf("countersign: action %s: encode input schema: %w", spec.Name, err)
	}
	decode := func(raw json.RawMessage) (In, error) {
		var in In
		err := json.Unmarshal(raw, &in)
		return in, err
	}
	typed := func(raw json.RawMessage, fn func(In) error) error {
		in, err := decode(raw)
		if err != nil {
			return fmt.Errorf("decode input: %w", err)
		}
		return fn(in)
	}
	raw := RawActionSpec{
		Name: spec.Name, Version: spec.Version, Description: spec.Description, Kind: spec.Kind,
		InputSchema: schemaJSON, Idempotent: spec.Idempotent, CallerExecuted: spec.CallerExecuted,
		Confirmation: spec.Confirmation, ReplacementKey: spec.ReplacementKey,
	}
	if spec.ReplacementKeyFunc != nil {
		raw.ReplacementKeyFunc = func(r json.RawMessage) (key string, err error) {
			err = typed(r, func(in In) error { key = spec.ReplacementKeyFunc(in); return nil })
			return key, err
		}
	}
	if spec.Authorize != nil {
		raw.Hooks.Authorize = func(ctx context.Context, req *AuthorizeRequest) error {
			return typed(req.Input, func(in In) error { return spec.Authorize(ctx, req, in) })
		}
	}
	if spec.Preflight != nil {
		raw.Hooks.Preflight = func(ctx context.Context, req *PreflightRequest) (pf *Preflight, err error) {
			err = typed(req.Input, func(in In) error { pf, err = spec.Preflight(ctx, req, in); return err })
			return pf, err
		}
	}
	if spec.Prepare != nil {
		raw.Hooks.Prepare = func(ctx context.Context, req *PrepareRequest) (p *Prepared, err error) {
			err = typed(req.Input, func(in In) error { p, err = spec.Prepare(ctx, req, in); return err })
			return p, err
		}
	}
	if spec.Execute != nil {
		raw.Hooks.Execute = func(ctx context.Context, req *ExecuteRequest) (r *Receipt, err error) {
			in, derr := decode(req.Input)
			if derr != nil {
				// Nothing was sent anywhere: the change definitely did not happen.
				return nil, NotApplied(fmt.Errorf("decode input: %w", derr))
			}
			return spec.Execute(ctx, req, in)
		}
	}
	raw.Hooks.Reconcile = spec.Reconcile
	raw.Hooks.Present = spec.Present
	a, err := NewRawAction(raw)
	if err != nil {
		return nil, err
	}
	a.normalize = func(r json.RawMessage) (json.RawMessage, error) {
		in, err := decode(r)
		if err != nil {
			return nil, err
		}
		return json.Marshal(in)
	}
	return a, nil
}

// ConfirmTool wraps an action, typically a read action, so that every call
// asks for approval (a deny rule still wins). Its version is the name plus a
// hash of its input schema, so a schema change invalidates pending approvals,
// and its default confirmation title is the name and the JSON arguments.
func ConfirmTool(a *Action) *Action {
	c := *a
	c.confirmOnly = true
	sum := sha256.Sum256(a.schemaJSON)
	c.version = a.name + "@" + hex.EncodeToString(sum[:8])
	return &c
}

// prepareInput validates raw input and returns the snapshot and its digest.
func (a *Action) prepareInput(raw json.RawMessage) (snapshot json.RawMessage, digest string, err error) {
	if err := a.validator.Validate(raw); err != nil {
		var se *schema.Error
		if errors.As(err, &se) {
			return nil, "", &InvalidInputError{Action: a.name, Problems: se.Problems}
		}
		return nil, "", err
	}
	norm, err := a.normalize(raw)
	if err != nil {
		return nil, "", &InvalidInputError{Action: a.name, Problems: []InputProblem{{Path: "", Message: err.Error()}}}
	}
	canon, err := canonjson.Canonicalize(norm)
	if err != nil {
		return nil, "", &InvalidInputError{Action: a.name, Problems: []InputProblem{{Path: "", Message: err.Error()}}}
	}
	digest, err = canonjson.Digest(canon)
	if err != nil {
		return nil, "", err
	}
	return canon, digest, nil
}

// InputDigest is the digest a proposal of a's records for input
// (cstype.Proposal.InputDigest): how a surface recognises a repeated
// identical call among the proposals it finds. An input the schema refuses
// is an *InvalidInputError.
func (a *Action) InputDigest(input json.RawMessage) (string, error) {
	_, digest, err := a.prepareInput(input)
	return digest, err
}

// fill replaces {path} placeholders with values from the input. A missing
// path renders as an empty string; strings render bare, other values as JSON.
func fill(tmpl string, input json.RawMessage) string {
	if !strings.Contains(tmpl, "{") {
		return tmpl
	}
	var doc any
	dec := json.NewDecoder(bytes.NewReader(input))
	dec.UseNumber()
	if err := dec.Decode(&doc); err != nil {
		return tmpl
	}
	return placeholder.ReplaceAllStringFunc(tmpl, func(m string) string {
		v := doc
		for _, part := range strings.Split(m[1:len(m)-1], ".") {
			obj, ok := v.(map[string]any)
			if !ok {
				return ""
			}
			v = obj[part]
		}
		switch x := v.(type) {
		case nil:
			return ""
		case string:
			return x
		case json.Number:
			return x.String()
		default:
			b, _ := json.Marshal(x)
			return string(b)
		}
	})
}

var placeholder = regexp.MustCompile(`\{[A-Za-z0-9_.-]+\}`)

func checkTemplate(t string) error {
	if strings.Count(t, "{") != len(placeholder.FindAllString(t, -1)) {
		return fmt.Errorf("%q: placeholders are {path} with letters, digits, _ . -", t)
	}
	return nil
}

// replacementKeyFor computes the proposal's replacement key.
func (a *Action) replacementKeyFor(input json.RawMessage) (string, error) {
	if a.replacementKeyFunc != nil {
		return a.replacementKeyFunc(input)
	}
	if a.replacementKey == "" {
		return "", nil
	}
	return fill(a.replacementKey, input), nil
}
