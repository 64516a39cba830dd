package chaos

import (
	"context"
	"math/rand/v2"
	"os"
	"os/exec"
	"sort"
	"sync"
	"syscall"
	"testing"
	"time"
)

// The kinds of fault the injector makes.
const (
	killServe  = "kill serve"     // SIGKILL serve, start it again
	killWorker = "kill worker"    // SIGKILL a worker, start it again
	stopWorker = "stop worker"    // SIGSTOP a worker past its lease, then SIGCONT
	stopServe  = "stop serve"     // the same of serve, with its requests in flight
	partition  = "partition"      // black-hole the workers' connections to PostgreSQL
	restartPG  = "restart server" // pg_ctlcluster restart (the standalone phase only)
)

// frozenFor is how long a stopped worker stays stopped: past its lease, so
// that another process takes its executions over before it resumes.
const frozenFor = lease + time.Second

// faults injects faults into a cluster on a schedule until stopped.
type faults struct {
	t  *testing.T
	c  *cluster
	st storeSetup
	// restarts is how many PostgreSQL restarts to spread over the run (0:
	// none); every is the pause between two faults, drawn from [min, max).
	restarts      int
	every, spread time.Duration

	mu     sync.Mutex
	counts map[string]int
	wg     sync.WaitGroup
}

func newFaults(t *testing.T, c *cluster, st storeSetup, restarts int) *faults {
	return &faults{t: t, c: c, st: st, restarts: restarts, every: time.Second, spread: time.Second, counts: map[string]int{}}
}

func (f *faults) count(kind string) {
	f.mu.Lock()
	f.counts[kind]++
	f.mu.Unlock()
}

// run injects faults every 1–2 s until ctx ends, then heals every one and
// waits for the processes it restarts. span is how long the run is meant to
// last, over which the PostgreSQL restarts are spread.
func (f *faults) run(ctx context.Context, span time.Duration) {
	start := time.Now()
	restartsDone := 0
	kinds := []string{killServe, killServe, killWorker, killWorker, stopWorker, stopServe}
	if f.st.proxy != nil {
		kinds = append(kinds, partition)
	}
	partitioned := false
	var healPartition <-chan time.Time
	// The kinds are dealt from a shuffled deck, so that every kind comes
	// up in each round of len(kinds) faults.
	var deck []string
	for {
		wait := f.every + rand.N(f.spread)
		select {
		case <-ctx.Done():
			if partitioned {
				_ = f.st.proxy.Pass()
			}
			f.wg.Wait()
			return
		case <-healPartition:
			if err := f.st.proxy.Pass(); err != nil {
				f.t.Errorf("heal the partition: %v", err)
			}
			partitioned, healPartition = false, nil
			continue
		case <-time.After(wait):
		}
		// The restarts, at even points of the span.
		if restartsDone < f.restarts && time.Since(start) > span*time.Duration(restartsDone+1)/time.Duration(f.restarts+1) {
			restartsDone++
			f.restartPostgreSQL()
			continue
		}
		if len(deck) == 0 {
			deck = append(deck, kinds...)
			rand.Shuffle(len(deck), func(i, j int) { deck[i], deck[j] = deck[j], deck[i] })
		}
		kind := deck[0]
		deck = deck[1:]
		switch kind {
		case killServe:
			f.async(0, func() { f.c.kill(0); f.c.restart(0) }, kind)
		case killWorker:
			i := 1 + rand.N(workers)
			f.async(i, func() { f.c.kill(i); f.c.restart(i) }, kind)
		case stopWorker:
			i := 1 + rand.N(workers)
			f.async(i, func() { f.freeze(ctx, i) }, kind)
		case stopServe:
			f.async(0, func() { f.freeze(ctx, 0) }, kind)
		case partition:
			if partitioned {
				continue
			}
			// 2–6 s: some shorter than the lease (the workers carry on),
			// some longer (their leases lapse and are taken over).
			f.st.proxy.BlackHole()
			f.count(kind)
			partitioned, healPartition = true, time.After(2*time.Second+rand.N(4*time.Second))
		}
	}
}

// async runs fault kind on slot i in the background, unless a fault is
// already under way there.
func (f *faults) async(i int, do func(), kind string) {
	if !f.c.claim(i) {
		return
	}
	f.count(kind)
	f.wg.Go(func() {
		defer f.c.release(i)
		do()
	})
}

// freeze stops the process of slot i with SIGSTOP for frozenFor, then
// resumes it. On SQLite a process stopped inside a write transaction holds
// the database's write lock, and every other process waits for it
// (docs/reliability.md, "SQLite's limit"): the process is let run a moment
// and stopped again until it is stopped outside one, as test/crash does.
func (f *faults) freeze(ctx context.Context, i int) {
	f.c.freeze(i)
	for tries := 0; f.st.writeLocked != nil && f.st.writeLocked(); tries++ {
		if tries == 50 {
			f.c.signal(i, syscall.SIGCONT) // stopped in a write transaction at every try: leave it be
			return
		}
		f.c.signal(i, syscall.SIGCONT)
		time.Sleep(5 * time.Millisecond)
		f.c.freeze(i)
	}
	select {
	case <-time.After(frozenFor):
	case <-ctx.Done():
	}
	f.c.signal(i, syscall.SIGCONT)
}

// restartPostgreSQL restarts the shared PostgreSQL server, as test/crash's
// TestPostgreSQLRestart does.
func (f *faults) restartPostgreSQL() {
	version, err := os.ReadDir("/etc/postgresql")
	if err != nil || len(version) == 0 {
		f.t.Errorf("no PostgreSQL cluster to restart: %v", err)
		return
	}
	restart := exec.Command("pg_ctlcluster", "--skip-systemctl-redirect", version[0].Name(), "main", "restart")
	if out, err := restart.CombinedOutput(); err != nil {
		f.t.Errorf("pg_ctlcluster restart: %v\n%s", err, out)
		return
	}
	f.count(restartPG)
}

// summary lists the faults injected, by kind.
func (f *faults) summary() map[string]int {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := map[string]int{}
	for k, v := range f.counts {
		out[k] = v
	}
	return out
}

func sortedKeys(m map[string]int) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
