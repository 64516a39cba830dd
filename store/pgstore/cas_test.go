package pgstore

import (
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/countersign/countersign/store"
	"github.com/countersign/countersign/store/storetest"
)

// TestRulesChangeOnlyMutableColumns pins what the compare-and-set write
// (cas.go) relies on: every rule of store/transition.go, applied from every
// status it accepts, changes only the columns in mutableColumns (and the
// version and update time, always written). If a rule starts changing
// another field, this fails, and mutableColumns must list it.
func TestRulesChangeOnlyMutableColumns(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	rules := storetest.TransitionRules(now)
	applied := map[string]int{}
	for name, apply := range rules {
		for _, from := range storetest.AllStatuses {
			for _, mode := range []store.Mode{store.ModeIndependent, store.ModeWait} {
				p := storetest.FullProposal(now, "prp_1", from, mode)
				w := p.Clone()
				c, err := apply(w)
				if c == nil {
					continue
				}
				_ = err // a change with an error (a claim that expired) is written too
				applied[name]++
				store.Finish(w, now)
				before, after := p.Clone(), w.Clone()
				for _, x := range []*store.Proposal{before, after} {
					x.Status, x.Decisions, x.Attempt, x.Lease, x.ConsumedBy = "", nil, 0, nil, ""
					x.NextAttemptAt, x.Outcome, x.Version, x.UpdatedAt = nil, nil, 0, time.Time{}
					x.Approvers, x.EscalateAt, x.RemindAt = nil, nil, nil
				}
				if !reflect.DeepEqual(before, after) {
					t.Errorf("%s from %s (%s): the rule changed a column the compare-and-set write does not:\n got %+v\nwant %+v",
						name, from, mode, after, before)
				}
			}
		}
	}
	for name := range rules {
		if applied[name] == 0 {
			t.Errorf("%s: applied from no status: the test checks nothing of it", name)
		}
	}
}

// TestMutableColumnsAreColumns: each mutable column is a proposal column,
// and its bit is its position in mutableColumns.
func TestMutableColumnsAreColumns(t *testing.T) {
	t.Parallel()
	cols := strings.Join(columnList(), ",")
	var all mutable
	for i, mc := range mutableColumns {
		if mc.bit != 1<<i {
			t.Errorf("%s: bit %b, want %b", mc.name, mc.bit, 1<<i)
		}
		if !strings.Contains(","+cols+",", ","+mc.name+",") {
			t.Errorf("%s is not a proposal column", mc.name)
		}
		all |= mc.bit
	}
	if all != allMutable {
		t.Errorf("mutableColumns cover %b, want %b", all, allMutable)
	}
}
