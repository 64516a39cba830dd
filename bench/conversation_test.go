package main

import (
	"context"
	"strings"
	"testing"

	"github.com/countersign/countersign/internal/pgtest"
)

// useB7Sizes sets B7's sizes for the test.
func useB7Sizes(t *testing.T, s conversationSizes) {
	t.Helper()
	old := b7Sizes
	b7Sizes = s
	t.Cleanup(func() { b7Sizes = old })
}

// tinyB7 are sizes that only show B7 works: the figures mean nothing.
var tinyB7 = conversationSizes{Turns: 40, Clients: 4, Parked: 100, WarmParked: 20}

// TestConversationsRun runs B7 at tiny sizes on every store: every turn
// must finish (the scenario fails otherwise), the figures must be there,
// the round trips on PostgreSQL alone, and the goal judged.
func TestConversationsRun(t *testing.T) {
	if testing.Short() {
		t.Skip("B7 parks runs and drives turns over HTTP; -short skips it")
	}
	useB7Sizes(t, tinyB7)
	for _, st := range []string{"sqlite", "postgres"} {
		t.Run(st, func(t *testing.T) {
			if st == "postgres" {
				pgtest.Connect(t) // skips, or fails in CI, when the server is unreachable
			}
			r, err := run(context.Background(), config{Stores: []string{st}, Scenarios: []string{"b7"}})
			if err != nil {
				t.Fatal(err)
			}
			if len(r.Problems) > 0 {
				t.Fatalf("problems: %q", r.Problems)
			}
			k := "b7." + st
			for _, key := range []string{k + ".turns", k + ".p50", k + ".p99", k + ".resume_p50", k + ".resume_p99",
				k + ".parked_rate", k + ".parked_claim_ms", k + ".parked_goroutines_before", k + ".parked_goroutines_after"} {
				if f, ok := r.figure(key); !ok || f.Value <= 0 || f.Store != st || f.Scenario != "B7" {
					t.Errorf("figure %s: %+v (found %v), want a positive value of B7 on %s", key, f, ok, st)
				}
			}
			if f, ok := r.figure(k + ".parked_bytes_per_run"); !ok || !strings.Contains(f.Note, "MB before") {
				t.Errorf("figure %s: %+v (found %v), want it with its before and after", k+".parked_bytes_per_run", f, ok)
			}
			for _, key := range []string{k + ".rt_message", k + ".rt_decision", k + ".rt_resume", k + ".rt_poll", k + ".conns", k + ".parked_conns_open"} {
				f, ok := r.figure(key)
				if st == "postgres" && (!ok || f.Value <= 0) {
					t.Errorf("figure %s: %+v (found %v), want a positive value", key, f, ok)
				}
				if st != "postgres" && ok {
					t.Errorf("figure %s on %s: %+v", key, st, f)
				}
			}
			if _, ok := r.figure(k + ".parked_conns_in_use"); ok != (st == "postgres") {
				t.Errorf("figure %s found %v on %s", k+".parked_conns_in_use", ok, st)
			}
			title := storeTitle(st)
			var judged bool
			for _, g := range r.Goals {
				if g.ID == "B7 "+title {
					judged = g.Status != "not measured"
				}
			}
			if !judged {
				t.Errorf("goal B7 %s not judged: %+v", title, r.Goals)
			}
			md := r.markdown()
			for _, want := range []string{"### B7 Conversations", "| " + title + " | 40 turns"} {
				if !strings.Contains(md, want) {
					t.Errorf("the report lacks %q:\n%s", want, md)
				}
			}
		})
	}
}

// TestQuickConversationSizes checks that -quick shrinks the turns and the
// parked runs, and keeps the clients.
func TestQuickConversationSizes(t *testing.T) {
	useB7Sizes(t, conversationSizes{Turns: 2000, Clients: 7, Parked: 100000, WarmParked: 5000})
	if got := conversationSizesFor(config{}); got != b7Sizes {
		t.Errorf("sizes %+v, want the flags' %+v", got, b7Sizes)
	}
	got := conversationSizesFor(config{Quick: true})
	if got.Turns != quickB7Sizes.Turns || got.Parked != quickB7Sizes.Parked || got.Clients != 7 || got.WarmParked != 5000 {
		t.Errorf("quick sizes %+v", got)
	}
}

// TestParkedRunGoal judges the B7 goal from known figures.
func TestParkedRunGoal(t *testing.T) {
	fig := func(key string, v float64) Figure {
		return Figure{Key: "b7.postgres." + key, Scenario: "B7", Store: "postgres", Value: v}
	}
	for _, tc := range []struct {
		name string
		figs []Figure
		want string
	}{
		{"none", nil, "not measured"},
		{"no bytes", []Figure{fig("parked_goroutines_before", 10), fig("parked_goroutines_after", 10)}, "not measured"},
		{"rows only", []Figure{fig("parked_goroutines_before", 10), fig("parked_goroutines_after", 12), fig("parked_bytes_per_run", -3), fig("parked_conns_in_use", 0)}, "met"},
		{"a goroutine per run", []Figure{fig("parked_goroutines_before", 10), fig("parked_goroutines_after", 5010), fig("parked_bytes_per_run", 0)}, "missed"},
		{"memory per run", []Figure{fig("parked_goroutines_before", 10), fig("parked_goroutines_after", 10), fig("parked_bytes_per_run", 2048)}, "missed"},
		{"a connection held", []Figure{fig("parked_goroutines_before", 10), fig("parked_goroutines_after", 10), fig("parked_bytes_per_run", 1), fig("parked_conns_in_use", 1)}, "missed"},
	} {
		r := &Report{Figures: tc.figs}
		var got string
		for _, g := range goals(r, config{Stores: []string{"postgres"}}) {
			if g.ID == "B7 PostgreSQL" {
				got = g.Status
			}
		}
		if got != tc.want {
			t.Errorf("%s: goal %q, want %q", tc.name, got, tc.want)
		}
	}
}

// TestAnnotateKeepsScenarioNotes checks that the report's notes add to a
// scenario's own note instead of replacing it.
func TestAnnotateKeepsScenarioNotes(t *testing.T) {
	riverRun = nil
	r := &Report{Figures: []Figure{
		{Key: "b7.sqlite.parked_goroutines_after", Scenario: "B7", Store: "sqlite", Value: 12, Unit: "goroutines", Note: "+0"},
		{Key: "b3.sqlite.actions", Scenario: "B3", Store: "sqlite", Value: 500, Unit: "actions/s", Note: "mine"},
	}}
	annotate(r, map[string]float64{"sqlite": 5000})
	if f, _ := r.figure("b7.sqlite.parked_goroutines_after"); f.Note != "+0" {
		t.Errorf("B7 note %q, want +0", f.Note)
	}
	if f, _ := r.figure("b3.sqlite.actions"); !strings.HasPrefix(f.Note, "mine; 40 % of the commit limit") {
		t.Errorf("B3 note %q", f.Note)
	}
}
