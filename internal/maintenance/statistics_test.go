package maintenance_test

import (
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/countersign/countersign/internal/maintenance"
	"github.com/countersign/countersign/store"
)

// TestStatistics: on a store whose planner needs statistics (PostgreSQL),
// a run after the proposals table grew from nothing analyzes it, and the
// next run, with nothing changed, analyzes nothing. The other stores have
// no such statistics to keep, and the worker runs no such service for them.
func TestStatistics(t *testing.T) {
	t.Parallel()
	eachStore(t, func(t *testing.T, open opener) {
		clock := newClock()
		st := open(t, clock.Now)
		stats, ok := st.(store.Statistics)
		if !ok {
			return // memory, SQLite
		}
		e := newEngine(t, st, clock)
		for i := range 300 {
			propose(t, e, fmt.Sprintf("s%d", i))
		}
		var (
			mu   sync.Mutex
			runs [][]string
		)
		s := maintenance.NewStatistics(stats, maintenance.StatisticsConfig{Interval: time.Hour, Logger: discard(),
			Analyzed: func(tables []string) {
				mu.Lock()
				defer mu.Unlock()
				runs = append(runs, tables)
			}})
		// The first run, at once, may already see the proposals.
		start(t, s)
		if err := trigger(t, s); err != nil {
			t.Fatal(err)
		}
		mu.Lock()
		analyzed := slices.Concat(runs...)
		runs = nil
		mu.Unlock()
		if !slices.Contains(analyzed, "proposals") {
			t.Fatalf("after 300 proposals the runs analyzed %v; want proposals among them", analyzed)
		}
		if err := trigger(t, s); err != nil {
			t.Fatal(err)
		}
		mu.Lock()
		defer mu.Unlock()
		if slices.Contains(slices.Concat(runs...), "proposals") {
			t.Errorf("a run with nothing changed analyzed %v again", runs)
		}
	})
}
