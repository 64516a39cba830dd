package pgstore

import (
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
)

// TestTransitionsAreHOT pins what makes every transition of a proposal (a
// decision, a claim, a renewal, a settlement) a HOT update, written on its
// row's page with no new entry in any index of proposals: no index of
// proposals names, in its key or its predicate, a column that a transition
// may change (mutableColumns, version, updated_at), and no generated column
// stands for one. The status-dependent indexes live on the side tables
// (claimqueue.go, openproposals.go) instead. An index that names one, or a
// generated column, fails here.
func TestTransitionsAreHOT(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	s := smallStore(t)
	changing := []string{"version", "updated_at"}
	for _, mc := range mutableColumns {
		changing = append(changing, mc.name)
	}
	// The claim writes these too (claimBatchSQL), and a settlement.
	for _, c := range []string{"status", "attempt", "lease_owner", "lease_token", "lease_generation", "lease_expires_at", "outcome"} {
		if !slices.Contains(changing, c) {
			t.Fatalf("mutableColumns lacks %s", c)
		}
	}
	word := regexp.MustCompile(`\b(` + strings.Join(changing, "|") + `)\b`)

	rows, err := s.pool.Query(ctx, `SELECT c.relname, pg_get_indexdef(i.indexrelid) FROM pg_index i
		JOIN pg_class c ON c.oid = i.indexrelid
		WHERE i.indrelid = ($1 || '.proposals')::regclass`, s.q.schema)
	if err != nil {
		t.Fatal(err)
	}
	defs, err := pgx.CollectRows(rows, pgx.RowToStructByPos[struct {
		Name, Def string
	}])
	if err != nil {
		t.Fatal(err)
	}
	if len(defs) < 5 {
		t.Fatalf("proposals has %d indexes; the test expects its primary key, tool call, confirmation and listings", len(defs))
	}
	for _, d := range defs {
		// The index's own name and the table's may hold a column's name.
		def := d.Def[strings.Index(d.Def, " USING "):]
		if m := word.FindString(def); m != "" {
			t.Errorf("index %s names %s, which a transition changes: %s", d.Name, m, d.Def)
		}
	}
	var generated []string
	rows, err = s.pool.Query(ctx, `SELECT attname FROM pg_attribute
		WHERE attrelid = ($1 || '.proposals')::regclass AND attgenerated <> '' AND NOT attisdropped`, s.q.schema)
	if err != nil {
		t.Fatal(err)
	}
	if generated, err = pgx.CollectRows(rows, pgx.RowTo[string]); err != nil {
		t.Fatal(err)
	}
	if len(generated) > 0 {
		t.Errorf("proposals has generated columns %v: one that a transition's change moves, indexed, makes its update not HOT", generated)
	}
}
