package storetest

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/countersign/countersign/store"
)

// requireNewestFirst fails the test unless ps are ordered by creation time,
// newest first, ties broken by id (descending, as keyset pagination on
// (created_at, id) reads them), without duplicates.
func requireNewestFirst(t *testing.T, ps []*store.Proposal) {
	t.Helper()
	seen := map[string]bool{}
	for i, p := range ps {
		if seen[p.ID] {
			t.Errorf("proposal %s listed twice", p.ID)
		}
		seen[p.ID] = true
		if i == 0 {
			continue
		}
		prev := ps[i-1]
		if p.CreatedAt.After(prev.CreatedAt) || (p.CreatedAt.Equal(prev.CreatedAt) && p.ID > prev.ID) {
			t.Errorf("listing out of order at %d: %s (%v) after %s (%v)", i, p.ID, p.CreatedAt, prev.ID, prev.CreatedAt)
		}
	}
}

// newestFirst returns the ids of ps in the order a listing must return them.
func newestFirst(ps []*store.Proposal) []string {
	s := slices.Clone(ps)
	slices.SortFunc(s, func(a, b *store.Proposal) int {
		if c := b.CreatedAt.Compare(a.CreatedAt); c != 0 {
			return c
		}
		return strings.Compare(b.ID, a.ID)
	})
	return ids(s)
}

func testListProposals(t *testing.T, newStore Factory) {
	t.Run("PagesNewestFirst", func(t *testing.T) {
		t.Parallel()
		fx := setup(t, newStore)
		var created []*store.Proposal
		for range 25 {
			created = append(created, fx.createNew())
			fx.clock.Advance(time.Second)
		}
		// Updating a proposal does not move it in the listing.
		fx.decide(created[3], approver, store.VerdictApproved)
		fx.decide(created[20], approver, store.VerdictRejected)

		var all []*store.Proposal
		params := store.ListProposalsParams{Limit: 10}
		for i, want := range []int{10, 10, 5} {
			page := fx.list(params)
			if len(page.Proposals) != want {
				t.Fatalf("page %d has %d proposals, want %d", i, len(page.Proposals), want)
			}
			last := i == 2
			if (page.Next == "") != last {
				t.Fatalf("page %d: Next = %q, want it empty only on the last page", i, page.Next)
			}
			all = append(all, page.Proposals...)
			params.After = page.Next
		}
		requireNewestFirst(t, all)
		if got, want := ids(all), newestFirst(created); !slices.Equal(got, want) {
			t.Errorf("listing = %v\nwant %v", got, want)
		}
	})

	t.Run("ExactMultipleOfLimit", func(t *testing.T) {
		t.Parallel()
		fx := setup(t, newStore)
		var created []*store.Proposal
		for range 6 {
			created = append(created, fx.createNew())
			fx.clock.Advance(time.Millisecond)
		}
		all, pages := fx.listAll(store.ListProposalsParams{Limit: 3})
		if got, want := ids(all), newestFirst(created); !slices.Equal(got, want) {
			t.Errorf("listing = %v, want %v", got, want)
		}
		if pages > 3 {
			t.Errorf("%d pages for 6 proposals by 3, want at most 3", pages)
		}
	})

	t.Run("TiesBrokenByID", func(t *testing.T) {
		t.Parallel()
		fx := setup(t, newStore)
		var created []*store.Proposal
		created = append(created, fx.createNew())
		fx.clock.Advance(time.Second)
		for range 7 { // all at one instant
			created = append(created, fx.createNew())
		}
		fx.clock.Advance(time.Second)
		created = append(created, fx.createNew())
		for _, limit := range []int{1, 2, 3, 4} {
			all, _ := fx.listAll(store.ListProposalsParams{Limit: limit})
			requireNewestFirst(t, all)
			if got, want := ids(all), newestFirst(created); !slices.Equal(got, want) {
				t.Errorf("limit %d: listing = %v\nwant %v", limit, got, want)
			}
		}
	})

	t.Run("DefaultLimit", func(t *testing.T) {
		t.Parallel()
		fx := setup(t, newStore)
		for range 25 {
			fx.createNew()
		}
		page := fx.list(store.ListProposalsParams{})
		if len(page.Proposals) != 25 || page.Next != "" {
			t.Errorf("Limit 0: %d proposals, Next %q; want 25 and no cursor", len(page.Proposals), page.Next)
		}
		page = fx.list(store.ListProposalsParams{Limit: store.MaxPageSize})
		if len(page.Proposals) != 25 || page.Next != "" {
			t.Errorf("Limit MaxPageSize: %d proposals, Next %q; want 25 and no cursor", len(page.Proposals), page.Next)
		}
	})

	t.Run("InvalidLimit", func(t *testing.T) {
		t.Parallel()
		fx := setup(t, newStore)
		fx.createNew()
		for _, limit := range []int{-1, store.MaxPageSize + 1} {
			_, err := fx.store.ListProposals(fx.ctx, &store.ListProposalsParams{Tenant: tenant, Limit: limit})
			if !isInvalidParams(err) {
				t.Errorf("Limit %d: %v, want ErrInvalidParams", limit, err)
			}
		}
	})

	t.Run("Empty", func(t *testing.T) {
		t.Parallel()
		fx := setup(t, newStore)
		page := fx.list(store.ListProposalsParams{})
		if len(page.Proposals) != 0 || page.Next != "" {
			t.Errorf("empty store: %d proposals, Next %q", len(page.Proposals), page.Next)
		}
	})

	t.Run("Filters", func(t *testing.T) {
		t.Parallel()
		fx := setup(t, newStore)
		next := func(th string, o ...func(*store.Proposal)) *store.Proposal {
			fx.clock.Advance(time.Second)
			return fx.create(fx.proposal(th, o...)).Proposal
		}
		p1 := next("t1")
		p2 := next("t1", withAction("files.delete"))
		p3 := next("t2")
		p4 := next("t2", withAction("files.delete"))
		p5 := next("t1")
		fx.decide(p2, approver, store.VerdictApproved)
		fx.decide(p3, approver, store.VerdictRejected)
		fx.decide(p5, approver, store.VerdictApproved)
		other := NewProposal(otherTenant, "t1", uniqueID("call"), withExpiresAt(fx.clock.Now().Add(time.Hour)))
		fx.create(other)

		cases := []struct {
			name   string
			params store.ListProposalsParams
			want   []*store.Proposal
		}{
			{"All", store.ListProposalsParams{}, []*store.Proposal{p5, p4, p3, p2, p1}},
			{"Pending", store.ListProposalsParams{Statuses: []store.Status{store.StatusPending}}, []*store.Proposal{p4, p1}},
			{"ApprovedOrRejected", store.ListProposalsParams{Statuses: []store.Status{store.StatusApproved, store.StatusRejected}}, []*store.Proposal{p5, p3, p2}},
			{"NoMatch", store.ListProposalsParams{Statuses: []store.Status{store.StatusSucceeded}}, nil},
			{"Action", store.ListProposalsParams{Action: "files.delete"}, []*store.Proposal{p4, p2}},
			{"Thread", store.ListProposalsParams{ThreadID: "t1"}, []*store.Proposal{p5, p2, p1}},
			{"ThreadActionStatus", store.ListProposalsParams{ThreadID: "t1", Action: "payments.refund", Statuses: []store.Status{store.StatusApproved}}, []*store.Proposal{p5}},
			{"OtherThread", store.ListProposalsParams{ThreadID: "t9"}, nil},
		}
		for _, c := range cases {
			for _, limit := range []int{0, 1, 2} {
				c.params.Limit = limit
				all, _ := fx.listAll(c.params)
				if got, want := ids(all), ids(c.want); !slices.Equal(got, want) {
					t.Errorf("%s (limit %d): listing = %v, want %v", c.name, limit, got, want)
				}
			}
		}
		otherAll, _ := fx.listAll(store.ListProposalsParams{Tenant: otherTenant})
		if got := ids(otherAll); !slices.Equal(got, []string{other.ID}) {
			t.Errorf("other tenant's listing = %v, want [%s]", got, other.ID)
		}
	})

	t.Run("Visible", func(t *testing.T) {
		t.Parallel()
		fx := setup(t, newStore)
		next := func(th string, o ...func(*store.Proposal)) *store.Proposal {
			fx.clock.Advance(time.Second)
			return fx.create(fx.proposal(th, o...)).Proposal
		}
		// deleteThread drops a thread, so that another actor's next call
		// claims its id: proposals outlive their thread, so a thread may hold
		// the calls of a requester who no longer owns it — and its new owner
		// must not see them.
		deleteThread := func(th string) {
			if err := fx.store.DeleteThread(fx.ctx, &store.GetThreadParams{Tenant: tenant, ID: th}); err != nil {
				t.Fatalf("DeleteThread(%s): %v", th, err)
			}
		}
		// Alice owns t-alice, which holds an older call of bob's; erin owns
		// t-erin, which holds an older call of frank's.
		bInAlices := next("t-alice", withRequester("bob"), withApprovers("requester"))
		deleteThread("t-alice")
		aFinance := next("t-alice", withRequester("alice"), withApprovers("role:finance"))
		aSelf := next("t-alice", withRequester("alice"), withApprovers("requester"))
		fInErins := next("t-erin", withRequester("frank"), withApprovers("requester", "role:ops"))
		deleteThread("t-erin")
		eDave := next("t-erin", withRequester("erin"), withApprovers("actor:dave"))
		// gus's call ran, and nobody knows whether it applied: operators
		// see it, to resolve it.
		gUnknown := next("t-gus", withRequester("gus"), withApprovers("requester"))
		fx.decide(gUnknown, approver, store.VerdictApproved)
		gUnknown = fx.claim(fx.get(gUnknown), longLease)
		fx.settle(settleParams(gUnknown, store.StatusUnknown))

		operator := func(v *store.Visibility) *store.Visibility { v.Operator = true; return v }
		cases := []struct {
			name string
			vis  *store.Visibility
			want []*store.Proposal
		}{
			{"Unrestricted", nil, []*store.Proposal{gUnknown, eDave, fInErins, aSelf, aFinance, bInAlices}},
			{"RequesterNotLaterOwner", &store.Visibility{Actor: "alice", Principals: []string{"actor:alice", "role:agent"}},
				[]*store.Proposal{aSelf, aFinance}},
			{"RequesterApprover", &store.Visibility{Actor: "bob", Principals: []string{"actor:bob", "role:agent"}},
				[]*store.Proposal{bInAlices}},
			{"RequesterApproverOnlyOwnCall", &store.Visibility{Actor: "frank", Principals: []string{"actor:frank"}},
				[]*store.Proposal{fInErins}},
			{"Role", &store.Visibility{Actor: "fran", Principals: []string{"actor:fran", "role:finance"}},
				[]*store.Proposal{aFinance}},
			{"Actor", &store.Visibility{Actor: "dave", Principals: []string{"actor:dave"}},
				[]*store.Proposal{eDave}},
			{"RequesterAndRole", &store.Visibility{Actor: "erin", Principals: []string{"actor:erin", "role:finance"}},
				[]*store.Proposal{eDave, aFinance}},
			{"Others", &store.Visibility{Actor: "mallory", Principals: []string{"actor:mallory", "role:support"}}, nil},
			{"OperatorSeesUnknown", operator(&store.Visibility{Actor: "olga", Principals: []string{"actor:olga", "role:operator"}}),
				[]*store.Proposal{gUnknown}},
			{"OperatorAndRole", operator(&store.Visibility{Actor: "olga", Principals: []string{"actor:olga", "role:finance"}}),
				[]*store.Proposal{gUnknown, aFinance}},
		}
		for _, c := range cases {
			for _, limit := range []int{0, 1, 2} {
				all, _ := fx.listAll(store.ListProposalsParams{Visible: c.vis, Limit: limit})
				if got, want := ids(all), ids(c.want); !slices.Equal(got, want) {
					t.Errorf("%s (limit %d): listing = %v, want %v", c.name, limit, got, want)
				}
			}
			// The listing and store.CanSee are one rule.
			for _, p := range []*store.Proposal{gUnknown, eDave, fInErins, aSelf, aFinance, bInAlices} {
				if got, want := store.CanSee(fx.get(p), c.vis), slices.ContainsFunc(c.want, func(w *store.Proposal) bool { return w.ID == p.ID }); got != want {
					t.Errorf("%s: CanSee(%s) = %v, the listing says %v", c.name, p.ID, got, want)
				}
			}
		}
		// Visibility combines with the other filters.
		all, _ := fx.listAll(store.ListProposalsParams{
			Visible: &store.Visibility{Actor: "alice", Principals: []string{"actor:alice"}}, ThreadID: "t-erin",
		})
		if len(all) != 0 {
			t.Errorf("alice in t-erin: %v, want none", ids(all))
		}
	})

	t.Run("TamperedCursor", func(t *testing.T) {
		t.Parallel()
		fx := setup(t, newStore)
		for range 5 {
			fx.createNew()
			fx.clock.Advance(time.Second)
		}
		cursor := fx.list(store.ListProposalsParams{Limit: 2}).Next
		if len(cursor) < 8 {
			t.Fatalf("cursor %q: want a longer one", cursor)
		}
		// The last character is spared: in base64 it may carry only padding
		// bits that a decoder ignores.
		var bad []string
		for _, i := range []int{0, 1, len(cursor) / 3, len(cursor) / 2, 2 * len(cursor) / 3, len(cursor) - 2} {
			b := []byte(cursor)
			if b[i] == 'A' {
				b[i] = 'B'
			} else {
				b[i] = 'A'
			}
			bad = append(bad, string(b))
		}
		bad = append(bad, cursor[:len(cursor)-4], cursor+"AAAA", "not-a-cursor", "%%%", strings.Repeat("A", len(cursor)))
		for _, c := range bad {
			_, err := fx.store.ListProposals(fx.ctx, &store.ListProposalsParams{Tenant: tenant, Limit: 2, After: c})
			if !isInvalidCursor(err) {
				t.Errorf("cursor %q (from %q): %v, want ErrInvalidCursor", c, cursor, err)
			}
		}
		// The genuine cursor still works.
		if page := fx.list(store.ListProposalsParams{Limit: 2, After: cursor}); len(page.Proposals) != 2 {
			t.Errorf("genuine cursor: %d proposals, want 2", len(page.Proposals))
		}
	})

	t.Run("CursorFromAnotherStore", func(t *testing.T) {
		t.Parallel()
		fx := setup(t, newStore)
		other := setup(t, newStore)
		for range 3 {
			fx.createNew()
			other.createNew()
		}
		foreign := other.list(store.ListProposalsParams{Limit: 1}).Next
		_, err := fx.store.ListProposals(fx.ctx, &store.ListProposalsParams{Tenant: tenant, Limit: 1, After: foreign})
		if !isInvalidCursor(err) {
			t.Errorf("another store's cursor: %v, want ErrInvalidCursor", err)
		}
	})
}
