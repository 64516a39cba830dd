package pgstore

import (
	"context"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5"
)

// sideTable is a table that repeats some proposals' columns for its
// indexes: its name, its columns, and the query (over the schema _S_) of
// the rows it must hold, exactly, those columns in that order.
type sideTable struct{ Name, Table, Columns, Want string }

// sideTables are the store's side tables.
var sideTables = []sideTable{
	// claimqueue.go: the proposals of store.Claimable's statuses.
	{"claim queue", "claim_queue", claimQueueColumns, `SELECT ` + claimQueueColumns + ` FROM _S_.proposals
		WHERE (status = 'approved' AND mode = 'independent') OR status IN ('executing', 'reconciling')`},
	// openproposals.go: the proposals of store.Due's statuses.
	{"open proposals", "open_proposals", openColumns, `SELECT id, tenant, thread_id, requester, action, replacement_key,
			created_at, expires_at, status = 'pending', escalate_at, remind_at, remind_every FROM _S_.proposals
		WHERE status = 'pending' OR (status = 'approved' AND mode IN ('wait', 'two_phase'))`},
}

// queryer runs a query: a connection or a pool.
type queryer interface {
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
}

// sideTableDiff returns up to ten rows in which what st holds in schema
// (quoted) and what it must hold differ, each as "missing or differing
// row" or "stray or differing row" with its tenant and id.
func sideTableDiff(ctx context.Context, q queryer, schema string, st sideTable) ([]string, error) {
	r := strings.NewReplacer("_S_", schema)
	rows, err := q.Query(ctx, `WITH want AS (`+r.Replace(st.Want)+`), got AS (SELECT `+st.Columns+` FROM `+schema+`.`+st.Table+`)
	(SELECT 'missing', id, tenant FROM (SELECT * FROM want EXCEPT SELECT * FROM got) m)
	UNION ALL
	(SELECT 'stray', id, tenant FROM (SELECT * FROM got EXCEPT SELECT * FROM want) s)
	LIMIT 10`)
	if err != nil {
		return nil, err
	}
	var out []string
	defer rows.Close()
	for rows.Next() {
		var kind, id, tenant string
		if err := rows.Scan(&kind, &id, &tenant); err != nil {
			return out, err
		}
		out = append(out, fmt.Sprintf("%s or differing row %s/%s", kind, tenant, id))
	}
	return out, rows.Err()
}
