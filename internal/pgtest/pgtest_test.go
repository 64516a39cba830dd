package pgtest

import (
	"context"
	"fmt"
	"runtime"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

func TestDSN(t *testing.T) {
	t.Setenv(EnvDSN, "")
	if got := DSN(); got != DefaultDSN {
		t.Errorf("DSN() = %q, want the default %q", got, DefaultDSN)
	}
	t.Setenv(EnvDSN, "postgres://u@db:5433/x")
	if got := DSN(); got != "postgres://u@db:5433/x" {
		t.Errorf("DSN() = %q, want the environment's", got)
	}
}

func TestNewSchema(t *testing.T) {
	var schema string
	t.Run("Use", func(t *testing.T) {
		var dsn string
		dsn, schema = NewSchema(t)
		if !strings.HasPrefix(schema, SchemaPrefix) || !strings.Contains(dsn, "search_path="+schema) {
			t.Fatalf("NewSchema = %q, %q; want a %s… schema and a DSN with its search_path", dsn, schema, SchemaPrefix)
		}
		_, other := NewSchema(t)
		if other == schema {
			t.Fatalf("two schemas named %s", schema)
		}
		// The DSN's connections work in the schema.
		conn, err := pgx.Connect(t.Context(), dsn)
		if err != nil {
			t.Fatal(err)
		}
		defer func() { _ = conn.Close(context.Background()) }()
		if _, err := conn.Exec(t.Context(), `CREATE TABLE t (x int)`); err != nil {
			t.Fatal(err)
		}
		if n := countSchemaTables(t, schema); n != 1 {
			t.Fatalf("schema %s has %d tables, want the one made through the DSN", schema, n)
		}
	})
	if schema == "" {
		return // skipped: no server
	}
	var n int
	if err := Connect(t).QueryRow(t.Context(), `SELECT count(*) FROM pg_namespace WHERE nspname = $1`, schema).Scan(&n); err != nil {
		t.Fatal(err)
	}
	if n != 0 {
		t.Errorf("schema %s outlived its test", schema)
	}
}

func countSchemaTables(t *testing.T, schema string) int {
	t.Helper()
	var n int
	if err := Connect(t).QueryRow(t.Context(), `SELECT count(*) FROM pg_tables WHERE schemaname = $1`, schema).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// recorder is a testing.TB that records how a test ended.
type recorder struct {
	testing.TB
	skipped, failed string
}

func (r *recorder) Helper() {}
func (r *recorder) Skip(args ...any) {
	r.skipped = fmt.Sprint(args...)
	runtime.Goexit()
}
func (r *recorder) Fatal(args ...any) {
	r.failed = fmt.Sprint(args...)
	runtime.Goexit()
}

// run calls fn with a recorder, as a test would, on a goroutine of its own
// (Skip and Fatal end it).
func run(t *testing.T, fn func(testing.TB)) *recorder {
	r := &recorder{TB: t}
	done := make(chan struct{})
	go func() {
		defer close(done)
		fn(r)
	}()
	<-done
	return r
}

func TestUnreachable(t *testing.T) {
	t.Setenv(EnvDSN, "postgres://postgres:secret@127.0.0.1:1/test?sslmode=disable&connect_timeout=2")

	t.Setenv("CI", "")
	r := run(t, func(tb testing.TB) { NewSchema(tb) })
	if r.skipped == "" || r.failed != "" {
		t.Fatalf("outside CI: skipped %q, failed %q; want a skip", r.skipped, r.failed)
	}
	for _, want := range []string{"unreachable", EnvDSN, "start"} {
		if !strings.Contains(strings.ToLower(r.skipped), strings.ToLower(want)) {
			t.Errorf("skip message %q does not mention %q", r.skipped, want)
		}
	}
	if strings.Contains(r.skipped, "secret") {
		t.Errorf("skip message %q shows the password", r.skipped)
	}

	t.Setenv("CI", "true")
	r = run(t, func(tb testing.TB) { Connect(tb) })
	if r.failed == "" || r.skipped != "" {
		t.Fatalf("in CI: skipped %q, failed %q; want a failure", r.skipped, r.failed)
	}
}

func TestRedact(t *testing.T) {
	for in, want := range map[string]string{
		"postgres://u:pw@h/db":                 "postgres://u:xxxxx@h/db",
		"postgres://u@h/db":                    "postgres://u@h/db",
		"host=h user=u password=pw dbname=x":   "host=h user=u password=xxxxx dbname=x",
		"host=h password='p w\\'x' dbname=x":   "host=h password=xxxxx dbname=x",
		"host=h user=u dbname=x sslmode=allow": "host=h user=u dbname=x sslmode=allow",
	} {
		if got := redact(in); got != want {
			t.Errorf("redact(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestWithParam(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{"postgres://u@h/db", "postgres://u@h/db?k=v"},
		{"postgres://u@h/db?sslmode=disable", "postgres://u@h/db?k=v&sslmode=disable"},
		{"postgresql://u@h/db?k=old", "postgresql://u@h/db?k=v"},
		{"host=h dbname=db", "host=h dbname=db k=v"},
	} {
		if got := WithParam(c.in, "k", "v"); got != c.want {
			t.Errorf("WithParam(%q) = %q, want %q", c.in, got, c.want)
		}
	}
}

func TestPoolDSN(t *testing.T) {
	for _, dsn := range []string{
		DefaultDSN,
		"postgres://u@db:5433/x?pool_max_conns=50&sslmode=disable",
		"host=db user=u dbname=x",
		"host=db user=u pool_max_conns=50",
	} {
		cfg, err := pgxpool.ParseConfig(PoolDSN(dsn))
		if err != nil {
			t.Errorf("PoolDSN(%q) does not parse: %v", dsn, err)
			continue
		}
		if cfg.MaxConns != MaxConns {
			t.Errorf("PoolDSN(%q): a pool of %d, want %d", dsn, cfg.MaxConns, MaxConns)
		}
	}
}
