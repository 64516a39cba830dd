package pgstore_test

import (
	"context"
	"errors"
	"reflect"
	"testing"
	"time"

	"github.com/countersign/countersign/internal/pgtest"
	"github.com/countersign/countersign/store"
	"github.com/countersign/countersign/store/pgstore"
)

// callEveryMethod calls each method of s's store.Store interface that takes
// a context, with zero-valued parameters, and returns the errors by method
// name. Listen is left out: it blocks until its context ends.
func callEveryMethod(ctx context.Context, s store.Store) map[string]error {
	errs := map[string]error{}
	iface := reflect.TypeFor[store.Store]()
	v := reflect.ValueOf(s)
	ctxType := reflect.TypeFor[context.Context]()
	errType := reflect.TypeFor[error]()
	for i := range iface.NumMethod() {
		m := iface.Method(i)
		ft := m.Type
		if ft.NumIn() == 0 || ft.In(0) != ctxType || ft.NumOut() == 0 || ft.Out(ft.NumOut()-1) != errType || m.Name == "Listen" {
			continue
		}
		args := []reflect.Value{reflect.ValueOf(ctx)}
		for j := 1; j < ft.NumIn(); j++ {
			t := ft.In(j)
			a := reflect.New(t).Elem()
			if t.Kind() == reflect.Pointer {
				a = reflect.New(t.Elem()) // zero params, never nil
			}
			args = append(args, a)
		}
		out := v.MethodByName(m.Name).Call(args)
		err, _ := out[len(out)-1].Interface().(error)
		errs[m.Name] = err
	}
	return errs
}

// TestUnavailableWhileDown takes PostgreSQL away from a store (a proxy
// between them refuses connections and resets the open ones) and checks
// that every method that reaches the database answers store.ErrUnavailable
// (or, for parameters refused before any query, store.ErrInvalidParams /
// store.ErrNotFound), that Open does too, and that the same store serves
// again once the server is back.
func TestUnavailableWhileDown(t *testing.T) {
	dsn, schema := pgtest.NewSchema(t)
	proxy, via := pgtest.Proxied(t, dsn)
	ctx := context.Background()
	s, err := pgstore.Open(ctx, withPoolSize(via), &pgstore.Options{Schema: schema})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()

	proxy.Down()
	cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	checked := 0
	for name, err := range callEveryMethod(cctx, s) {
		switch {
		case errors.Is(err, store.ErrUnavailable):
			checked++
		case err == nil, errors.Is(err, store.ErrInvalidParams), errors.Is(err, store.ErrNotFound), errors.Is(err, store.ErrInvalidCursor):
			// Refused (or answered) before any query.
		default:
			t.Errorf("%s while the server is down: %v (want store.ErrUnavailable)", name, err)
		}
	}
	t.Logf("%d methods answered ErrUnavailable", checked)
	if checked < 20 {
		t.Errorf("only %d methods reached the database; the zero parameters are refused too early to test", checked)
	}
	if _, err := s.SchemaVersion(cctx); !errors.Is(err, store.ErrUnavailable) {
		t.Errorf("SchemaVersion while down: %v", err)
	}
	if _, err := pgstore.Open(cctx, withPoolSize(via), &pgstore.Options{Schema: schema}); !errors.Is(err, store.ErrUnavailable) {
		t.Errorf("Open while down: %v, want store.ErrUnavailable", err)
	}

	if err := proxy.Pass(); err != nil {
		t.Fatal(err)
	}
	if _, err := s.GetProposal(cctx, &store.GetProposalParams{Tenant: "t", ID: "prp_none"}); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("GetProposal after the server came back: %v, want not found", err)
	}
}
