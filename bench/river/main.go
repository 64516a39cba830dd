// Command river measures River (github.com/riverqueue/river), the peer
// Countersign's worker is compared with (issue 6), on the machine it runs on:
//
//   - burn-down: N no-op jobs inserted with InsertMany before the client
//     starts, timed from Start until every job is completed in the database;
//   - latency: insert → work start of sequential jobs with an idle client,
//     from the moment Insert returned (its transaction committed) to the
//     moment the worker's Work was entered; p50, p95 and p99.
//
// Each runs on PostgreSQL and SQLite, twice: with River's defaults, and tuned
// (MaxWorkers 1000, FetchCooldown 1 ms). It prints a Markdown report, then the
// same figures as JSON.
//
//	go run . [-n 10000] [-samples 200] [-stores postgres,sqlite]
//
// PostgreSQL runs in a fresh schema of the server named by
// COUNTERSIGN_TEST_POSTGRES (default postgres://postgres@127.0.0.1:5432/test),
// created by River's own migrations (rivermigrate) and dropped at the end.
// SQLite runs in a temporary file, removed at the end.
//
// This is a module of its own, so that the main module never depends on River.
package main

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/riverqueue/river/riverdriver/riversqlite"
	"github.com/riverqueue/river/rivermigrate"
	_ "modernc.org/sqlite"
)

// defaultMaxWorkers is the queue size River's documentation and examples
// configure; River has no default, a queue must name one.
const defaultMaxWorkers = 100

// tuning is one way to configure the client.
type tuning struct {
	Name          string
	MaxWorkers    int
	FetchCooldown time.Duration // zero: River's default (100 ms)
}

var tunings = []tuning{
	{Name: "defaults", MaxWorkers: defaultMaxWorkers},
	{Name: "tuned", MaxWorkers: 1000, FetchCooldown: time.Millisecond},
}

// result is one store and tuning's figures.
type result struct {
	Store         string  `json:"store"`
	Tuning        string  `json:"tuning"`
	MaxWorkers    int     `json:"max_workers"`
	FetchCooldown string  `json:"fetch_cooldown"`
	Jobs          int     `json:"jobs"`
	DrainSeconds  float64 `json:"drain_seconds"`
	JobsPerSecond float64 `json:"jobs_per_second"`
	Samples       int     `json:"latency_samples"`
	P50Ms         float64 `json:"latency_p50_ms"`
	P95Ms         float64 `json:"latency_p95_ms"`
	P99Ms         float64 `json:"latency_p99_ms"`
}

func main() {
	n := flag.Int("n", 10000, "no-op jobs per burn-down")
	samples := flag.Int("samples", 200, "sequential jobs timed for the latency figures")
	stores := flag.String("stores", "postgres,sqlite", "stores to measure")
	jsonOnly := flag.Bool("json", false, "print only the JSON figures (for the main module's bench command)")
	flag.Parse()
	if err := run(context.Background(), *n, *samples, strings.Split(*stores, ","), *jsonOnly); err != nil {
		fmt.Fprintln(os.Stderr, "river bench:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, n, samples int, stores []string, jsonOnly bool) error {
	var results []result
	details := map[string]string{}
	for _, name := range stores {
		for _, tu := range tunings {
			fmt.Fprintf(os.Stderr, "%s, %s: ", name, tu.Name)
			var (
				r   result
				det string
				err error
			)
			switch name {
			case "postgres":
				r, det, err = onPostgres(ctx, tu, n, samples)
			case "sqlite":
				r, det, err = onSQLite(ctx, tu, n, samples)
			default:
				return fmt.Errorf("unknown store %q: want postgres or sqlite", name)
			}
			if err != nil {
				return fmt.Errorf("%s, %s: %w", name, tu.Name, err)
			}
			fmt.Fprintf(os.Stderr, "%.0f jobs/s, p50 %.3f ms\n", r.JobsPerSecond, r.P50Ms)
			details[r.Store] = det
			results = append(results, r)
		}
	}
	if !jsonOnly {
		report(results, details, n, samples)
	}
	enc := json.NewEncoder(os.Stdout)
	enc.SetIndent("", "  ")
	// The machine is described by the main module's bench command, which
	// runs this one; standalone, the report's first line names the basics.
	return enc.Encode(map[string]any{"river": riverVersion(), "details": details, "results": results})
}

func dsn() string {
	if s := os.Getenv("COUNTERSIGN_TEST_POSTGRES"); s != "" {
		return s
	}
	return "postgres://postgres@127.0.0.1:5432/test"
}

func onPostgres(ctx context.Context, tu tuning, n, samples int) (result, string, error) {
	pool, err := pgxpool.New(ctx, dsn())
	if err != nil {
		return result{}, "", err
	}
	defer pool.Close()
	var b [4]byte
	_, _ = rand.Read(b[:])
	schema := "river_bench_" + hex.EncodeToString(b[:])
	if _, err := pool.Exec(ctx, "CREATE SCHEMA "+schema); err != nil {
		return result{}, "", fmt.Errorf("create schema: %w", err)
	}
	defer func() {
		if _, err := pool.Exec(context.WithoutCancel(ctx), "DROP SCHEMA "+schema+" CASCADE"); err != nil {
			fmt.Fprintln(os.Stderr, "drop schema:", err)
		}
	}()
	var version, fsync, syncCommit string
	if err := pool.QueryRow(ctx, "SELECT current_setting('server_version'), current_setting('fsync'), current_setting('synchronous_commit')").Scan(&version, &fsync, &syncCommit); err != nil {
		return result{}, "", err
	}
	det := fmt.Sprintf("PostgreSQL %s (fsync %s, synchronous_commit %s), riverpgxv5, pgxpool defaults (%d connections), schema %s…",
		version, fsync, syncCommit, pool.Config().MaxConns, "river_bench_")
	pending := func(ctx context.Context) (int, error) {
		var c int
		err := pool.QueryRow(ctx, "SELECT count(*) FROM "+pgx.Identifier{schema, "river_job"}.Sanitize()+" WHERE state <> 'completed'").Scan(&c)
		return c, err
	}
	r, err := measure(ctx, riverpgxv5.New(pool), schema, tu, n, samples, pending)
	r.Store = "PostgreSQL"
	return r, det, err
}

func onSQLite(ctx context.Context, tu tuning, n, samples int) (result, string, error) {
	dir, err := os.MkdirTemp("", "river-bench-")
	if err != nil {
		return result{}, "", err
	}
	defer os.RemoveAll(dir)
	// River's own tests open SQLite this way (WAL, one connection); FULL
	// matches Countersign's SQLite store, so both fsync each commit.
	db, err := sql.Open("sqlite", "file:"+filepath.Join(dir, "river.db")+
		"?_pragma=journal_mode(WAL)&_pragma=synchronous(FULL)&_pragma=busy_timeout(30000)")
	if err != nil {
		return result{}, "", err
	}
	defer db.Close()
	db.SetMaxOpenConns(1)
	var version string
	if err := db.QueryRowContext(ctx, "SELECT sqlite_version()").Scan(&version); err != nil {
		return result{}, "", err
	}
	det := fmt.Sprintf("SQLite %s via modernc.org/sqlite, riversqlite, WAL, synchronous=FULL, one connection (SetMaxOpenConns(1), as River's tests do)", version)
	pending := func(ctx context.Context) (int, error) {
		var c int
		err := db.QueryRowContext(ctx, "SELECT count(*) FROM river_job WHERE state <> 'completed'").Scan(&c)
		return c, err
	}
	r, err := measure(ctx, riversqlite.New(db), "", tu, n, samples, pending)
	r.Store = "SQLite"
	return r, det, err
}

// noopArgs is the job every run inserts.
type noopArgs struct{}

func (noopArgs) Kind() string { return "noop" }

// noopWorker counts jobs and, when started is set, reports when Work began.
type noopWorker struct {
	river.WorkerDefaults[noopArgs]
	done    atomic.Int64
	started atomic.Pointer[chan time.Time]
}

func (w *noopWorker) Work(ctx context.Context, job *river.Job[noopArgs]) error {
	if ch := w.started.Load(); ch != nil {
		*ch <- time.Now()
	}
	w.done.Add(1)
	return nil
}

// measure migrates a fresh database, burns down n jobs and then times
// sequential jobs, on one client configured by tu.
func measure[TTx any](ctx context.Context, driver riverdriver.Driver[TTx], schema string, tu tuning, n, samples int,
	pending func(context.Context) (int, error)) (result, error) {
	r := result{Tuning: tu.Name, MaxWorkers: tu.MaxWorkers, FetchCooldown: "default (100ms)", Jobs: n, Samples: samples}
	if tu.FetchCooldown > 0 {
		r.FetchCooldown = tu.FetchCooldown.String()
	}
	logger := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	migrator, err := rivermigrate.New(driver, &rivermigrate.Config{Schema: schema, Logger: logger})
	if err != nil {
		return r, err
	}
	if _, err := migrator.Migrate(ctx, rivermigrate.DirectionUp, nil); err != nil {
		return r, fmt.Errorf("migrate: %w", err)
	}

	w := &noopWorker{}
	workers := river.NewWorkers()
	river.AddWorker(workers, w)
	client, err := river.NewClient(driver, &river.Config{
		Logger:        logger,
		Schema:        schema,
		FetchCooldown: tu.FetchCooldown,
		Queues:        map[string]river.QueueConfig{river.QueueDefault: {MaxWorkers: tu.MaxWorkers}},
		Workers:       workers,
	})
	if err != nil {
		return r, err
	}

	// Burn-down.
	const chunk = 1000
	for i := 0; i < n; i += chunk {
		params := make([]river.InsertManyParams, min(chunk, n-i))
		for j := range params {
			params[j] = river.InsertManyParams{Args: noopArgs{}}
		}
		if _, err := client.InsertMany(ctx, params); err != nil {
			return r, fmt.Errorf("insert: %w", err)
		}
	}
	start := time.Now()
	if err := client.Start(ctx); err != nil {
		return r, err
	}
	defer func() {
		stopCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
		defer cancel()
		_ = client.Stop(stopCtx)
	}()
	deadline := start.Add(10 * time.Minute)
	for {
		// Poll the database only once the workers have run every job, so
		// that the polling does not compete with the burn-down.
		if w.done.Load() >= int64(n) {
			left, err := pending(ctx)
			if err != nil {
				return r, err
			}
			if left == 0 {
				break
			}
		}
		if time.Now().After(deadline) {
			return r, errors.New("burn-down did not finish in 10 minutes")
		}
		time.Sleep(2 * time.Millisecond)
	}
	elapsed := time.Since(start)
	r.DrainSeconds = elapsed.Seconds()
	r.JobsPerSecond = float64(n) / elapsed.Seconds()

	// Latency: the client is idle now; one job at a time.
	ch := make(chan time.Time, 1)
	w.started.Store(&ch)
	time.Sleep(200 * time.Millisecond)
	lat := make([]time.Duration, 0, samples)
	for range samples {
		if _, err := client.Insert(ctx, noopArgs{}, nil); err != nil {
			return r, fmt.Errorf("insert: %w", err)
		}
		inserted := time.Now()
		select {
		case at := <-ch:
			lat = append(lat, at.Sub(inserted))
		case <-time.After(30 * time.Second):
			return r, errors.New("a job was not worked within 30 s")
		}
	}
	slices.Sort(lat)
	r.P50Ms, r.P95Ms, r.P99Ms = ms(pct(lat, 50)), ms(pct(lat, 95)), ms(pct(lat, 99))
	return r, nil
}

// pct is the nearest-rank percentile of sorted durations.
func pct(sorted []time.Duration, p int) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	i := (p*len(sorted)+99)/100 - 1
	return sorted[max(i, 0)]
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

func report(results []result, details map[string]string, n, samples int) {
	fmt.Printf("## River (peer), %s\n\n", riverVersion())
	fmt.Printf("%d cores, %s %s/%s (go run ./bench in the main module records the whole machine).\n\n", runtime.NumCPU(), runtime.Version(), runtime.GOOS, runtime.GOARCH)
	for _, s := range slices.Sorted(func(yield func(string) bool) {
		for k := range details {
			if !yield(k) {
				return
			}
		}
	}) {
		fmt.Printf("- %s: %s\n", s, details[s])
	}
	fmt.Printf("\n| store | configuration | burn-down of %d no-op jobs | insert → work p50 / p95 / p99 (%d jobs) |\n| --- | --- | --- | --- |\n", n, samples)
	for _, r := range results {
		fmt.Printf("| %s | %s (MaxWorkers %d, FetchCooldown %s) | %s jobs/s (%.2f s) | %.3f / %.3f / %.3f ms |\n",
			r.Store, r.Tuning, r.MaxWorkers, r.FetchCooldown, thousands(r.JobsPerSecond), r.DrainSeconds, r.P50Ms, r.P95Ms, r.P99Ms)
	}
	fmt.Println()
}

func thousands(f float64) string {
	s := fmt.Sprintf("%.0f", f)
	var b strings.Builder
	for i, c := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(c)
	}
	return b.String()
}

// riverVersion is the River module this binary was built with.
func riverVersion() string {
	if bi, ok := debug.ReadBuildInfo(); ok {
		for _, d := range bi.Deps {
			if d.Path == "github.com/riverqueue/river" {
				return "river " + d.Version
			}
		}
	}
	return "river (unknown version)"
}
