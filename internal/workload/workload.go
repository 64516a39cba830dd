// Package workload seeds stores with approved work and watches it drain. The
// crash tests, the benchmarks and the bench command share it, so that they
// measure and verify the same thing.
package workload

import (
	"context"
	"fmt"
	"strings"
	"time"

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
// COUNTERSIGN_TEST_POSTGRES overrides).
func OpenStore(ctx context.Context, spec string) (store.Store, error) {
	kind, target, _ := strings.Cut(spec, ":")
	switch kind {
	case "sqlite":
		return sqlitestore.Open(ctx, target, &sqlitestore.Options{BusyTimeout: 30 * time.Second})
	case "postgres":
		return pgstore.Open(ctx, pgtest.DSN(), &pgstore.Options{Schema: target})
	}
	return nil, fmt.Errorf("workload: unknown store %q: want sqlite:<path> or postgres:<schema>", spec)
}

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
				ExpiresAt: time.Now().Add(24 * time.Hour), OperationID: "op_" + id, ConfirmationID: "cnf_" + id,
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
