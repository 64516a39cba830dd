package chaos

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	_ "modernc.org/sqlite" // the ledger's driver

	"github.com/countersign/countersign/webhook"
)

// The webhook actions the cluster runs, all executed by the backend.
const (
	// actTransfer is not idempotent and can be reconciled: an uncertain
	// execute is settled by asking the backend's ledger.
	actTransfer = "chaos.transfer"
	// actNotify is not idempotent and cannot be reconciled: an uncertain
	// execute ends unknown.
	actNotify = "chaos.notify"
	// actTag is idempotent: an uncertain execute is sent again with the same
	// operation id, which the backend applies once and answers again.
	actTag = "chaos.tag"
)

var actions = []string{actTransfer, actNotify, actTag}

func idempotent(action string) bool { return action == actTag }

// backendDelay bounds each of the two pauses of an execute, before and after
// its effect, so that a fault lands in the middle of some executes: before
// the effect (not applied), or after it and before the answer (applied,
// the worker does not know).
const backendDelay = 250 * time.Millisecond

// execution is the ledger's record of one applied operation.
type execution struct {
	op, proposal, action, receipt string
	attempt                       int
}

// backend is the signed test backend of the webhook actions: a real HTTP
// server that checks every request's signature, applies each operation once
// (its ledger, a SQLite file, has a unique key on the operation id) and
// answers reconcile from what it applied.
type backend struct {
	t      *testing.T
	secret []byte
	db     *sql.DB
	url    string

	// mu orders the decisions about one operation: an execute's effect,
	// and a reconcile's answer.
	mu       sync.Mutex
	inflight map[string]int // operation id → executes received, effect not yet decided
	// fenced holds the operations reconcile answered not_applied: a later
	// execute of one is refused, so that the answer stays true (a worker
	// stopped after its last lease check, resumed after the new holder
	// reconciled, would send one).
	fenced map[string]bool

	// Counts of what the backend was asked and answered.
	executes, applied, replays, doubles, cancelled, late atomic.Int64
	reconciles, reconcileApplied, reconcileNot           atomic.Int64
	reconcileUnknown, badSignatures, badRequests         atomic.Int64
}

func newBackend(t *testing.T, secret []byte) *backend {
	t.Helper()
	path := filepath.Join(t.TempDir(), "backend-ledger.db")
	// synchronous(FULL): an applied operation is on disk before it is answered.
	db, err := sql.Open("sqlite", "file:"+path+"?_pragma=busy_timeout(30000)&_pragma=journal_mode(WAL)&_pragma=synchronous(FULL)&_txlock=immediate")
	if err != nil {
		t.Fatal(err)
	}
	db.SetMaxOpenConns(1)
	for _, q := range []string{
		`CREATE TABLE executions (operation_id TEXT PRIMARY KEY, proposal_id TEXT NOT NULL, action TEXT NOT NULL, attempt INTEGER NOT NULL, receipt TEXT NOT NULL)`,
		// Every execute received for an operation already applied: a replay of
		// an idempotent action, a double execution of any other.
		`CREATE TABLE repeats (operation_id TEXT NOT NULL, proposal_id TEXT NOT NULL, action TEXT NOT NULL, attempt INTEGER NOT NULL)`,
	} {
		if _, err := db.Exec(q); err != nil {
			t.Fatal(err)
		}
	}
	b := &backend{t: t, secret: secret, db: db, inflight: map[string]int{}, fenced: map[string]bool{}}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /execute", b.execute)
	mux.HandleFunc("POST /reconcile", b.reconcile)
	srv := httptest.NewServer(mux)
	b.url = srv.URL
	t.Cleanup(func() {
		srv.Close()
		_ = db.Close()
	})
	return b
}

// read reads and verifies a signed request body into v.
func (b *backend) read(w http.ResponseWriter, r *http.Request, v any) bool {
	body, err := io.ReadAll(io.LimitReader(r.Body, 1<<20))
	if err != nil {
		return false // the sender went away mid-request
	}
	if err := webhook.Verify(b.secret, r.Header.Get(webhook.SignatureHeader), body, time.Now(), time.Minute); err != nil {
		b.badSignatures.Add(1)
		b.t.Errorf("%s: %v", r.URL.Path, err)
		http.Error(w, `{"error":"bad signature"}`, http.StatusUnauthorized)
		return false
	}
	if err := json.Unmarshal(body, v); err != nil {
		b.badRequests.Add(1)
		b.t.Errorf("%s: body %s: %v", r.URL.Path, body, err)
		http.Error(w, `{"error":"bad body"}`, http.StatusBadRequest)
		return false
	}
	return true
}

func pause(ctx context.Context) error {
	select {
	case <-time.After(rand.N(backendDelay)):
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (b *backend) execute(w http.ResponseWriter, r *http.Request) {
	var req struct {
		OperationID string `json:"operation_id"`
		ProposalID  string `json:"proposal_id"`
		Action      string `json:"action"`
		Attempt     int    `json:"attempt"`
		Tenant      string `json:"tenant"`
		Actor       string `json:"actor"`
	}
	if !b.read(w, r, &req) {
		return
	}
	if req.OperationID == "" || r.Header.Get("Idempotency-Key") != req.OperationID || req.Tenant != tenant || req.Actor != agentActor {
		b.badRequests.Add(1)
		b.t.Errorf("execute %+v with Idempotency-Key %q", req, r.Header.Get("Idempotency-Key"))
		http.Error(w, `{"error":"bad execute"}`, http.StatusBadRequest)
		return
	}
	b.executes.Add(1)
	// While the effect is undecided, reconcile answers unknown: it cannot
	// yet say whether this operation is applied.
	b.mu.Lock()
	b.inflight[req.OperationID]++
	b.mu.Unlock()
	receipt, err := b.apply(r.Context(), req.OperationID, req.ProposalID, req.Action, req.Attempt)
	b.mu.Lock()
	if b.inflight[req.OperationID]--; b.inflight[req.OperationID] == 0 {
		delete(b.inflight, req.OperationID)
	}
	b.mu.Unlock()
	if errors.Is(err, errFenced) {
		// A definite failure: the engine records the execute as not applied.
		b.late.Add(1)
		http.Error(w, `{"error":"the operation was reconciled as not applied"}`, http.StatusConflict)
		return
	}
	if err != nil {
		// The sender gave up before the effect (a killed or partitioned
		// worker, a lost lease): nothing is applied, and nobody reads the
		// answer.
		b.cancelled.Add(1)
		http.Error(w, `{"error":"cancelled"}`, http.StatusServiceUnavailable)
		return
	}
	if pause(r.Context()) != nil {
		return // applied; the sender will not hear it
	}
	w.Header().Set("Content-Type", "application/json")
	fmt.Fprintf(w, `{"receipt":%q,"result":{"operation":%q}}`, receipt, req.OperationID)
}

// errFenced refuses the execute of an operation reconciled as not applied.
var errFenced = errors.New("fenced")

// apply applies an operation once: the first execute of an operation id
// records it; a later one is recorded as a repeat and answered with the
// first one's receipt. An operation reconciled as not applied is refused.
func (b *backend) apply(ctx context.Context, op, proposal, action string, attempt int) (string, error) {
	if err := pause(ctx); err != nil {
		return "", err
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.fenced[op] {
		return "", errFenced
	}
	receipt := "rc_" + op
	res, err := b.db.Exec(`INSERT INTO executions VALUES (?, ?, ?, ?, ?) ON CONFLICT DO NOTHING`, op, proposal, action, attempt, receipt)
	if err != nil {
		b.t.Errorf("ledger: %v", err)
		return "", err
	}
	if n, _ := res.RowsAffected(); n == 1 {
		b.applied.Add(1)
		return receipt, nil
	}
	if idempotent(action) {
		b.replays.Add(1)
	} else {
		b.doubles.Add(1)
	}
	if _, err := b.db.Exec(`INSERT INTO repeats VALUES (?, ?, ?, ?)`, op, proposal, action, attempt); err != nil {
		b.t.Errorf("ledger: %v", err)
	}
	return receipt, nil
}

func (b *backend) reconcile(w http.ResponseWriter, r *http.Request) {
	var req struct {
		OperationID string `json:"operation_id"`
		ProposalID  string `json:"proposal_id"`
		Action      string `json:"action"`
	}
	if !b.read(w, r, &req) {
		return
	}
	b.reconciles.Add(1)
	b.mu.Lock()
	defer b.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	if b.inflight[req.OperationID] > 0 {
		b.reconcileUnknown.Add(1)
		fmt.Fprint(w, `{"status":"unknown"}`)
		return
	}
	var receipt string
	switch err := b.db.QueryRow(`SELECT receipt FROM executions WHERE operation_id = ?`, req.OperationID).Scan(&receipt); err {
	case nil:
		b.reconcileApplied.Add(1)
		fmt.Fprintf(w, `{"status":"applied","receipt":%q}`, receipt)
	case sql.ErrNoRows:
		b.reconcileNot.Add(1)
		b.fenced[req.OperationID] = true
		fmt.Fprint(w, `{"status":"not_applied"}`)
	default:
		b.t.Errorf("ledger: %v", err)
		http.Error(w, `{"error":"ledger"}`, http.StatusInternalServerError)
	}
}

// ledger returns every applied operation, by operation id, and the number of
// repeated executes of non-idempotent actions (double executions) and of
// idempotent ones (replays, which the backend applied once).
func (b *backend) ledger(t *testing.T) (map[string]execution, int, int) {
	t.Helper()
	rows, err := b.db.Query(`SELECT operation_id, proposal_id, action, attempt, receipt FROM executions`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	out := map[string]execution{}
	for rows.Next() {
		var e execution
		if err := rows.Scan(&e.op, &e.proposal, &e.action, &e.attempt, &e.receipt); err != nil {
			t.Fatal(err)
		}
		out[e.op] = e
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	var doubles, replays int
	if err := b.db.QueryRow(`SELECT count(*) FROM repeats WHERE action != ?`, actTag).Scan(&doubles); err != nil {
		t.Fatal(err)
	}
	if err := b.db.QueryRow(`SELECT count(*) FROM repeats WHERE action = ?`, actTag).Scan(&replays); err != nil {
		t.Fatal(err)
	}
	return out, doubles, replays
}
