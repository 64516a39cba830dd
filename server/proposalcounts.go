package server

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/countersign/countersign/store"
	"github.com/prometheus/client_golang/prometheus"
)

// DefaultProposalCountsEvery is how often [ProposalCounts.Run] recounts
// when given no interval.
const DefaultProposalCountsEvery = 30 * time.Second

// ProposalCounts is the countersign_proposals gauge: every tenant's
// proposals by status, as the store counts them, so that it is the same
// whichever process serves the scrape. Counting reads every stored proposal,
// so it is not done per scrape (where an open /metrics would let anyone make
// the store count ten million rows at will): [ProposalCounts.Run] recounts
// in the background, and a scrape reports the last count and when it was
// taken (countersign_proposals_counted_timestamp_seconds), with the
// approved backlog (countersign_approved_backlog) from the same count. Until
// the first count there is no sample of either.
type ProposalCounts struct {
	count       func(context.Context) (map[store.Status]int, error)
	desc        *prometheus.Desc
	atDesc      *prometheus.Desc
	backlogDesc *prometheus.Desc

	mu     sync.Mutex
	counts map[store.Status]int // nil until the first count
	at     time.Time
}

// NewProposalCounts returns the collector of the proposals in st by status.
// Register it on the registry given to NewMetrics, and run its Run.
func NewProposalCounts(st store.Store) *ProposalCounts {
	return &ProposalCounts{
		count: st.CountByStatus,
		desc: prometheus.NewDesc("countersign_proposals",
			"Proposals in the store, by status, as of the last count (see countersign_proposals_counted_timestamp_seconds).",
			[]string{"status"}, nil),
		atDesc: prometheus.NewDesc("countersign_proposals_counted_timestamp_seconds",
			"When countersign_proposals was last counted, in Unix seconds.", nil, nil),
		backlogDesc: prometheus.NewDesc("countersign_approved_backlog",
			"Approved proposals not yet executing, as of the last count: the worker's queue for independent ones; wait and two_phase ones wait for their agent's call.",
			nil, nil),
	}
}

// Refresh counts the proposals once.
func (c *ProposalCounts) Refresh(ctx context.Context) error {
	counts, err := c.count(ctx)
	if err != nil {
		return fmt.Errorf("count proposals: %w", err)
	}
	c.mu.Lock()
	c.counts, c.at = counts, time.Now()
	c.mu.Unlock()
	return nil
}

// Run counts now and then every interval (0: DefaultProposalCountsEvery)
// until ctx ends. A failed count keeps the last one and is logged to log
// (nil: slog.Default()). It returns when ctx ends.
func (c *ProposalCounts) Run(ctx context.Context, every time.Duration, log *slog.Logger) {
	if every <= 0 {
		every = DefaultProposalCountsEvery
	}
	if log == nil {
		log = slog.Default()
	}
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		// A count that outlives its interval would pile up behind the next.
		cctx, cancel := context.WithTimeout(ctx, every)
		err := c.Refresh(cctx)
		cancel()
		if err != nil && ctx.Err() == nil {
			log.WarnContext(ctx, "metrics: count proposals", "err", err)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// Describe implements prometheus.Collector.
func (c *ProposalCounts) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.desc
	ch <- c.atDesc
	ch <- c.backlogDesc
}

// Collect implements prometheus.Collector. It reads no store.
func (c *ProposalCounts) Collect(ch chan<- prometheus.Metric) {
	c.mu.Lock()
	counts, at := c.counts, c.at
	c.mu.Unlock()
	if counts == nil {
		return
	}
	for _, s := range store.Statuses {
		ch <- prometheus.MustNewConstMetric(c.desc, prometheus.GaugeValue, float64(counts[s]), string(s))
	}
	ch <- prometheus.MustNewConstMetric(c.atDesc, prometheus.GaugeValue, float64(at.UnixNano())/1e9)
	// The backlog comes from the same count: a scrape still reads no store.
	ch <- prometheus.MustNewConstMetric(c.backlogDesc, prometheus.GaugeValue, float64(counts[store.StatusApproved]))
}
