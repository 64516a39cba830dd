package pgstore

import "sync"

// grouper shares statements among concurrent callers (see casgroup.go for
// the writes, and GetProposal for the reads). While maxInFlight statements
// run, a new item queues, and the queue is sent as one statement. An item
// that finds a statement free runs at once: the quiet path costs what it
// did without grouping.
//
// The first item to find a statement free leads: it runs its own group
// and, while items are queued, hands the lead to the oldest of them, whose
// group is everything queued (up to maxGroup). Items whose keys are equal
// never share a group, when key is set: the later waits for the next one.
// Writes are queued only while maxInFlight statements run; the queue is
// empty whenever a statement is free, since a leader that finishes hands
// the queue on before it frees its statement.
type grouper[T any] struct {
	maxInFlight, maxGroup int
	// key, when set, keeps two items of one key out of a group.
	key func(T) rowKey

	mu      sync.Mutex
	running int // statements in flight
	pending []*groupItem[T]
}

// rowKey names one row of a tenant: a proposal, a run.
type rowKey struct{ tenant, id string }

// groupItem is one caller's item, queued.
type groupItem[T any] struct {
	v T
	// done receives true when the item's group has run, and false when
	// its caller is to lead the next group, group.
	done  chan bool
	group []*groupItem[T]
}

// do runs v in a group: run gets the group's items (v among them), and
// returns once the group has run. run must not panic.
func (g *grouper[T]) do(v T, run func([]T)) {
	it := &groupItem[T]{v: v, done: make(chan bool, 1)}
	g.mu.Lock()
	lead := g.running < g.maxInFlight && len(g.pending) == 0
	g.pending = append(g.pending, it)
	if lead {
		g.running++
		it.group = g.take() // it alone
	}
	g.mu.Unlock()
	if !lead {
		if finished := <-it.done; finished {
			return
		}
		// it leads the group the previous leader took for it.
	}
	group := it.group
	vs := make([]T, len(group))
	for i, m := range group {
		vs[i] = m.v
	}
	run(vs)

	g.mu.Lock()
	var next []*groupItem[T]
	if len(g.pending) > 0 {
		next = g.take() // its oldest item leads it
		next[0].group = next
	} else {
		g.running--
	}
	g.mu.Unlock()
	if next != nil {
		next[0].done <- false
	}
	for _, m := range group {
		if m != it {
			m.done <- true
		}
	}
}

// take removes the next group from the queue: the oldest items, at most
// maxGroup, no two of one key (a later item of a key stays queued, in
// order). The caller holds g.mu.
func (g *grouper[T]) take() []*groupItem[T] {
	var group, rest []*groupItem[T]
	seen := map[rowKey]bool{}
	for _, it := range g.pending {
		full := len(group) == g.maxGroup
		var k rowKey
		if g.key != nil && !full {
			k = g.key(it.v)
		}
		if full || (g.key != nil && seen[k]) {
			rest = append(rest, it)
			continue
		}
		if g.key != nil {
			seen[k] = true
		}
		group = append(group, it)
	}
	g.pending = rest
	return group
}
