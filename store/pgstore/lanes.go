package pgstore

import "runtime"

// lanesShare is the part of the pool a worker's claim and settlement lanes
// may hold at once: one connection in lanesShare, so that HTTP requests,
// renewals, the listener and the periodic jobs keep the rest.
const lanesShare = 4

// WriteLanes implements store.Lanes: one lane per core the Go runtime
// uses, and no more than a quarter of the pool's connections. Each lane is a
// transaction of its own; PostgreSQL runs them side by side and folds their
// commits' flushes together, where one lane leaves the cores idle while its
// commit waits for the disk.
func (s *Store) WriteLanes() int {
	return writeLanes(runtime.GOMAXPROCS(0), int(s.pool.Config().MaxConns))
}

func writeLanes(procs, conns int) int {
	return max(1, min(procs, conns/lanesShare))
}
