package pgstore_test

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/countersign/countersign/internal/pgtest"
	"github.com/countersign/countersign/internal/pgtrace"
	"github.com/countersign/countersign/store"
	"github.com/countersign/countersign/store/pgstore"
)

// BenchmarkRoundTrips reports how many round trips to PostgreSQL each store
// operation costs (roundtrips/op), the figure docs/design.md §15 holds to one per
// transition: create, decide, claim, renew and settle one proposal, and a
// worker's batched claim and settlement per proposal; and the notification
// batches the store sent meanwhile (notes), which a busy store shares among
// many changes. Statements are
// prepared once per connection, so the first iterations pay more: run with
// -benchtime=300x (the batches, 100 proposals an iteration, with 10x).
func BenchmarkRoundTrips(b *testing.B) {
	ctx := context.Background()
	st, rt := tracedStore(b, "")
	counted := func(f func() error) int64 {
		before := rt.Total()
		if err := f(); err != nil {
			b.Fatal(err)
		}
		return rt.Total() - before
	}
	// b.Run calls each function more than once: every proposal gets an id
	// of its own.
	var seq int
	proposal := func(mode store.Mode) *store.Proposal {
		seq++
		name := fmt.Sprint(seq)
		return &store.Proposal{
			ID: "prp_" + name, Tenant: "acme", Requester: "alice", ThreadID: "t_" + name, ToolCallID: "call_" + name,
			Action: "payments.refund", ActionVersion: "1", Input: json.RawMessage(`{"amount":1}`), RawInput: json.RawMessage(`{"amount":1}`),
			InputDigest: "sha256:00", Preview: "Refund 1", Confirmation: store.Confirmation{Title: "Refund 1"},
			ConfirmationID: "cnf_" + name, Mode: mode, Approvers: []string{"role:finance"}, Quorum: 1,
			ExpiresAt: time.Now().Add(time.Hour), OperationID: "op_" + name,
		}
	}

	b.Run("transitions", func(b *testing.B) {
		var create, decide, claim, renew, settle int64
		notes := rt.Notes()
		for range b.N {
			p := proposal(store.ModeWait)
			create += counted(func() error {
				_, err := st.CreateProposal(ctx, &store.CreateProposalParams{Proposal: p})
				return err
			})
			decide += counted(func() error {
				_, err := st.Decide(ctx, &store.DecideParams{Tenant: p.Tenant, ID: p.ID, Actor: "bob", Verdict: store.VerdictApproved, Via: "api"})
				return err
			})
			var claimed *store.Proposal
			claim += counted(func() (err error) {
				claimed, err = st.Claim(ctx, &store.ClaimParams{Tenant: p.Tenant, ID: p.ID, Owner: "bench", LeaseDuration: time.Minute, ConsumedBy: p.ToolCallID})
				return err
			})
			fence := store.Fence{Token: claimed.Lease.Token, Generation: claimed.Lease.Generation}
			renew += counted(func() error {
				_, err := st.RenewLease(ctx, &store.RenewLeaseParams{Tenant: p.Tenant, ID: p.ID, Fence: fence, LeaseDuration: time.Minute})
				return err
			})
			executed := true
			settle += counted(func() error {
				_, err := st.Settle(ctx, &store.SettleParams{Tenant: p.Tenant, ID: p.ID, Fence: fence, Status: store.StatusSucceeded, Executed: &executed, Receipt: "rf"})
				return err
			})
		}
		n := float64(b.N)
		b.ReportMetric(float64(create)/n, "create-rt/op")
		b.ReportMetric(float64(decide)/n, "decide-rt/op")
		b.ReportMetric(float64(claim)/n, "claim-rt/op")
		b.ReportMetric(float64(renew)/n, "renew-rt/op")
		b.ReportMetric(float64(settle)/n, "settle-rt/op")
		b.ReportMetric(float64(rt.Notes()-notes)/n, "notes-rt/op")
	})

	b.Run("batches", func(b *testing.B) {
		const batch = 100
		var claims, settles, proposals int64
		for range b.N {
			for range batch {
				p := proposal(store.ModeIndependent)
				if _, err := st.CreateProposal(ctx, &store.CreateProposalParams{Proposal: p}); err != nil {
					b.Fatal(err)
				}
				if _, err := st.Decide(ctx, &store.DecideParams{Tenant: p.Tenant, ID: p.ID, Actor: "bob", Verdict: store.VerdictApproved, Via: "api"}); err != nil {
					b.Fatal(err)
				}
			}
			var got []*store.Claimed
			claims += counted(func() (err error) {
				got, err = st.ClaimBatch(ctx, &store.ClaimBatchParams{Owner: "bench", LeaseDuration: time.Minute, Limit: batch})
				return err
			})
			executed := true
			params := make([]*store.SettleParams, len(got))
			for k, c := range got {
				params[k] = &store.SettleParams{
					Tenant: c.Proposal.Tenant, ID: c.Proposal.ID, Status: store.StatusSucceeded, Executed: &executed, Receipt: "rf",
					Fence: store.Fence{Token: c.Proposal.Lease.Token, Generation: c.Proposal.Lease.Generation},
				}
			}
			settles += counted(func() error {
				_, _, err := st.SettleMany(ctx, params)
				return err
			})
			proposals += int64(len(got))
		}
		b.ReportMetric(float64(claims)/float64(proposals), "claim-rt/proposal")
		b.ReportMetric(float64(settles)/float64(proposals), "settle-rt/proposal")
	})
}

// tracedStore is a store on a fresh schema whose pool (of maxConns
// connections, "" for the DSN's) counts its round trips.
func tracedStore(tb testing.TB, maxConns string) (*pgstore.Store, *pgtrace.Counter) {
	tb.Helper()
	ctx := context.Background()
	dsn, schema := pgtest.NewSchema(tb)
	if maxConns != "" {
		dsn = pgtest.WithParam(dsn, "pool_max_conns", maxConns)
	}
	cfg, err := pgxpool.ParseConfig(dsn)
	if err != nil {
		tb.Fatal(err)
	}
	rt := &pgtrace.Counter{}
	cfg.ConnConfig.Tracer = rt
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(pool.Close)
	st, err := pgstore.New(ctx, pool, &pgstore.Options{Schema: schema})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { _ = st.Close() }) // before the pool's
	return st, rt
}
