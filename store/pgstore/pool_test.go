package pgstore

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/countersign/countersign/internal/pgtest"
	"github.com/countersign/countersign/store"
)

// TestOpenPoolSize checks the size of the pool Open makes: Options.MaxConns,
// DefaultMaxConns when it is 0, and the DSN's pool_max_conns over both.
func TestOpenPoolSize(t *testing.T) {
	pgtest.Connect(t) // skips, or fails in CI, when the server is unreachable
	// DefaultDSN in key=value form; another server's is not known here.
	const kv = "host=127.0.0.1 port=5432 user=postgres dbname=test sslmode=disable"
	cases := []struct {
		name     string
		dsn      string
		maxConns int
		want     int32
	}{
		{"default", pgtest.DSN(), 0, DefaultMaxConns},
		{"option", pgtest.DSN(), 7, 7},
		{"the URL's pool_max_conns wins", pgtest.WithParam(pgtest.DSN(), "pool_max_conns", "3"), 7, 3},
		{"the URL's pool_max_conns over the default", pgtest.WithParam(pgtest.DSN(), "pool_max_conns", "2"), 0, 2},
		{"key=value default", kv, 0, DefaultMaxConns},
		{"key=value pool_max_conns wins", kv + " pool_max_conns=5", 9, 5},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if strings.HasPrefix(c.dsn, kv) && pgtest.DSN() != pgtest.DefaultDSN {
				t.Skip("the key=value form is DefaultDSN's, and " + pgtest.EnvDSN + " names another server")
			}
			// SkipMigrations: the schema need not exist for the pool.
			s, err := Open(context.Background(), c.dsn, &Options{MaxConns: c.maxConns, SkipMigrations: true})
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			if got := s.pool.Config().MaxConns; got != c.want {
				t.Errorf("a pool of %d connections, want %d", got, c.want)
			}
		})
	}
}

func TestOpenRejectsNegativeMaxConns(t *testing.T) {
	for _, n := range []int{-1, -1 << 40, 1 << 40} {
		_, err := Open(context.Background(), pgtest.DSN(), &Options{MaxConns: n})
		if !errors.Is(err, store.ErrInvalidParams) {
			t.Errorf("MaxConns %d: %v, want ErrInvalidParams", n, err)
		}
	}
}

// TestPoolConfigSettings: the pool's connections run with the store's
// application_name and plan_cache_mode, unless the DSN names its own.
func TestPoolConfigSettings(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		dsn, name, mode string
	}{
		{"postgres://u@h/db", DefaultApplicationName, DefaultPlanCacheMode},
		{"postgres://u@h/db?application_name=app&plan_cache_mode=auto", "app", "auto"},
		{"host=h user=u dbname=db plan_cache_mode=force_custom_plan", DefaultApplicationName, "force_custom_plan"},
	} {
		cfg, err := PoolConfig(c.dsn, nil)
		if err != nil {
			t.Fatalf("%s: %v", c.dsn, err)
		}
		p := cfg.ConnConfig.RuntimeParams
		if p["application_name"] != c.name || p["plan_cache_mode"] != c.mode {
			t.Errorf("%s: application_name %q, plan_cache_mode %q; want %q, %q", c.dsn, p["application_name"], p["plan_cache_mode"], c.name, c.mode)
		}
	}
	if _, err := PoolConfig("postgres://u@h/db", &Options{MaxConns: -1}); !errors.Is(err, store.ErrInvalidParams) {
		t.Errorf("PoolConfig with MaxConns -1: %v, want ErrInvalidParams", err)
	}
}
