package countersign_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/countersign/countersign"
	"github.com/countersign/countersign/cstype"
	"github.com/countersign/countersign/notifications"
	"github.com/countersign/countersign/store"
	"github.com/countersign/countersign/webhook"
)

// delivered is one request a notification receiver got.
type delivered struct {
	header http.Header
	body   []byte
}

// TestEmbeddedWorkerDeliversNotifications: a program that embeds the
// library — New, a notifications.Deliverer given to NewWorker, Run — gets
// its notifications delivered by the worker alone: it writes the targets
// to the store (nobody calls Sync) and posts each new proposal's
// proposal.created, signed, to the receiver. On every store.
func TestEmbeddedWorkerDeliversNotifications(t *testing.T) {
	t.Parallel()
	eachStore(t, func(t *testing.T, open storeOpener) {
		st := open(t, nil)
		got := make(chan delivered, 100)
		rcv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			b, _ := io.ReadAll(r.Body)
			select {
			case got <- delivered{header: r.Header.Clone(), body: b}:
			default: // the test reads the first only
			}
			w.WriteHeader(http.StatusNoContent)
		}))
		defer rcv.Close()
		n := &noopAction{calls: map[string]int{}}
		e, err := countersign.New(countersign.Options{Store: st, Actions: []*countersign.Action{n.action(t, "noop", false)},
			Policy: independentRule(), Logger: slog.New(slog.DiscardHandler)})
		if err != nil {
			t.Fatal(err)
		}
		secret := []byte("receiver-secret")
		d, err := notifications.New(notifications.Options{
			Engine:  e,
			Targets: []notifications.Target{{URL: rcv.URL, Events: []cstype.EventType{cstype.EventCreated}, Secret: secret}},
			Render: func(p *cstype.Proposal) (json.RawMessage, error) {
				return json.Marshal(map[string]string{"id": p.ID, "status": string(p.Status)})
			},
			PollInterval: 10 * time.Millisecond, Logger: slog.New(slog.DiscardHandler),
		})
		if err != nil {
			t.Fatal(err)
		}
		w, err := e.NewWorker(countersign.WorkerOptions{PollInterval: 10 * time.Millisecond, Notifications: d})
		if err != nil {
			t.Fatal(err)
		}
		defer runWorker(t, w)()

		// The worker writes the targets as it starts: only events after
		// that are announced, so calls are made until one is.
		proposed := map[string]bool{}
		var first delivered
	wait:
		for i := 0; ; i++ {
			res, err := e.Call(t.Context(), &countersign.Call{Identity: tAlice, ThreadID: "t1", ToolCallID: fmt.Sprintf("n%d", i),
				Action: "noop", Input: json.RawMessage(`{}`)})
			if err != nil {
				t.Fatal(err)
			}
			proposed[res.ProposalID] = true
			select {
			case first = <-got:
				break wait
			case <-time.After(50 * time.Millisecond):
			}
			if i == 600 {
				t.Fatal("no notification delivered within 30s: the embedded worker does not deliver")
			}
		}
		if err := webhook.Verify(secret, first.header.Get(webhook.SignatureHeader), first.body, time.Now(), 0); err != nil {
			t.Errorf("the notification's signature: %v", err)
		}
		var body struct {
			ID       string `json:"id"`
			Type     string `json:"type"`
			Proposal struct {
				ID string `json:"id"`
			} `json:"proposal"`
		}
		if err := json.Unmarshal(first.body, &body); err != nil {
			t.Fatalf("body %s: %v", first.body, err)
		}
		if body.Type != "proposal.created" || !proposed[body.Proposal.ID] || first.header.Get("Idempotency-Key") != body.ID || !strings.HasPrefix(body.ID, "ntf_") {
			t.Errorf("notification %s with Idempotency-Key %q; want proposal.created of a proposal made here, keyed by its id",
				first.body, first.header.Get("Idempotency-Key"))
		}
	})
}

// TestWorkerCountsProposals: a worker given OnProposalCounts hands it the
// store's count of every status, and counts again every
// ProposalCountsEvery. On every store.
func TestWorkerCountsProposals(t *testing.T) {
	t.Parallel()
	eachStore(t, func(t *testing.T, open storeOpener) {
		st := open(t, nil)
		n := &noopAction{calls: map[string]int{}}
		e, err := countersign.New(countersign.Options{Store: st, Actions: []*countersign.Action{n.action(t, "noop", false)},
			Policy: independentRule(), Logger: slog.New(slog.DiscardHandler)})
		if err != nil {
			t.Fatal(err)
		}
		for i := range 3 {
			if _, err := e.Call(context.Background(), &countersign.Call{Identity: tAlice, ThreadID: "t1", ToolCallID: fmt.Sprintf("c%d", i),
				Action: "noop", Input: json.RawMessage(`{}`)}); err != nil {
				t.Fatal(err)
			}
		}
		counts := make(chan map[cstype.Status]int, 100)
		w, err := e.NewWorker(countersign.WorkerOptions{PollInterval: 10 * time.Millisecond, ProposalCountsEvery: 5 * time.Millisecond,
			OnProposalCounts: func(c map[cstype.Status]int, _ time.Time) {
				select {
				case counts <- c:
				default:
				}
			}})
		if err != nil {
			t.Fatal(err)
		}
		defer runWorker(t, w)()
		for i := range 3 { // the first count, and two more each interval
			select {
			case c := <-counts:
				if c[cstype.StatusPending] != 3 || len(c) > len(cstype.Statuses) {
					t.Fatalf("count %d: %v, want 3 pending", i+1, c)
				}
			case <-time.After(30 * time.Second):
				t.Fatalf("%d counts within 30s, want 3", i)
			}
		}
	})
}

// TestNewWorkerRefusesANegativeCountInterval names the field.
func TestNewWorkerRefusesANegativeCountInterval(t *testing.T) {
	t.Parallel()
	e, err := countersign.New(countersign.Options{Store: openMemory(t, nil)})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.NewWorker(countersign.WorkerOptions{ProposalCountsEvery: -time.Second}); err == nil || !strings.Contains(err.Error(), "WorkerOptions.ProposalCountsEvery") {
		t.Errorf("NewWorker: %v, want an error naming ProposalCountsEvery", err)
	}
}

// statisticsStore is a store whose planner, it says, needs statistics: it
// counts the worker's requests to refresh them.
type statisticsStore struct {
	store.Store
	asked chan struct{}
}

func (s *statisticsStore) RefreshStatistics(context.Context) ([]string, error) {
	select {
	case s.asked <- struct{}{}:
	default:
	}
	return nil, nil
}

// TestWorkerRefreshesPlannerStatistics: a worker on a store that
// implements store.Statistics (PostgreSQL) asks it to refresh them at once,
// and again a second later (maintenance.DefaultStatisticsEvery).
func TestWorkerRefreshesPlannerStatistics(t *testing.T) {
	t.Parallel()
	st := &statisticsStore{Store: openMemory(t, nil), asked: make(chan struct{}, 1)}
	e, err := countersign.New(countersign.Options{Store: st, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	w, err := e.NewWorker(countersign.WorkerOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer runWorker(t, w)()
	for i := range 2 {
		select {
		case <-st.asked:
		case <-time.After(30 * time.Second):
			t.Fatalf("%d refreshes within 30s, want 2", i)
		}
	}
}

// runWorker runs w until the function it returns is called, which stops
// Run, waits for it and reports the error it returned, if any.
func runWorker(t *testing.T, w *countersign.Worker) (stop func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	ran := make(chan error, 1)
	go func() { ran <- w.Run(ctx) }()
	return func() {
		cancel()
		if err := <-ran; err != nil {
			t.Errorf("Run: %v", err)
		}
	}
}
