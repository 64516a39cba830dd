package sqlitestore_test

import (
	"context"
	"fmt"
	"log"
	"os"
	"path/filepath"
	"time"

	"github.com/countersign/countersign/store"
	"github.com/countersign/countersign/store/sqlitestore"
)

// Open a database file, migrating it, and store a proposal. A second Open of
// the same file, here or in another process, sees it.
func ExampleOpen() {
	dir, err := os.MkdirTemp("", "countersign")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	ctx := context.Background()
	path := filepath.Join(dir, "countersign.db")

	s, err := sqlitestore.Open(ctx, path, nil)
	if err != nil {
		log.Fatal(err)
	}
	defer s.Close()
	res, err := s.CreateProposal(ctx, &store.CreateProposalParams{Proposal: &store.Proposal{
		ID: "prp_1", Tenant: "acme", Requester: "alice", ThreadID: "thr_1", ToolCallID: "call_1",
		Action: "payments.refund", ActionVersion: "1", Mode: store.ModeWait,
		Approvers: []string{"requester"}, Quorum: 1,
		ExpiresAt: time.Now().Add(10 * time.Minute), OperationID: "op_1",
	}})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(res.Created, res.Proposal.Status)

	other, err := sqlitestore.Open(ctx, path, nil)
	if err != nil {
		log.Fatal(err)
	}
	defer other.Close()
	p, err := other.GetProposal(ctx, &store.GetProposalParams{Tenant: "acme", ID: "prp_1"})
	if err != nil {
		log.Fatal(err)
	}
	v, err := other.SchemaVersion(ctx)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(p.Status, v == sqlitestore.LatestSchemaVersion())
	// Output:
	// true pending
	// pending true
}
