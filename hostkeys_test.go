package countersign_test

import (
	"testing"

	"github.com/countersign/countersign"
	"github.com/countersign/countersign/internal/outboxhost"
	"github.com/countersign/countersign/internal/runhost"
	"github.com/countersign/countersign/store/memstore"
)

// TestHostKeysCannotBeForged: the engine's privileged sides (RunHost, the
// outbox) are handed out only for the key their internal package grants;
// a key made without it (a new one, nil) is refused, so that a package
// that may not import the key's package (test/imports) cannot reach them.
func TestHostKeysCannotBeForged(t *testing.T) {
	e, err := countersign.New(countersign.Options{Store: memstore.New(nil)})
	if err != nil {
		t.Fatal(err)
	}
	if e.RunHost(runhost.Grant()) == nil {
		t.Fatal("RunHost(Grant()) is nil")
	}
	if e.Outbox(outboxhost.Grant()) == nil {
		t.Fatal("Outbox(Grant()) is nil")
	}
	refused := func(name string, f func()) {
		t.Helper()
		defer func() {
			if recover() == nil {
				t.Errorf("%s: handed out", name)
			}
		}()
		f()
	}
	refused("RunHost(new key)", func() { e.RunHost(new(runhost.Key)) })
	refused("RunHost(nil)", func() { e.RunHost(nil) })
	refused("Outbox(new key)", func() { e.Outbox(new(outboxhost.Key)) })
	refused("Outbox(nil)", func() { e.Outbox(nil) })
}
