package server

import (
	"maps"
	"sync"
	"time"

	"github.com/countersign/countersign/cstype"
	"github.com/prometheus/client_golang/prometheus"
)

// ProposalCounts is the countersign_proposals gauge: every tenant's
// proposals by status, as the store counts them, so that it is the same
// whichever process serves the scrape. Counting reads every stored proposal,
// so it is not done per scrape (where an open /metrics would let anyone make
// the store count ten million rows at will), nor here: the worker counts in
// the background (countersign.WorkerOptions.OnProposalCounts, given Set;
// internal/maintenance's ProposalCounts) and a scrape reports the last
// count and when it was taken
// (countersign_proposals_counted_timestamp_seconds), with the approved
// backlog (countersign_approved_backlog) from the same count. Until the
// first count there is no sample of either.
type ProposalCounts struct {
	desc        *prometheus.Desc
	atDesc      *prometheus.Desc
	backlogDesc *prometheus.Desc

	mu     sync.Mutex
	counts map[cstype.Status]int // nil until the first count
	at     time.Time
}

// NewProposalCounts returns the collector of the proposals by status.
// Register it on the registry given to NewMetrics, and give its Set to the
// worker (countersign.WorkerOptions.OnProposalCounts).
func NewProposalCounts() *ProposalCounts {
	return &ProposalCounts{
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

// Set records a count, taken at at: the next scrapes report it. It is safe
// for concurrent use, and keeps its own copy of counts.
func (c *ProposalCounts) Set(counts map[cstype.Status]int, at time.Time) {
	cp := make(map[cstype.Status]int, len(counts))
	maps.Copy(cp, counts)
	c.mu.Lock()
	c.counts, c.at = cp, at
	c.mu.Unlock()
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
	for _, s := range cstype.Statuses {
		ch <- prometheus.MustNewConstMetric(c.desc, prometheus.GaugeValue, float64(counts[s]), string(s))
	}
	ch <- prometheus.MustNewConstMetric(c.atDesc, prometheus.GaugeValue, float64(at.UnixNano())/1e9)
	// The backlog comes from the same count: a scrape still reads no store.
	ch <- prometheus.MustNewConstMetric(c.backlogDesc, prometheus.GaugeValue, float64(counts[cstype.StatusApproved]))
}
