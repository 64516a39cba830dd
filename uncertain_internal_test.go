package countersign

import (
	"context"
	"testing"
)

// routeUncertain is the one rule both execution paths follow.
func TestRouteUncertain(t *testing.T) {
	t.Parallel()
	reconcile := func(context.Context, *ReconcileRequest) (*Reconciliation, error) { return nil, nil }
	cases := []struct {
		name       string
		reconciles bool
		idempotent bool
		attempts   int
		want       uncertainRoute
	}{
		{name: "reconcile", reconciles: true, attempts: 1, want: routeReconcile},
		{name: "reconcile before retry", reconciles: true, idempotent: true, attempts: 1, want: routeReconcile},
		{name: "reconcile whatever the attempts", reconciles: true, idempotent: true, attempts: 5, want: routeReconcile},
		{name: "idempotent: retry", idempotent: true, attempts: 1, want: routeRetry},
		{name: "idempotent: last retry", idempotent: true, attempts: 4, want: routeRetry},
		{name: "idempotent: attempts spent", idempotent: true, attempts: 5, want: routeUnknown},
		{name: "idempotent: past the bound", idempotent: true, attempts: 6, want: routeUnknown},
		{name: "neither", attempts: 1, want: routeUnknown},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			a := &Action{name: "a", idempotent: tc.idempotent}
			if tc.reconciles {
				a.hooks.Reconcile = reconcile
			}
			if got := routeUncertain(a, tc.attempts, 5); got != tc.want {
				t.Fatalf("routeUncertain(attempts %d of 5) = %d, want %d", tc.attempts, got, tc.want)
			}
		})
	}
}
