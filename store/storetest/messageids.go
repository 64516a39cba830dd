package storetest

import (
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/countersign/countersign/store"
)

// testMessageIDs pins how messages are keyed: by tenant, thread and id
// (docs/api.md Part 3, "Messages, outcomes and ids"). A thread holds an id once;
// any other thread, of this tenant or another, may hold the same id; and an
// outcome message is admitted whatever ids clients chose before it.
func testMessageIDs(t *testing.T, newStore Factory) {
	t.Run("SameIDInOtherThreadsAndTenants", func(t *testing.T) {
		t.Parallel()
		fx := setup(t, newStore)
		const id = "m-shared"
		for _, tt := range []struct{ tenant, thread, owner string }{
			{tenant, "t-a", requester},
			{tenant, "t-b", requester},
			{tenant, "t-c", approver}, // another owner in the same tenant
			{otherTenant, "t-a", requester},
		} {
			p := fx.postParams(tt.thread, tt.owner, "hello from "+tt.tenant+"/"+tt.thread, nil)
			p.Message.ID, p.Message.Tenant = id, tt.tenant
			fx.mustPost(p)
		}
		for _, tt := range []struct{ tenant, thread string }{{tenant, "t-a"}, {tenant, "t-b"}, {tenant, "t-c"}, {otherTenant, "t-a"}} {
			msgs, err := fx.store.ListMessages(fx.ctx, &store.ListMessagesParams{Tenant: tt.tenant, ThreadID: tt.thread})
			if err != nil {
				t.Fatal(err)
			}
			if len(msgs) != 1 || msgs[0].ID != id || msgs[0].Text != "hello from "+tt.tenant+"/"+tt.thread {
				t.Fatalf("%s/%s: messages %+v, want its own message %s", tt.tenant, tt.thread, msgs, id)
			}
		}
		// A run's message may take an id another thread holds.
		r := fx.post("t-run", requester, "go", newRun()).Run
		if _, err := fx.store.UpdateRun(fx.ctx, &store.UpdateRunParams{Tenant: tenant, ID: r.ID, Fence: runFence(r),
			Messages: []*store.Message{{ID: id, Role: store.RoleAssistant, Text: "ok"}}}); err != nil {
			t.Fatalf("a run's message with an id another thread holds: %v", err)
		}
	})

	t.Run("TakenInTheThread", func(t *testing.T) {
		t.Parallel()
		fx := setup(t, newStore)
		first := fx.post("t-take", requester, "first", nil).Message
		for name, mut := range map[string]func(*store.PostMessageParams){
			"a message":            func(p *store.PostMessageParams) {},
			"a message with a run": func(p *store.PostMessageParams) { p.Run = newRun() },
			"a text decision":      func(p *store.PostMessageParams) { p.Decision, p.Owner = true, "" },
			"a text decision by another": func(p *store.PostMessageParams) {
				p.Decision, p.Owner, p.Message.Sender = true, "", approver
			},
		} {
			p := fx.postParams("t-take", requester, "second", nil)
			p.Message.ID = first.ID
			mut(p)
			_, err := fx.store.PostMessage(fx.ctx, p)
			requireMessageIDTaken(t, name, err, "t-take", first.ID)
		}
		msgs := fx.messages("t-take")
		if len(msgs) != 1 || msgs[0].Text != "first" {
			t.Fatalf("messages %+v after refused posts, want the first alone", msgs)
		}
		if fx.thread("t-take").RunID != "" {
			t.Fatal("a refused post left a run holding the thread")
		}
		// The id of a run's message is the thread's too, both ways.
		r := fx.post("t-take", requester, "go", newRun()).Run
		_, err := fx.store.UpdateRun(fx.ctx, &store.UpdateRunParams{Tenant: tenant, ID: r.ID, Fence: runFence(r), Steps: 1,
			Messages: []*store.Message{{ID: first.ID, Role: store.RoleAssistant, Text: "hijack"}}})
		requireMessageIDTaken(t, "a run's message", err, "t-take", first.ID)
		if got := fx.getRun(r.ID); got.Version != r.Version || got.Steps != 0 {
			t.Fatalf("run after a refused update: version %d, steps %d; want it unchanged", got.Version, got.Steps)
		}
		assistant := &store.Message{ID: uniqueID("msg"), Role: store.RoleAssistant, Text: "done"}
		if _, err := fx.store.UpdateRun(fx.ctx, &store.UpdateRunParams{Tenant: tenant, ID: r.ID, Fence: runFence(r),
			To: store.RunFinished, Messages: []*store.Message{assistant}}); err != nil {
			t.Fatal(err)
		}
		p := fx.postParams("t-take", requester, "after", nil)
		p.Message.ID = assistant.ID
		_, err = fx.store.PostMessage(fx.ctx, p)
		requireMessageIDTaken(t, "the id of a run's message", err, "t-take", assistant.ID)
		if n := len(fx.messages("t-take")); n != 3 {
			t.Fatalf("%d messages, want 3 (first, go, done)", n)
		}
	})

	t.Run("OwnershipAndBusyFirst", func(t *testing.T) {
		t.Parallel()
		fx := setup(t, newStore)
		held := fx.post("t-first", requester, "mine", nil).Message
		// Who may not post learns nothing of the thread's ids.
		p := fx.postParams("t-first", approver, "theirs", nil)
		p.Message.ID = held.ID
		_, err := fx.store.PostMessage(fx.ctx, p)
		requireErrorIs(t, err, store.ErrNotThreadOwner)
		if errors.Is(err, store.ErrMessageIDTaken) {
			t.Fatalf("another actor's post: %v, which says the id is taken", err)
		}
		r := fx.post("t-first", requester, "go", newRun()).Run
		p = fx.postParams("t-first", requester, "more", nil)
		p.Message.ID = held.ID
		_, err = fx.store.PostMessage(fx.ctx, p)
		var busy *store.ThreadBusyError
		if !errors.As(err, &busy) || busy.RunID != r.ID {
			t.Fatalf("a taken id while a run holds the thread: %v, want THREAD_BUSY", err)
		}
	})

	t.Run("DeletedThreadFreesItsIDs", func(t *testing.T) {
		t.Parallel()
		fx := setup(t, newStore)
		m := fx.post("t-del", requester, "once", nil).Message
		if err := fx.store.DeleteThread(fx.ctx, &store.GetThreadParams{Tenant: tenant, ID: "t-del"}); err != nil {
			t.Fatal(err)
		}
		p := fx.postParams("t-del", requester, "again", nil)
		p.Message.ID = m.ID
		fx.mustPost(p)
	})

	t.Run("RaceForOneID", func(t *testing.T) {
		t.Parallel()
		fx := setup(t, newStore)
		const n = 12
		// In a thread that does not exist yet, and in one that does.
		fx.post("t-race-old", requester, "before", nil)
		for _, th := range []string{"t-race-new", "t-race-old"} {
			var won, taken atomic.Int32
			errs := make([]error, n)
			concurrently(n, func(i int) {
				p := fx.postParams(th, requester, fmt.Sprint("racer ", i), nil)
				p.Message.ID = "m-race"
				_, err := fx.store.PostMessage(fx.ctx, p)
				switch {
				case err == nil:
					won.Add(1)
				case errors.Is(err, store.ErrMessageIDTaken):
					taken.Add(1)
				default:
					errs[i] = err
				}
			})
			if err := errors.Join(errs...); err != nil {
				t.Fatalf("%s: %v", th, err)
			}
			if won.Load() != 1 || taken.Load() != n-1 {
				t.Fatalf("%s: %d posts of one id won and %d were refused as taken; want 1 and %d", th, won.Load(), taken.Load(), n-1)
			}
			count := 0
			for _, m := range fx.messages(th) {
				if m.ID == "m-race" {
					count++
				}
			}
			if count != 1 {
				t.Fatalf("%s holds m-race %d times, want once", th, count)
			}
		}
		// The same id in as many threads: every post is taken.
		errs := make([]error, n)
		concurrently(n, func(i int) {
			p := fx.postParams(fmt.Sprint("t-race-", i), requester, "mine", nil)
			p.Message.ID = "m-race"
			_, errs[i] = fx.store.PostMessage(fx.ctx, p)
		})
		if err := errors.Join(errs...); err != nil {
			t.Fatalf("one id in %d threads at once: %v", n, err)
		}
	})

	t.Run("OutcomeNotPreempted", func(t *testing.T) {
		t.Parallel()
		fx := setup(t, newStore)
		p := fx.claimed()
		// Before the settlement, the thread's owner posts messages with
		// the id the outcome once had (msg_<proposal>:<status>) and other
		// guesses.
		guesses := []string{"msg_" + p.ID + ":" + string(store.StatusSucceeded), "msg_" + p.ID, p.ID}
		for _, id := range guesses {
			mp := fx.postParams(thread, requester, "guess", nil)
			mp.Message.ID = id
			fx.mustPost(mp)
		}
		fx.succeed(p)
		var outcomes []*store.Message
		for _, m := range fx.messages(thread) {
			if m.Outcome != nil {
				outcomes = append(outcomes, m)
			}
		}
		if len(outcomes) != 1 {
			t.Fatalf("%d outcome messages, want 1: %+v", len(outcomes), outcomes)
		}
		o := outcomes[0]
		if o.ProposalID != p.ID || o.Role != store.RoleAssistant || o.Outcome.Status != store.StatusSucceeded {
			t.Fatalf("outcome message %+v, want %s's success", o, p.ID)
		}
		requireServerMessageID(t, o.ID, p.ID)
	})

	t.Run("OutcomeIDsUnpredictable", func(t *testing.T) {
		t.Parallel()
		fx := setup(t, newStore)
		// Settled, rejected, and superseded (which PostgreSQL writes in
		// the creation's statement): each admits one message whose id
		// says nothing of its proposal.
		a := fx.claimed()
		fx.succeed(a)
		b := fx.createNew()
		fx.decide(b, approver, store.VerdictRejected)
		c := fx.createNew(withKey("same"))
		fx.createNew(withKey("same"))
		want := map[string]store.Status{a.ID: store.StatusSucceeded, b.ID: store.StatusRejected, c.ID: store.StatusSuperseded}
		seen := map[string]bool{}
		for _, m := range fx.messages(thread) {
			if m.Outcome == nil {
				continue
			}
			if want[m.ProposalID] != m.Outcome.Status || seen[m.ProposalID] {
				t.Fatalf("outcome message %+v: want one of %v, each once", m, want)
			}
			seen[m.ProposalID] = true
			requireServerMessageID(t, m.ID, m.ProposalID)
			if seen[m.ID] {
				t.Fatalf("outcome message id %s twice", m.ID)
			}
			seen[m.ID] = true
		}
		for id := range want {
			if !seen[id] {
				t.Fatalf("no outcome message for %s", id)
			}
		}
	})
}

// requireMessageIDTaken checks err is the typed refusal of id in thread,
// and nothing else's.
func requireMessageIDTaken(t *testing.T, what string, err error, thread, id string) {
	t.Helper()
	var taken *store.MessageIDTakenError
	if !errors.As(err, &taken) || !errors.Is(err, store.ErrMessageIDTaken) || taken.ThreadID != thread || taken.ID != id {
		t.Fatalf("%s with the taken id %s: %v, want a *MessageIDTakenError naming thread %s and the id", what, id, err, thread)
	}
	if errors.Is(err, store.ErrInvalidParams) || errors.Is(err, store.ErrThreadBusy) || errors.Is(err, store.ErrNotThreadOwner) {
		t.Fatalf("%s: %v also matches another refusal", what, err)
	}
}

// requireServerMessageID checks that id is one the server made on its own
// account: msg_ and 32 hex digits, nothing of the proposal it is about.
func requireServerMessageID(t *testing.T, id, proposalID string) {
	t.Helper()
	hex := strings.TrimPrefix(id, "msg_")
	if hex == id || len(hex) != 32 || strings.Trim(hex, "0123456789abcdef") != "" || strings.Contains(id, proposalID) {
		t.Fatalf("outcome message id %q: want msg_ and 32 hex digits, nothing of %s", id, proposalID)
	}
}
