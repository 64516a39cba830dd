// Package storetest is the conformance suite every store driver must pass:
// memstore, sqlitestore and, later, pgstore run the same tests, races
// included, so that the engine can rely on one contract whatever the driver.
//
// A driver's test calls Run with a Factory that returns a fresh, empty store
// reading the time from the clock it is given:
//
//	func TestConformance(t *testing.T) {
//		storetest.Run(t, func(t *testing.T, now func() time.Time) store.Store {
//			s := memstore.New(&memstore.Options{Now: now})
//			t.Cleanup(func() { _ = s.Close() })
//			return s
//		})
//	}
//
// Each subtest asks the factory for its own store, so subtests run in
// parallel. Tests that depend on a lease running out use a short real lease,
// move the fake clock past it and sleep past it, so they hold both for drivers
// that judge leases by the injected clock (memory, SQLite) and for drivers
// that judge them by the database's clock (PostgreSQL).
//
// A driver whose SQL restates a selection rule of store/transition.go
// (Due, Claimable, Escalatable, Remindable) also passes WithRuleQuery: a
// function that runs those queries unfiltered, which RulesMatchQueries
// compares with the Go rules over proposals in every state they tell apart.
//
// When a driver's behaviour changes, extend the suite rather than the
// driver's own tests, so every driver is held to the change.
package storetest
