package pgstore

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/countersign/countersign/internal/pgtest"
	"github.com/countersign/countersign/store"
)

// BenchmarkDrainFloor is what the PostgreSQL server alone can drain: the
// rows a drain of b.N approved proposals must write, sent as bare SQL by
// four loops of claim-then-settle, 125 proposals a statement, with no
// engine, no worker and nothing decoded but ids. It is the bound on B1
// that no client-side work can lift (docs/profiles/postgres.md, "The
// drain's floor").
//
//   - This store's schema and its claim statement (claimBatchSQL, the one
//     the worker runs), then a set-based settlement that writes what
//     SettleMany writes for a success: the row, one proposal.settled
//     event, one outcome message, and the claim queue row deleted. Since
//     migration 0022 the claim order lives in a table of its own and no
//     index of proposals names a column the drain changes, so its updates
//     can be HOT (the "narrow" schema this benchmark measured before it
//     was built: docs/decisions/0050-pg-claim-queue.md).
//
//   - writes=rows leaves out the audit events and the outcome message, to
//     show what they cost; docs/design.md requires both.
//
//     go test -run '^$' -bench DrainFloor -benchtime 30000x ./store/pgstore
func BenchmarkDrainFloor(b *testing.B) {
	for _, writes := range []string{"design", "rows"} {
		b.Run("writes="+writes, func(b *testing.B) {
			benchDrainFloor(b, writes == "design")
		})
	}
}

const (
	floorLoops = 4
	floorBatch = 125
)

func benchDrainFloor(b *testing.B, audit bool) {
	ctx := context.Background()
	dsn, schema := pgtest.NewSchema(b)
	st, err := Open(ctx, dsn, &Options{Schema: schema})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = st.Close() })
	pool, err := pgxpool.New(ctx, pgtest.PoolDSN(dsn))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(pool.Close)
	q := func(sql string) string { return qualify(st.q.schema, sql) }
	exec := func(sqls ...string) {
		b.Helper()
		for _, sql := range sqls {
			if _, err := pool.Exec(ctx, q(sql)); err != nil {
				b.Fatalf("%s: %v", sql, err)
			}
		}
	}
	seedFloor(b, st, pool, b.N)
	claim, settle := q(claimBatchSQL), q(floorSettleSQL)
	claim = strings.Replace(claim, "PCOLS", "p.tenant, p.id, p.thread_id, p.version, p.status, p.attempt, p.lease_expires_at, p.next_attempt_at, p.updated_at", 1)
	claim = claim[:strings.LastIndex(claim, "SELECT ")] + "SELECT tenant, id, thread_id, version FROM claimed"
	if !audit {
		claim = dropCTE(b, claim, "ev")
		settle = dropCTE(b, dropCTE(b, settle, "ev"), "msg")
	}
	exec(`ANALYZE _S_.proposals`, `ANALYZE _S_.claim_queue`, `CHECKPOINT`)

	// The log the drain writes, server-wide (nothing else runs on the
	// bench's server): bytes, records and flushes per proposal.
	var walBefore, walAfter, recBefore, recAfter, syncBefore, syncAfter float64
	walRead := func(bytes, recs, syncs *float64) {
		if err := pool.QueryRow(ctx, `SELECT wal_bytes::float8, wal_records::float8, wal_sync::float8 FROM pg_stat_wal`).Scan(bytes, recs, syncs); err != nil {
			b.Fatal(err)
		}
	}
	walRead(&walBefore, &recBefore, &syncBefore)
	b.ResetTimer()
	start := time.Now()
	var wg sync.WaitGroup
	var mu sync.Mutex
	settled := 0
	errs := make(chan error, floorLoops)
	for range floorLoops {
		wg.Add(1)
		go func() {
			defer wg.Done()
			n, err := floorLoop(ctx, pool, claim, settle)
			mu.Lock()
			settled += n
			mu.Unlock()
			errs <- err
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)
	b.StopTimer()
	walRead(&walAfter, &recAfter, &syncAfter)
	b.ReportMetric((walAfter-walBefore)/float64(b.N), "walB/proposal")
	b.ReportMetric((recAfter-recBefore)/float64(b.N), "walrec/proposal")
	b.ReportMetric((syncAfter-syncBefore)/float64(b.N), "walsync/proposal")
	close(errs)
	for err := range errs {
		if err != nil {
			b.Fatal(err)
		}
	}
	if settled != b.N {
		b.Fatalf("settled %d of %d proposals", settled, b.N)
	}
	var hot, upd int64
	if err := pool.QueryRow(ctx, `SELECT n_tup_hot_upd, n_tup_upd FROM pg_stat_user_tables
		WHERE schemaname = $1 AND relname = 'proposals'`, schema).Scan(&hot, &upd); err == nil && upd > 0 {
		b.ReportMetric(float64(hot)/float64(upd), "hot/update")
	}
	b.ReportMetric(float64(b.N)/elapsed.Seconds(), "proposals/s")
}

// floorLoop claims and settles until nothing is left to claim, and returns
// how many proposals it settled.
func floorLoop(ctx context.Context, pool *pgxpool.Pool, claim, settle string) (int, error) {
	settled := 0
	for {
		rows, err := pool.Query(ctx, claim, time.Now(), "floor", int64(time.Minute/time.Microsecond), floorBatch)
		if err != nil {
			return settled, err
		}
		var tenants, ids []string
		var versions []int64
		for rows.Next() {
			var tenant, id, thread string
			var version int64
			if err := rows.Scan(&tenant, &id, &thread, &version); err != nil {
				rows.Close()
				return settled, err
			}
			tenants, ids, versions = append(tenants, tenant), append(ids, id), append(versions, version)
		}
		if err := rows.Err(); err != nil {
			return settled, err
		}
		if len(ids) == 0 {
			return settled, nil
		}
		var n int
		if err := pool.QueryRow(ctx, settle, tenants, ids, versions, time.Now()).Scan(&n); err != nil {
			return settled, err
		}
		if n != len(ids) {
			return settled, fmt.Errorf("settled %d of the %d claimed", n, len(ids))
		}
		settled += n
	}
}

// seedFloor stores n approved proposals in independent mode: one through
// CreateProposal, as the bench seeds, then n-1 copies of its row made by the
// server (ids, tool call, confirmation and operation replaced, 16 threads),
// which is quicker than n creations and leaves the same rows.
func seedFloor(b *testing.B, st *Store, pool *pgxpool.Pool, n int) {
	b.Helper()
	ctx := context.Background()
	const digest = "sha256:44136fa355b3678a1146ad16f7e8649e94fb4fc21fe77e8310c060f61caaff8a"
	_, err := st.CreateProposal(ctx, &store.CreateProposalParams{
		Proposal: &store.Proposal{
			ID: "prp_floor_0", Tenant: "acme", Requester: "alice", ThreadID: "t0", ToolCallID: "prp_floor_0",
			Action: "noop", ActionVersion: "1", Input: []byte(`{}`), RawInput: []byte(`{}`), InputDigest: digest,
			Mode: store.ModeIndependent, Approvers: []string{"requester"}, Quorum: 1,
			ExpiresAt: time.Now().Add(24 * time.Hour), OperationID: "op_prp_floor_0", ConfirmationID: "cnf_prp_floor_0",
		},
		ApprovedBy: &store.Decision{Actor: "grant:seed", Via: "grant"},
	})
	if err != nil {
		b.Fatal(err)
	}
	batch := &pgx.Batch{}
	batch.Queue(qualify(st.q.schema, `INSERT INTO _S_.threads (tenant, id, owner, created_at)
		SELECT 'acme', 't' || i, 'alice', now() FROM generate_series(1, 15) i ON CONFLICT DO NOTHING`))
	batch.Queue(qualify(st.q.schema, `INSERT INTO _S_.proposals (`+proposalColumns+`)
		SELECT `+proposalColumns+` FROM (SELECT (jsonb_populate_record(p, jsonb_build_object(
			'id', 'prp_floor_' || i, 'tool_call_id', 'prp_floor_' || i, 'thread_id', 't' || (i % 16),
			'confirmation_id', 'cnf_prp_floor_' || i, 'operation_id', 'op_prp_floor_' || i))).*
		FROM _S_.proposals p, generate_series(1, $1 - 1) i WHERE p.id = 'prp_floor_0') r`), n)
	batch.Queue(qualify(st.q.schema, `INSERT INTO _S_.claim_queue (`+claimQueueColumns+`)
		SELECT `+claimQueueColumns+` FROM _S_.proposals WHERE id <> 'prp_floor_0'`))
	if err := pool.SendBatch(ctx, batch).Close(); err != nil {
		b.Fatal(err)
	}
}

// dropCTE removes the CTE named name ("), name AS (" up to the next CTE or
// the final SELECT) from a statement built of CTEs.
func dropCTE(b *testing.B, sql, name string) string {
	b.Helper()
	i := strings.Index(sql, "), "+name+" AS (")
	if i < 0 {
		b.Fatalf("no CTE %s in %s", name, sql)
	}
	rest := sql[i+2:]
	j := strings.Index(rest, "), ")
	if k := strings.Index(rest, ")\nSELECT "); j < 0 || (k >= 0 && k < j) {
		j = k
	}
	return sql[:i] + rest[j:]
}

// floorSettleSQL writes what SettleMany writes for a successful execution,
// set-based: the row (succeeded, its outcome, the lease cleared), one
// proposal.settled event and one outcome message each, and the claim queue
// row deleted. Parameters: tenants,
// ids, versions (parallel arrays), now.
const floorSettleSQL = `WITH k AS (SELECT * FROM unnest($1::text[], $2::text[], $3::bigint[]) AS k(tenant, id, version)
), u AS (
	UPDATE _S_.proposals p SET status = 'succeeded', outcome = '{"receipt": {"id": "ok"}}'::jsonb,
		lease_owner = NULL, lease_token = NULL, lease_generation = NULL, lease_expires_at = NULL,
		version = p.version + 1, updated_at = $4
	FROM k WHERE p.tenant = k.tenant AND p.id = k.id AND p.version = k.version
	RETURNING p.tenant, p.id, p.thread_id
), w AS (
	DELETE FROM _S_.claim_queue q USING u WHERE q.id = u.id
), ev AS (
	INSERT INTO _S_.events (tenant, proposal_id, type, actor, via, status, detail, at)
	SELECT tenant, id, 'proposal.settled', 'worker', '', 'succeeded', 'receipt ok', $4 FROM u
), msg AS (
	INSERT INTO _S_.messages (id, tenant, thread_id, role, text, proposal_id, outcome, created_at, outcome_status)
	SELECT 'msg_' || id || '_succeeded', tenant, thread_id, 'tool', 'noop succeeded', id,
		'{"receipt": {"id": "ok"}}'::jsonb, $4, 'succeeded' FROM u
	ON CONFLICT (tenant, proposal_id, outcome_status) WHERE outcome_status <> '' DO NOTHING
)
SELECT count(*) FROM u`
