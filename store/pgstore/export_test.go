package pgstore

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/countersign/countersign/store"
	"github.com/countersign/countersign/store/storetest"
)

// QueryRule is a storetest.RuleQuery: it runs the statement by which the
// store selects what rule accepts, with the parameters the store gives it
// (now as the store's clock reads it, truncated to microseconds), and no
// limit to speak of. The claim is the worker's whole statement, claimBatch,
// in a transaction that is rolled back: its selection is the part that
// picks (lease expiry on the database's clock, as always).
func QueryRule(ctx context.Context, s store.Store, rule storetest.Rule, now time.Time) ([]string, error) {
	st := s.(*Store)
	now = dbTime(now)
	const noLimit = 1 << 30
	var rows pgx.Rows
	var err error
	switch rule {
	case storetest.RuleDue:
		rows, err = st.pool.Query(ctx, st.q.expireDue, now, noLimit)
	case storetest.RuleEscalatable:
		rows, err = st.pool.Query(ctx, st.q.escalateDue, now, noLimit)
	case storetest.RuleRemindable:
		rows, err = st.pool.Query(ctx, st.q.remindDue, now, noLimit)
	case storetest.RuleClaimable:
		tx, err := st.pool.Begin(ctx)
		if err != nil {
			return nil, err
		}
		defer func() { _ = tx.Rollback(ctx) }()
		rows, err := tx.Query(ctx, st.q.claimBatch, now, "rule-query", int64(1), noLimit)
		if err != nil {
			return nil, err
		}
		return firstColumn(rows)
	default:
		return nil, fmt.Errorf("no query for rule %q", rule)
	}
	if err != nil {
		return nil, err
	}
	return firstColumn(rows)
}

// firstColumn collects the first column of rows, the proposal's id in
// every statement above.
func firstColumn(rows pgx.Rows) ([]string, error) {
	return pgx.CollectRows(rows, func(r pgx.CollectableRow) (string, error) {
		v, err := r.Values()
		if err != nil {
			return "", err
		}
		id, ok := v[0].(string)
		if !ok {
			return "", fmt.Errorf("first column %T, want the id", v[0])
		}
		return id, nil
	})
}

// SideTables and SideTableDiff check the side tables (sidetables_test.go).
var (
	SideTables    = sideTables
	SideTableDiff = sideTableDiff
)
