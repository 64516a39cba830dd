package recheck

import (
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// rounds records the keys of each round.
type rounds struct {
	mu   sync.Mutex
	seen []map[string]int
}

func (r *rounds) round(keys []string) {
	m := map[string]int{}
	for _, k := range keys {
		m[k]++
	}
	r.mu.Lock()
	r.seen = append(r.seen, m)
	r.mu.Unlock()
}

func (r *rounds) count() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.seen)
}

func (r *rounds) last() map[string]int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.seen[len(r.seen)-1]
}

func waitFor(t *testing.T, what string, ok func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !ok() {
		if time.Now().After(deadline) {
			t.Fatalf("10 s without %s", what)
		}
		time.Sleep(time.Millisecond)
	}
}

// TestGuardRounds: each round names every key held once, however many
// streams share it; End ends the streams its match accepts and no other;
// the goroutine ends when the last stream is removed, and starts again
// with the next.
func TestGuardRounds(t *testing.T) {
	var r rounds
	g := New[string, int](time.Millisecond, r.round)
	var ended [6]atomic.Bool
	var removes []func()
	for i, key := range []string{"a", "a", "a", "b", "b", "c"} {
		removes = append(removes, g.Add(key, i, func() { ended[i].Store(true) }))
	}
	waitFor(t, "a round", func() bool { return r.count() > 0 })
	if got := r.last(); len(got) != 3 || got["a"] != 1 || got["b"] != 1 || got["c"] != 1 {
		t.Fatalf("a round's keys: %v, want a, b and c once each", got)
	}

	g.End("b", func(v int) bool { return v == 4 })
	g.End("a", nil)
	for i, want := range []bool{true, true, true, false, true, false} {
		if ended[i].Load() != want {
			t.Fatalf("stream %d ended: %v, want %v", i, ended[i].Load(), want)
		}
	}

	// Ending does not remove: the streams do, when they end.
	for _, remove := range removes[:5] {
		remove()
		remove() // twice is harmless
	}
	if running, keys := g.Running(); !running || keys != 1 {
		t.Fatalf("with c's stream open: running %v, %d keys; want running, 1", running, keys)
	}
	removes[5]()
	waitFor(t, "the goroutine's end", func() bool { running, _ := g.Running(); return !running })

	n := r.count()
	remove := g.Add("d", 0, func() {})
	waitFor(t, "a round after the goroutine started again", func() bool { return r.count() > n })
	if got := r.last(); len(got) != 1 || got["d"] != 1 {
		t.Fatalf("the next round's keys: %v, want d", got)
	}
	remove()
	waitFor(t, "the goroutine's end", func() bool { running, _ := g.Running(); return !running })
}

// TestGuardConcurrent adds, ends and removes streams from many goroutines
// while rounds run (go test -race).
func TestGuardConcurrent(t *testing.T) {
	g := New[int, int](time.Microsecond, nil)
	g.round = func(keys []int) {
		for _, k := range keys {
			g.End(k, func(v int) bool { return v%7 == 0 })
		}
	}
	var wg sync.WaitGroup
	for w := range 16 {
		wg.Go(func() {
			for i := range 500 {
				done := make(chan struct{})
				var once sync.Once
				remove := g.Add(i%10, w*500+i, func() { once.Do(func() { close(done) }) })
				if (w*500+i)%7 == 0 {
					<-done // the round ends it
				}
				remove()
			}
		})
	}
	wg.Wait()
	waitFor(t, "the goroutine's end", func() bool { running, keys := g.Running(); return !running && keys == 0 })
}
