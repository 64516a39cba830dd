package pgstore

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"math"
	"regexp"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/countersign/countersign/internal/cursor"
	"github.com/countersign/countersign/internal/defaults"
	"github.com/countersign/countersign/internal/rowmemory"
	"github.com/countersign/countersign/store"
)

// Defaults for Options.
const (
	// DefaultSchema is the schema that holds the store's tables.
	DefaultSchema = "countersign"
	// DefaultNotifyInterval is the shortest time between two work
	// notifications sent by one Store (see Options.NotifyInterval).
	DefaultNotifyInterval = 2 * time.Millisecond
	// DefaultApplicationName is the application_name of the connections of
	// a pool that Open creates, unless the DSN names one.
	DefaultApplicationName = "countersign"
	// DefaultPlanCacheMode is the plan_cache_mode of the connections of a
	// pool that Open creates, unless the DSN names one. The store's
	// statements are prepared once per connection, and their plans do not
	// depend on the values they are run with (every index they need is
	// named by the statement's shape, not its parameters: TestQueryPlans
	// checks the generic plans), so planning each run anew, as PostgreSQL's "auto"
	// mode kept doing for the store's compare-and-set statements, only
	// costs the server's CPU: measured, a third of a decision's.
	DefaultPlanCacheMode = "force_generic_plan"
	// DefaultMaxConns is the size of the pool Open creates when neither
	// Options.MaxConns nor the DSN's pool_max_conns sets one. It is sized
	// for the concurrency a server admits (many concurrent requests and the
	// worker's slots), not for the machine's cores as pgxpool's default is,
	// and measured: of 8, 16, 32 and 64 connections, 16 served the bench's
	// B3 (64 HTTP clients and a worker) and B6 (32 clients deciding) best,
	// on a 2-core machine running the database too; more connections than
	// that only queued inside the database.
	// The number lives in internal/defaults, which package config reads too.
	DefaultMaxConns = defaults.PostgresMaxConns
	// MaxSchemaLen is the longest schema name: the notification channel,
	// "countersign_" + the schema, must fit PostgreSQL's 63-byte limit on
	// identifiers.
	MaxSchemaLen = 63 - len(channelPrefix)
)

// channelPrefix starts the name of a schema's notification channel.
const channelPrefix = "countersign_"

// Options configures a Store. A nil *Options means the defaults.
type Options struct {
	// Schema is the PostgreSQL schema that holds the tables. Default
	// DefaultSchema. It must be an identifier: a letter or an underscore,
	// then letters, digits and underscores, at most MaxSchemaLen bytes.
	// Letter case is kept (the name is always quoted). Stores on one
	// database with different schemas are independent of each other.
	Schema string
	// Now is the application's clock: it stamps records and judges
	// deadlines (ExpiresAt, NextAttemptAt, grant expiry), as the engine
	// computes them on the same clock. Default time.Now. Lease expiry is
	// judged by the database's clock instead (see the package
	// documentation). Times are stored with microsecond precision.
	Now func() time.Time
	// SkipMigrations leaves the schema as it is: Open and New do not
	// migrate. Use it when migrations run separately (countersign
	// migrate), then call Migrate or check SchemaVersion.
	SkipMigrations bool
	// NotifyInterval is the shortest time between two work notifications
	// this Store sends; a burst of approvals costs a couple of NOTIFYs,
	// and the last one is never dropped (see the package documentation).
	// Default DefaultNotifyInterval; it must not be negative.
	NotifyInterval time.Duration
	// MaxConns is the size of the pool Open creates, used when the DSN does
	// not set pool_max_conns (the DSN wins). Default DefaultMaxConns; it
	// must not be negative. New ignores it: the caller sized its own pool.
	// Each Listen holds one more connection, outside the pool.
	MaxConns int
}

// Store is the PostgreSQL driver of store.Store. It is safe for concurrent
// use, and any number of Stores, in one process or many, may share a schema.
type Store struct {
	pool    *pgxpool.Pool
	ownPool bool // Open made the pool, so Close closes it
	schema  string
	channel string // the LISTEN/NOTIFY channel, countersign_<schema>
	now     func() time.Time
	q       *queries
	work    *workNotifier
	notes   *sender // sends notifications after their transactions commit
	// rows remembers recent proposals, for the transitions that follow
	// their reads (see internal/rowmemory).
	rows rowmemory.Proposals
	// runs remembers runs the same way (runs.go).
	runs rowmemory.Runs
	// cas groups the single-row transitions' statements (casgroup.go), and
	// reads the reads of one proposal by id (GetProposal).
	cas   *grouper[*casWrite]
	reads *grouper[*proposalRead]
	// listenCheck is how long Listen waits for a notification before it
	// pings the server (listenCheckInterval; tests shorten it).
	listenCheck time.Duration

	// The cursor codec is loaded from the meta table on first use, since
	// the store may be opened without migrating, and the key is made by
	// the first migration.
	codecMu sync.Mutex
	codec   *cursor.Codec
}

var (
	_ store.Store      = (*Store)(nil)
	_ store.Notifier   = (*Store)(nil)
	_ store.Lanes      = (*Store)(nil)
	_ store.Statistics = (*Store)(nil)
)

// identifier is what Options.Schema accepts.
var identifier = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// resolve validates opts and fills in the defaults.
func resolve(opts *Options) (Options, error) {
	var o Options
	if opts != nil {
		o = *opts
	}
	o.Schema = cmp.Or(o.Schema, DefaultSchema)
	if o.Now == nil {
		o.Now = time.Now
	}
	switch {
	case !identifier.MatchString(o.Schema):
		return o, fmt.Errorf("%w: Options.Schema %q is not an identifier (letters, digits, underscores; not starting with a digit)", store.ErrInvalidParams, o.Schema)
	case len(o.Schema) > MaxSchemaLen:
		return o, fmt.Errorf("%w: Options.Schema %q is longer than %d bytes", store.ErrInvalidParams, o.Schema, MaxSchemaLen)
	case o.NotifyInterval < 0:
		return o, fmt.Errorf("%w: Options.NotifyInterval %v is negative", store.ErrInvalidParams, o.NotifyInterval)
	case o.MaxConns < 0 || o.MaxConns > math.MaxInt32:
		return o, fmt.Errorf("%w: Options.MaxConns %d is negative or too large", store.ErrInvalidParams, o.MaxConns)
	}
	o.NotifyInterval = cmp.Or(o.NotifyInterval, DefaultNotifyInterval)
	o.MaxConns = cmp.Or(o.MaxConns, DefaultMaxConns)
	return o, nil
}

// PoolConfig returns the configuration of the pool Open makes for dsn: the
// DSN's settings, with opts.MaxConns connections (default DefaultMaxConns)
// unless the DSN sets pool_max_conns, and application_name and
// plan_cache_mode (DefaultApplicationName, DefaultPlanCacheMode) unless it
// sets them. A caller that needs more of the pool (a tracer) changes the
// configuration and gives New the pool it makes.
func PoolConfig(dsn string, opts *Options) (*pgxpool.Config, error) {
	o, err := resolve(opts)
	if err != nil {
		return nil, err
	}
	cfg, err := pgxpool.ParseConfig(dsn)
	if err != nil {
		return nil, err
	}
	// pgxpool.ParseConfig fills in its own default and drops the setting:
	// whether the DSN named one is in the connection settings alone.
	if cc, err := pgconn.ParseConfig(dsn); err == nil {
		if _, set := cc.RuntimeParams["pool_max_conns"]; !set {
			cfg.MaxConns = int32(o.MaxConns)
		}
	}
	for key, value := range map[string]string{"application_name": DefaultApplicationName, "plan_cache_mode": DefaultPlanCacheMode} {
		if _, ok := cfg.ConnConfig.RuntimeParams[key]; !ok {
			cfg.ConnConfig.RuntimeParams[key] = value
		}
	}
	return cfg, nil
}

// Open connects to the database at dsn (a PostgreSQL URL or key=value
// string, with pgxpool's pool_* settings) with a pool of its own, which
// Close closes, and, unless opts.SkipMigrations is set, migrates the schema.
// The pool is configured by PoolConfig.
func Open(ctx context.Context, dsn string, opts *Options) (*Store, error) {
	o, err := resolve(opts)
	if err != nil {
		return nil, fmt.Errorf("pgstore: open: %w", err)
	}
	cfg, err := PoolConfig(dsn, &o)
	if err != nil {
		return nil, fmt.Errorf("pgstore: open: %w", err)
	}
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, wrap("open", err)
	}
	if err := pool.Ping(ctx); err != nil {
		pool.Close()
		return nil, wrap("open", err)
	}
	s, err := newStore(ctx, pool, o)
	if err != nil {
		pool.Close()
		return nil, err
	}
	s.ownPool = true
	return s, nil
}

// New returns a Store on a pool the caller owns: Close leaves it open, and
// the caller closes it after the Store. Every statement names the schema, so
// the pool's search_path does not matter. Unless opts.SkipMigrations is set,
// New migrates the schema.
func New(ctx context.Context, pool *pgxpool.Pool, opts *Options) (*Store, error) {
	if pool == nil {
		return nil, fmt.Errorf("pgstore: new: %w: nil pool", store.ErrInvalidParams)
	}
	o, err := resolve(opts)
	if err != nil {
		return nil, fmt.Errorf("pgstore: new: %w", err)
	}
	return newStore(ctx, pool, o)
}

func newStore(ctx context.Context, pool *pgxpool.Pool, o Options) (*Store, error) {
	s := &Store{
		pool:    pool,
		schema:  o.Schema,
		channel: channelPrefix + o.Schema,
		now:     o.Now,
		q:       newQueries(pgx.Identifier{o.Schema}.Sanitize()),
		rows:    rowmemory.NewProposals(rowMemorySize),
		runs:    rowmemory.NewRuns(runMemorySize),
		cas:     newCASGrouper(),
		reads:   newReadGrouper(),

		listenCheck: listenCheckInterval,
	}
	s.notes = newSender(s.sendNotifications)
	s.work = newWorkNotifier(o.NotifyInterval, s.sendTrailingWork)
	if !o.SkipMigrations {
		if err := s.Migrate(ctx); err != nil {
			s.work.close()
			s.notes.close()
			return nil, err
		}
	}
	return s, nil
}

// Schema returns the schema that holds the store's tables.
func (s *Store) Schema() string { return s.schema }

// Channel returns the LISTEN/NOTIFY channel of the store's schema.
func (s *Store) Channel() string { return s.channel }

// Close sends the store's pending work notification, if any, and, if Open
// made the pool, closes it (then later calls fail). It always returns nil.
func (s *Store) Close() error {
	s.work.close()
	s.notes.close()
	if s.ownPool {
		s.pool.Close()
	}
	return nil
}

// clock returns the application's current time as the database will store
// it: UTC, microseconds, no monotonic reading.
func (s *Store) clock() time.Time { return s.now().UTC().Truncate(time.Microsecond) }

// dbTime normalises a time for storage the way clock does.
func dbTime(t time.Time) time.Time { return t.UTC().Truncate(time.Microsecond) }

// maxAttempts bounds the runs of a statement or batch that PostgreSQL
// aborted as a deadlock victim or a serialization failure. The store's lock
// order makes both unlikely; a rerun reads everything afresh, so it is safe.
const maxAttempts = 3

// batch sends the statements fill queues as one pipelined batch: one round
// trip, which PostgreSQL runs as one implicit transaction (pgx ends the
// batch with a single Sync), each statement with a snapshot of its own, so
// that each sees what concurrent transactions committed while the one
// before it waited on them. The queued callbacks run in order; the first
// error rolls the whole batch back. fill must reset what its callbacks
// report, since an aborted batch is sent again.
func (s *Store) batch(ctx context.Context, fill func(b *pgx.Batch)) error {
	var err error
	for range maxAttempts {
		b := &pgx.Batch{}
		fill(b)
		err = s.pool.SendBatch(ctx, b).Close()
		if !retryable(err) {
			break
		}
	}
	return err
}

// publish hands a committed transaction's notifications to the sender:
// the tenant and id of each proposal whose status changed, and work not yet
// announced, if the rate limiter allows it now (else its trailing
// notification announces it).
func (s *Store) publish(changed []*store.Proposal, work bool) {
	if len(changed) == 0 && !work {
		return
	}
	payloads := make([]string, 0, len(changed)+1)
	for _, p := range changed {
		payloads = append(payloads, changePayload(p.Tenant, p.ID))
	}
	if work {
		if s.work.reserve() {
			payloads = append(payloads, payloadWork)
		} else {
			s.work.deferred()
		}
	}
	s.notes.add(payloads...)
}

// cursorCodec returns the codec made from the database's cursor key.
func (s *Store) cursorCodec(ctx context.Context) (*cursor.Codec, error) {
	s.codecMu.Lock()
	defer s.codecMu.Unlock()
	if s.codec != nil {
		return s.codec, nil
	}
	var key []byte
	err := s.pool.QueryRow(ctx, s.q.loadCursorKey, metaCursorKey).Scan(&key)
	if errors.Is(err, pgx.ErrNoRows) || isUndefinedTable(err) || pgCode(err) == codeInvalidSchemaName {
		return nil, fmt.Errorf("load cursor key: not found (is the schema %q migrated?)", s.schema)
	}
	if err != nil {
		return nil, fmt.Errorf("load cursor key: %w", err)
	}
	c, err := cursor.NewCodec(key)
	if err != nil {
		return nil, fmt.Errorf("load cursor key: %w", err)
	}
	s.codec = c
	return c, nil
}

// schemaToken stands for the quoted schema in the query texts of queries.go.
const schemaToken = "_S_."

// qualify puts the quoted schema in place of schemaToken.
func qualify(quoted, query string) string {
	return strings.ReplaceAll(query, schemaToken, quoted+".")
}
