// Package runhost holds the key to the engine's privileged side of agent
// runs (countersign.RunHost): reading any run, writing its steps, claiming
// and sweeping runs, watching a run. Those act for the engine, not for a
// person, and check nobody, so no surface may reach them.
//
// Engine.RunHost wants the Key Grant returns, and only a package that may
// import this one can call Grant: Go lets only the module's own packages
// import an internal package, and test/imports (TestImports) lets only the
// agent runtime (package agent) and the composition root (cmd/countersign)
// do so among them. A surface's code that asked for a RunHost would fail
// that test.
package runhost

// Key unlocks Engine.RunHost: the engine hands out its privileged side
// only for the one Key that Grant returns, so that a package that cannot
// import runhost cannot forge one (a new Key, a zero one, nil: each is
// refused).
type Key struct{ _ byte } // not zero-sized, so that new(Key) is never the granted one

var key = new(Key)

// Grant returns the key Engine.RunHost wants.
func Grant() *Key { return key }

// Valid reports whether k is the key Grant returns.
func Valid(k *Key) bool { return k != nil && k == key }
