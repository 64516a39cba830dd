package pgstore

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
)

// TestSenderGathersAndDeduplicates checks the post-commit sender: what is
// added while a round is in flight goes out in the next round, once, in
// batches of at most maxNotifyBatch; close sends what is pending, and later
// adds are dropped.
func TestSenderGathersAndDeduplicates(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	var rounds [][]string
	inFlight := make(chan struct{})
	release := make(chan struct{})
	first := true
	n := newSender(func(ctx context.Context, payloads []string) error {
		mu.Lock()
		rounds = append(rounds, slices.Clone(payloads))
		wait := first
		first = false
		mu.Unlock()
		if wait {
			close(inFlight)
			<-release
		}
		return nil
	})
	n.add("p:a")
	<-inFlight // the first round holds p:a; the rest gathers behind it
	for i := range maxNotifyBatch + 10 {
		n.add(fmt.Sprint("p:", i), "w")
	}
	n.add("p:a")
	close(release)
	n.close()
	n.add("p:late")

	mu.Lock()
	defer mu.Unlock()
	seen := map[string]int{}
	for i, r := range rounds {
		if len(r) > maxNotifyBatch {
			t.Errorf("round %d sent %d payloads, more than %d", i, len(r), maxNotifyBatch)
		}
		for _, p := range r {
			seen[p]++
		}
	}
	if seen["p:a"] != 2 || seen["w"] != 1 || seen["p:late"] != 0 || len(seen) != maxNotifyBatch+10+2 {
		t.Errorf("p:a sent %d times (want 2: once per round it was added in), w %d (want 1), p:late %d (want 0), %d distinct (want %d)",
			seen["p:a"], seen["w"], seen["p:late"], len(seen), maxNotifyBatch+12)
	}
	for p, c := range seen {
		if p != "p:a" && c != 1 {
			t.Errorf("%s sent %d times, want once", p, c)
		}
	}
}
