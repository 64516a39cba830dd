package countersign_test

import (
	"testing"

	"github.com/countersign/countersign/internal/teststores"
)

// storeOpener opens an empty store on a clock, closed when t ends.
type storeOpener = teststores.Opener

// openMemory opens an in-memory store (internal/teststores).
var openMemory = teststores.Memory

// eachStore runs test on memory, SQLite and PostgreSQL, in parallel.
func eachStore(t *testing.T, test func(t *testing.T, open storeOpener)) {
	t.Helper()
	teststores.Each(t, test)
}
