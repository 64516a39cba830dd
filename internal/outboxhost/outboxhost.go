// Package outboxhost holds the key to the engine's notification outbox
// (Engine.Outbox): claiming any tenant's due notifications and recording
// their deliveries. That acts for the engine, not for a person, and checks
// nobody, so no surface may reach it.
//
// Only a package that may import this one makes a Key: Go lets only the
// module's own packages import an internal package, and test/imports
// (TestImports) lets only the notification deliverer (package
// notifications) and the composition root (cmd/countersign) do so among
// them.
package outboxhost

// Key unlocks Engine.Outbox. Its unexported field keeps a package that
// cannot import outboxhost from writing a value of it.
type Key struct{ _ struct{} }
