package sqlitestore

import (
	"cmp"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net/url"
	"path/filepath"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/countersign/countersign/internal/cursor"
	"github.com/countersign/countersign/internal/rowmemory"
	"github.com/countersign/countersign/store"

	_ "modernc.org/sqlite" // registers the "sqlite" database/sql driver
)

// Defaults for Options.
const (
	// DefaultBusyTimeout is how long a connection waits for another
	// connection or process to release the database before it fails with
	// SQLITE_BUSY.
	DefaultBusyTimeout = 5 * time.Second
	// DefaultReadConns is the size of the read pool.
	DefaultReadConns = 4
)

// Options configures a Store. A nil *Options means the defaults.
type Options struct {
	// Now is the clock every transition reads. Default time.Now. Times are
	// stored in UTC with nanosecond precision.
	Now func() time.Time
	// BusyTimeout bounds the wait for the write lock held by another
	// process, and for the transient locks of WAL checkpoints. Default
	// DefaultBusyTimeout; it must not be negative.
	BusyTimeout time.Duration
	// ReadConns is the number of read connections. Default
	// DefaultReadConns; it must not be negative.
	ReadConns int
	// SkipMigrations leaves the schema as it is: Open does not migrate.
	// Use it when migrations run separately (countersign migrate), then
	// call Migrate or check SchemaVersion.
	SkipMigrations bool
}

// Store is the SQLite driver of store.Store. It is safe for concurrent use,
// and several Stores, in one process or many, may share one file.
type Store struct {
	// w is the one writer connection (writer.go): every write transaction
	// runs on it, begun IMMEDIATE, so writes in this process queue for it
	// (group.go) and writes from other processes wait on SQLite's lock.
	w writer
	// r is the read pool, query_only. In WAL mode reads never block the
	// writer, nor the writer them.
	r   *sql.DB
	now func() time.Time

	// The cursor codec is loaded from the meta table on first use, since
	// Open may be asked not to migrate and the key is made by migration.
	codecMu sync.Mutex
	codec   *cursor.Codec

	// queue groups concurrent writes into one transaction (group.go).
	queue writeQueue
	// groupReruns counts the groups run again with savepoints, after a
	// write failed having changed rows (runGroup).
	groupReruns atomic.Int64
	// rq runs the read pool's queries prepared (stmtcache.go).
	rq readDB
	// rows remembers recent proposals, for the transitions that follow
	// their reads and claims (see mutate and internal/rowmemory).
	rows rowmemory.Proposals
}

var _ store.Store = (*Store)(nil)

// rowMemorySize bounds the proposals a Store remembers: enough for the
// proposals a busy process has in flight (each read before it is decided,
// or claimed before it is settled), a few megabytes at most.
const rowMemorySize = 4096

// Open opens (creating if needed) the database file at path and, unless
// opts.SkipMigrations is set, migrates it to the latest schema.
func Open(ctx context.Context, path string, opts *Options) (*Store, error) {
	if opts == nil {
		opts = &Options{}
	}
	switch {
	case path == "" || path == ":memory:":
		// Two pools on an in-memory database would be two databases.
		return nil, fmt.Errorf("sqlitestore: open: %w: a file path is required", store.ErrInvalidParams)
	case opts.BusyTimeout < 0:
		return nil, fmt.Errorf("sqlitestore: open: %w: Options.BusyTimeout is negative", store.ErrInvalidParams)
	case opts.ReadConns < 0:
		return nil, fmt.Errorf("sqlitestore: open: %w: Options.ReadConns is negative", store.ErrInvalidParams)
	}
	abs, err := filepath.Abs(path)
	if err != nil {
		return nil, fmt.Errorf("sqlitestore: open: %w", classify(err))
	}
	busy := cmp.Or(opts.BusyTimeout, DefaultBusyTimeout)
	reads := cmp.Or(opts.ReadConns, DefaultReadConns)

	w, err := sql.Open("sqlite", dsn(abs, busy, true))
	if err != nil {
		return nil, fmt.Errorf("sqlitestore: open: %w", classify(err))
	}
	w.SetMaxOpenConns(1)
	w.SetMaxIdleConns(1)
	w.SetConnMaxLifetime(0)
	w.SetConnMaxIdleTime(0)
	// The writer connects first: it switches a new file to WAL, which a
	// query_only connection could not do.
	if err := w.PingContext(ctx); err != nil {
		_ = w.Close()
		return nil, fmt.Errorf("sqlitestore: open %s: %w", path, classify(err))
	}
	r, err := sql.Open("sqlite", dsn(abs, busy, false))
	if err != nil {
		_ = w.Close()
		return nil, fmt.Errorf("sqlitestore: open: %w", classify(err))
	}
	r.SetMaxOpenConns(reads)
	r.SetMaxIdleConns(reads)
	s := &Store{w: writer{db: w}, r: r, now: opts.Now, rq: readDB{db: r}, rows: rowmemory.NewProposals(rowMemorySize)}
	if s.now == nil {
		s.now = time.Now
	}
	if err := r.PingContext(ctx); err != nil {
		_ = s.Close()
		return nil, fmt.Errorf("sqlitestore: open %s: %w", path, classify(err))
	}
	if !opts.SkipMigrations {
		if err := s.Migrate(ctx); err != nil {
			_ = s.Close()
			return nil, err
		}
	}
	return s, nil
}

// dsn builds the connection string. Pragmas travel in the DSN so that every
// connection a pool opens gets them, not only the first.
//
//   - journal_mode=WAL: readers and the writer do not block each other, and
//     several processes can share the file.
//   - synchronous=FULL: a commit is on disk when it returns. WAL with NORMAL
//     stays consistent but may lose the last commits on power loss, and a
//     lost decision or settlement is exactly what this store must not lose.
//   - foreign_keys=on: messages follow their thread.
//   - busy_timeout: wait for, rather than fail on, another process's lock.
//   - _txlock=immediate (writer): a transaction begun through database/sql
//     takes the write lock at once. The writer begins its own with BEGIN
//     IMMEDIATE (writer.go), for the same reason: two processes never both
//     read under a shared lock and then deadlock upgrading it; the second
//     waits (busy_timeout) at BEGIN instead.
//   - temp_store=memory (writer): the sub-journal of a group's savepoints
//     (group.go), a copy of every page each write touches, stays in memory.
//     With files for temporary data SQLite spills it to a temporary file
//     after 64 KiB, a write or two, and the writer, which every write
//     waits for, spent 6 % of B3's CPU in those writes' system calls
//     (docs/profiles/scale.md, change 14).
//   - query_only (readers): a read connection cannot write by mistake.
func dsn(path string, busy time.Duration, writer bool) string {
	q := url.Values{}
	q.Set("_busy_timeout", strconv.FormatInt(busy.Milliseconds(), 10))
	q.Set("_foreign_keys", "1")
	q.Set("_synchronous", "FULL")
	if writer {
		q.Set("_journal_mode", "WAL")
		q.Set("_txlock", "immediate")
		q.Add("_pragma", "temp_store(memory)")
	} else {
		q.Set("_query_only", "1")
	}
	u := url.URL{Scheme: "file", Path: filepath.ToSlash(path), RawQuery: q.Encode()}
	if u.Path != "" && u.Path[0] != '/' { // a Windows drive letter: file:///C:/…
		u.Path = "/" + u.Path
	}
	return u.String()
}

// Close closes both connection pools. Calls after Close fail.
func (s *Store) Close() error {
	s.rq.close()
	return errors.Join(s.w.close(), s.r.Close())
}

// clock returns the store's current time in UTC, without a monotonic
// reading, as it will read back from the database.
func (s *Store) clock() time.Time { return s.now().UTC().Round(0) }

// commitErr is returned by a write function whose transition changed the
// row and still refused the operation (for example a claim that expired a
// lapsed approval): the change is committed, then err is returned.
type commitErr struct{ err error }

func (e *commitErr) Error() string { return e.err.Error() }

// cursorCodec returns the codec made from the database's cursor key.
func (s *Store) cursorCodec(ctx context.Context) (*cursor.Codec, error) {
	s.codecMu.Lock()
	defer s.codecMu.Unlock()
	if s.codec != nil {
		return s.codec, nil
	}
	var key []byte
	err := s.r.QueryRowContext(ctx, `SELECT value FROM meta WHERE key = ?`, metaCursorKey).Scan(&key)
	if err != nil {
		return nil, fmt.Errorf("load cursor key (is the database migrated?): %w", err)
	}
	c, err := cursor.NewCodec(key)
	if err != nil {
		return nil, fmt.Errorf("load cursor key: %w", err)
	}
	s.codec = c
	return c, nil
}
