// Package faultstore wraps any store.Store for tests of lease safety: it
// makes the calls that keep a lease (RenewLease; the answers of the claims:
// Claim, ClaimBatch, a CreateProposal that takes a lease) hang, fail or
// answer slowly, and it records, in one ordered log, what the engine asked
// of the store and what the store answered.
//
// A test scripts the renewals with SetRenewals, reads the calls back with
// Renewals and Settlements, the lease the wrapped store granted last with
// Lease, and the order of everything with Events; Note adds the
// test's own events (Execute's context ending, say) to the same log, so that
// a test asserts on the order of events rather than on durations.
//
//	fs := faultstore.New(memstore.New(nil))
//	fs.SetRenewals(faultstore.Fault{Hang: true})
//	e, _ := countersign.New(countersign.Options{Store: fs, ...})
package faultstore
