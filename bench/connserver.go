package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"runtime"
	"runtime/metrics"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/countersign/countersign/server"
	"github.com/countersign/countersign/server/auth"
	"github.com/countersign/countersign/store"
	"github.com/jackc/pgx/v5/pgxpool"
)

// The server process of B8: the real HTTP server (server.New, its
// http.Server, API keys) on a loopback port, over the engine of B5 (one
// no-op action in wait mode, asked of role:finance), in a process of its
// own, so that its connections' ends and the clients' do not share one
// file-descriptor limit and its memory is its own. The bench binary started
// with connServerEnv set is this server; it reads commands on standard
// input and answers each with one line on standard output.

// connServerEnv carries the server process's spec (JSON connServerSpec).
const connServerEnv = "COUNTERSIGN_BENCH_CONN_SERVER"

// connServerSpec is what the server process serves.
type connServerSpec struct {
	Store     string `json:"store"` // workload.Open's spec
	MaxConns  int    `json:"max_conns"`
	Tenants   int    `json:"tenants"`
	Approvers int    `json:"approvers"` // per tenant, each with its own key
	// IdleProfile is the file "profile" writes a CPU profile to, from
	// that command to "unprofile" (empty: neither is accepted).
	IdleProfile string `json:"idle_profile,omitempty"`
}

// The API keys of B8, per tenant t: one agent (alice), Approvers stream
// holders (role finance) and one decider (bob, role finance).
func connAgentKey(t int) string       { return fmt.Sprintf("b8-agent-%d", t) }
func connApproverKey(t, j int) string { return fmt.Sprintf("b8-approver-%d-%d", t, j) }
func connDeciderKey(t int) string     { return fmt.Sprintf("b8-decider-%d", t) }
func connTenant(t int) string         { return fmt.Sprintf("tenant%d", t) }

func (s connServerSpec) keys() []auth.APIKey {
	var keys []auth.APIKey
	for t := range s.Tenants {
		keys = append(keys,
			auth.APIKey{Key: connAgentKey(t), Tenant: connTenant(t), Actor: "alice"},
			auth.APIKey{Key: connDeciderKey(t), Tenant: connTenant(t), Actor: "bob", Roles: []string{"finance"}})
		for j := range s.Approvers {
			keys = append(keys, auth.APIKey{Key: connApproverKey(t, j), Tenant: connTenant(t), Actor: fmt.Sprintf("approver%d", j), Roles: []string{"finance"}})
		}
	}
	return keys
}

// connStat is the server process's answer to "stat": what it holds now.
// GoMemory is only measured by "mem" (it forces garbage collections).
type connStat struct {
	Created    int64  `json:"created"` // proposals stored since the start
	Reads      int64  `json:"reads"`   // store reads of proposals and events since the start
	CPU        int64  `json:"cpu_ns"`  // this process's user + system time
	Conns      int64  `json:"conns"`   // client connections open (http.Server.ConnState)
	Goroutines int    `json:"goroutines"`
	GoMemory   uint64 `json:"go_memory,omitempty"` // heap objects + stacks, after GCs until they stop shrinking
	Stacks     uint64 `json:"stacks,omitempty"`    // the stacks alone, read right after`
	PoolTotal  int    `json:"pool_total"`          // PostgreSQL: connections open in the pool
	PoolInUse  int    `json:"pool_in_use"`         // PostgreSQL: connections acquired now
	Error      string `json:"error,omitempty"`     // the command was refused
}

// creationCounter counts the proposals the store created (not replays)
// and the reads the waiters and the streams make.
type creationCounter struct {
	store.Store
	created atomic.Int64
	reads   atomic.Int64
}

func (s *creationCounter) Unwrap() store.Store { return s.Store }

func (s *creationCounter) GetProposal(ctx context.Context, p *store.GetProposalParams) (*store.Proposal, error) {
	s.reads.Add(1)
	return s.Store.GetProposal(ctx, p)
}

func (s *creationCounter) ListEvents(ctx context.Context, p *store.ListEventsParams) ([]*store.Event, error) {
	s.reads.Add(1)
	return s.Store.ListEvents(ctx, p)
}

func (s *creationCounter) LastEventID(ctx context.Context, p *store.LastEventIDParams) (int64, error) {
	s.reads.Add(1)
	return s.Store.LastEventID(ctx, p)
}

func (s *creationCounter) CreateProposal(ctx context.Context, p *store.CreateProposalParams) (*store.CreateProposalResult, error) {
	res, err := s.Store.CreateProposal(ctx, p)
	if err == nil && res.Created {
		s.created.Add(1)
	}
	return res, err
}

// connServerMain is the server process.
func connServerMain(specJSON string) int {
	fail := func(err error) int { fmt.Fprintln(os.Stderr, "B8 server:", err); return 2 }
	var spec connServerSpec
	if err := json.Unmarshal([]byte(specJSON), &spec); err != nil {
		return fail(err)
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	raw, err := openSpec(ctx, spec.Store, spec.MaxConns, nil)
	if err != nil {
		return fail(err)
	}
	defer raw.Close()
	st := &creationCounter{Store: raw}
	eng, err := waitEngine(st, func(string) {})
	if err != nil {
		return fail(err)
	}
	keys, err := auth.NewAPIKeys(spec.keys())
	if err != nil {
		return fail(err)
	}
	srv, err := server.New(server.Options{Engine: eng, Auth: keys, Metrics: newMetrics(),
		// Request logs are discarded; warnings and errors (a 5xx and its
		// cause) go to standard error.
		Logger: slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))})
	if err != nil {
		return fail(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return fail(err)
	}
	hs := srv.HTTPServer(ln.Addr().String())
	var conns atomic.Int64 // client connections open
	hs.ConnState = func(_ net.Conn, state http.ConnState) {
		switch state {
		case http.StateNew:
			conns.Add(1)
		case http.StateClosed, http.StateHijacked:
			conns.Add(-1)
		}
	}
	served := make(chan error, 1)
	go func() { served <- hs.Serve(ln) }()
	defer func() {
		sctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = hs.Shutdown(sctx)
	}()
	stat := func(withMemory bool) connStat {
		s := connStat{Created: st.created.Load(), Reads: st.reads.Load(), CPU: int64(cpuTime()), Conns: conns.Load()}
		if withMemory {
			_, s.GoMemory = goMemory()
			m := []metrics.Sample{{Name: "/memory/classes/heap/stacks:bytes"}}
			metrics.Read(m)
			s.Stacks = m[0].Value.Uint64()
		}
		s.Goroutines = runtime.NumGoroutine()
		s.PoolTotal, s.PoolInUse = poolStat(raw)
		return s
	}
	fmt.Printf("READY http://%s\n", ln.Addr())
	in := bufio.NewScanner(os.Stdin)
	out := json.NewEncoder(os.Stdout)
	stopProfile := func() {}
	defer func() { stopProfile() }()
	for in.Scan() {
		switch in.Text() {
		case "stat":
			_ = out.Encode(stat(false))
		case "mem":
			_ = out.Encode(stat(true))
		case "profile", "unprofile":
			// The profile starts after the answer's stat and stops
			// before it, so that it holds the window between them.
			s := stat(false)
			if in.Text() == "profile" {
				stop, err := startRunProfile(filepath.Dir(spec.IdleProfile), strings.TrimSuffix(filepath.Base(spec.IdleProfile), ".prof"))
				if err != nil || spec.IdleProfile == "" {
					_ = out.Encode(map[string]string{"error": fmt.Sprintf("profile %q: %v", spec.IdleProfile, err)})
					break
				}
				stopProfile = stop
			} else {
				stopProfile()
				stopProfile = func() {}
				s = stat(false)
			}
			_ = out.Encode(s)
		default:
			_ = out.Encode(map[string]string{"error": "unknown command " + in.Text()})
		}
		select {
		case err := <-served:
			return fail(err)
		default:
		}
	}
	// Standard input closed: the bench is done with this server.
	return 0
}

// poolStat is a PostgreSQL store's pool: connections open and acquired (0, 0
// on SQLite).
func poolStat(st store.Store) (total, inUse int) {
	if p, ok := st.(interface{ Pool() *pgxpool.Pool }); ok {
		s := p.Pool().Stat()
		return int(s.TotalConns()), int(s.AcquiredConns())
	}
	return 0, 0
}
