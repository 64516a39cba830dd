package store_test

import (
	"testing"

	"github.com/countersign/countersign/store"
	"github.com/countersign/countersign/store/memstore"
)

// lanesStore is a driver with an optional interface.
type lanesStore struct {
	store.Store
	lanes int
}

func (s lanesStore) WriteLanes() int { return s.lanes }

// counting wraps a store and passes everything through.
type counting struct{ store.Store }

func (c counting) Unwrap() store.Store { return c.Store }

// opaque wraps a store without Unwrap.
type opaque struct{ store.Store }

// TestAs: an optional interface is found on the store itself, through any
// number of wrappers that unwrap, and not through one that does not; a
// wrapper's own implementation comes first.
func TestAs(t *testing.T) {
	driver := lanesStore{Store: memstore.New(nil), lanes: 3}
	for _, tc := range []struct {
		name  string
		st    store.Store
		found bool
		lanes int
	}{
		{"the driver", driver, true, 3},
		{"one wrapper", counting{driver}, true, 3},
		{"two wrappers", counting{counting{driver}}, true, 3},
		{"a wrapper that does not unwrap", opaque{driver}, false, 0},
		{"behind one that does not unwrap", counting{opaque{driver}}, false, 0},
		{"the wrapper's own first", counting{lanesStore{Store: counting{driver}, lanes: 5}}, true, 5},
		{"a driver without it", counting{memstore.New(nil)}, false, 0},
		{"no store", nil, false, 0},
	} {
		l, ok := store.As[store.Lanes](tc.st)
		if ok != tc.found || (ok && l.WriteLanes() != tc.lanes) {
			got := 0
			if ok {
				got = l.WriteLanes()
			}
			t.Errorf("%s: found %v with %d lanes, want %v with %d", tc.name, ok, got, tc.found, tc.lanes)
		}
	}
	if _, ok := store.As[store.Notifier](counting{memstore.New(nil)}); ok {
		t.Error("memstore behind a wrapper gained Listen")
	}
}
