package pgstore

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	migfiles "github.com/countersign/countersign/internal/migrations"

	"github.com/countersign/countersign/internal/pgtest"
	"github.com/countersign/countersign/store"
)

// applied pins the SHA-256 of every released migration. Databases in the
// field have run these files; editing one would leave them with a schema no
// build describes. Change the schema with a new file, and add its sum here.
var applied = map[string]string{
	"0001_init.sql":                "2d40531bcae0e67f481b47cb93478591cf0c12a92e478fdb9fd90a3362aa20df",
	"0002_list_pending.sql":        "680ecd5ae43f2508ef0b080992e063cc6d9ea63bb15da40ca2c314f583efeb9e",
	"0003_sessions.sql":            "48bb1dc1f5743aebca8980b1bee91902127843fec8c45c6d253b0f60039a2b08",
	"0004_rule_fingerprint.sql":    "549a285a9e547c997efeed18da1f546b2f44d6ab13022352a78333e1fb3915cb",
	"0005_runs.sql":                "3df5cefb15c2bc91b0bdc8b5439d1fcedfba557b74816000da08d6f1f64c67ce",
	"0008_escalation.sql":          "c1915e7738d7f889d0474a77e29a41b1fcbfd20030de57008b4f6c6e9a6119e6",
	"0006_client_tools.sql":        "5e06ce525ef6dd1f60790d1611213674b8b5a695b308fcd1a69f866b8777c7c2",
	"0007_notifications.sql":       "671c6ea87fd21da9ce794e74647f6269935b0dc286b3a0d471a0a643ddc7d0a9",
	"0009_audit_chain.sql":         "d24080c19a7bca0878a9b0db1c41bfd349eb684aa1ce92221b13566d82ffe76c",
	"0010_rule_applied.sql":        "d38e641abb237065630b9245e2a351f31e740fe6cc072872c1b925b8c9b8c600",
	"0011_credential_kinds.sql":    "0471c2d7037426855e7ee72f7a6f446554fc5abe1a2c13b308df0a95d9fd4327",
	"0012_audit_checkpoints.sql":   "1328558a1d4a0e7cdb8a75c1e854103ea5907d4de456c3b203ecdb6901c807d2",
	"0013_message_keys.sql":        "fe96155b64ddfcebd777596b23aae66274cab408b5f79b437b46504b38b7bf0a",
	"0014_event_actor_kind.sql":    "a042c0ef277eb47f56bfdcbe1c760d4e89cc0af9eaded4d6604ae3e8706bf292",
	"0015_approver_channels.sql":   "3d02add104c1854526fc24f1f4f5b18edba3b37ae09df4a56905cefd8f46d5f3",
	"0016_slack_announcements.sql": "2dcbaffc0f372a46405cb0c9fc81b9a781e689ce5191f0727568579b771d25dc",
	"0017_email_links.sql":         "4e247e9ac4cf94d014349f3b12e1f12508ff5a00cd070a30c4e564cfb0586f0d",
	"0018_passkeys.sql":            "76c4b476c51e9f9291b3965569b779f70b22a91aa2847056d30a51945d3aca2d",
	"0019_trace_parent.sql":        "f0765c16476f177aa9b3138b54a8e336fa2980638a4bbf47788b582754b674c5",
	"0020_mcp_nonces.sql":          "0f87115e008c0bc166c8f1ce3c921b9aaa35f1ee18ead9e1bffb8dcaec9d9c7c",
	"0021_statistics_targets.sql":  "79669e51a089d9591215f8730aa2d93d2267eb577b815deddf60f70d43bfe65a",
	"0022_claim_queue.sql":         "835fb78491f890ae60f6914dde2b7357ecbd6d86fe9e061e2e704e0beafab1fc",
	"0023_open_proposals.sql":      "0df7efce98cd08526c6dc5c717491ccba0807419a9c62d47a035b8752d1f43ac",
}

func TestMigrationsUnchanged(t *testing.T) {
	t.Parallel()
	files, err := migfiles.Load(migrationFiles, "migrations")
	if err != nil {
		t.Fatal(err)
	}
	if LatestSchemaVersion() != len(files) {
		t.Errorf("LatestSchemaVersion = %d, want %d", LatestSchemaVersion(), len(files))
	}
	for _, p := range migfiles.CheckPinned(files, applied) {
		t.Error(p)
	}
}

// TestQueriesQualified guards the query texts: every table is qualified.
func TestQueriesQualified(t *testing.T) {
	t.Parallel()
	q := newQueries(`"s"`)
	for name, sql := range map[string]string{
		"claimBatch": q.claimBatch, "supersede": q.supersede, "getMany": q.getMany, "getReplayed": q.getReplayed,
		"listProposals": q.listProposals,
	} {
		if strings.Contains(sql, schemaToken) || strings.Contains(sql, "PCOLS") {
			t.Errorf("%s: unreplaced token in %s", name, sql)
		}
		for _, table := range []string{"proposals", "events", "messages", "threads", "grants"} {
			for _, kw := range []string{"FROM ", "INTO ", "UPDATE ", "JOIN "} {
				if strings.Contains(sql, kw+table) {
					t.Errorf("%s: unqualified %s%s", name, kw, table)
				}
			}
		}
	}
}

func TestParsePayload(t *testing.T) {
	t.Parallel()
	for payload, want := range map[string]store.Notification{
		"w":        {Work: true},
		"p:prp_1":  {ProposalID: "prp_1"},
		"p:a:b":    {ProposalID: "a:b"},
		"p:":       {},
		"x":        {},
		"":         {},
		"wp:prp_1": {},
		// a change of a named tenant
		"t:4:acmeprp_1":            {Tenant: "acme", ProposalID: "prp_1"},
		"t:3:a:bprp_1":             {Tenant: "a:b", ProposalID: "prp_1"},
		"t:0:prp_1":                {ProposalID: "prp_1"},
		"t:":                       {},
		"t:4:acme":                 {}, // no proposal
		"t:5:acme":                 {},
		"t:x:acmeprp_1":            {},
		"t:-1:acmeprp_1":           {},
		"t:+4:acmeprp_1":           {},
		"t:04:acmeprp_1":           {},
		"t:4acmeprp_1":             {},
		"t:99999999999999999999:a": {},
	} {
		got, ok := parsePayload(payload)
		if got != want || ok != (want != store.Notification{}) {
			t.Errorf("parsePayload(%q) = %+v, %t; want %+v", payload, got, ok, want)
		}
	}
	for _, c := range []struct{ tenant, id string }{{"acme", "prp_1"}, {"t:4:x", "p:y"}, {"ünï", "1"}, {"", "prp_2"}} {
		want := store.Notification{Tenant: c.tenant, ProposalID: c.id}
		if got, ok := parsePayload(changePayload(c.tenant, c.id)); !ok || got != want {
			t.Errorf("parsePayload(changePayload(%q, %q)) = %+v, %t; want %+v", c.tenant, c.id, got, ok, want)
		}
	}
}

func TestWorkNotifier(t *testing.T) {
	t.Parallel()
	const interval = 50 * time.Millisecond
	var sent atomic.Int32
	w := newWorkNotifier(interval, func(context.Context) error { sent.Add(1); return nil })

	if !w.reserve() {
		t.Fatal("the first notification was not allowed")
	}
	if w.reserve() {
		t.Fatal("a second notification in the window was allowed")
	}
	// Work committed in the window: one trailing notification for all.
	for range 10 {
		w.deferred()
	}
	if sent.Load() != 0 {
		t.Fatal("the trailing notification went out before the window ended")
	}
	deadline := time.Now().Add(5 * time.Second)
	for sent.Load() == 0 && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	// The trailing notification opened a new window.
	if w.reserve() {
		t.Error("a notification right after the trailing one was allowed")
	}
	time.Sleep(2 * interval)
	if n := sent.Load(); n != 1 {
		t.Fatalf("%d trailing notifications, want 1", n)
	}

	// Close sends a pending notification rather than drop it.
	w.deferred()
	w.close()
	if n := sent.Load(); n != 2 {
		t.Errorf("after close: %d notifications, want 2", n)
	}
	w.deferred() // after close: nothing, and no goroutine
	time.Sleep(2 * interval)
	if n := sent.Load(); n != 2 {
		t.Errorf("a notification after close: %d, want 2", n)
	}
}

// TestListenSurvivesQuiet: a listener that hears nothing for a while pings
// the server and keeps its connection, then still receives.
func TestListenSurvivesQuiet(t *testing.T) {
	t.Parallel()
	s := smallStore(t)
	s.listenCheck = 50 * time.Millisecond

	got := make(chan store.Notification, 16)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Listen(ctx, func(n store.Notification) { got <- n }) }()
	defer func() {
		cancel()
		if err := <-done; !errors.Is(err, context.Canceled) {
			t.Errorf("Listen = %v, want context.Canceled", err)
		}
	}()

	conn := pgtest.Connect(t)
	listenerPID := func() int {
		var pid int
		for range 500 {
			err := conn.QueryRow(ctx, `SELECT pid FROM pg_stat_activity WHERE application_name = $1 AND state = 'idle'`, listenerPrefix+s.schema).Scan(&pid)
			if err == nil {
				return pid
			}
			time.Sleep(10 * time.Millisecond)
		}
		t.Fatal("no listener")
		return 0
	}
	before := listenerPID()
	time.Sleep(300 * time.Millisecond) // several quiet intervals, each ending in a ping
	if _, err := conn.Exec(ctx, `SELECT pg_notify($1, 'p:prp_quiet')`, s.Channel()); err != nil {
		t.Fatal(err)
	}
	select {
	case n := <-got:
		if n.ProposalID != "prp_quiet" {
			t.Errorf("got %+v, want p:prp_quiet (and no reconnection)", n)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("no notification after a quiet spell")
	}
	if after := listenerPID(); after != before {
		t.Errorf("the listener reconnected (backend %d, then %d) though its connection was fine", before, after)
	}
}

func TestWriteLanes(t *testing.T) {
	for _, c := range []struct{ procs, conns, want int }{
		{2, 16, 2},   // this project's machine: cores bound it
		{16, 16, 4},  // many cores: the pool's quarter bounds it
		{16, 64, 16}, // a big pool: cores again
		{1, 16, 1},
		{8, 2, 1}, // a tiny pool still gets a lane
		{0, 0, 1},
	} {
		if got := writeLanes(c.procs, c.conns); got != c.want {
			t.Errorf("writeLanes(%d procs, %d conns) = %d, want %d", c.procs, c.conns, got, c.want)
		}
	}
}

// smallStore opens a store on a schema of its own with a pool of two
// connections, closed when the test ends.
func smallStore(t *testing.T) *Store {
	t.Helper()
	dsn, schema := pgtest.NewSchema(t)
	s, err := Open(t.Context(), pgtest.WithParam(dsn, "pool_max_conns", "2"), &Options{Schema: schema})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}
