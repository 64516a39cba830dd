package server

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/countersign/countersign/agui/event"
	"github.com/countersign/countersign/cstype"
	"github.com/countersign/countersign/store"
	"github.com/countersign/countersign/store/memstore"
)

// faultyStore fails the calls named in fail with err: errors shaped as the
// drivers' are, their words included.
type faultyStore struct {
	store.Store
	mu   sync.Mutex
	fail map[string]bool
	err  error
}

func (s *faultyStore) set(err error, calls ...string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.err, s.fail = err, map[string]bool{}
	for _, c := range calls {
		s.fail[c] = true
	}
}

func (s *faultyStore) fault(call string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.fail[call] {
		return s.err
	}
	return nil
}

func (s *faultyStore) PostMessage(ctx context.Context, p *store.PostMessageParams) (*store.PostMessageResult, error) {
	if err := s.fault("PostMessage"); err != nil {
		return nil, err
	}
	return s.Store.PostMessage(ctx, p)
}

func (s *faultyStore) GetThread(ctx context.Context, p *store.GetThreadParams) (*cstype.Thread, error) {
	if err := s.fault("GetThread"); err != nil {
		return nil, err
	}
	return s.Store.GetThread(ctx, p)
}

func (s *faultyStore) ListMessages(ctx context.Context, p *store.ListMessagesParams) ([]*cstype.Message, error) {
	if err := s.fault("ListMessages"); err != nil {
		return nil, err
	}
	return s.Store.ListMessages(ctx, p)
}

func (s *faultyStore) CreateProposal(ctx context.Context, p *store.CreateProposalParams) (*store.CreateProposalResult, error) {
	if err := s.fault("CreateProposal"); err != nil {
		return nil, err
	}
	return s.Store.CreateProposal(ctx, p)
}

func (s *faultyStore) Decide(ctx context.Context, p *store.DecideParams) (*store.DecideResult, error) {
	if err := s.fault("Decide"); err != nil {
		return nil, err
	}
	return s.Store.Decide(ctx, p)
}

// driverWords are what a driver's error says and no answer may: SQLite's
// and PostgreSQL's words, the store packages' names, a constraint's name, a
// network address.
var driverWords = []string{"sqlite", "pq:", "sqlstate", "constraint", "duplicate key", "pgstore", "messages_id_key",
	"dial tcp", "relation", "database is locked", "invalid byte sequence"}

// requireNoDriverWords fails when text carries any of driverWords.
func requireNoDriverWords(t *testing.T, what, text string) {
	t.Helper()
	lower := strings.ToLower(text)
	for _, w := range driverWords {
		if strings.Contains(lower, w) {
			t.Errorf("%s carries %q: %s", what, w, text)
		}
	}
}

// driverErrors are errors as the stores return them: refused as invalid
// (cstype.ErrInvalidParams, with the driver's words), unreachable
// (cstype.ErrUnavailable), and anything else.
var driverErrors = map[string]error{
	"pg unique": fmt.Errorf("pgstore: post message: %w: messages_id_key exists: %w", cstype.ErrInvalidParams,
		errors.New(`ERROR: duplicate key value violates unique constraint "messages_id_key" (SQLSTATE 23505)`)),
	"sqlite unique": fmt.Errorf("sqlitestore: create: %w: %s", cstype.ErrInvalidParams,
		"constraint failed: UNIQUE constraint failed: messages.id (2067)"),
	"pg encoding": fmt.Errorf("pgstore: post message: %w: %w", cstype.ErrInvalidParams,
		errors.New(`ERROR: invalid byte sequence for encoding "UTF8": 0x00 (SQLSTATE 22021)`)),
	"pg internal": fmt.Errorf("pgstore: get thread: %w", errors.New(`pq: relation "cs_test.threads" does not exist (SQLSTATE 42P01)`)),
	"sqlite busy": fmt.Errorf("sqlitestore: list messages: %w", errors.New("sqlite: database is locked (5) (SQLITE_BUSY)")),
	"unavailable": store.Unavailable(fmt.Errorf("pgstore: %w", errors.New("dial tcp 127.0.0.1:5432: connect: connection refused (SQLSTATE 08006)"))),
}

// TestNoDriverTextInErrors feeds the stores' errors, each carrying its
// driver's words, through the HTTP routes and the AG-UI endpoint that
// reach the store on the conversation's paths: every answer is an error
// with a fixed text for what came from below (503 UNAVAILABLE for a store
// out of reach), and none carries a driver's words.
func TestNoDriverTextInErrors(t *testing.T) {
	t.Parallel()
	fs := &faultyStore{Store: memstore.New(nil)}
	h := aguiHarnessOn(t, "mem", harnessOptions{store: fs})
	// Before any fault: a pending proposal in alice's thread, and a run
	// parked on its interrupt.
	pending := h.pending("call_fault", "c_fault")
	in := h.interrupted("t_int", "refund 40 EUR to c_int")

	type surface struct {
		calls []string // the store calls that fail
		http  *req     // an HTTP request, or
		agui  map[string]any
	}
	surfaces := map[string]surface{
		"POST message, posting":       {calls: []string{"PostMessage"}, http: &req{method: "POST", path: "/v1/threads/t_new/messages", token: "alice", body: say("hello")}},
		"POST message, thread":        {calls: []string{"GetThread"}, http: &req{method: "POST", path: "/v1/threads/t1/messages", token: "alice", body: map[string]any{"id": "m_x", "text": "hello"}}},
		"POST message, text decision": {calls: []string{"Decide"}, http: &req{method: "POST", path: "/v1/threads/t1/messages", token: "alice", body: say("yes #" + pending)}},
		"POST message, decision's id": {calls: []string{"ListMessages"}, http: &req{method: "POST", path: "/v1/threads/t1/messages", token: "alice", body: map[string]any{"id": "m_y", "text": "yes #" + pending}}},
		"GET thread":                  {calls: []string{"ListMessages"}, http: &req{method: "GET", path: "/v1/threads/t1", token: "alice"}},
		"POST call":                   {calls: []string{"CreateProposal"}, http: &req{method: "POST", path: "/v1/calls", token: "alice", body: refund("call_new", "c_new", 5)}},
		"POST approve":                {calls: []string{"Decide"}, http: &req{method: "POST", path: "/v1/proposals/" + pending + "/approve", token: "alice", body: map[string]any{}}},
		"AG-UI input, posting":        {calls: []string{"PostMessage"}, agui: userInput("t_agui", "r1", "m1", "hello")},
		"AG-UI input, thread":         {calls: []string{"GetThread"}, agui: userInput("t1", "r1", "m1", "hello")},
		"AG-UI input, history":        {calls: []string{"ListMessages"}, agui: userInput("t1", "r1", "m1", "hello")},
		"AG-UI text decision":         {calls: []string{"Decide"}, agui: userInput("t1", "r1", "m_dec", "yes #"+pending)},
		"AG-UI resume":                {calls: []string{"Decide"}, agui: resumeInput("t_int", "r2", approved(in.ID))},
	}
	for ename, err := range driverErrors {
		for sname, sf := range surfaces {
			fs.set(err, sf.calls...)
			what := sname + " with " + ename
			if sf.http != nil {
				resp := h.do(*sf.http)
				if resp.status < 400 {
					t.Errorf("%s: %d %s, want an error", what, resp.status, resp.body)
				}
				if errors.Is(err, cstype.ErrUnavailable) && resp.status != 503 {
					t.Errorf("%s: %d %s, want 503", what, resp.status, resp.body)
				}
				requireNoDriverWords(t, what, string(resp.body))
				continue
			}
			evs := h.runAGUI("alice", sf.agui)
			e, ok := evs[len(evs)-1].(*event.RunError)
			if !ok {
				t.Errorf("%s: %s, want a RUN_ERROR", what, types(evs))
				continue
			}
			if errors.Is(err, cstype.ErrUnavailable) && e.Code != CodeUnavailable {
				t.Errorf("%s: RUN_ERROR %s, want %s", what, e.Code, CodeUnavailable)
			}
			requireNoDriverWords(t, what, e.Code+" "+e.Message)
		}
	}
	fs.set(nil)
	if p := h.must(200, req{method: "GET", path: "/v1/proposals/" + pending, token: "alice"}).json(t); p["status"] != "pending" {
		t.Errorf("the proposal after the faults is %v, want pending", p["status"])
	}
}

// TestNoDriverTextFromRealStores: values a store's database cannot hold
// (a NUL in text, which PostgreSQL's text and jsonb refuse) are refused
// with the server's words on every store, never the driver's.
func TestNoDriverTextFromRealStores(t *testing.T) {
	t.Parallel()
	for _, kind := range allStoreKinds {
		t.Run(kind, func(t *testing.T) {
			t.Parallel()
			h := aguiHarnessOn(t, kind, harnessOptions{})
			resp := h.do(req{method: "POST", path: "/v1/threads/t1/messages", token: "alice", body: say("a\u0000b")})
			if e, _ := resp.json(t)["error"].(map[string]any); resp.status != 400 || e["code"] != CodeInvalidBody || !strings.HasPrefix(e["message"].(string), "text") {
				t.Errorf("a NUL in a message: %d %s, want 400 INVALID_BODY naming text", resp.status, resp.body)
			}
			requireNoDriverWords(t, "a NUL in a message", string(resp.body))
			evs := h.runAGUI("alice", userInput("t2", "r1", "m1", "a\u0000b"))
			if e := lastRunError(t, evs); e.Code != CodeInvalidInput {
				t.Errorf("a NUL over AG-UI: RUN_ERROR %s %q, want %s", e.Code, e.Message, CodeInvalidInput)
			} else {
				requireNoDriverWords(t, "a NUL over AG-UI", e.Message)
			}
			// A call whose input holds a NUL: stored where the store can
			// hold it, refused in the server's words where it cannot.
			resp = h.do(req{method: "POST", path: "/v1/calls", token: "alice", body: refund("call_nul", "c\u0000nul", 5)})
			if resp.status != 200 && resp.status != 400 {
				t.Errorf("a NUL in a call's input: %d %s, want 200 or 400", resp.status, resp.body)
			}
			requireNoDriverWords(t, "a NUL in a call's input", string(resp.body))
		})
	}
}
