package pgstore_test

import (
	"context"
	"fmt"
	"log"
	"time"

	"github.com/countersign/countersign/store"
	"github.com/countersign/countersign/store/pgstore"
)

// Open a store on a PostgreSQL database, in a schema of its own, and run a
// worker's side: listen for work and claim it. (Not run as a test: it needs
// a server; see the package's tests for runnable ones.)
func ExampleOpen() {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	s, err := pgstore.Open(ctx, "postgres://countersign@db.internal/app?pool_max_conns=16",
		&pgstore.Options{Schema: "countersign"})
	if err != nil {
		log.Fatal(err)
	}
	defer s.Close()

	wake := make(chan struct{}, 1)
	go func() {
		_ = s.Listen(ctx, func(n store.Notification) {
			if n.Work {
				select {
				case wake <- struct{}{}:
				default: // a wake-up is already pending
				}
			}
		})
	}()
	for {
		claimed, err := s.ClaimBatch(ctx, &store.ClaimBatchParams{Owner: "worker-1", LeaseDuration: time.Minute, Limit: 8})
		if err != nil {
			log.Fatal(err)
		}
		for _, c := range claimed {
			fmt.Println("execute", c.Proposal.ID, "claimed from", c.From)
		}
		select {
		case <-wake:
		case <-time.After(time.Second): // notifications are best effort: poll too
		case <-ctx.Done():
			return
		}
	}
}
