package main

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/countersign/countersign/internal/pgtest"
)

// walStats is a reading of PostgreSQL's pg_stat_wal (server-wide, since
// its last reset): the write-ahead log written, and how often it was
// written out and flushed to disk.
type walStats struct {
	bytes, records, fpi, writes, syncs float64
}

// readWAL reads pg_stat_wal on a connection of its own.
func readWAL(ctx context.Context) (walStats, error) {
	conn, err := pgx.Connect(ctx, pgtest.DSN())
	if err != nil {
		return walStats{}, err
	}
	defer conn.Close(ctx)
	var w walStats
	err = conn.QueryRow(ctx, `SELECT wal_bytes::float8, wal_records::float8, wal_fpi::float8, wal_write::float8, wal_sync::float8 FROM pg_stat_wal`).
		Scan(&w.bytes, &w.records, &w.fpi, &w.writes, &w.syncs)
	if err != nil {
		return walStats{}, fmt.Errorf("read pg_stat_wal: %w", err)
	}
	return w, nil
}

// walFigures are the log a run of n proposals wrote between two readings,
// per proposal: what every row update, index entry, event and message costs
// the disk, which bounds a drain once its commits are batched. The server
// is shared with nothing else while the bench runs.
func walFigures(k string, before, after walStats, n int) []Figure {
	per := func(v float64) float64 { return v / float64(n) }
	return []Figure{
		{Key: k + ".wal_bytes", Label: "write-ahead log per proposal", Value: per(after.bytes - before.bytes), Unit: "bytes"},
		{Key: k + ".wal_records", Label: "write-ahead log records per proposal", Value: per(after.records - before.records), Unit: "records"},
		{Key: k + ".wal_fpi", Label: "full-page images per proposal", Value: per(after.fpi - before.fpi), Unit: "pages"},
		{Key: k + ".wal_syncs", Label: "write-ahead log flushes per proposal", Value: per(after.syncs - before.syncs), Unit: "flushes"},
	}
}
