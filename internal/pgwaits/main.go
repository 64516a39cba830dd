// Command pgwaits samples what PostgreSQL's backends are doing, to say where
// a benchmark's database time goes: every -every it reads pg_stat_activity,
// and for each backend of the database that is not idle it counts its wait
// event (or "CPU" when it waits for none), until -for has passed or it is
// interrupted. It prints each wait as a share of the samples, most first,
// and how many backends were active on average.
//
//	go run ./internal/pgwaits [-dsn postgres://postgres@127.0.0.1:5432/test] [-every 10ms] [-for 30s]
//
// Run it beside `go run ./bench -scenarios B1 …`: docs/profiles/ reports
// what it printed before and after a change. Its own queries show as one
// backend at most, which it leaves out.
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"sort"
	"time"

	"github.com/jackc/pgx/v5"
)

func main() {
	dsn := flag.String("dsn", "postgres://postgres@127.0.0.1:5432/test?sslmode=disable", "the database")
	every := flag.Duration("every", 10*time.Millisecond, "how often to sample")
	span := flag.Duration("for", 30*time.Second, "how long to sample")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	ctx, cancel := context.WithTimeout(ctx, *span)
	defer cancel()
	conn, err := pgx.Connect(context.Background(), *dsn)
	if err != nil {
		fmt.Fprintln(os.Stderr, "pgwaits:", err)
		os.Exit(1)
	}
	defer conn.Close(context.Background())
	s, err := sample(ctx, conn, *every)
	if err != nil {
		fmt.Fprintln(os.Stderr, "pgwaits:", err)
		os.Exit(1)
	}
	s.print(os.Stdout)
}

// waitsQuery lists the wait of every active backend of this database but
// the sampler's own; a backend on the CPU has no wait event.
const waitsQuery = `SELECT coalesce(wait_event_type || ':' || wait_event, 'CPU')
FROM pg_stat_activity
WHERE datname = current_database() AND pid <> pg_backend_pid() AND state NOT IN ('idle')
  AND backend_type = 'client backend'`

// samples counts, per wait, the backends seen in it.
type samples struct {
	rounds int
	waits  map[string]int
}

// sample reads the waits every period until ctx ends.
func sample(ctx context.Context, conn *pgx.Conn, every time.Duration) (*samples, error) {
	s := &samples{waits: map[string]int{}}
	tick := time.NewTicker(every)
	defer tick.Stop()
	for {
		if err := s.round(ctx, conn); err != nil {
			if ctx.Err() != nil {
				return s, nil
			}
			return nil, err
		}
		select {
		case <-ctx.Done():
			return s, nil
		case <-tick.C:
		}
	}
}

func (s *samples) round(ctx context.Context, conn *pgx.Conn) error {
	rows, err := conn.Query(ctx, waitsQuery)
	if err != nil {
		return fmt.Errorf("read pg_stat_activity: %w", err)
	}
	waits, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return fmt.Errorf("read pg_stat_activity: %w", err)
	}
	s.rounds++
	for _, w := range waits {
		s.waits[w]++
	}
	return nil
}

// print writes the waits, most first, each as a share of every active
// backend seen, then the active backends per sample.
func (s *samples) print(w io.Writer) {
	total := 0
	names := make([]string, 0, len(s.waits))
	for n, c := range s.waits {
		names = append(names, n)
		total += c
	}
	sort.Slice(names, func(i, j int) bool {
		if s.waits[names[i]] != s.waits[names[j]] {
			return s.waits[names[i]] > s.waits[names[j]]
		}
		return names[i] < names[j]
	})
	fmt.Fprintf(w, "%d samples, %.2f active backends per sample\n", s.rounds, float64(total)/float64(max(1, s.rounds)))
	fmt.Fprintf(w, "| wait | share of active backends |\n| --- | --- |\n")
	for _, n := range names {
		fmt.Fprintf(w, "| %s | %.1f %% |\n", n, 100*float64(s.waits[n])/float64(total))
	}
}
