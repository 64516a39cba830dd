package main

import (
	"cmp"
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// commitsPerAction is what one action needs, committed one at a time:
// B1 claim and settle; B3 also the proposal's creation and its approval.
var commitsPerAction = map[string]float64{"B1": 2, "B3": 4}

// annotate notes each B1 and B3 figure as a fraction of the store's commit
// limit, and B1's drain rates and B2 against River tuned, after the note the scenario
// gave it, if any.
func annotate(r *Report, limits map[string]float64) {
	r.River = riverRun
	for i := range r.Figures {
		f := &r.Figures[i]
		var notes []string
		if f.Note != "" {
			notes = append(notes, f.Note)
		}
		if c, ok := commitsPerAction[f.Scenario]; ok && f.Unit != "ms" {
			if lim := limits[f.Store]; lim > 0 && strings.HasSuffix(f.Unit, "/s") {
				notes = append(notes, fmt.Sprintf("%.0f %% of the commit limit (%g commits × %s/s ÷ %s commits/s)", 100*c*f.Value/lim, c, format(f.Value), format(lim)))
			}
		}
		switch {
		case f.Scenario == "B1" && f.Unit == "proposals/s":
			// A drain's rate against River's; not its round trips, log
			// bytes or connections, which River's run does not measure.
			if rv, ok := r.figure(fmt.Sprintf("river.%s.tuned.drain", f.Store)); ok && rv.Value > 0 {
				notes = append(notes, fmt.Sprintf("× %.2f River tuned (%s jobs/s)", f.Value/rv.Value, format(rv.Value)))
			}
		case f.Scenario == "B2":
			p := f.Key[strings.LastIndexByte(f.Key, '.')+1:]
			if rv, ok := r.figure(fmt.Sprintf("river.%s.tuned.%s", f.Store, p)); ok && rv.Value > 0 {
				notes = append(notes, fmt.Sprintf("× %.3f River tuned (%s ms)", f.Value/rv.Value, format(rv.Value)))
			}
		}
		f.Note = strings.Join(notes, "; ")
	}
}

// goal is one target of issue 6 item 5, of issue 12 or of issue 32.
type goal struct {
	id, text string
	// only, if set, is the one store the goal applies to.
	only string
	// check returns met and what was measured; ok false when a figure it
	// needs is missing.
	check func(r *Report, store string) (met bool, detail string, ok bool)
}

var goalList = []goal{
	{"B1", "PostgreSQL: ≥ River tuned's burn-down with 1 and with 4 processes; SQLite: ≥ 2 × River tuned's", "", func(r *Report, st string) (bool, string, bool) {
		need := map[string]float64{"postgres": 1, "sqlite": 2}[st]
		rv, ok1 := r.figure(fmt.Sprintf("river.%s.tuned.drain", st))
		// SQLite's goal (issue 6) takes the better of 1 and 4 processes;
		// PostgreSQL's (issue 12) must hold with both.
		best := 0.0
		for i, p := range []string{"procs1", "procs4"} {
			f, ok := r.figure(fmt.Sprintf("b1.%s.%s", st, p))
			switch {
			case !ok:
			case st == "postgres" && i > 0 && best > 0:
				best = min(best, f.Value)
			case st == "postgres":
				best = f.Value
			default:
				best = max(best, f.Value)
			}
		}
		if !ok1 || best == 0 || rv.Value == 0 {
			return false, "", false
		}
		return best >= need*rv.Value, fmt.Sprintf("%s/s vs River tuned %s/s: × %.2f (need × %g)", format(best), format(rv.Value), best/rv.Value, need), true
	}},
	{"B2", "p50 ≤ 1 ms and p99 ≤ 5 ms", "", func(r *Report, st string) (bool, string, bool) {
		p50, ok1 := r.figure("b2." + st + ".p50")
		p99, ok2 := r.figure("b2." + st + ".p99")
		if !ok1 || !ok2 {
			return false, "", false
		}
		return p50.Value <= 1 && p99.Value <= 5, fmt.Sprintf("p50 %s ms, p99 %s ms", format(p50.Value), format(p99.Value)), true
	}},
	{"B3", "≥ 50 % of the commit-bound ceiling", "", func(r *Report, st string) (bool, string, bool) {
		f, ok := r.figure("b3." + st + ".actions")
		lim := 0.0
		for _, k := range []string{"limit." + st + ".serial", "limit." + st + ".grouped"} {
			if l, ok := r.figure(k); ok {
				lim = max(lim, l.Value)
			}
		}
		if !ok || lim == 0 {
			return false, "", false
		}
		frac := commitsPerAction["B3"] * f.Value / lim
		return frac >= 0.5, fmt.Sprintf("%s actions/s = %.0f %% of %s commits/s ÷ 4", format(f.Value), 100*frac, format(lim)), true
	}},
	{"B4", "page of 1000 ≤ 20 ms, 1M/10k ≤ 1.5", "", func(r *Report, st string) (bool, string, bool) {
		var parts []string
		met, any := true, false
		for _, from := range []string{"thread", "inbox"} {
			small, ok1 := r.figure(fmt.Sprintf("b4.%s.%s.10000.p50", st, from))
			big, ok2 := r.figure(fmt.Sprintf("b4.%s.%s.1000000.p50", st, from))
			if !ok1 || !ok2 || small.Value == 0 {
				continue
			}
			any = true
			ratio := big.Value / small.Value
			met = met && big.Value <= 20 && small.Value <= 20 && ratio <= 1.5
			parts = append(parts, fmt.Sprintf("%s: %s ms at 1M, ratio %.2f", from, format(big.Value), ratio))
		}
		return met, strings.Join(parts, "; "), any
	}},
	{"B5", "≤ 10 KB per waiter, all woken within 1 s", "", func(r *Report, st string) (bool, string, bool) {
		mem, ok1 := r.figure("b5." + st + ".bytes_per_waiter")
		wake, ok2 := r.figure("b5." + st + ".wake_all_ms")
		if !ok1 || !ok2 {
			return false, "", false
		}
		return mem.Value <= 10*1024 && wake.Value <= 1000, fmt.Sprintf("%s bytes per waiter, all woken in %s ms", format(mem.Value), format(wake.Value)), true
	}},
	{"B6", "SQLite: ≥ 2,000 decisions/s, p99 ≤ 20 ms", "sqlite", func(r *Report, st string) (bool, string, bool) {
		rate, ok1 := r.figure("b6.sqlite.rate")
		p99, ok2 := r.figure("b6.sqlite.p99")
		if !ok1 || !ok2 {
			return false, "", false
		}
		return rate.Value >= 2000 && p99.Value <= 20, fmt.Sprintf("%s decisions/s, p99 %s ms", format(rate.Value), format(p99.Value)), true
	}},
	{"B7", "no goroutine, no store connection and under 256 bytes of Go memory per parked run", "", func(r *Report, st string) (bool, string, bool) {
		k := "b7." + st
		before, ok1 := r.figure(k + ".parked_goroutines_before")
		after, ok2 := r.figure(k + ".parked_goroutines_after")
		mem, ok3 := r.figure(k + ".parked_bytes_per_run")
		if !ok1 || !ok2 || !ok3 {
			return false, "", false
		}
		// A few goroutines may come and go (the engine's wait watcher, a
		// pool's health check); one per run would be thousands.
		extra := after.Value - before.Value
		met := extra <= parkedGoroutineSlack && mem.Value < 256
		detail := fmt.Sprintf("goroutines %+.0f, %s bytes per run", extra, format(mem.Value))
		if use, ok := r.figure(k + ".parked_conns_in_use"); ok {
			met = met && use.Value == 0
			detail += fmt.Sprintf(", %.0f connections in use", use.Value)
		}
		return met, detail, true
	}},
	{"B8", "issue 17: 10,000 long-polls and 1,000 event streams on one server with 0 errors", "", func(r *Report, st string) (bool, string, bool) {
		k := "b8." + st
		errs, ok1 := r.figure(k + ".errors")
		polls, ok2 := r.figure(k + ".go_per_longpoll")
		streams, ok3 := r.figure(k + ".go_per_stream")
		nPolls, ok4 := r.figure(k + ".longpolls")
		nStreams, ok5 := r.figure(k + ".streams")
		if !ok1 || !ok2 || !ok3 || !ok4 || !ok5 || nPolls.Value < 10000 || nStreams.Value < 1000 {
			// Smaller runs do not judge the goal.
			return false, "", false
		}
		return errs.Value == 0, fmt.Sprintf("%.0f errors; %s bytes per long-poll, %s per stream (Go)", errs.Value, format(polls.Value), format(streams.Value)), true
	}},
	{"B9", "issue 32: decision committed → Execute-start p99 ≤ 100 ms with 64 approvers and 4 workers; no proposal executed twice", "", func(r *Report, st string) (bool, string, bool) {
		p99, ok1 := r.figure("b9." + st + ".p99")
		doubles, ok2 := r.figure("b9." + st + ".doubles")
		if !ok2 {
			return false, "", false
		}
		if !ok1 {
			// A double fails the scenario before its latency is reported:
			// the goal is missed all the same.
			return false, fmt.Sprintf("%.0f proposals executed twice", doubles.Value), doubles.Value > 0
		}
		return p99.Value <= 100 && doubles.Value == 0, fmt.Sprintf("p99 %s ms, %.0f proposals executed twice", format(p99.Value), doubles.Value), true
	}},
	{"B3 vs SQLite", "issue 12: B3 PostgreSQL ≥ B3 SQLite in the same run", "postgres", func(r *Report, st string) (bool, string, bool) {
		pg, ok1 := r.figure("b3.postgres.actions")
		sq, ok2 := r.figure("b3.sqlite.actions")
		if !ok1 || !ok2 || sq.Value == 0 {
			return false, "", false
		}
		return pg.Value >= sq.Value, fmt.Sprintf("%s vs SQLite %s actions/s: × %.2f", format(pg.Value), format(sq.Value), pg.Value/sq.Value), true
	}},
	{"B6", "issue 12: PostgreSQL ≥ B6 SQLite in the same run, p99 ≤ 20 ms", "postgres", func(r *Report, st string) (bool, string, bool) {
		pg, ok1 := r.figure("b6.postgres.rate")
		p99, ok2 := r.figure("b6.postgres.p99")
		sq, ok3 := r.figure("b6.sqlite.rate")
		if !ok1 || !ok2 || !ok3 || sq.Value == 0 {
			return false, "", false
		}
		return pg.Value >= sq.Value && p99.Value <= 20, fmt.Sprintf("%s vs SQLite %s decisions/s: × %.2f, p99 %s ms", format(pg.Value), format(sq.Value), pg.Value/sq.Value, format(p99.Value)), true
	}},
	{"RT calls", "issue 12: ≤ 2 round trips per HTTP call (B3)", "postgres", func(r *Report, st string) (bool, string, bool) {
		return atMost(r, 2, "b3."+st+".rt_call")
	}},
	{"RT decisions", "issue 12: ≤ 2 round trips per decision (B3, B6)", "postgres", func(r *Report, st string) (bool, string, bool) {
		return atMost(r, 2, "b3."+st+".rt_decision", "b6."+st+".rt_decision")
	}},
	{"RT drain", "issue 12: ≤ 0.05 round trips per proposal for claims and for settlements (B1)", "postgres", func(r *Report, st string) (bool, string, bool) {
		var keys []string
		for _, p := range []string{"procs1", "procs4"} {
			keys = append(keys, fmt.Sprintf("b1.%s.%s.rt_claim", st, p), fmt.Sprintf("b1.%s.%s.rt_settle", st, p))
		}
		return atMost(r, 0.05, keys...)
	}},
	{"B1 #32", "issue 32: PostgreSQL B1 with < 16 cores ≥ 0.7 × River tuned with 1 and with 4 processes; with ≥ 16 cores, 1 process ≥ 1.0 × River tuned and ≥ 0.9 × 4 processes, 4 processes ≥ 1.5 × River tuned", "postgres", b1Issue32},
	{"B3 latency #32", "issue 32: B3 call → Execute-start p50 ≤ 20 ms and p99 ≤ 100 ms at the main load", "", func(r *Report, st string) (bool, string, bool) {
		p50, ok1 := r.figure("b3." + st + ".p50")
		p99, ok2 := r.figure("b3." + st + ".p99")
		if !ok1 || !ok2 {
			return false, "", false
		}
		detail := fmt.Sprintf("p50 %s ms, p99 %s ms", format(p50.Value), format(p99.Value))
		if r.B3Agents > 0 {
			detail = fmt.Sprintf("%d agents: %s", r.B3Agents, detail)
		}
		return p50.Value <= 20 && p99.Value <= 100, detail, true
	}},
	{"B3 load #32", "issue 32: B3 throughput does not fall as the load grows: actions/s at each load ≥ 0.9 × the best at any smaller load", "", b3LoadIssue32},
	{"B3 #32", "issue 32: B3 PostgreSQL ≥ 50 % of the commit ceiling with ≥ 16 cores; with fewer, ≥ B3 SQLite in the same run (issue 12's row, judged by issue 32's machine rule)", "postgres", b3PGIssue32},
}

// bigMachine is the core count from which issue 32 sets its many-core
// goals; below it, the machine's few cores are the bound.
const bigMachine = 16

// cores is the number of cores the report's machine has.
func cores(r *Report) (int, bool) {
	n, err := strconv.Atoi(r.Machine["cores"])
	return n, err == nil && n > 0
}

// b1Issue32 judges issue 32's B1 goal on PostgreSQL by the machine's cores.
func b1Issue32(r *Report, st string) (bool, string, bool) {
	c, ok0 := cores(r)
	rv, ok1 := r.figure(fmt.Sprintf("river.%s.tuned.drain", st))
	p1, ok2 := r.figure(fmt.Sprintf("b1.%s.procs1", st))
	p4, ok3 := r.figure(fmt.Sprintf("b1.%s.procs4", st))
	if !ok0 || !ok1 || !ok2 || !ok3 || rv.Value == 0 || p4.Value == 0 {
		return false, "", false
	}
	r1, r4 := p1.Value/rv.Value, p4.Value/rv.Value
	if c < bigMachine {
		return r1 >= 0.7 && r4 >= 0.7, fmt.Sprintf("%d cores (< %d): 1 process %s/s = × %.2f, 4 processes %s/s = × %.2f River tuned (%s/s); need × 0.7 each",
			c, bigMachine, format(p1.Value), r1, format(p4.Value), r4, format(rv.Value)), true
	}
	of4 := p1.Value / p4.Value
	return r1 >= 1 && of4 >= 0.9 && r4 >= 1.5, fmt.Sprintf("%d cores: 1 process %s/s = × %.2f River tuned (%s/s; need × 1.0) and × %.2f of 4 processes (need × 0.9); 4 processes %s/s = × %.2f River tuned (need × 1.5)",
		c, format(p1.Value), r1, format(rv.Value), of4, format(p4.Value), r4), true
}

// b3LoadIssue32 judges that B3's throughput holds as the load grows: at
// each load, at least 0.9 × the best of the smaller loads.
func b3LoadIssue32(r *Report, st string) (bool, string, bool) {
	type point struct {
		agents int
		rate   float64
	}
	var pts []point
	if f, ok := r.figure("b3." + st + ".actions"); ok && r.B3Agents > 0 {
		pts = append(pts, point{r.B3Agents, f.Value})
	}
	prefix := "b3." + st + ".agents"
	for _, f := range r.Figures {
		rest, ok := strings.CutPrefix(f.Key, prefix)
		if !ok {
			continue
		}
		n, ok := strings.CutSuffix(rest, ".actions")
		if !ok {
			continue
		}
		if a, err := strconv.Atoi(n); err == nil && a > 0 {
			pts = append(pts, point{a, f.Value})
		}
	}
	if len(pts) < 2 {
		return false, "", false
	}
	slices.SortFunc(pts, func(a, b point) int { return cmp.Compare(a.agents, b.agents) })
	met := true
	best := pts[0]
	parts := []string{fmt.Sprintf("%d agents %s/s", best.agents, format(best.rate))}
	for _, p := range pts[1:] {
		ratio := 0.0
		if best.rate > 0 {
			ratio = p.rate / best.rate
		}
		met = met && p.rate >= 0.9*best.rate
		parts = append(parts, fmt.Sprintf("%d agents %s/s = × %.2f the best below (%d agents)", p.agents, format(p.rate), ratio, best.agents))
		if p.rate > best.rate {
			best = p
		}
	}
	return met, strings.Join(parts, "; ") + "; need × 0.9", true
}

// b3PGIssue32 judges B3 on PostgreSQL by issue 32's machine rule: against
// the commit ceiling with many cores, against SQLite with few.
func b3PGIssue32(r *Report, st string) (bool, string, bool) {
	c, ok0 := cores(r)
	pg, ok1 := r.figure("b3." + st + ".actions")
	if !ok0 || !ok1 {
		return false, "", false
	}
	if c >= bigMachine {
		lim := 0.0
		for _, k := range []string{"limit." + st + ".serial", "limit." + st + ".grouped"} {
			if l, ok := r.figure(k); ok {
				lim = max(lim, l.Value)
			}
		}
		if lim == 0 {
			return false, "", false
		}
		frac := commitsPerAction["B3"] * pg.Value / lim
		return frac >= 0.5, fmt.Sprintf("%d cores: %s actions/s = %.0f %% of %s commits/s ÷ 4 (need 50 %%)", c, format(pg.Value), 100*frac, format(lim)), true
	}
	sq, ok := r.figure("b3.sqlite.actions")
	if !ok || sq.Value == 0 {
		return false, "", false
	}
	return pg.Value >= sq.Value, fmt.Sprintf("%d cores (< %d): %s vs SQLite %s actions/s: × %.2f (need × 1)", c, bigMachine, format(pg.Value), format(sq.Value), pg.Value/sq.Value), true
}

// parkedGoroutineSlack is how many more goroutines B7 tolerates with its
// runs parked than before, whatever their number.
const parkedGoroutineSlack = 5

// atMost judges that every figure of keys that was measured is at most
// limit; ok is false when none was.
func atMost(r *Report, limit float64, keys ...string) (met bool, detail string, ok bool) {
	met = true
	var parts []string
	for _, k := range keys {
		f, found := r.figure(k)
		if !found {
			continue
		}
		ok = true
		met = met && f.Value <= limit
		parts = append(parts, fmt.Sprintf("%s %s", rtName(k), format(f.Value)))
	}
	return met, strings.Join(parts, "; "), ok
}

// goals judges every goal on every store it applies to.
func goals(r *Report, cfg config) []GoalResult {
	var out []GoalResult
	for _, g := range goalList {
		for _, st := range cfg.Stores {
			if g.only != "" && st != g.only {
				continue
			}
			res := GoalResult{ID: g.id + " " + storeTitle(st), Goal: g.text, Status: "not measured"}
			if met, detail, ok := g.check(r, st); ok {
				res.Status, res.Detail = "missed", detail
				if met {
					res.Status = "met"
				}
			}
			out = append(out, res)
		}
	}
	return out
}

// rtName names a round-trip figure in a goal's detail: b1.postgres.procs4.rt_claim
// is "B1 procs4 claim".
func rtName(key string) string {
	parts := strings.Split(key, ".")
	if len(parts) < 3 {
		return key
	}
	rest := parts[2:]
	rest[len(rest)-1] = strings.TrimPrefix(rest[len(rest)-1], "rt_")
	return strings.ToUpper(parts[0]) + " " + strings.Join(rest, " ")
}
