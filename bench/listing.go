package main

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"net/url"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/countersign/countersign"
	"github.com/countersign/countersign/internal/pgtest"
	"github.com/countersign/countersign/internal/workload"
	"github.com/countersign/countersign/store"
)

// B4 times one page of 1000 proposals from a thread (an agent's thread
// view) and from the inbox (an approver's pending proposals), as the store
// grows from 10k to 1M proposals.
//
// Seeding a million proposals through CreateProposal would take most of an
// hour, so the store is seeded in bulk: three template proposals (pending,
// succeeded, rejected) go through the real engine and store, so the row
// format is authentic, and then set-based SQL copies them, varying what
// makes rows distinct. That SQL knows the stores' table layout (the
// proposals and threads tables of store/sqlitestore/migrations and
// store/pgstore/migrations): the columns it varies are named here, every
// other column is copied from the template as the store wrote it. Audit
// events and outcome messages, which listing never reads, are not copied.

// listSamples is how many pages are timed per source and size (after
// listWarmup untimed ones).
const (
	listSamples = 100
	listWarmup  = 5
	listPage    = store.MaxPageSize
)

// The dataset. Row i of the copies (i counts from the templates up, one
// second apart, the newest a few seconds before the run):
//
//   - 1 in hotEvery belongs to the measured thread, hotThread, which the
//     agent alice owns and requested; the others to threads of 16
//     consecutive proposals (th_<i/16>), owned and requested by one of 200
//     agents;
//   - a hash of i makes a row pending (pendPermille, see below), rejected
//     (2 %) or succeeded (the rest), and makes its approvers role:finance
//     (85 %), requester (10 %) or role:legal (5 %);
//   - the inbox is bob's, of role finance: he sees the pending proposals
//     whose approvers name role:finance.
//
// Each growth step makes 3 % of its new rows pending, but at least 1,500,
// so that even the first 10,000 hold a full page for bob (1,500 × 85 %):
// at 1M, 3.1 % of all proposals are pending.
const (
	hotEvery    = 8
	hotThread   = "th_hot"
	hotAgent    = "alice"
	inboxActor  = "bob"
	inboxRole   = "finance"
	minPending  = 1500
	pendPercent = 3
)

func init() {
	register(scenario{ID: "B4", order: 40, perStore: true,
		Title: "Listing: a page of 1000",
		Method: fmt.Sprintf("One store grows through the sizes (stored proposals); at each, after ANALYZE (PostgreSQL: VACUUM ANALYZE and a checkpoint; SQLite: a WAL checkpoint), %d pages of %d are timed from each source, "+
			"after %d untimed: **thread**, the agent's thread view (ThreadID set, the agent's identity; the thread holds 1 in %d proposals, all ages), "+
			"and **inbox**, an approver's pending proposals (Statuses [pending], as GET /v1/proposals?status=pending and the web inbox ask; "+
			"%d %% of proposals pending, at least %s per growth step, 85 %% of them the approver's). Measured at the engine's List, which is what the "+
			"server and the web inbox call: it adds the tenant and the caller's visibility filter to the store's ListProposals, so the figure "+
			"is the query, the row decoding and the visibility check, without HTTP and JSON rendering. Every page must hold %d rows, newest "+
			"first, of the thread or pending. Seeded in bulk: templates made by the real engine and store, copied by set-based SQL "+
			"(most settled, over 200 agents and a thread per 16 proposals). Ratio: p50 at the largest size ÷ p50 at the smallest.",
			listSamples, listPage, listWarmup, hotEvery, pendPercent, thousands(fmt.Sprint(minPending)), listPage),
		run: listing})
}

// listSource is one of the two pages B4 times.
type listSource struct {
	name   string
	id     countersign.Identity
	params countersign.ListParams
	// check reports a row that does not belong on the page.
	check func(p *store.Proposal) error
}

func listSources() []listSource {
	return []listSource{
		{name: "thread", id: countersign.Identity{Tenant: workload.Tenant, Actor: hotAgent},
			params: countersign.ListParams{ThreadID: hotThread, Limit: listPage},
			check: func(p *store.Proposal) error {
				if p.ThreadID != hotThread {
					return fmt.Errorf("proposal %s of thread %s", p.ID, p.ThreadID)
				}
				return nil
			}},
		{name: "inbox", id: countersign.Identity{Tenant: workload.Tenant, Actor: inboxActor, Roles: []string{inboxRole}},
			params: countersign.ListParams{Statuses: []store.Status{store.StatusPending}, Limit: listPage},
			check: func(p *store.Proposal) error {
				if p.Status != store.StatusPending || !slices.Contains(p.Approvers, "role:"+inboxRole) {
					return fmt.Errorf("proposal %s is %s for %v", p.ID, p.Status, p.Approvers)
				}
				return nil
			}},
	}
}

func listing(e *env) ([]Figure, error) {
	sizes := slices.Sorted(slices.Values(e.cfg.Sizes))
	st, spec, closeStore, err := e.open()
	if err != nil {
		return nil, err
	}
	defer closeStore()
	ctx := e.ctx
	eng, err := newEngine(st, countersign.ModeIndependent, func() {})
	if err != nil {
		return nil, err
	}
	sd, err := openSeeder(ctx, spec)
	if err != nil {
		return nil, err
	}
	defer sd.close()
	// The timeline ends a few seconds ago; the templates are newer still.
	t0 := time.Now().Add(-time.Duration(sizes[len(sizes)-1]+60) * time.Second).UTC().Truncate(time.Second)
	if err := makeTemplates(ctx, eng, st); err != nil {
		return nil, fmt.Errorf("templates: %w", err)
	}
	if err := sd.prepare(ctx); err != nil {
		return nil, err
	}
	var figs []Figure
	p50 := map[string][]float64{}
	have := len(templateStatuses) // rows stored so far
	for _, size := range sizes {
		if size > have {
			b := newBar(size-have, "B4 %s: seed to %s", e.target.title, thousands(fmt.Sprint(size)))
			pend := max(pendPercent*10, minPending*1000/(size-have))
			start := time.Now()
			for lo := have; lo < size; lo += seedChunk {
				hi := min(lo+seedChunk, size)
				if err := sd.seed(ctx, lo, hi, min(pend, 500), t0); err != nil {
					return figs, fmt.Errorf("seed %d..%d: %w", lo, hi, err)
				}
				b.add(hi - lo)
			}
			if err := sd.analyze(ctx); err != nil {
				return figs, fmt.Errorf("analyze: %w", err)
			}
			b.done()
			fmt.Fprintf(os.Stderr, "B4 %s: seeded %s proposals in %s\n", e.target.title, thousands(fmt.Sprint(size-have)), time.Since(start).Round(time.Millisecond))
			have = size
		}
		b := newBar(2*(listSamples+listWarmup), "B4 %s: list at %s", e.target.title, thousands(fmt.Sprint(size)))
		for _, src := range listSources() {
			lat, err := timeList(ctx, eng, src, size, b)
			if err != nil {
				b.done()
				return figs, fmt.Errorf("%s at %d: %w", src.name, size, err)
			}
			k := fmt.Sprintf("b4.%s.%s.%d", e.target.name, src.name, size)
			label := fmt.Sprintf("%s: page of %d at %s proposals", src.name, listPage, thousands(fmt.Sprint(size)))
			figs = append(figs,
				Figure{Key: k + ".p50", Label: label + ", p50", Value: ms(pct(lat, 50)), Unit: "ms"},
				Figure{Key: k + ".p99", Label: label + ", p99", Value: ms(pct(lat, 99)), Unit: "ms"})
			p50[src.name] = append(p50[src.name], ms(pct(lat, 50)))
		}
		b.done()
	}
	if len(sizes) > 1 {
		for _, src := range listSources() {
			v := p50[src.name]
			if len(v) != len(sizes) || v[0] == 0 {
				continue
			}
			figs = append(figs, Figure{Key: fmt.Sprintf("b4.%s.%s.ratio", e.target.name, src.name),
				Label: fmt.Sprintf("%s: p50 at %s ÷ p50 at %s", src.name, thousands(fmt.Sprint(sizes[len(sizes)-1])), thousands(fmt.Sprint(sizes[0]))),
				Value: v[len(v)-1] / v[0], Unit: "×"})
		}
	}
	return figs, nil
}

// timeList checks one page of src and returns listSamples sorted timings.
func timeList(ctx context.Context, eng *countersign.Engine, src listSource, size int, b *bar) ([]time.Duration, error) {
	page, err := eng.List(ctx, src.id, src.params)
	if err != nil {
		return nil, err
	}
	ps := page.Proposals
	// Below 10,000 proposals (a -quick run) the dataset may not fill a page.
	if len(ps) != listPage && (size >= 10000 || len(ps) == 0) {
		return nil, fmt.Errorf("the page holds %d proposals, want %d", len(ps), listPage)
	}
	for i, p := range ps {
		if err := src.check(p); err != nil {
			return nil, err
		}
		if i > 0 && !p.CreatedAt.Before(ps[i-1].CreatedAt) && !(p.CreatedAt.Equal(ps[i-1].CreatedAt) && p.ID < ps[i-1].ID) {
			return nil, fmt.Errorf("proposal %s is out of order", p.ID)
		}
	}
	lat := make([]time.Duration, 0, listSamples)
	for i := range listSamples + listWarmup {
		start := time.Now()
		page, err := eng.List(ctx, src.id, src.params)
		d := time.Since(start)
		if err != nil {
			return nil, err
		}
		if len(page.Proposals) != len(ps) {
			return nil, fmt.Errorf("a page held %d proposals, then %d", len(ps), len(page.Proposals))
		}
		if i >= listWarmup {
			lat = append(lat, d)
		}
		b.add(1)
	}
	slices.Sort(lat)
	return lat, nil
}

// templateStatuses are the statuses of the template proposals, one each.
var templateStatuses = []store.Status{store.StatusPending, store.StatusSucceeded, store.StatusRejected}

// templateID is the tool call id of the template of a status.
func templateID(s store.Status) string { return "tmpl_" + string(s) }

// templates selects the template rows, in either dialect.
const templates = `(SELECT * FROM proposals WHERE thread_id = '` + hotThread + `' AND tool_call_id IN ('tmpl_pending', 'tmpl_succeeded', 'tmpl_rejected'))`

// makeTemplates makes one proposal in each of templateStatuses through the
// engine (the call, the decision) and the store (the worker's claim and
// settlement), in the measured thread, as alice.
func makeTemplates(ctx context.Context, eng *countersign.Engine, st store.Store) error {
	alice := countersign.Identity{Tenant: workload.Tenant, Actor: hotAgent}
	bob := countersign.Identity{Tenant: workload.Tenant, Actor: inboxActor, Roles: []string{inboxRole}}
	input := json.RawMessage(`{"amount": 40, "currency": "EUR", "customer": "c_9", "reason": "duplicate charge on the March invoice"}`)
	for _, status := range templateStatuses {
		res, err := eng.Call(ctx, &countersign.Call{Identity: alice, ThreadID: hotThread, RunID: "run_1",
			ToolCallID: templateID(status), Action: "noop", Input: input})
		if err != nil {
			return err
		}
		if res.Status != countersign.ResultPending {
			return fmt.Errorf("call: status %s, want pending", res.Status)
		}
		id := res.ProposalID
		switch status {
		case store.StatusRejected:
			if _, err := eng.Decide(ctx, &countersign.Decision{Identity: bob, ProposalID: id, Verdict: countersign.Reject, Reason: "not this one"}); err != nil {
				return err
			}
		case store.StatusSucceeded:
			if _, err := eng.Decide(ctx, &countersign.Decision{Identity: bob, ProposalID: id, Verdict: countersign.Approve, Reason: "looks right"}); err != nil {
				return err
			}
			p, err := st.Claim(ctx, &store.ClaimParams{Tenant: workload.Tenant, ID: id, Owner: "bench", LeaseDuration: time.Minute})
			if err != nil {
				return err
			}
			executed := true
			if _, err := st.Settle(ctx, &store.SettleParams{Tenant: workload.Tenant, ID: id,
				Fence: store.Fence{Token: p.Lease.Token, Generation: p.Lease.Generation}, Status: store.StatusSucceeded,
				Executed: &executed, Receipt: "re_3PqL9x2e", Result: json.RawMessage(`{"refund_id": "re_3PqL9x2e", "state": "succeeded"}`),
				Summary: "refunded 40 EUR to c_9", Presentation: "Refunded 40 EUR to c_9."}); err != nil {
				return err
			}
		}
		p, err := st.GetProposal(ctx, &store.GetProposalParams{Tenant: workload.Tenant, ID: id})
		if err != nil {
			return err
		}
		if p.Status != status {
			return fmt.Errorf("template %s is %s, want %s", id, p.Status, status)
		}
	}
	return nil
}

// seedChunk is how many proposals one seeding statement inserts.
const seedChunk = 50000

// seeder copies the templates in bulk, in one store's SQL dialect.
type seeder interface {
	// prepare reads the proposals table's columns.
	prepare(ctx context.Context) error
	// seed inserts rows lo..hi-1 and their threads; pend is the share of
	// pending rows, in thousandths.
	seed(ctx context.Context, lo, hi, pend int, t0 time.Time) error
	analyze(ctx context.Context) error
	close()
}

func openSeeder(ctx context.Context, spec string) (seeder, error) {
	kind, target, _ := strings.Cut(spec, ":")
	switch kind {
	case "sqlite":
		u := url.URL{Scheme: "file", Path: target, RawQuery: url.Values{"_pragma": {"busy_timeout(30000)"}}.Encode()}
		db, err := sql.Open("sqlite", u.String())
		if err != nil {
			return nil, err
		}
		db.SetMaxOpenConns(1)
		// A large page cache for the index inserts: the seeding
		// connection's, not the store's.
		if _, err := db.ExecContext(ctx, `PRAGMA cache_size = -262144`); err != nil {
			_ = db.Close()
			return nil, err
		}
		return &sqliteSeeder{db: db}, nil
	case "postgres":
		conn, err := pgx.Connect(ctx, pgtest.DSN())
		if err != nil {
			return nil, err
		}
		if _, err := conn.Exec(ctx, `SET search_path TO `+pgx.Identifier{target}.Sanitize()); err != nil {
			_ = conn.Close(ctx)
			return nil, err
		}
		return &pgSeeder{conn: conn}, nil
	}
	return nil, fmt.Errorf("unknown store spec %q", spec)
}

// shapeColumns builds the select list: an expression for every varied
// column, the template's value (t.<column>) for every other one.
func shapeColumns(cols []string, vary map[string]string) string {
	out := make([]string, len(cols))
	for i, c := range cols {
		if e, ok := vary[c]; ok {
			out[i] = e
		} else {
			out[i] = "t." + c
		}
	}
	return strings.Join(out, ", ")
}

// The varied columns, shared by both dialects where the SQL is the same.
// In the row source r: i, h (a hash of i), st (status), hot, at (created
// at, the dialect's time type), rid (the id).
var commonVary = map[string]string{
	"id":              "r.rid",
	"requester":       "CASE WHEN r.hot THEN '" + hotAgent + "' ELSE 'agent_' || ((r.i / 16) % 200) END",
	"thread_id":       "CASE WHEN r.hot THEN '" + hotThread + "' ELSE 'th_' || (r.i / 16) END",
	"run_id":          "'run_' || (r.i / 16)",
	"tool_call_id":    "'call_' || r.i",
	"confirmation_id": "CASE WHEN t.confirmation_id = '' THEN '' ELSE 'cnf_' || r.i END",
	"operation_id":    "'op_' || r.i",
	"created_at":      "r.at",
	"updated_at":      "r.at",
}

// statusCase picks a row's status from its hash.
func statusCase(pend int) string {
	return fmt.Sprintf("CASE WHEN h %% 1000 < %d THEN 'pending' WHEN h %% 1000 < %d THEN 'rejected' ELSE 'succeeded' END", pend, pend+20)
}

// rowHash spreads i over 0..1000002 (an integer hash both dialects compute
// alike).
const rowHash = "(i * 2654435761) % 1000003"

type pgSeeder struct {
	conn *pgx.Conn
	cols []string
}

func (s *pgSeeder) close() { _ = s.conn.Close(context.Background()) }

func (s *pgSeeder) prepare(ctx context.Context) error {
	// Generated columns, should a migration add any, are the server's to
	// compute. The seeded statuses (pending, rejected, succeeded) leave the
	// claim queue empty, as the store would; the pending ones get their
	// open rows (seed).
	rows, err := s.conn.Query(ctx, `SELECT column_name FROM information_schema.columns
		WHERE table_schema = current_schema() AND table_name = 'proposals' AND is_generated = 'NEVER'
		ORDER BY ordinal_position`)
	if err != nil {
		return err
	}
	if s.cols, err = pgx.CollectRows(rows, pgx.RowTo[string]); err != nil {
		return err
	}
	return nil
}

func (s *pgSeeder) seed(ctx context.Context, lo, hi, pend int, t0 time.Time) error {
	vary := map[string]string{
		"approvers":  `CASE WHEN (r.h / 1000) % 20 < 17 THEN t.approvers WHEN (r.h / 1000) % 20 < 19 THEN ARRAY['requester'] ELSE ARRAY['role:legal'] END`,
		"expires_at": `CASE WHEN r.st = 'pending' THEN now() + interval '24 hours' ELSE r.at + interval '1 hour' END`,
		"outcome":    `CASE WHEN t.outcome IS NULL THEN NULL ELSE jsonb_set(t.outcome, '{proposal_id}', to_jsonb(r.rid)) END`,
	}
	for k, v := range commonVary {
		vary[k] = v
	}
	q := `INSERT INTO proposals (` + strings.Join(s.cols, ", ") + `)
		SELECT ` + shapeColumns(s.cols, vary) + `
		FROM (
			SELECT g.i, g.h, g.st, g.hot, g.at,
				'prp_' || lpad(to_hex((extract(epoch FROM g.at) * 1000)::bigint), 12, '0') || substr(md5(g.i::text), 1, 20) AS rid
			FROM (
				SELECT i, h, ` + statusCase(pend) + ` AS st, i % ` + fmt.Sprint(hotEvery) + ` = 0 AS hot,
					$3::timestamptz + i * interval '1 second' AS at
				FROM (SELECT i, ` + rowHash + ` AS h FROM generate_series($1::bigint, $2::bigint - 1) AS i) AS x
			) AS g
		) AS r
		JOIN ` + templates + ` AS t ON t.status = r.st`
	if _, err := s.conn.Exec(ctx, q, lo, hi, t0); err != nil {
		return err
	}
	// The pending ones' open rows (pgstore's openproposals.go), as the
	// store's creation writes them: the inbox reads them.
	if _, err := s.conn.Exec(ctx, `INSERT INTO open_proposals (id, tenant, thread_id, requester, action, replacement_key,
			created_at, expires_at, undecided, escalate_at, remind_at, remind_every)
		SELECT id, tenant, thread_id, requester, action, replacement_key, created_at, expires_at, true, escalate_at, remind_at, remind_every
		FROM proposals WHERE status = 'pending'
		AND created_at >= $2::timestamptz + $1::bigint * interval '1 second'
		AND created_at < $2::timestamptz + $3::bigint * interval '1 second'`, lo, t0, hi); err != nil {
		return err
	}
	// Their threads, each owned by its requester.
	_, err := s.conn.Exec(ctx, `INSERT INTO threads (tenant, id, owner, created_at)
		SELECT $3, 'th_' || n, 'agent_' || (n % 200), $4::timestamptz + n * 16 * interval '1 second'
		FROM generate_series($1::bigint / 16, ($2::bigint - 1) / 16) AS n
		ON CONFLICT DO NOTHING`, lo, hi, workload.Tenant, t0)
	return err
}

// analyze does what autovacuum would have done in a live store before the
// measurement rather than during it: statistics, the visibility map (a
// bulk insert leaves it empty), and a checkpoint of the insert's WAL.
func (s *pgSeeder) analyze(ctx context.Context) error {
	if _, err := s.conn.Exec(ctx, `VACUUM (ANALYZE) proposals`); err != nil {
		return err
	}
	if _, err := s.conn.Exec(ctx, `VACUUM (ANALYZE) threads`); err != nil {
		return err
	}
	if _, err := s.conn.Exec(ctx, `VACUUM (ANALYZE) open_proposals`); err != nil {
		return err
	}
	// CHECKPOINT needs superuser or pg_checkpoint; without it, the
	// server's own checkpoints may overlap the measurement.
	_, _ = s.conn.Exec(ctx, `CHECKPOINT`)
	return nil
}

type sqliteSeeder struct {
	db   *sql.DB
	cols []string
}

func (s *sqliteSeeder) close() { _ = s.db.Close() }

func (s *sqliteSeeder) prepare(ctx context.Context) error {
	rows, err := s.db.QueryContext(ctx, `SELECT name FROM pragma_table_info('proposals') ORDER BY cid`)
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
		var c string
		if err := rows.Scan(&c); err != nil {
			return err
		}
		s.cols = append(s.cols, c)
	}
	return rows.Err()
}

func (s *sqliteSeeder) seed(ctx context.Context, lo, hi, pend int, t0 time.Time) error {
	vary := map[string]string{
		"approvers":  `CASE WHEN (r.h / 1000) % 20 < 17 THEN t.approvers WHEN (r.h / 1000) % 20 < 19 THEN '["requester"]' ELSE '["role:legal"]' END`,
		"expires_at": fmt.Sprintf(`CASE WHEN r.st = 'pending' THEN %d ELSE r.at + 3600000000000 END`, time.Now().Add(24*time.Hour).UnixNano()),
		"outcome":    `CASE WHEN t.outcome IS NULL THEN NULL ELSE json_set(t.outcome, '$.proposal_id', r.rid) END`,
	}
	for k, v := range commonVary {
		vary[k] = v
	}
	q := `WITH RECURSIVE x(i) AS (SELECT ?1 UNION ALL SELECT i + 1 FROM x WHERE i < ?2 - 1)
		INSERT INTO proposals (` + strings.Join(s.cols, ", ") + `)
		SELECT ` + shapeColumns(s.cols, vary) + `
		FROM (
			SELECT g.i, g.h, g.st, g.hot, g.at,
				'prp_' || printf('%012x', g.at / 1000000) || substr(lower(hex(randomblob(10))), 1, 20) AS rid
			FROM (
				SELECT i, h, ` + statusCase(pend) + ` AS st, i % ` + fmt.Sprint(hotEvery) + ` = 0 AS hot,
					?3 + i * 1000000000 AS at
				FROM (SELECT i, ` + rowHash + ` AS h FROM x)
			) AS g
		) AS r
		JOIN ` + templates + ` AS t ON t.status = r.st`
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer func() { _ = tx.Rollback() }()
	if _, err := tx.ExecContext(ctx, q, lo, hi, t0.UnixNano()); err != nil {
		return err
	}
	if _, err := tx.ExecContext(ctx, `WITH RECURSIVE n(n) AS (SELECT ?1 / 16 UNION ALL SELECT n + 1 FROM n WHERE n < (?2 - 1) / 16)
		INSERT OR IGNORE INTO threads (tenant, id, owner, created_at)
		SELECT ?3, 'th_' || n, 'agent_' || (n % 200), ?4 + n * 16 * 1000000000 FROM n`, lo, hi, workload.Tenant, t0.UnixNano()); err != nil {
		return err
	}
	return tx.Commit()
}

// analyze gathers statistics and moves the insert's WAL into the database
// (as the store's automatic checkpoints would have by the time a store grew
// this large), so that readers do not search a large WAL.
func (s *sqliteSeeder) analyze(ctx context.Context) error {
	if _, err := s.db.ExecContext(ctx, `ANALYZE`); err != nil {
		return err
	}
	_, err := s.db.ExecContext(ctx, `PRAGMA wal_checkpoint(TRUNCATE)`)
	return err
}
