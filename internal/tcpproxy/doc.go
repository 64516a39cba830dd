// Package tcpproxy is a loopback TCP proxy for tests of outages and
// partitions: it sits between a client (the server's store pool) and a
// server (PostgreSQL) and, on the test's word, forwards, refuses, resets or
// black-holes connections, so that a test can take "the database" away
// from one process without stopping a database other tests share.
//
//	p, _ := tcpproxy.New("127.0.0.1:5432")
//	defer p.Close()
//	dsn := "postgres://postgres@" + p.Addr() + "/test"
//	p.Down()      // refused, and every open connection reset: the server is gone
//	p.BlackHole() // nothing moves either way, connections stay open: a partition
//	p.Reset()     // open connections are reset; new ones are served
//	p.Pass()      // forward again
//
// Down closes the listener, so a new connection is refused by the kernel
// (ECONNREFUSED) as it is when a server is stopped; Pass listens again on
// the same port.
package tcpproxy
