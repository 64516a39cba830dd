// Package tracelog adds the trace context to log lines: a slog.Handler
// that writes the trace_id and span_id of the span in a record's context,
// so that a log line and the span it was written in can be found together.
package tracelog

import (
	"context"
	"log/slog"

	"go.opentelemetry.io/otel/trace"
)

// Handler wraps a slog.Handler: a record logged with a context that holds a
// valid span gets trace_id and span_id attributes (lowercase hex, as W3C
// Trace Context writes them). Records without one pass unchanged.
type Handler struct{ next slog.Handler }

// New returns next wrapped.
func New(next slog.Handler) *Handler { return &Handler{next: next} }

// Enabled is next's.
func (h *Handler) Enabled(ctx context.Context, l slog.Level) bool { return h.next.Enabled(ctx, l) }

// Handle adds the span's ids, then hands the record to next.
func (h *Handler) Handle(ctx context.Context, r slog.Record) error {
	if sc := trace.SpanContextFromContext(ctx); sc.IsValid() {
		// A clone: the record's attributes may share storage with the
		// caller's copy.
		r = r.Clone()
		r.AddAttrs(slog.String("trace_id", sc.TraceID().String()), slog.String("span_id", sc.SpanID().String()))
	}
	return h.next.Handle(ctx, r)
}

// WithAttrs wraps next's.
func (h *Handler) WithAttrs(as []slog.Attr) slog.Handler { return &Handler{next: h.next.WithAttrs(as)} }

// WithGroup wraps next's.
func (h *Handler) WithGroup(name string) slog.Handler { return &Handler{next: h.next.WithGroup(name)} }
