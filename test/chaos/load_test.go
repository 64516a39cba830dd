package chaos

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"sort"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// plan is what a call's proposal should get.
type plan int

const (
	approveOne plan = iota // one approver
	approveTwo             // quorum 2: two approvers, concurrently
	reject                 // one approver rejects it
)

// item is one call the clients make and decide, and what they were told.
type item struct {
	n        int
	action   string
	plan     plan
	deciders []string // the approvers who decide it
	// wait is a call in wait mode: once it is approved the client repeats
	// it, and serve executes it in that request; seen and seenReceipt are
	// the outcome the client was told.
	wait              bool
	seen, seenReceipt string

	proposal string
	// answers maps a decider to the status its decision was answered with
	// (applied, unchanged, conflict, expired).
	mu      sync.Mutex
	answers map[string]string
}

// clientStats counts what the clients met.
type clientStats struct {
	requests, connErrors, unavailable, tooMany, internal, timeouts atomic.Int64
	mu                                                             sync.Mutex
	internalBodies                                                 []string
	other                                                          map[int]int // other unexpected statuses
}

// api is a client of serve's HTTP API that retries what a fault interrupts:
// a refused or reset connection, a time-out, 503 (the store cannot be
// reached) and 429. A 500 is recorded, then retried too, so that the run
// finishes and reports; it fails the test.
type api struct {
	base  string
	http  *http.Client
	stats *clientStats
}

func newAPI(base string) *api {
	return &api{base: base, stats: &clientStats{other: map[int]int{}},
		http: &http.Client{Timeout: 20 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: 64}}}
}

// errGaveUp is a request that never got an answer before its deadline.
var errGaveUp = errors.New("no answer before the deadline")

// post sends body to path as token until an answer other than a fault's,
// and decodes a 200's body into out. It returns the final status.
func (a *api) post(ctx context.Context, token, path string, body, out any) (int, error) {
	b, err := json.Marshal(body)
	if err != nil {
		return 0, err
	}
	for {
		if ctx.Err() != nil {
			return 0, errGaveUp
		}
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, a.base+path, bytes.NewReader(b))
		if err != nil {
			return 0, err
		}
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Authorization", "Bearer "+token)
		a.stats.requests.Add(1)
		resp, err := a.http.Do(req)
		if err != nil {
			var ne interface{ Timeout() bool }
			if errors.As(err, &ne) && ne.Timeout() {
				a.stats.timeouts.Add(1)
			} else {
				a.stats.connErrors.Add(1)
			}
			backoff(ctx, 100*time.Millisecond)
			continue
		}
		rb, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil {
			a.stats.connErrors.Add(1) // cut off mid-answer
			backoff(ctx, 100*time.Millisecond)
			continue
		}
		switch resp.StatusCode {
		case http.StatusOK:
			if err := json.Unmarshal(rb, out); err != nil {
				return resp.StatusCode, fmt.Errorf("%s: %v: %s", path, err, rb)
			}
			return resp.StatusCode, nil
		case http.StatusServiceUnavailable:
			a.stats.unavailable.Add(1)
			backoff(ctx, 250*time.Millisecond)
			continue
		case http.StatusTooManyRequests:
			a.stats.tooMany.Add(1)
			backoff(ctx, 250*time.Millisecond)
			continue
		case http.StatusInternalServerError:
			a.stats.internal.Add(1)
			a.stats.mu.Lock()
			a.stats.internalBodies = append(a.stats.internalBodies, path+": "+string(rb))
			a.stats.mu.Unlock()
			backoff(ctx, 250*time.Millisecond)
			continue
		}
		a.stats.mu.Lock()
		a.stats.other[resp.StatusCode]++
		a.stats.mu.Unlock()
		return resp.StatusCode, fmt.Errorf("%s: HTTP %d: %s", path, resp.StatusCode, rb)
	}
}

// backoff sleeps about d (jittered), or until ctx ends.
func backoff(ctx context.Context, d time.Duration) {
	select {
	case <-time.After(d/2 + rand.N(d)):
	case <-ctx.Done():
	}
}

// newItems plans n calls: the three actions in turn (transfer twice as
// often), 70 % approved by one approver, 20 % by two, 10 % rejected.
func newItems(n int) []*item {
	names := []string{"bob", "carol", "dave"}
	items := make([]*item, n)
	for i := range items {
		it := &item{n: i, answers: map[string]string{}}
		it.action = []string{actTransfer, actNotify, actTransfer, actTag}[i%4]
		first := names[i%3]
		switch r := i % 10; {
		case r < 7:
			it.plan, it.deciders = approveOne, []string{first}
		case r < 9:
			it.plan, it.deciders = approveTwo, []string{first, names[(i+1)%3]}
		default:
			it.plan, it.deciders = reject, []string{first}
		}
		it.wait = it.plan == approveOne && i%3 == 0
		items[i] = it
	}
	return items
}

// run makes item's call and its decisions through the API. An error is a
// request that failed for a reason other than a fault.
func (it *item) run(ctx context.Context, a *api) error {
	quorum := 1
	if it.plan == approveTwo {
		quorum = 2
	}
	var call struct {
		Status     string `json:"status"`
		ProposalID string `json:"proposal_id"`
		Receipt    string `json:"receipt"`
	}
	body := map[string]any{
		"thread_id": fmt.Sprintf("t%d", it.n%16), "tool_call_id": fmt.Sprintf("call_%06d", it.n),
		"action": it.action, "input": map[string]any{"n": it.n, "quorum": quorum}, "mode": "independent",
	}
	if it.wait {
		body["mode"], body["wait_seconds"] = "wait", 0
	}
	if _, err := a.post(ctx, agentKey, "/v1/calls", body, &call); err != nil {
		return fmt.Errorf("call %d: %w", it.n, err)
	}
	if call.Status != "pending" || call.ProposalID == "" {
		return fmt.Errorf("call %d: status %q, proposal %q; want pending", it.n, call.Status, call.ProposalID)
	}
	it.proposal = call.ProposalID
	verb := "approve"
	if it.plan == reject {
		verb = "reject"
	}
	var wg sync.WaitGroup
	errs := make(chan error, len(it.deciders))
	for _, who := range it.deciders {
		wg.Go(func() {
			var dec struct {
				Status string `json:"status"`
			}
			if _, err := a.post(ctx, approvers[who], "/v1/proposals/"+it.proposal+"/"+verb, map[string]any{"reason": "chaos " + who}, &dec); err != nil {
				errs <- fmt.Errorf("%s %s by %s: %w", verb, it.proposal, who, err)
				return
			}
			it.mu.Lock()
			it.answers[who] = dec.Status
			it.mu.Unlock()
		})
	}
	wg.Wait()
	close(errs)
	if err := <-errs; err != nil || !it.wait {
		return err
	}
	// The waiting caller comes back: its repeated call executes the
	// approved proposal (in serve), or answers the outcome recorded.
	body["wait_seconds"] = 5
	for {
		call.Status, call.Receipt = "", ""
		if _, err := a.post(ctx, agentKey, "/v1/calls", body, &call); err != nil {
			return fmt.Errorf("repeat call %d: %w", it.n, err)
		}
		switch call.Status {
		case "succeeded", "failed", "unknown":
			it.seen, it.seenReceipt = call.Status, call.Receipt
			return nil
		case "pending", "approved", "executing", "reconciling":
			backoff(ctx, 250*time.Millisecond) // another holder's execution, or a reconcile, is under way
		default:
			return fmt.Errorf("repeat call %d: status %q", it.n, call.Status)
		}
	}
}

// drive runs the items with clients concurrent clients, releasing item i at
// start + i×span/len(items), so that the load lasts about span whatever the
// faults do to it. It returns the requests' errors.
func drive(ctx context.Context, t *testing.T, a *api, items []*item, clients int, span time.Duration) []string {
	t.Helper()
	start := time.Now()
	queue := make(chan *item)
	var mu sync.Mutex
	var errs []string
	var wg sync.WaitGroup
	for range clients {
		wg.Go(func() {
			for it := range queue {
				if err := it.run(ctx, a); err != nil {
					mu.Lock()
					errs = append(errs, err.Error())
					mu.Unlock()
				}
			}
		})
	}
	for i, it := range items {
		if d := time.Until(start.Add(span * time.Duration(i) / time.Duration(len(items)))); d > 0 {
			time.Sleep(d)
		}
		select {
		case queue <- it:
		case <-ctx.Done():
		}
	}
	close(queue)
	wg.Wait()
	sort.Strings(errs)
	return errs
}
