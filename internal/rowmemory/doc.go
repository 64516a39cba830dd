// Package rowmemory remembers, for a store driver, the last version of each
// row it read or wrote, so that a transition can start from that copy
// instead of reading the row again.
//
// A remembered row is only ever a guess. A driver that starts from one
// writes with a compare-and-set on the row's version, so a row that another
// process changed since costs one more read, never a wrong write; it judges
// an answer that writes nothing (a refusal, "unchanged") on a row read from
// the database, never on a remembered one; and it remembers a row only once
// the transaction that wrote it has committed, so that a version the
// database rolled back can never match. Readers never get a remembered row.
// The engine does, through the driver (store.Rememberer), for one purpose:
// to judge a decision on it instead of reading the proposal first; the
// decision is then written to that version alone (DecideParams.Version),
// and a refusal, or a row that moved on, is judged again on the row as
// stored (docs/decisions/0053-decisions-on-remembered-rows.md).
//
// The memory is bounded: past its size it forgets the row it learned of
// first (a fixed ring of keys). It never replaces a row by an older version
// of it. Get and Put copy, so no caller changes a remembered row. Shared
// spares the copy to a caller that only reads the row, or copies it before
// changing it: it hands out the remembered row itself, which stays
// unchanged, since a newer version replaces a row rather than changing it.
//
// PostgreSQL (store/pgstore) saves a round trip per transition with it;
// SQLite (store/sqlitestore) saves its single writer the read and the
// decoding of the row inside the write transaction. Both remember the
// proposals they create, so that the decision that usually follows finds
// them.
package rowmemory
