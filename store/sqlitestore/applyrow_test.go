package sqlitestore

import (
	"context"
	"fmt"
	"reflect"
	"testing"
	"time"

	"github.com/countersign/countersign/store"
	"github.com/countersign/countersign/store/storetest"
)

// TestApplyRowWritesTheRule pins what updateProposalSQL relies on: every
// rule of store/transition.go, applied from every status it accepts, changes
// only the columns that statement writes. Each rule's result is written
// with applyRow over a row holding every field and read back: the row must
// be the rule's result, field for field. A rule that starts changing
// another field fails here until updateProposalSQL writes it.
func TestApplyRowWritesTheRule(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := openInternal(t)
	now := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	rules := storetest.TransitionRules(now)
	applied := map[string]int{}
	n := 0
	for name, apply := range rules {
		for _, from := range storetest.AllStatuses {
			for _, mode := range []store.Mode{store.ModeIndependent, store.ModeWait} {
				n++
				base := storetest.FullProposal(now, fmt.Sprintf("prp_%d", n), from, mode)
				w := base.Clone()
				c, _ := apply(w) // a change with an error (a claim that expired) is written too
				if c == nil {
					continue
				}
				applied[name]++
				var got *store.Proposal
				err := s.write(ctx, func(tx *wtx, _ time.Time) error {
					if err := insertProposal(ctx, tx, base); err != nil {
						return err
					}
					stored, err := getProposal(ctx, tx, base.Tenant, base.ID)
					if err != nil {
						return err
					}
					if !reflect.DeepEqual(stored, base) {
						return fmt.Errorf("the row as inserted reads back as\n%+v\nwant\n%+v", stored, base)
					}
					if err := applyRow(ctx, tx, w, base.Version, c, now); err != nil {
						return err
					}
					got, err = getProposal(ctx, tx, base.Tenant, base.ID)
					return err
				})
				if err != nil {
					t.Fatalf("%s from %s (%s): %v", name, from, mode, err)
				}
				if !reflect.DeepEqual(got, w) {
					t.Errorf("%s from %s (%s): the row as written differs from the rule's result:\n got %+v\nwant %+v",
						name, from, mode, got, w)
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
