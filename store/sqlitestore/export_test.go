package sqlitestore

import (
	"context"
	"fmt"
	"time"

	"github.com/countersign/countersign/store"
	"github.com/countersign/countersign/store/storetest"
)

// QueryRule is a storetest.RuleQuery: it runs the statement by which the
// store selects what rule accepts (claimSQL shares claimBatchSQL's WHERE,
// claimWhere), with the parameters the store gives it, and no limit to speak
// of.
func QueryRule(ctx context.Context, s store.Store, rule storetest.Rule, now time.Time) ([]string, error) {
	at := now.UnixNano()
	const noLimit = 1 << 30
	var (
		query string
		args  []any
	)
	switch rule {
	case storetest.RuleDue:
		query, args = expireDueSQL, []any{at, noLimit}
	case storetest.RuleClaimable:
		query, args = claimSQL, []any{at, at, noLimit}
	case storetest.RuleEscalatable:
		query, args = escalateDueSQL, []any{at, noLimit}
	case storetest.RuleRemindable:
		query, args = remindDueSQL, []any{at, noLimit}
	default:
		return nil, fmt.Errorf("no query for rule %q", rule)
	}
	ps, err := queryProposals(ctx, s.(*Store).r, query, args...)
	if err != nil {
		return nil, err
	}
	ids := make([]string, len(ps))
	for i, p := range ps {
		ids[i] = p.ID
	}
	return ids, nil
}
