// Package outboxhost holds the key to the engine's notification outbox
// (Engine.Outbox): claiming any tenant's due notifications and recording
// their deliveries. That acts for the engine, not for a person, and checks
// nobody, so no surface may reach it.
//
// Engine.Outbox wants the Key Grant returns, and only a package that may
// import this one can call Grant: Go lets only the module's own packages
// import an internal package, and test/imports (TestImports) lets only the
// notification deliverer (package notifications) and the composition root
// (cmd/countersign) do so among them.
package outboxhost

// Key unlocks Engine.Outbox: the engine hands out its privileged side
// only for the one Key that Grant returns, so that a package that cannot
// import outboxhost cannot forge one (a new Key, a zero one, nil: each is
// refused).
type Key struct{ _ byte } // not zero-sized, so that new(Key) is never the granted one

var key = new(Key)

// Grant returns the key Engine.Outbox wants.
func Grant() *Key { return key }

// Valid reports whether k is the key Grant returns.
func Valid(k *Key) bool { return k != nil && k == key }
