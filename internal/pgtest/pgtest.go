// Package pgtest gives tests a PostgreSQL schema of their own.
//
// Tests find the server through the environment variable
// COUNTERSIGN_TEST_POSTGRES (default DefaultDSN). When the server cannot be
// reached, a test is skipped with a message saying how to start one, except
// in CI (the environment variable CI is set): there it fails, so that a
// broken database never passes for a green build.
//
//	dsn, schema := pgtest.NewSchema(t)
//	s, err := pgstore.Open(ctx, pgtest.PoolDSN(dsn), &pgstore.Options{Schema: schema})
package pgtest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"net"
	"net/url"
	"os"
	"regexp"
	"strconv"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/countersign/countersign/internal/tcpproxy"
)

// EnvDSN names the environment variable that holds the test server's DSN.
const EnvDSN = "COUNTERSIGN_TEST_POSTGRES"

// DefaultDSN is the test server when EnvDSN is unset: a local PostgreSQL
// with trust authentication and a database named test.
const DefaultDSN = "postgres://postgres@127.0.0.1:5432/test?sslmode=disable"

// SchemaPrefix starts the name of every schema NewSchema makes, so that
// leftovers of killed test runs are easy to find and drop.
const SchemaPrefix = "cs_t_"

// MaxConns is the pool size PoolDSN gives a test's store. Tests open many
// stores at once, in parallel tests and in several packages, and the
// server's max_connections (100 by default) is shared by all of them, so a
// test's pool stays far below the size a server gets
// (pgstore.DefaultMaxConns).
const MaxConns = 4

// connectTimeout bounds the wait for an unreachable server.
const connectTimeout = 5 * time.Second

// DSN returns the test server's connection string: EnvDSN, or DefaultDSN.
func DSN() string {
	if dsn := os.Getenv(EnvDSN); dsn != "" {
		return dsn
	}
	return DefaultDSN
}

// Connect opens a connection to the test server for t, closed when t ends.
// It skips or fails t when the server is unreachable (see the package
// documentation).
func Connect(t testing.TB) *pgx.Conn {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), connectTimeout)
	defer cancel()
	conn, err := pgx.Connect(ctx, DSN())
	if err != nil {
		unreachable(t, err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), connectTimeout)
		defer cancel()
		_ = conn.Close(ctx)
	})
	return conn
}

// NewSchema creates a uniquely named, empty schema (SchemaPrefix and random
// hex) and drops it, with everything in it, when t ends; t's other cleanups
// registered later (closing a store on the schema) run before the drop. It
// returns the schema's name and a DSN of the test server whose connections
// have search_path set to it, for tests that run SQL of their own. It skips
// or fails t when the server is unreachable.
func NewSchema(t testing.TB) (dsn, schema string) {
	t.Helper()
	var b [6]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never returns an error
	schema = SchemaPrefix + hex.EncodeToString(b[:])

	ctx, cancel := context.WithTimeout(context.Background(), connectTimeout)
	defer cancel()
	conn, err := pgx.Connect(ctx, DSN())
	if err != nil {
		unreachable(t, err)
	}
	defer func() { _ = conn.Close(ctx) }()
	if _, err := conn.Exec(ctx, "CREATE SCHEMA "+pgx.Identifier{schema}.Sanitize()); err != nil {
		t.Fatalf("pgtest: create schema %s: %v", schema, err)
	}
	t.Cleanup(func() { dropSchema(t, schema) })
	return WithParam(DSN(), "search_path", schema), schema
}

func dropSchema(t testing.TB, schema string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	conn, err := pgx.Connect(ctx, DSN())
	if err != nil {
		t.Errorf("pgtest: drop schema %s: %v", schema, err)
		return
	}
	defer func() { _ = conn.Close(ctx) }()
	if _, err := conn.Exec(ctx, "DROP SCHEMA IF EXISTS "+pgx.Identifier{schema}.Sanitize()+" CASCADE"); err != nil {
		t.Errorf("pgtest: drop schema %s: %v", schema, err)
	}
}

// WithParam returns dsn, in either form (URL or key=value), with the
// parameter key set to value: a run-time setting such as search_path, or a
// pgxpool setting such as pool_max_conns. The value must not need quoting
// in key=value form.
func WithParam(dsn, key, value string) string {
	if u, err := url.Parse(dsn); err == nil && (u.Scheme == "postgres" || u.Scheme == "postgresql") {
		q := u.Query()
		q.Set(key, value)
		u.RawQuery = q.Encode()
		return u.String()
	}
	return dsn + " " + key + "=" + value
}

// PoolDSN returns dsn with pool_max_conns set to MaxConns: the DSN a test
// hands to pgstore.Open (or pgxpool), whose pool would otherwise be sized
// for a server. It is not for pgx.Connect, which would send pool_max_conns
// to the server as a setting the server does not know.
func PoolDSN(dsn string) string {
	return WithParam(dsn, "pool_max_conns", strconv.Itoa(MaxConns))
}

// unreachable ends a test that cannot reach the server: a failure in CI, a
// skip elsewhere.
func unreachable(t testing.TB, err error) {
	t.Helper()
	msg := "pgtest: PostgreSQL is unreachable at " + redact(DSN()) + ": " + err.Error() +
		"\n\tStart one (Debian: pg_ctlcluster <version> main start; or docker run -d -p 5432:5432" +
		" -e POSTGRES_HOST_AUTH_METHOD=trust -e POSTGRES_DB=test postgres) or point " + EnvDSN + " at one."
	if os.Getenv("CI") != "" {
		t.Fatal(msg + "\n\tCI is set: a missing database fails the build.")
	}
	t.Skip(msg)
}

// kvPassword finds the password of a key=value DSN.
var kvPassword = regexp.MustCompile(`password=('(\\.|[^'])*'|\S+)`)

// redact hides the password of a DSN.
func redact(dsn string) string {
	u, err := url.Parse(dsn)
	if err != nil || u.Scheme == "" {
		return kvPassword.ReplaceAllString(dsn, "password=xxxxx")
	}
	if u.User == nil {
		return dsn
	}
	if _, ok := u.User.Password(); ok {
		u.User = url.UserPassword(u.User.Username(), "xxxxx")
	}
	return u.String()
}

// Proxied returns dsn (a URL) with its host and port replaced by those of a
// loopback TCP proxy to the server, which t closes when it ends: a test
// takes the server away from its own connections (p.Down, p.BlackHole)
// without stopping the server other tests share.
func Proxied(t testing.TB, dsn string) (p *tcpproxy.Proxy, proxied string) {
	t.Helper()
	u, err := url.Parse(dsn)
	if err != nil || (u.Scheme != "postgres" && u.Scheme != "postgresql") {
		t.Fatalf("pgtest: proxied: want a postgres:// URL, not %s", redact(dsn))
	}
	port := u.Port()
	if port == "" {
		port = "5432"
	}
	if p, err = tcpproxy.New(net.JoinHostPort(u.Hostname(), port)); err != nil {
		t.Fatalf("pgtest: proxied: %v", err)
	}
	t.Cleanup(func() { _ = p.Close() })
	u.Host = p.Addr()
	return p, u.String()
}
