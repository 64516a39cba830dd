package webhook

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/countersign/countersign"
	"github.com/countersign/countersign/internal/redact"
	"go.opentelemetry.io/otel/trace"
)

// DefaultTimeout bounds a request to an endpoint whose Timeout is zero.
const DefaultTimeout = 10 * time.Second

// Endpoint is one of an action's URLs in the backend.
type Endpoint struct {
	// URL is an absolute http or https URL without userinfo or fragment,
	// written in RFC 3986's characters. It is the only address this
	// endpoint's hook ever calls: a redirect is never followed. A token in
	// its query never appears in an error (errors show it REDACTED).
	URL string
	// Timeout bounds one request, from dialing to the end of the response
	// body. Default DefaultTimeout.
	Timeout time.Duration
}

// Spec describes an action whose hooks live in the backend. The fields
// mirror countersign.RawActionSpec and docs/api.md's `actions` configuration.
type Spec struct {
	Name        string
	Version     string // default "1"
	Kind        string // "read" or "write" (default)
	Description string
	InputSchema json.RawMessage
	// Confirmation is the copy an approver reads.
	Confirmation countersign.Confirmation
	// ReplacementKey is a template ("{customer}"): a new proposal with the
	// same requester, thread, action and key supersedes the pending ones.
	ReplacementKey string
	// Idempotent declares that executing twice with the same operation id
	// is safe, so the engine may send an uncertain execute again with that
	// id (bounded attempts, each with its attempt number).
	Idempotent bool
	// Prepare, if set, previews the change and names the state it depends on.
	Prepare *Endpoint
	// Execute applies the change. Required, unless ExecuteByCaller.
	Execute *Endpoint
	// ExecuteByCaller declares an action the calling agent runs itself
	// (countersign.RawActionSpec.CallerExecuted): Execute must be nil, and
	// only Prepare and Reconcile, if set, call the backend.
	ExecuteByCaller bool
	// Reconcile, if set, answers whether an uncertain operation was applied;
	// without it, an uncertain outcome is retried (Idempotent) or unknown.
	Reconcile *Endpoint
}

// Options configures how an action calls its backend.
type Options struct {
	// Secret is the HMAC key that signs every request (see Sign). Required.
	// Every backend that verifies with it can sign a request any other
	// verifier of it accepts: give an action whose backend others should
	// not trust a secret of its own, and never give a notification
	// receiver one a backend holds.
	Secret []byte
	// Client sends the requests. Default: a client shared by every action,
	// with bounded dial, TLS handshake and response headers, that opens a new
	// connection for every request (so that a connection the backend closed
	// while idle never makes an execute uncertain). Whatever the client, the
	// action never follows a redirect. A custom client's transport should
	// report its progress through net/http/httptrace, as http.Transport
	// does; otherwise only a failed dial or name lookup counts as "not
	// sent", and every other failure of an execute is uncertain.
	Client *http.Client
	// Now is the clock that timestamps signatures. Default time.Now.
	Now func() time.Time
	// Observe, if set, is told of every request: the action, the endpoint
	// ("prepare", "execute", "reconcile"), how long it took and the HTTP
	// status (0 when no answer came). For latency metrics; it must not block.
	Observe func(action, endpoint string, d time.Duration, status int)
	// TracerProvider, if set, makes a client span of every request and
	// sends its W3C traceparent header, so that the backend continues the
	// trace of the call (docs/tracing.md). Default nil: no span, no header.
	TracerProvider trace.TracerProvider
}

// NewAction returns an action whose hooks POST to the spec's endpoints, as
// docs/api.md's "Webhook actions" describes:
//
//   - prepare: 200 is the preview and state version; 403 denies the call
//     (DeniedByAuthorize), 409 and 422 deny it (DeniedByPreflight), with the
//     body's reason; anything else is an error.
//   - execute: 2xx is the receipt; 4xx is a definite failure
//     (countersign.NotApplied); 3xx (never followed), 5xx, a time-out, a
//     broken connection or an unreadable 2xx body are uncertain, as is any
//     failure once the request may have left this process. A failure before
//     that (a name lookup, a refused connection) is a definite failure.
//   - reconcile: 200 with status applied (and a receipt), not_applied or
//     unknown; anything else is an error, which keeps the proposal
//     reconciling.
func NewAction(spec Spec, opts Options) (*countersign.Action, error) {
	c, hooks, err := newCaller(spec, opts)
	if err != nil {
		return nil, fmt.Errorf("webhook: action %s: %w", spec.Name, err)
	}
	a, err := countersign.NewRawAction(countersign.RawActionSpec{
		Name:           spec.Name,
		Version:        spec.Version,
		Description:    spec.Description,
		Kind:           countersign.Kind(spec.Kind),
		InputSchema:    spec.InputSchema,
		Idempotent:     spec.Idempotent,
		Confirmation:   spec.Confirmation,
		ReplacementKey: spec.ReplacementKey,
		CallerExecuted: spec.ExecuteByCaller,
		Hooks:          hooks,
	})
	if err != nil {
		return nil, err
	}
	// The version sent is the action's own, defaults applied, as the engine
	// records it on proposals. No hook runs before NewAction returns.
	c.version = a.Version()
	return a, nil
}

// newCaller checks the endpoints and options and returns the hooks that call
// them.
func newCaller(spec Spec, opts Options) (*caller, countersign.Hooks, error) {
	var hooks countersign.Hooks
	switch {
	case spec.ExecuteByCaller && spec.Execute != nil:
		return nil, hooks, errors.New("Spec.Execute must be nil when ExecuteByCaller")
	case !spec.ExecuteByCaller && spec.Execute == nil:
		return nil, hooks, errors.New("Spec.Execute is required")
	case len(opts.Secret) == 0 && (spec.Execute != nil || spec.Prepare != nil || spec.Reconcile != nil):
		return nil, hooks, errors.New("Options.Secret is required")
	}
	c := &caller{secret: bytes.Clone(opts.Secret), now: opts.Now, version: spec.Version, action: spec.Name, observe: opts.Observe}
	if c.now == nil {
		c.now = time.Now
	}
	c.client = defaultClient()
	if opts.Client != nil {
		c.client = noRedirects(opts.Client)
	}
	if opts.TracerProvider != nil {
		c.client = traced(c.client, opts.TracerProvider)
	}
	var err error
	if spec.Execute != nil {
		if c.execute, err = parseEndpoint("Execute", spec.Execute); err != nil {
			return nil, hooks, err
		}
		hooks.Execute = c.executeHook
	}
	if spec.Prepare != nil {
		if c.prepare, err = parseEndpoint("Prepare", spec.Prepare); err != nil {
			return nil, hooks, err
		}
		hooks.Prepare = c.prepareHook
	}
	if spec.Reconcile != nil {
		if c.reconcile, err = parseEndpoint("Reconcile", spec.Reconcile); err != nil {
			return nil, hooks, err
		}
		hooks.Reconcile = c.reconcileHook
	}
	return c, hooks, nil
}

// endpoint is a checked Endpoint.
type endpoint struct {
	name    string // prepare, execute or reconcile
	url     string
	timeout time.Duration
}

func parseEndpoint(field string, e *Endpoint) (*endpoint, error) {
	// The URL may carry a token in its query: errors show it redacted.
	shown := redact.URL(e.URL)
	u, err := url.Parse(e.URL)
	switch {
	case e.URL == "":
		return nil, fmt.Errorf("Spec.%s.URL is required", field)
	case err != nil:
		return nil, fmt.Errorf("Spec.%s.URL: %w", field, redact.Error(err))
	case u.Scheme != "http" && u.Scheme != "https":
		return nil, fmt.Errorf("Spec.%s.URL %q: want an http or https URL", field, shown)
	case u.Opaque != "" || u.Hostname() == "":
		return nil, fmt.Errorf("Spec.%s.URL %q: want an absolute URL with a host", field, shown)
	case u.User != nil:
		// Credentials belong in the signature, not in a URL that logs and
		// error messages repeat.
		return nil, fmt.Errorf("Spec.%s.URL: must not carry userinfo", field)
	case u.Fragment != "" || strings.Contains(e.URL, "#"):
		return nil, fmt.Errorf("Spec.%s.URL %q: must not have a fragment", field, shown)
	case e.Timeout < 0:
		return nil, fmt.Errorf("Spec.%s.Timeout %v: must be positive", field, e.Timeout)
	}
	if err := redact.CheckURL(e.URL); err != nil {
		return nil, fmt.Errorf("Spec.%s.URL: %w", field, err)
	}
	return &endpoint{name: strings.ToLower(field), url: u.String(), timeout: cmp.Or(e.Timeout, DefaultTimeout)}, nil
}

// caller holds one action's endpoints and signs its requests.
type caller struct {
	action                      string
	observe                     func(action, endpoint string, d time.Duration, status int)
	secret                      []byte
	now                         func() time.Time
	version                     string
	client                      *http.Client
	prepare, execute, reconcile *endpoint
}

// The request bodies, field for field as docs/api.md lists them.
type (
	prepareBody struct {
		Action        string          `json:"action"`
		ActionVersion string          `json:"action_version"`
		Input         json.RawMessage `json:"input"`
		Tenant        string          `json:"tenant"`
		Actor         string          `json:"actor"`
	}
	executeBody struct {
		OperationID   string          `json:"operation_id"`
		ProposalID    string          `json:"proposal_id"` // empty when no approval was needed
		Action        string          `json:"action"`
		ActionVersion string          `json:"action_version"`
		Input         json.RawMessage `json:"input"`
		StateVersion  string          `json:"state_version"`
		Tenant        string          `json:"tenant"`
		Actor         string          `json:"actor"`
		Attempt       int             `json:"attempt"`
	}
	reconcileBody struct {
		OperationID string `json:"operation_id"`
		ProposalID  string `json:"proposal_id"`
		Action      string `json:"action"`
		Tenant      string `json:"tenant"`
		Actor       string `json:"actor"`
	}
)

// encode marshals a request body. The input is sent as the engine holds it
// (no HTML escaping), and the signature covers exactly these bytes.
func encode(v any) ([]byte, error) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(b.Bytes(), []byte("\n")), nil
}

// rawInput keeps a missing input valid JSON.
func rawInput(in json.RawMessage) json.RawMessage {
	if len(in) == 0 {
		return json.RawMessage("null")
	}
	return in
}

// maxReason bounds a denial reason taken from a backend's body.
const maxReason = 1024

func (c *caller) prepareHook(ctx context.Context, req *countersign.PrepareRequest) (*countersign.Prepared, error) {
	body, err := encode(prepareBody{
		Action: req.Action, ActionVersion: c.version, Input: rawInput(req.Input),
		Tenant: req.Identity.Tenant, Actor: req.Identity.Actor,
	})
	if err != nil {
		return nil, fmt.Errorf("webhook prepare: encode request: %w", err)
	}
	resp, err := c.post(ctx, c.client, c.prepare, body, nil)
	if err != nil {
		return nil, fmt.Errorf("webhook prepare: %w", err)
	}
	switch resp.status {
	case http.StatusOK:
		var out struct {
			Preview      *string `json:"preview"`
			StateVersion *string `json:"state_version"`
		}
		if err := resp.decode(&out); err != nil {
			return nil, fmt.Errorf("webhook prepare: HTTP 200, but %w", err)
		}
		if out.Preview == nil || *out.Preview == "" {
			return nil, errors.New("webhook prepare: HTTP 200, but the body has no preview")
		}
		p := &countersign.Prepared{Preview: *out.Preview}
		if out.StateVersion != nil {
			p.StateVersion = *out.StateVersion
		}
		return p, nil
	case http.StatusForbidden, http.StatusConflict, http.StatusUnprocessableEntity:
		code := countersign.DeniedByPreflight // the backend's own check of the call
		if resp.status == http.StatusForbidden {
			code = countersign.DeniedByAuthorize
		}
		return nil, &countersign.DeniedError{Code: code, Action: req.Action, Reason: denialReason(resp)}
	}
	return nil, fmt.Errorf("webhook prepare: %v", resp)
}

// denialReason is the body's reason, or says who refused.
func denialReason(resp *response) string {
	var out struct {
		Reason string `json:"reason"`
	}
	if resp.decode(&out) == nil {
		if r := excerpt([]byte(out.Reason), maxReason); r != "" {
			return r
		}
	}
	return fmt.Sprintf("the backend refused to prepare the call (HTTP %d)", resp.status)
}

func (c *caller) executeHook(ctx context.Context, req *countersign.ExecuteRequest) (*countersign.Receipt, error) {
	body, err := encode(executeBody{
		OperationID: req.OperationID, ProposalID: req.ProposalID, Action: req.Action,
		ActionVersion: c.version, Input: rawInput(req.Input), StateVersion: req.StateVersion,
		Tenant: req.Identity.Tenant, Actor: req.Identity.Actor, Attempt: req.Attempt,
	})
	if err != nil {
		return nil, countersign.NotApplied(fmt.Errorf("webhook execute: encode request: %w", err))
	}
	// A context that has already ended stops the transport before it does
	// anything; say so here, where it is certain, rather than leave it to
	// the fallback judgement in mayHaveBeenSent.
	if ctx.Err() != nil {
		return nil, countersign.NotApplied(fmt.Errorf("webhook execute: not sent: %w", context.Cause(ctx)))
	}
	resp, err := c.post(ctx, c.client, c.execute, body, map[string]string{"Idempotency-Key": req.OperationID})
	if err != nil {
		var se *sendError
		if errors.As(err, &se) && !se.sent {
			return nil, countersign.NotApplied(fmt.Errorf("webhook execute: not sent: %w", err))
		}
		return nil, fmt.Errorf("webhook execute: %w", err) // uncertain
	}
	switch {
	case resp.status >= 200 && resp.status < 300:
		var out struct {
			Receipt *string         `json:"receipt"`
			Result  json.RawMessage `json:"result"`
		}
		// The backend said it applied the change but the answer is
		// unusable: the change may well exist, so this is uncertain.
		if err := resp.decode(&out); err != nil {
			return nil, fmt.Errorf("webhook execute: HTTP %d, but %w", resp.status, err)
		}
		if out.Receipt == nil || *out.Receipt == "" {
			return nil, fmt.Errorf("webhook execute: HTTP %d, but the body has no receipt", resp.status)
		}
		rec := &countersign.Receipt{ID: *out.Receipt}
		if len(out.Result) > 0 && string(out.Result) != "null" {
			rec.Result = out.Result
		}
		return rec, nil
	case resp.status >= 400 && resp.status < 500:
		return nil, countersign.NotApplied(fmt.Errorf("webhook execute: %v", resp))
	}
	// 5xx, and 3xx: the redirect is not followed, and the backend that
	// answered with it may have acted before it did.
	return nil, fmt.Errorf("webhook execute: %v", resp)
}

func (c *caller) reconcileHook(ctx context.Context, req *countersign.ReconcileRequest) (*countersign.Reconciliation, error) {
	body, err := encode(reconcileBody{
		OperationID: req.OperationID, ProposalID: req.ProposalID, Action: req.Action,
		Tenant: req.Identity.Tenant, Actor: req.Identity.Actor,
	})
	if err != nil {
		return nil, fmt.Errorf("webhook reconcile: encode request: %w", err)
	}
	resp, err := c.post(ctx, c.client, c.reconcile, body, nil)
	if err != nil {
		return nil, fmt.Errorf("webhook reconcile: %w", err)
	}
	if resp.status != http.StatusOK {
		return nil, fmt.Errorf("webhook reconcile: %v", resp)
	}
	var out struct {
		Status  string          `json:"status"`
		Receipt string          `json:"receipt"`
		Result  json.RawMessage `json:"result"`
	}
	if err := resp.decode(&out); err != nil {
		return nil, fmt.Errorf("webhook reconcile: HTTP 200, but %w", err)
	}
	switch countersign.ReconcileStatus(out.Status) {
	case countersign.ReconcileApplied:
		if out.Receipt == "" {
			return nil, errors.New("webhook reconcile: status applied without a receipt")
		}
		r := &countersign.Reconciliation{Status: countersign.ReconcileApplied, Receipt: out.Receipt}
		if len(out.Result) > 0 && string(out.Result) != "null" {
			r.Result = out.Result
		}
		return r, nil
	case countersign.ReconcileNotApplied:
		return &countersign.Reconciliation{Status: countersign.ReconcileNotApplied}, nil
	case countersign.ReconcileUnknown:
		return &countersign.Reconciliation{Status: countersign.ReconcileUnknown}, nil
	}
	return nil, fmt.Errorf("webhook reconcile: status %q: want applied, not_applied or unknown", excerpt([]byte(out.Status), 64))
}
