// Package workload seeds stores with approved work and watches it drain. The
// crash tests, the benchmarks and the bench command share it, so that they
// measure and verify the same thing.
package workload

import (
	"cmp"
	"context"
	"fmt"
	"math"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/countersign/countersign/internal/pgtest"
	"github.com/countersign/countersign/store"
	"github.com/countersign/countersign/store/pgstore"
	"github.com/countersign/countersign/store/sqlitestore"
)

// Tenant owns every seeded proposal.
const Tenant = "acme"

// emptyDigest is the input digest of {}, the input of every seeded proposal.
const emptyDigest = "sha256:44136fa355b3678a1146ad16f7e8649e94fb4fc21fe77e8310c060f61caaff8a"

// OpenStore opens a store named by a spec: "sqlite:<path>" or
// "postgres:<schema>" (on the server of pgtest.DSN, which
// COUNTERSIGN_TEST_POSTGRES overrides), with the default Options: a
// PostgreSQL pool of a test's size, pgtest.MaxConns.
func OpenStore(ctx context.Context, spec string) (store.Store, error) {
	return Open(ctx, spec, nil)
}

// Options tunes the PostgreSQL pool of a store that Open opens; SQLite
// ignores them. A nil *Options means the defaults.
type Options struct {
	// MaxConns is the pool's size, whatever the DSN says. 0 means
	// pgtest.MaxConns, the bound that keeps tests within the server's
	// connections; the bench passes a server's, pgstore.DefaultMaxConns.
	MaxConns int
	// Tracer, if not nil, traces the queries of the pool's connections
	// (and of the store's Listen connection, made with the pool's
	// settings). It may also implement pgx's other tracer interfaces.
	Tracer pgx.QueryTracer
}

// Open opens a store named by a spec, as OpenStore does, with options.
func Open(ctx context.Context, spec string, opts *Options) (store.Store, error) {
	var o Options
	if opts != nil {
		o = *opts
	}
	kind, target, _ := strings.Cut(spec, ":")
	switch kind {
	case "sqlite":
		return sqlitestore.Open(ctx, target, &sqlitestore.Options{BusyTimeout: 30 * time.Second})
	case "postgres":
		return openPostgres(ctx, target, o)
	}
	return nil, fmt.Errorf("workload: unknown store %q: want sqlite:<path> or postgres:<schema>", spec)
}

// openPostgres opens a store on a pool of its own, configured as
// pgstore.Open's is, with the pool's size and tracer set here.
func openPostgres(ctx context.Context, schema string, o Options) (store.Store, error) {
	if o.MaxConns < 0 || o.MaxConns > math.MaxInt32 {
		return nil, fmt.Errorf("workload: MaxConns %d is negative or too large", o.MaxConns)
	}
	cfg, err := pgstore.PoolConfig(pgtest.DSN(), &pgstore.Options{Schema: schema})
	if err != nil {
		return nil, fmt.Errorf("workload: %w", err)
	}
	cfg.MaxConns = int32(cmp.Or(o.MaxConns, pgtest.MaxConns))
	cfg.ConnConfig.Tracer = o.Tracer
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("workload: %w", err)
	}
	st, err := pgstore.New(ctx, pool, &pgstore.Options{Schema: schema})
	if err != nil {
		pool.Close()
		return nil, err
	}
	return &pooledStore{Store: st, pool: pool}, nil
}

// pooledStore is a PostgreSQL store that owns its pool.
type pooledStore struct {
	*pgstore.Store
	pool *pgxpool.Pool
}

// Close closes the store, then its pool.
func (s *pooledStore) Close() error {
	err := s.Store.Close()
	s.pool.Close()
	return err
}

// Pool returns the store's pool, for its size and statistics.
func (s *pooledStore) Pool() *pgxpool.Pool { return s.pool }

// SeedApproved stores n proposals of action, already approved (as a
// remembered approval would), in independent mode, for workers to drain. Ids
// are prefix plus a counter, so that seeds do not collide.
func SeedApproved(ctx context.Context, st store.Store, action, prefix string, n int) ([]string, error) {
	ids := make([]string, n)
	for i := range ids {
		id := fmt.Sprintf("prp_%s_%08d", prefix, i)
		_, err := st.CreateProposal(ctx, &store.CreateProposalParams{
			Proposal: &store.Proposal{
				ID: id, Tenant: Tenant, Requester: "alice", ThreadID: fmt.Sprintf("t%d", i%16), ToolCallID: id,
				Action: action, ActionVersion: "1", Input: []byte(`{}`), RawInput: []byte(`{}`), InputDigest: emptyDigest,
				Mode: store.ModeIndependent, Approvers: []string{"requester"}, Quorum: 1,
				ExpiresAt: time.Now().Add(24 * time.Hour), OperationID: "op_" + id, // independent: no confirmation id, as the engine makes them
			},
			ApprovedBy: &store.Decision{Actor: "grant:seed", Via: "grant"},
		})
		if err != nil {
			return nil, fmt.Errorf("workload: seed %s: %w", id, err)
		}
		ids[i] = id
	}
	return ids, nil
}

// Drained reports whether no proposal of the tenant waits for a worker
// (approved or executing).
func Drained(ctx context.Context, st store.Store) (bool, error) {
	page, err := st.ListProposals(ctx, &store.ListProposalsParams{Tenant: Tenant, Limit: 1,
		Statuses: []store.Status{store.StatusApproved, store.StatusExecuting}})
	if err != nil {
		return false, err
	}
	return len(page.Proposals) == 0, nil
}

// WaitDrained polls until Drained, ctx ends, or tick fails; each tick runs
// between polls (nil for none).
func WaitDrained(ctx context.Context, st store.Store, every time.Duration, tick func()) error {
	for {
		ok, err := Drained(ctx, st)
		if err == nil && ok {
			return nil
		}
		if ctx.Err() != nil {
			return fmt.Errorf("workload: not drained: %w (last error: %v)", ctx.Err(), err)
		}
		if tick != nil {
			tick()
		}
		time.Sleep(every)
	}
}

// Tally counts the tenant's proposals by status.
func Tally(ctx context.Context, st store.Store) (map[store.Status]int, error) {
	out := map[store.Status]int{}
	params := &store.ListProposalsParams{Tenant: Tenant}
	for {
		page, err := st.ListProposals(ctx, params)
		if err != nil {
			return nil, err
		}
		for _, p := range page.Proposals {
			out[p.Status]++
		}
		if page.Next == "" {
			return out, nil
		}
		params.After = page.Next
	}
}
