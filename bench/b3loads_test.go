package main

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/countersign/countersign/store"
)

// TestB3Loads checks the loads B3 runs at: -b3-loads and -agents, each
// once, the smallest first; and the keys each load's figures carry.
func TestB3Loads(t *testing.T) {
	for _, c := range []struct {
		loads  []int
		agents int
		want   []int
	}{
		{[]int{4, 32, 64}, 32, []int{4, 32, 64}},
		{[]int{64, 4, 32}, 16, []int{4, 16, 32, 64}}, // -agents runs though not listed
		{[]int{8, 8}, 8, []int{8}},
		{nil, 32, []int{32}},
	} {
		if got := b3Loads(config{B3Loads: c.loads, Agents: c.agents}); !slices.Equal(got, c.want) {
			t.Errorf("b3Loads(%v, -agents %d) = %v, want %v", c.loads, c.agents, got, c.want)
		}
	}
	if k := b3Key("postgres", 32, 32); k != "b3.postgres" {
		t.Errorf("the main load's key %q, want b3.postgres (today's keys)", k)
	}
	if k := b3Key("sqlite", 4, 32); k != "b3.sqlite.agents4" {
		t.Errorf("another load's key %q, want b3.sqlite.agents4", k)
	}
}

// TestParseLoads checks -b3-loads: positive whole numbers, and a clear
// refusal of anything else.
func TestParseLoads(t *testing.T) {
	got, err := parseLoads(" 4, 32,64 ,")
	if err != nil || !slices.Equal(got, []int{4, 32, 64}) {
		t.Errorf("parseLoads = %v, %v; want [4 32 64]", got, err)
	}
	if got, err := parseLoads(""); err != nil || len(got) != 0 {
		t.Errorf("parseLoads(\"\") = %v, %v; want none", got, err)
	}
	for _, bad := range []string{"4x", "0", "-4", "4,many", "3.5"} {
		if _, err := parseLoads(bad); err == nil || !strings.Contains(err.Error(), "positive whole number") {
			t.Errorf("parseLoads(%q) = %v, want a refusal naming what it wants", bad, err)
		}
	}
}

// decideSpy answers each Decide with the outcome (or error) it is given;
// it has no Listen (listeningSpy adds one).
type decideSpy struct {
	store.Store
	outcome store.DecideOutcome
	err     error
}

func (s *decideSpy) Decide(_ context.Context, p *store.DecideParams) (*store.DecideResult, error) {
	if s.err != nil {
		return nil, s.err
	}
	return &store.DecideResult{Outcome: s.outcome}, nil
}

// listeningSpy is a decideSpy with a Listen, which counts its calls.
type listeningSpy struct {
	*decideSpy
	listened int
}

func (s *listeningSpy) Listen(context.Context, func(store.Notification)) error {
	s.listened++
	return nil
}

// TestTimeDecisions checks B3's decision clock: only a decision the store
// applied is timed, by its proposal's id, and the wrapper keeps Listen
// in reach (store.As) exactly where the store has one (the worker is
// woken through it).
func TestTimeDecisions(t *testing.T) {
	spy := &decideSpy{outcome: store.DecideApplied}
	var seen []string
	var last int64
	st := timeDecisions(spy, func(id string, at int64) { seen = append(seen, id); last = at })
	ctx := context.Background()
	if _, err := st.Decide(ctx, &store.DecideParams{ID: "prp_a"}); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(seen, []string{"prp_a"}) || last <= 0 {
		t.Fatalf("an applied decision: seen %v at %d, want [prp_a] at a moment", seen, last)
	}
	spy.outcome = store.DecideUnchanged
	_, _ = st.Decide(ctx, &store.DecideParams{ID: "prp_b"})
	spy.outcome = store.DecideConflict
	_, _ = st.Decide(ctx, &store.DecideParams{ID: "prp_c"})
	spy.err = errors.New("store down")
	if _, err := st.Decide(ctx, &store.DecideParams{ID: "prp_d"}); err == nil {
		t.Error("the store's error was lost")
	}
	if len(seen) != 1 {
		t.Errorf("decisions not applied were timed: %v", seen)
	}
	if _, ok := store.As[store.Notifier](st); ok {
		t.Error("a store without Listen gained one")
	}
	ls := &listeningSpy{decideSpy: &decideSpy{outcome: store.DecideApplied}}
	n, ok := store.As[store.Notifier](tagSteps(timeDecisions(ls, func(string, int64) {})))
	if !ok {
		t.Fatal("the store's Listen was lost under the decision clock and the step tags")
	}
	if err := n.Listen(ctx, func(store.Notification) {}); err != nil || ls.listened != 1 {
		t.Errorf("Listen reached the store %d times (%v), want once", ls.listened, err)
	}
}

// goalStatus judges the goals on r for store st and returns the status of
// the goal whose id (without the store) is id.
func goalStatus(t *testing.T, r *Report, st, id string) (status, detail string) {
	t.Helper()
	for _, g := range goals(r, config{Stores: []string{st}}) {
		if g.ID == id+" "+storeTitle(st) {
			return g.Status, g.Detail
		}
	}
	t.Fatalf("goal %s %s is not in the table", id, storeTitle(st))
	return "", ""
}

// reportOf builds a report of the given figures (key → value) on a machine of
// cores cores ("" for a machine that did not say), with B3's main load at
// 32 agents.
func reportOf(cores string, kv map[string]float64) *Report {
	r := &Report{Machine: map[string]string{}, B3Agents: 32}
	if cores != "" {
		r.Machine["cores"] = cores
	}
	for k, v := range kv {
		r.add(Figure{Key: k, Value: v})
	}
	return r
}

// TestIssue32Goals checks each goal of issue 32 met, missed, and not
// measured when a figure it needs is missing.
func TestIssue32Goals(t *testing.T) {
	riverRun = nil
	b1 := func(river, p1, p4 float64) map[string]float64 {
		return map[string]float64{"river.postgres.tuned.drain": river, "b1.postgres.procs1": p1, "b1.postgres.procs4": p4}
	}
	cases := []struct {
		name, id, store string
		r               *Report
		want            string
		detail          string // a part of the detail, if met or missed
	}{
		// B1: on few cores 0.7 × River with both process counts.
		{"B1 few cores met", "B1 #32", "postgres", reportOf("2", b1(10000, 7000, 7500)), "met", "2 cores (< 16)"},
		{"B1 few cores, 4 processes short", "B1 #32", "postgres", reportOf("2", b1(10000, 7000, 6900)), "missed", "× 0.69"},
		// On many cores the same figures miss: 1 process needs 1.0 ×.
		{"B1 many cores, the few-core figures", "B1 #32", "postgres", reportOf("16", b1(10000, 7000, 7500)), "missed", "16 cores"},
		{"B1 many cores met", "B1 #32", "postgres", reportOf("16", b1(10000, 14000, 15000)), "met", "× 0.93 of 4 processes"},
		{"B1 many cores, 1 process behind 4", "B1 #32", "postgres", reportOf("32", b1(10000, 12000, 15000)), "missed", "× 0.80 of 4 processes"},
		{"B1 many cores, 4 processes short", "B1 #32", "postgres", reportOf("16", b1(10000, 14000, 14900)), "missed", "× 1.49 River tuned (need × 1.5)"},
		{"B1 no River", "B1 #32", "postgres", reportOf("2", map[string]float64{"b1.postgres.procs1": 7000, "b1.postgres.procs4": 7000}), "not measured", ""},
		{"B1 no 4 processes", "B1 #32", "postgres", reportOf("2", map[string]float64{"river.postgres.tuned.drain": 1, "b1.postgres.procs1": 7000}), "not measured", ""},
		{"B1 cores unknown", "B1 #32", "postgres", reportOf("", b1(10000, 7000, 7500)), "not measured", ""},

		// B3 latency at the main load, each store.
		{"latency met", "B3 latency #32", "sqlite", reportOf("2", map[string]float64{"b3.sqlite.p50": 20, "b3.sqlite.p99": 100}), "met", "32 agents: p50 20.0 ms, p99 100 ms"},
		{"latency p99 missed", "B3 latency #32", "postgres", reportOf("2", map[string]float64{"b3.postgres.p50": 5, "b3.postgres.p99": 101}), "missed", "p99 101 ms"},
		{"latency p50 missed", "B3 latency #32", "sqlite", reportOf("2", map[string]float64{"b3.sqlite.p50": 21, "b3.sqlite.p99": 50}), "missed", "p50 21.0 ms"},
		{"latency other load only", "B3 latency #32", "sqlite", reportOf("2", map[string]float64{"b3.sqlite.agents4.p50": 1, "b3.sqlite.agents4.p99": 1}), "not measured", ""},

		// B3 load: each load ≥ 0.9 × the best of the smaller ones.
		{"load met", "B3 load #32", "sqlite", reportOf("2", map[string]float64{"b3.sqlite.agents4.actions": 900, "b3.sqlite.actions": 1000, "b3.sqlite.agents64.actions": 950}), "met",
			"4 agents 900/s; 32 agents 1,000/s = × 1.11 the best below (4 agents); 64 agents 950/s = × 0.95 the best below (32 agents)"},
		{"load falls at 64", "B3 load #32", "postgres", reportOf("2", map[string]float64{"b3.postgres.agents4.actions": 900, "b3.postgres.actions": 1000, "b3.postgres.agents64.actions": 899}), "missed", "64 agents 899/s = × 0.90 the best below (32 agents)"},
		// The best of any smaller load counts, not only the next one.
		{"load falls below an earlier best", "B3 load #32", "sqlite", reportOf("2", map[string]float64{"b3.sqlite.agents4.actions": 1000, "b3.sqlite.actions": 950, "b3.sqlite.agents64.actions": 880}), "missed", "64 agents 880/s = × 0.88 the best below (4 agents)"},
		{"load one load only", "B3 load #32", "sqlite", reportOf("2", map[string]float64{"b3.sqlite.actions": 1000}), "not measured", ""},

		// B3 PostgreSQL: the commit ceiling on many cores, SQLite on few.
		{"PG few cores met", "B3 #32", "postgres", reportOf("2", map[string]float64{"b3.postgres.actions": 600, "b3.sqlite.actions": 500}), "met", "2 cores (< 16): 600 vs SQLite 500"},
		{"PG few cores missed", "B3 #32", "postgres", reportOf("2", map[string]float64{"b3.postgres.actions": 400, "b3.sqlite.actions": 500, "limit.postgres.grouped": 1000}), "missed", "× 0.80"},
		{"PG few cores, no SQLite", "B3 #32", "postgres", reportOf("2", map[string]float64{"b3.postgres.actions": 600, "limit.postgres.grouped": 1000}), "not measured", ""},
		{"PG many cores met", "B3 #32", "postgres", reportOf("16", map[string]float64{"b3.postgres.actions": 1000, "b3.sqlite.actions": 2000, "limit.postgres.grouped": 8000}), "met", "50 % of 8,000 commits/s"},
		{"PG many cores missed", "B3 #32", "postgres", reportOf("16", map[string]float64{"b3.postgres.actions": 999, "b3.sqlite.actions": 500, "limit.postgres.serial": 8000}), "missed", "16 cores"},
		{"PG many cores, no limit", "B3 #32", "postgres", reportOf("16", map[string]float64{"b3.postgres.actions": 1000, "b3.sqlite.actions": 500}), "not measured", ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			status, detail := goalStatus(t, c.r, c.store, c.id)
			if status != c.want || !strings.Contains(detail, c.detail) {
				t.Errorf("goal %s %s: %q, %q; want %q with %q", c.id, c.store, status, detail, c.want, c.detail)
			}
		})
	}
	// The PostgreSQL-only goals are not listed for SQLite.
	for _, g := range goals(reportOf("2", nil), config{Stores: []string{"sqlite"}}) {
		if strings.HasPrefix(g.ID, "B1 #32") || strings.HasPrefix(g.ID, "B3 #32") {
			t.Errorf("goal %s listed for SQLite", g.ID)
		}
	}
}

// TestGoalIDsUnique checks that no two rows of the goal table share an id.
func TestGoalIDsUnique(t *testing.T) {
	seen := map[string]bool{}
	for _, g := range goals(&Report{}, config{Stores: []string{"sqlite", "postgres"}}) {
		if seen[g.ID] {
			t.Errorf("goal id %q twice", g.ID)
		}
		seen[g.ID] = true
	}
}

// TestWrappersUnwrap: every store wrapper of the bench keeps the driver's
// optional interfaces (here Listen) in reach of store.As, so that the
// engines and workers it serves run as they would on the bare store. A
// wrapper that hid them made B1 and B3 run one lane (profiles/scale.md,
// change 7), and made the audit scenario's runs with the sealer run without
// the lanes and planner statistics that its runs without the sealer had.
func TestWrappersUnwrap(t *testing.T) {
	for _, w := range []struct {
		name string
		wrap func(store.Store) store.Store
	}{
		{"B2 timedStore", func(s store.Store) store.Store { return &timedStore{Store: s} }},
		{"B3 timeDecisions", func(s store.Store) store.Store { return timeDecisions(s, func(string, int64) {}) }},
		{"B3 tagSteps", tagSteps},
		{"B5 waitStore", func(s store.Store) store.Store { return &waitStore{Store: s} }},
		{"B8 creationCounter", func(s store.Store) store.Store { return &creationCounter{Store: s} }},
		{"B9 decideClock", func(s store.Store) store.Store { return &decideClock{Store: s} }},
		{"audit timedSeals", func(s store.Store) store.Store { return timedSeals{Store: s, c: &sealClock{}} }},
	} {
		ls := &listeningSpy{decideSpy: &decideSpy{}}
		n, ok := store.As[store.Notifier](w.wrap(ls))
		if !ok {
			t.Errorf("%s hides the store's Listen", w.name)
			continue
		}
		if err := n.Listen(context.Background(), func(store.Notification) {}); err != nil || ls.listened != 1 {
			t.Errorf("%s: Listen reached the store %d times (%v), want once", w.name, ls.listened, err)
		}
	}
}
