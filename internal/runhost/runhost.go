// Package runhost holds the key to the engine's privileged side of agent
// runs (countersign.RunHost): reading any run, writing its steps, claiming
// and sweeping runs, watching a run. Those act for the engine, not for a
// person, and check nobody, so no surface may reach them.
//
// Engine.RunHost takes a Key, and only a package that may import this one
// makes a Key: Go lets only the module's own packages import an internal
// package, and test/imports (TestImports) lets only the agent runtime
// (package agent) and the composition root (cmd/countersign) do so among
// them. A surface's code that asked for a RunHost would fail that test.
package runhost

// Key unlocks Engine.RunHost. Its unexported field keeps a package that
// cannot import runhost from writing a value of it (an unnamed struct
// literal of the same shape is another type).
type Key struct{ _ struct{} }
