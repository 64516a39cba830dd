package tracelog

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"testing"

	"go.opentelemetry.io/otel/trace"
)

func TestHandlerAddsTheSpansIDs(t *testing.T) {
	var buf bytes.Buffer
	log := slog.New(New(slog.NewJSONHandler(&buf, nil))).With("component", "engine").WithGroup("g")
	tid, _ := trace.TraceIDFromHex("4bf92f3577b34da6a3ce929d0e0e4736")
	sid, _ := trace.SpanIDFromHex("00f067aa0ba902b7")
	ctx := trace.ContextWithSpanContext(context.Background(), trace.NewSpanContext(trace.SpanContextConfig{TraceID: tid, SpanID: sid, TraceFlags: trace.FlagsSampled}))

	log.InfoContext(ctx, "traced", "k", 1)
	log.Info("untraced", "k", 2)
	lines := bytes.Split(bytes.TrimSpace(buf.Bytes()), []byte("\n"))
	if len(lines) != 2 {
		t.Fatalf("got %d lines:\n%s", len(lines), buf.String())
	}
	var traced, untraced map[string]any
	if err := json.Unmarshal(lines[0], &traced); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(lines[1], &untraced); err != nil {
		t.Fatal(err)
	}
	g, _ := traced["g"].(map[string]any)
	if g["trace_id"] != "4bf92f3577b34da6a3ce929d0e0e4736" || g["span_id"] != "00f067aa0ba902b7" || traced["component"] != "engine" {
		t.Errorf("traced line %s: want trace_id and span_id beside the record's attributes", lines[0])
	}
	if _, ok := untraced["g"].(map[string]any)["trace_id"]; ok {
		t.Errorf("untraced line %s carries a trace id", lines[1])
	}
}
