package pgstore

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"syscall"
	"testing"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/countersign/countersign/store"
)

// TestUnreachableClassifier pins which errors mean "PostgreSQL cannot be
// reached" (store.ErrUnavailable: try again later) and which do not.
func TestUnreachableClassifier(t *testing.T) {
	t.Parallel()
	pg := func(code string) error { return &pgconn.PgError{Code: code, Message: "m"} }
	refused := &net.OpError{Op: "dial", Net: "tcp", Err: os.NewSyscallError("connect", syscall.ECONNREFUSED)}
	reset := &net.OpError{Op: "read", Net: "tcp", Err: os.NewSyscallError("read", syscall.ECONNRESET)}
	for _, tc := range []struct {
		name string
		err  error
		want bool
	}{
		{"nil", nil, false},
		{"connection refused", refused, true},
		{"connection reset", fmt.Errorf("failed to receive message: %w", reset), true},
		{"bare ECONNREFUSED", syscall.ECONNREFUSED, true},
		{"broken pipe", fmt.Errorf("write: %w", syscall.EPIPE), true},
		{"unexpected EOF", fmt.Errorf("receive message: %w", io.ErrUnexpectedEOF), true},
		{"EOF", io.EOF, true},
		{"conn closed", fmt.Errorf("exec: %w", pgconn.ErrConnClosed), true},
		{"admin shutdown 57P01", pg("57P01"), true},
		{"crash shutdown 57P02", pg("57P02"), true},
		{"cannot connect now 57P03", pg("57P03"), true},
		{"too many connections 53300", pg("53300"), true},
		{"connection failure 08006", pg("08006"), true},
		{"connection does not exist 08003", pg("08003"), true},
		{"unique violation", pg(codeUniqueViolation), false},
		{"serialization failure", pg(codeSerializationFailure), false},
		{"undefined table", pg(codeUndefinedTable), false},
		{"query canceled 57014", pg("57014"), false},
		{"invalid password 28P01", pg("28P01"), false},
		{"database does not exist 3D000", pg("3D000"), false},
		{"context canceled", context.Canceled, false},
		{"canceled after a reset", errors.Join(context.Canceled, reset), false},
		{"a plain error", errors.New("boom"), false},
		{"invalid params", store.ErrInvalidParams, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := unreachable(tc.err); got != tc.want {
				t.Errorf("unreachable(%v) = %v, want %v", tc.err, got, tc.want)
			}
			wrapped := wrap("op", tc.err)
			if got := errors.Is(wrapped, store.ErrUnavailable); got != tc.want {
				t.Errorf("errors.Is(wrap(%v), ErrUnavailable) = %v, want %v", tc.err, got, tc.want)
			}
			if tc.err != nil && !errors.Is(wrapped, tc.err) {
				t.Errorf("wrap lost the cause %v", tc.err)
			}
		})
	}
}
