// Package crash proves the worker's guarantees with real operating-system
// processes: several workers share one store, and the test kills them with
// SIGKILL at random, or between an action's side effect and its settlement.
//
// The test binary re-executes itself as a worker when CS_CRASH_ROLE=worker
// (see TestMain). Each worker runs a no-op action that records its operation
// id in a ledger table with a unique key; a second execution of the same
// operation would hit that key and is recorded as a violation.
package crash

import (
	"bufio"
	"context"
	"database/sql"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/countersign/countersign"
	"github.com/countersign/countersign/internal/pgtest"
	"github.com/countersign/countersign/internal/servetest"
	"github.com/countersign/countersign/internal/workload"
	"github.com/countersign/countersign/store"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	_ "modernc.org/sqlite" // the ledger's driver
)

// Environment of a worker process.
const (
	envRole      = "CS_CRASH_ROLE"      // "worker" or "caller" (caller_test.go) in a child
	envStore     = "CS_CRASH_STORE"     // "sqlite:<path>"
	envLedger    = "CS_CRASH_LEDGER"    // the ledger's SQLite path
	envAction    = "CS_CRASH_ACTION"    // noop | hang-after-effect
	envReconcile = "CS_CRASH_RECONCILE" // "1": the action has Reconcile
	envDelay     = "CS_CRASH_DELAY"     // how long each execution takes
)

const (
	tenant = workload.Tenant
	// lease is long enough that a busy machine's renewals keep up (a lapsed
	// lease turns an execution uncertain); recovery after a kill waits it out.
	lease       = 5 * time.Second
	pollTick    = 50 * time.Millisecond
	concurrency = 32 // executions in flight per worker process
)

func TestMain(m *testing.M) {
	switch os.Getenv(envRole) {
	case "worker":
		os.Exit(workerMain())
	case "caller":
		os.Exit(callerMain())
	}
	os.Exit(m.Run())
}

// workerMain is a worker process: it runs until SIGTERM (or SIGKILL).
func workerMain() int {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	st, err := workload.OpenStore(ctx, os.Getenv(envStore))
	if err != nil {
		fmt.Fprintln(os.Stderr, "open store:", err)
		return 2
	}
	defer st.Close()
	led, err := openLedger(os.Getenv(envLedger))
	if err != nil {
		fmt.Fprintln(os.Stderr, "open ledger:", err)
		return 2
	}
	defer led.Close()

	hang := os.Getenv(envAction) == "hang-after-effect"
	// freeze-before-execute and freeze-during-execute announce a moment
	// (FREEZE <id>) and pause there for the test to SIGSTOP the process:
	// after the checks that precede Execute, or after Execute's side effect
	// and before it returns (frozen_test.go).
	freezeBefore := os.Getenv(envAction) == "freeze-before-execute"
	freezeDuring := os.Getenv(envAction) == "freeze-during-execute"
	delay, _ := time.ParseDuration(os.Getenv(envDelay))
	spec := countersign.RawActionSpec{Name: "noop", Hooks: countersign.Hooks{
		Preflight: func(_ context.Context, req *countersign.PreflightRequest) (*countersign.Preflight, error) {
			if freezeBefore {
				fmt.Printf("FREEZE %s\n", req.ProposalID)
				time.Sleep(freezePause) // stopped in here
			}
			return &countersign.Preflight{Verdict: countersign.PreflightReady}, nil
		},
		Execute: func(ctx context.Context, req *countersign.ExecuteRequest) (*countersign.Receipt, error) {
			if err := led.record(ctx, req.OperationID, req.ProposalID); err != nil {
				return nil, err
			}
			if freezeDuring {
				fmt.Printf("FREEZE %s\n", req.ProposalID)
				time.Sleep(freezePause) // stopped in here
			}
			time.Sleep(delay)
			if hang {
				// The side effect is done; announce it and never settle.
				fmt.Printf("EFFECT %s\n", req.ProposalID)
				select {} // until the test kills this process

			}
			return &countersign.Receipt{ID: "rc_" + req.OperationID}, nil
		},
	}}
	if os.Getenv(envReconcile) == "1" {
		spec.Hooks.Reconcile = func(ctx context.Context, req *countersign.ReconcileRequest) (*countersign.Reconciliation, error) {
			ok, err := led.has(ctx, req.OperationID)
			switch {
			case err != nil:
				return nil, err
			case ok:
				return &countersign.Reconciliation{Status: countersign.ReconcileApplied, Receipt: "rc_" + req.OperationID}, nil
			default:
				return &countersign.Reconciliation{Status: countersign.ReconcileNotApplied}, nil
			}
		}
	}
	action, err := countersign.NewRawAction(spec)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	e, err := countersign.New(countersign.Options{Store: st, Actions: []*countersign.Action{action}, LeaseDuration: lease})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	w, err := e.NewWorker(countersign.WorkerOptions{PollInterval: pollTick, LeaseDuration: lease, MaxConcurrency: concurrency, ShutdownTimeout: 5 * time.Second})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	fmt.Println("READY")
	if err := w.Run(ctx); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return 0
}

// ledger records executions; its unique key turns a double execution into a
// recorded violation instead of a silent overwrite. It lives next to the
// store under test (a SQLite file beside it, a table in the PostgreSQL
// schema) but is the test's witness, not part of the system under test.
type ledger interface {
	record(ctx context.Context, op, proposal string) error
	has(ctx context.Context, op string) (bool, error)
	counts(ctx context.Context) (executions, violations int, err error)
	Close() error
}

func openLedger(spec string) (ledger, error) {
	kind, target, _ := strings.Cut(spec, ":")
	switch kind {
	case "sqlite":
		return openSQLiteLedger(target)
	case "postgres":
		return openPGLedger(target)
	}
	return nil, fmt.Errorf("unknown ledger %q", spec)
}

type sqliteLedger struct{ db *sql.DB }

func openSQLiteLedger(path string) (*sqliteLedger, error) {
	// It may skip fsync: a killed process loses nothing the kernel has.
	db, err := sql.Open("sqlite", "file:"+path+"?_pragma=busy_timeout(30000)&_pragma=journal_mode(WAL)&_pragma=synchronous(OFF)&_txlock=immediate")
	if err != nil {
		return nil, err
	}
	db.SetMaxOpenConns(1)
	for _, q := range []string{
		`CREATE TABLE IF NOT EXISTS executions (operation_id TEXT PRIMARY KEY, proposal_id TEXT NOT NULL, pid INTEGER NOT NULL)`,
		`CREATE TABLE IF NOT EXISTS violations (operation_id TEXT NOT NULL, proposal_id TEXT NOT NULL, pid INTEGER NOT NULL)`,
	} {
		if _, err := db.Exec(q); err != nil {
			db.Close()
			return nil, err
		}
	}
	return &sqliteLedger{db: db}, nil
}

func (l *sqliteLedger) record(ctx context.Context, op, proposal string) error {
	res, err := l.db.ExecContext(ctx, `INSERT INTO executions VALUES (?, ?, ?) ON CONFLICT DO NOTHING`, op, proposal, os.Getpid())
	if err != nil {
		return err
	}
	if n, _ := res.RowsAffected(); n == 0 {
		_, err = l.db.ExecContext(ctx, `INSERT INTO violations VALUES (?, ?, ?)`, op, proposal, os.Getpid())
	}
	return err
}

func (l *sqliteLedger) has(ctx context.Context, op string) (bool, error) {
	var n int
	err := l.db.QueryRowContext(ctx, `SELECT count(*) FROM executions WHERE operation_id = ?`, op).Scan(&n)
	return n > 0, err
}

func (l *sqliteLedger) counts(ctx context.Context) (executions, violations int, err error) {
	if err = l.db.QueryRowContext(ctx, `SELECT count(*) FROM executions`).Scan(&executions); err != nil {
		return 0, 0, err
	}
	err = l.db.QueryRowContext(ctx, `SELECT count(*) FROM violations`).Scan(&violations)
	return executions, violations, err
}

func (l *sqliteLedger) Close() error { return l.db.Close() }

type pgLedger struct {
	pool   *pgxpool.Pool
	schema string
}

func openPGLedger(schema string) (*pgLedger, error) {
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, pgtest.DSN())
	if err != nil {
		return nil, err
	}
	l := &pgLedger{pool: pool, schema: pgx.Identifier{schema}.Sanitize()}
	for _, q := range []string{
		`CREATE TABLE IF NOT EXISTS ` + l.schema + `.executions (operation_id text PRIMARY KEY, proposal_id text NOT NULL, pid int NOT NULL)`,
		`CREATE TABLE IF NOT EXISTS ` + l.schema + `.violations (operation_id text NOT NULL, proposal_id text NOT NULL, pid int NOT NULL)`,
	} {
		if _, err := pool.Exec(ctx, q); err != nil {
			pool.Close()
			return nil, err
		}
	}
	return l, nil
}

func (l *pgLedger) record(ctx context.Context, op, proposal string) error {
	tag, err := l.pool.Exec(ctx, `INSERT INTO `+l.schema+`.executions VALUES ($1, $2, $3) ON CONFLICT DO NOTHING`, op, proposal, os.Getpid())
	if err != nil {
		return err
	}
	if tag.RowsAffected() == 0 {
		_, err = l.pool.Exec(ctx, `INSERT INTO `+l.schema+`.violations VALUES ($1, $2, $3)`, op, proposal, os.Getpid())
	}
	return err
}

func (l *pgLedger) has(ctx context.Context, op string) (bool, error) {
	var n int
	err := l.pool.QueryRow(ctx, `SELECT count(*) FROM `+l.schema+`.executions WHERE operation_id = $1`, op).Scan(&n)
	return n > 0, err
}

func (l *pgLedger) counts(ctx context.Context) (executions, violations int, err error) {
	if err = l.pool.QueryRow(ctx, `SELECT count(*) FROM `+l.schema+`.executions`).Scan(&executions); err != nil {
		return 0, 0, err
	}
	err = l.pool.QueryRow(ctx, `SELECT count(*) FROM `+l.schema+`.violations`).Scan(&violations)
	return executions, violations, err
}

func (l *pgLedger) Close() error { l.pool.Close(); return nil }

// cluster runs worker processes against one store.
type cluster struct {
	t       *testing.T
	env     []string
	mu      sync.Mutex
	procs   []*exec.Cmd
	effects chan string // proposal ids whose side effect a worker announced
}

func newCluster(t *testing.T, storeSpec, ledgerPath string, extra ...string) *cluster {
	c := &cluster{t: t, effects: make(chan string, 1024),
		env: append(append(os.Environ(), envRole+"=worker", envStore+"="+storeSpec, envLedger+"="+ledgerPath), extra...)}
	t.Cleanup(c.stopAll)
	return c
}

// start launches worker i and waits for it to be ready.
func (c *cluster) start(i int) {
	c.t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = c.env
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		c.t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		c.t.Fatal(err)
	}
	ready := make(chan struct{})
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			line := sc.Text()
			switch {
			case line == "READY":
				close(ready)
			case strings.HasPrefix(line, "EFFECT "):
				c.effects <- strings.TrimPrefix(line, "EFFECT ")
			case strings.HasPrefix(line, "FREEZE "):
				c.effects <- strings.TrimPrefix(line, "FREEZE ")
			}
		}
		_, _ = io.Copy(io.Discard, out)
	}()
	select {
	case <-ready:
	case <-time.After(60 * time.Second):
		_ = cmd.Process.Kill()
		c.t.Fatal("worker did not start")
	}
	c.mu.Lock()
	for len(c.procs) <= i {
		c.procs = append(c.procs, nil)
	}
	c.procs[i] = cmd
	c.mu.Unlock()
}

// kill sends SIGKILL to worker i and reaps it.
func (c *cluster) kill(i int) {
	c.mu.Lock()
	cmd := c.procs[i]
	c.procs[i] = nil
	c.mu.Unlock()
	if cmd == nil {
		return
	}
	_ = cmd.Process.Signal(syscall.SIGKILL)
	_ = cmd.Wait()
}

// signal sends sig to worker i.
func (c *cluster) signal(i int, sig syscall.Signal) {
	c.mu.Lock()
	cmd := c.procs[i]
	c.mu.Unlock()
	if cmd != nil {
		_ = cmd.Process.Signal(sig)
	}
}

// freeze stops worker i with SIGSTOP and returns once it has stopped.
func (c *cluster) freeze(i int) {
	c.mu.Lock()
	cmd := c.procs[i]
	c.mu.Unlock()
	if cmd != nil {
		servetest.Stop(cmd.Process)
	}
}

// stopAll stops every worker gracefully (SIGTERM), killing stragglers.
func (c *cluster) stopAll() {
	c.mu.Lock()
	procs := c.procs
	c.procs = nil
	c.mu.Unlock()
	for _, cmd := range procs {
		if cmd != nil {
			_ = cmd.Process.Signal(syscall.SIGCONT) // a frozen one hears SIGTERM only then
			_ = cmd.Process.Signal(syscall.SIGTERM)
		}
	}
	for _, cmd := range procs {
		if cmd == nil {
			continue
		}
		done := make(chan struct{})
		go func() { _ = cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(15 * time.Second):
			_ = cmd.Process.Kill()
			<-done
		}
	}
}

// seed stores n approved independent proposals of the noop action.
func seed(t *testing.T, st store.Store, n int) []string {
	t.Helper()
	ids, err := workload.SeedApproved(context.Background(), st, "noop", "crash", n)
	if err != nil {
		t.Fatal(err)
	}
	return ids
}

// tally counts proposals by status.
func tally(t *testing.T, st store.Store) map[store.Status]int {
	t.Helper()
	out, err := workload.Tally(context.Background(), st)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

type backend struct {
	name       string
	storeSpec  string
	ledgerSpec string
	open       func(t *testing.T) store.Store
	// writeLocked, for SQLite, reports whether some process holds the
	// database's write lock (frozen_test.go); nil for PostgreSQL.
	writeLocked func(t *testing.T) bool
}

func sqliteBackend(t *testing.T) backend {
	dir := t.TempDir()
	spec := "sqlite:" + filepath.Join(dir, "countersign.db")
	return backend{name: "sqlite", storeSpec: spec, ledgerSpec: "sqlite:" + filepath.Join(dir, "ledger.db"), open: func(t *testing.T) store.Store {
		st, err := workload.OpenStore(context.Background(), spec)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = st.Close() })
		return st
	}, writeLocked: func(*testing.T) bool {
		return servetest.SQLiteWriteLocked(filepath.Join(dir, "countersign.db"))
	}}
}

// pgBackend gives the test its own schema, dropped at the end.
func pgBackend(t *testing.T) backend {
	_, schema := pgtest.NewSchema(t)
	spec := "postgres:" + schema
	return backend{name: "postgres", storeSpec: spec, ledgerSpec: spec, open: func(t *testing.T) store.Store {
		st, err := workload.OpenStore(context.Background(), spec)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = st.Close() })
		return st
	}}
}

func proposals(t *testing.T) int {
	if testing.Short() {
		return 1000
	}
	if v, err := strconv.Atoi(os.Getenv("CS_CRASH_PROPOSALS")); err == nil && v > 0 {
		return v
	}
	return 10000
}

func waitSettled(t *testing.T, st store.Store, limit time.Duration, during func()) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), limit)
	defer cancel()
	if err := workload.WaitDrained(ctx, st, 100*time.Millisecond, during); err != nil {
		t.Fatalf("%v: %v", err, tally(t, st))
	}
}

// waitTerminal polls until proposal id reaches a terminal status and
// returns it. Drained is not enough where a lease lapsed during Execute: the
// proposal is reconciling first, and the new holder settles it a moment
// later.
func waitTerminal(t *testing.T, st store.Store, id string, limit time.Duration) *store.Proposal {
	t.Helper()
	for deadline := time.Now().Add(limit); ; time.Sleep(100 * time.Millisecond) {
		p, err := st.GetProposal(context.Background(), &store.GetProposalParams{Tenant: tenant, ID: id})
		if err != nil {
			t.Fatal(err)
		}
		if p.Status.Terminal() {
			return p
		}
		if time.Now().After(deadline) {
			t.Fatalf("proposal %s never settled: still %s", id, p.Status)
		}
	}
}

func newLedger(t *testing.T, b backend) (ledger, string) {
	l, err := openLedger(b.ledgerSpec)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = l.Close() })
	return l, b.ledgerSpec
}

func ledgerCounts(t *testing.T, l ledger) (executions, violations int) {
	t.Helper()
	executions, violations, err := l.counts(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return executions, violations
}

// testDrain is scenario (a): 4 workers drain n proposals; every one succeeds
// exactly once.
func testDrain(t *testing.T, b backend) {
	st := b.open(t)
	n := proposals(t)
	seed(t, st, n)
	led, ledPath := newLedger(t, b)
	c := newCluster(t, b.storeSpec, ledPath)
	start := time.Now()
	for i := range 4 {
		c.start(i)
	}
	waitSettled(t, st, 10*time.Minute, nil)
	t.Logf("%s: 4 processes drained %d proposals in %v", b.name, n, time.Since(start).Round(time.Millisecond))
	c.stopAll()
	counts := tally(t, st)
	executions, violations := ledgerCounts(t, led)
	if counts[store.StatusSucceeded] != n || executions != n || violations != 0 {
		t.Fatalf("statuses %v, ledger %d rows, %d violations; want %d succeeded, %d rows, 0 violations", counts, executions, violations, n, n)
	}
}

// testKillEverySecond is scenario (b): the same, while a random worker is
// killed with SIGKILL every second and restarted. A non-idempotent action
// caught mid-execution ends unknown; nothing executes twice.
func testKillEverySecond(t *testing.T, b backend) {
	st := b.open(t)
	n := proposals(t)
	seed(t, st, n)
	led, ledPath := newLedger(t, b)
	// Executions take long enough that the drain lasts about ten seconds, so
	// that kills land mid-execution.
	delay := 10 * time.Second * time.Duration(4*concurrency) / time.Duration(n)
	c := newCluster(t, b.storeSpec, ledPath, envDelay+"="+delay.String())
	for i := range 4 {
		c.start(i)
	}
	kills := 0
	last := time.Now()
	waitSettled(t, st, 15*time.Minute, func() {
		if time.Since(last) < time.Second {
			return
		}
		i := rand.IntN(4)
		c.kill(i)
		c.start(i)
		kills++
		last = time.Now()
	})
	c.stopAll()
	counts := tally(t, st)
	executions, violations := ledgerCounts(t, led)
	t.Logf("%s: %d kills; statuses %v; ledger %d rows", b.name, kills, counts, executions)
	if violations != 0 {
		t.Fatalf("%d double executions", violations)
	}
	other := n - counts[store.StatusSucceeded] - counts[store.StatusUnknown] - counts[store.StatusReconciling]
	if other != 0 || kills == 0 {
		t.Fatalf("statuses %v after %d kills: want only succeeded, unknown or reconciling", counts, kills)
	}
	// Every succeeded proposal executed; an unknown one at most once.
	if executions < counts[store.StatusSucceeded] || executions > n {
		t.Fatalf("ledger %d rows for %d succeeded of %d", executions, counts[store.StatusSucceeded], n)
	}
}

// testKillAfterEffect is scenario (c): a worker is killed after Execute's side
// effect and before settlement; the proposal goes to reconciling and Reconcile
// settles it, with no second Execute.
func testKillAfterEffect(t *testing.T, b backend) {
	st := b.open(t)
	ids := seed(t, st, 1)
	led, ledPath := newLedger(t, b)
	hanging := newCluster(t, b.storeSpec, ledPath, envAction+"=hang-after-effect", envReconcile+"=1")
	hanging.start(0)
	select {
	case id := <-hanging.effects:
		if id != ids[0] {
			t.Fatalf("effect for %s, want %s", id, ids[0])
		}
	case <-time.After(60 * time.Second):
		t.Fatal("the worker never executed")
	}
	hanging.kill(0)
	p, err := st.GetProposal(context.Background(), &store.GetProposalParams{Tenant: tenant, ID: ids[0]})
	if err != nil || p.Status != store.StatusExecuting {
		t.Fatalf("after the kill: %v, %v; want executing", p, err)
	}
	healthy := newCluster(t, b.storeSpec, ledPath, envReconcile+"=1")
	healthy.start(0)
	p = waitTerminal(t, st, ids[0], 2*time.Minute)
	healthy.stopAll()
	executions, violations := ledgerCounts(t, led)
	if p.Status != store.StatusSucceeded || executions != 1 || violations != 0 {
		t.Fatalf("status %s, ledger %d rows, %d violations; want succeeded by reconciliation, 1, 0", p.Status, executions, violations)
	}
	var sawReconciling bool
	events, err := st.ListEvents(context.Background(), &store.ListEventsParams{Tenant: tenant, ProposalID: p.ID})
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range events {
		if e.Type == store.EventSettled && e.Status == store.StatusReconciling {
			sawReconciling = true
		}
	}
	if !sawReconciling || p.Outcome.Receipt != "rc_"+p.OperationID {
		t.Fatalf("events %v, outcome %+v: want a reconciling step and the reconciled receipt", events, p.Outcome)
	}
}

func TestSQLite(t *testing.T) {
	t.Run("Drain", func(t *testing.T) { testDrain(t, sqliteBackend(t)) })
	t.Run("KillEverySecond", func(t *testing.T) { testKillEverySecond(t, sqliteBackend(t)) })
	t.Run("KillAfterEffect", func(t *testing.T) { testKillAfterEffect(t, sqliteBackend(t)) })
}

func TestPostgreSQL(t *testing.T) {
	t.Run("Drain", func(t *testing.T) { testDrain(t, pgBackend(t)) })
	t.Run("KillEverySecond", func(t *testing.T) { testKillEverySecond(t, pgBackend(t)) })
	t.Run("KillAfterEffect", func(t *testing.T) { testKillAfterEffect(t, pgBackend(t)) })
}

// envRestart enables TestPostgreSQLRestart, which restarts the shared
// PostgreSQL server: `make test` runs it on its own, after every other
// package, so that no other test loses its connections.
const envRestart = "CS_CRASH_PG_RESTART"

// TestPostgreSQLRestart restarts PostgreSQL (pg_ctlcluster restart) while
// workers drain: they reconnect, execute nothing twice, and finish the work.
func TestPostgreSQLRestart(t *testing.T) {
	if os.Getenv(envRestart) == "" {
		t.Skipf("set %s=1 to restart the shared PostgreSQL server (make test does, on its own)", envRestart)
	}
	version, err := os.ReadDir("/etc/postgresql")
	if err != nil || len(version) == 0 {
		t.Fatalf("no PostgreSQL cluster to restart: %v", err)
	}
	b := pgBackend(t)
	st := b.open(t)
	n := proposals(t) / 2
	seed(t, st, n)
	led, ledPath := newLedger(t, b)
	// Executions take long enough that the restart lands mid-drain.
	delay := 8 * time.Second * time.Duration(2*concurrency) / time.Duration(n)
	c := newCluster(t, b.storeSpec, ledPath, envDelay+"="+delay.String())
	for i := range 2 {
		c.start(i)
	}
	time.Sleep(2 * time.Second)
	restart := exec.Command("pg_ctlcluster", "--skip-systemctl-redirect", version[0].Name(), "main", "restart")
	if out, err := restart.CombinedOutput(); err != nil {
		t.Fatalf("pg_ctlcluster restart: %v\n%s", err, out)
	}
	t.Log("PostgreSQL restarted")
	// The test's own pool reconnects too: errors while the server is down
	// are retried until the deadline.
	waitSettled(t, st, 5*time.Minute, nil)
	c.stopAll()
	counts := tally(t, st)
	executions, violations := ledgerCounts(t, led)
	t.Logf("after a restart: statuses %v; ledger %d rows", counts, executions)
	if violations != 0 {
		t.Fatalf("%d double executions", violations)
	}
	if counts[store.StatusSucceeded]+counts[store.StatusUnknown] != n || counts[store.StatusSucceeded] < n/2 {
		t.Fatalf("statuses %v: want every proposal succeeded or unknown, most succeeded", counts)
	}
}
