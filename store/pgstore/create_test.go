package pgstore

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/countersign/countersign/internal/pgtest"
	"github.com/countersign/countersign/store"
)

// openAt opens a store on a fresh schema whose application clock stands
// still at now.
func openAt(t *testing.T, now time.Time) *Store {
	t.Helper()
	dsn, schema := pgtest.NewSchema(t)
	s, err := Open(context.Background(), pgtest.WithParam(dsn, "pool_max_conns", "2"), &Options{Schema: schema, Now: func() time.Time { return now }})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

func createTestProposal(id, thread string, now time.Time) *store.Proposal {
	return &store.Proposal{
		ID: id, Tenant: "acme", Requester: "alice", ThreadID: thread, RunID: "run1", ToolCallID: "call_" + id,
		Action: "payments.refund", ActionVersion: "1", Input: json.RawMessage(`{"amount":1}`), RawInput: json.RawMessage(`{"amount":1}`),
		InputDigest: "sha256:in", Preview: "Refund 1", Confirmation: store.Confirmation{Title: "Refund 1"},
		Mode: store.ModeWait, Approvers: []string{"role:finance"}, Quorum: 1, ReplacementKey: "cust",
		ExpiresAt: now.Add(time.Hour), OperationID: "op_" + id, RuleFingerprint: "fp1",
	}
}

// TestSupersedeInSQL pins supersedeSQL to store.ApplySupersede: the
// proposal a creation supersedes is stored as the rule makes it, with the
// rule's event and outcome message.
func TestSupersedeInSQL(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	s := openAt(t, now)
	old, err := s.CreateProposal(ctx, &store.CreateProposalParams{Proposal: createTestProposal("prp_old", "t1", now)})
	if err != nil {
		t.Fatal(err)
	}
	n, err := s.CreateProposal(ctx, &store.CreateProposalParams{Proposal: createTestProposal("prp_new", "t1", now)})
	if err != nil {
		t.Fatal(err)
	}
	want := old.Proposal.Clone()
	c := store.ApplySupersede(want, "prp_new", now)
	store.Finish(want, now)
	normalize(want)
	if len(n.Superseded) != 1 || !reflect.DeepEqual(n.Superseded[0], want) {
		t.Fatalf("superseded %+v\nwant %+v", n.Superseded, want)
	}
	got, err := s.GetProposal(ctx, &store.GetProposalParams{Tenant: "acme", ID: "prp_old"})
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("stored %+v\nwant   %+v", got, want)
	}
	evs, err := s.ListEvents(ctx, &store.ListEventsParams{Tenant: "acme", ProposalID: "prp_old", Limit: 10})
	if err != nil {
		t.Fatal(err)
	}
	last := evs[len(evs)-1]
	if e := c.Events[0]; last.Type != e.Type || last.Actor != e.Actor || last.Via != e.Via || last.Detail != e.Detail ||
		last.Status != want.Status || !last.At.Equal(now) {
		t.Errorf("event %+v, want %+v with status %s at %v", last, e, want.Status, now)
	}
	msgs, err := s.ListMessages(ctx, &store.ListMessagesParams{Tenant: "acme", ThreadID: "t1"})
	if err != nil {
		t.Fatal(err)
	}
	m := c.Admit
	m.Outcome.At = dbTime(m.Outcome.At)
	// The id is random on both sides (store.NewMessageID; gen_random_uuid
	// in SQL): the same shape, never the same value, nothing of the
	// proposal.
	if len(msgs) == 1 {
		id := strings.TrimPrefix(msgs[0].ID, "msg_")
		if len(id) != 32 || strings.Trim(id, "0123456789abcdef") != "" || len(strings.TrimPrefix(m.ID, "msg_")) != 32 || msgs[0].ID == m.ID {
			t.Errorf("outcome message id %q, want msg_ and 32 random hex digits as the rule makes (%q)", msgs[0].ID, m.ID)
		}
	}
	if len(msgs) != 1 || msgs[0].Role != m.Role || msgs[0].Text != m.Text ||
		msgs[0].ProposalID != m.ProposalID || !reflect.DeepEqual(msgs[0].Outcome, m.Outcome) || !msgs[0].CreatedAt.Equal(now) {
		t.Errorf("messages %+v\nwant one like %+v", msgs, m)
	}
}

// TestGrantApprovesInSQL pins the grant check of the creation's insert to
// store.GrantApproves: over grants that differ from the call in every way
// the rule looks at, a creation approved by the grant is stored exactly
// when the rule says the grant approves it, and refused with
// store.ErrGrantNotLive otherwise.
func TestGrantApprovesInSQL(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	s := openAt(t, now)
	r := rand.New(rand.NewPCG(1, 2))
	// Each field matches the call most of the time, so that both answers
	// come up often: the first value matches.
	pick := func(vs ...string) string {
		if r.IntN(5) < 4 {
			return vs[0]
		}
		return vs[1+r.IntN(len(vs)-1)]
	}
	// A time: the first kind most of the time, else one of the others.
	at := func(kinds ...string) *time.Time {
		var t time.Time
		switch pick(kinds...) {
		case "none":
			return nil
		case "past":
			t = now.Add(-time.Minute)
		case "now":
			t = now
		default:
			t = now.Add(time.Minute)
		}
		return &t
	}
	approved, refused := 0, 0
	for i := range 300 {
		p := createTestProposal(fmt.Sprintf("prp_%d", i), fmt.Sprintf("t%d", i), now)
		p.ReplacementKey = ""
		g := &store.Grant{
			ID: fmt.Sprintf("grt_%d", i), Tenant: "acme", Requester: pick("alice", "mallory"), Scope: store.Scope(pick("thread", "run", "run")),
			ThreadID: pick(p.ThreadID, "other"), RunID: pick("run1", "run1", "run2"), Action: pick(p.Action, "payments.charge"),
			ActionVersion: pick("1", "2"), InputDigest: pick("", "sha256:in", "sha256:other"), OriginProposalID: "prp_origin",
			GrantedBy: "bob", CreatedAt: now.Add(-time.Hour), ActivatedAt: at("past", "none"), ExpiresAt: at("none", "future", "now", "past"), RevokedAt: at("none", "past", "future"),
			RuleFingerprint: pick("fp1", "fp2"),
		}
		if _, err := s.pool.Exec(ctx, `INSERT INTO `+s.q.schema+`.grants (`+grantColumns+`)
			VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, '', $16)`,
			g.ID, g.Tenant, g.Requester, string(g.Scope), g.ThreadID, g.RunID, g.Action, g.ActionVersion, g.InputDigest,
			g.OriginProposalID, g.GrantedBy, g.CreatedAt, g.ActivatedAt, g.ExpiresAt, g.RevokedAt, g.RuleFingerprint); err != nil {
			t.Fatal(err)
		}
		// The rule judges the proposal as the creation stamps it.
		stamped := p.Clone()
		stamped.CreatedAt = now
		want := store.GrantApproves(g, stamped, now)
		_, err := s.CreateProposal(ctx, &store.CreateProposalParams{Proposal: p, GrantID: g.ID,
			ApprovedBy: &store.Decision{Actor: "grant:" + g.ID, Via: "grant"}})
		switch {
		case want && err != nil:
			t.Errorf("grant %+v approves the call by the rule; the store refused it: %v", g, err)
		case !want && !isGrantNotLive(err):
			t.Errorf("grant %+v does not approve the call by the rule; the store answered %v, want ErrGrantNotLive", g, err)
		}
		if want {
			approved++
		} else {
			refused++
		}
	}
	if approved == 0 || refused == 0 {
		t.Fatalf("%d approved, %d refused: the cases do not cover both answers", approved, refused)
	}
}

func isGrantNotLive(err error) bool { return errors.Is(err, store.ErrGrantNotLive) }
