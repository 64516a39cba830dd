package countersign

import (
	"context"
	"time"

	"github.com/countersign/countersign/cstype"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"
)

// The engine's span names and attribute keys (docs/tracing.md).
const (
	spanCall      = "countersign.call"
	spanDecide    = "countersign.decide"
	spanClaim     = "countersign.claim"
	spanExecute   = "countersign.execute"
	spanSettle    = "countersign.settle"
	spanReconcile = "countersign.reconcile"

	// TracerName is the instrumentation scope of the engine's spans.
	TracerName = "github.com/countersign/countersign"
)

// Attribute keys. The gen_ai ones are OpenTelemetry's GenAI semantic
// conventions for a tool call.
var (
	attrProposalID = attribute.Key("countersign.proposal.id")
	attrTenant     = attribute.Key("countersign.tenant")
	attrAction     = attribute.Key("countersign.action")
	attrStatus     = attribute.Key("countersign.status")
	attrThreadID   = attribute.Key("countersign.thread.id")
	attrRunID      = attribute.Key("countersign.run.id")
	attrMode       = attribute.Key("countersign.mode")
	attrAttempt    = attribute.Key("countersign.attempt")
	attrVerdict    = attribute.Key("countersign.decision.verdict")
	attrVia        = attribute.Key("countersign.decision.via")
	attrOutcome    = attribute.Key("countersign.decision.outcome")
	attrToolName   = attribute.Key("gen_ai.tool.name")
	attrToolCallID = attribute.Key("gen_ai.tool.call.id")
	attrOperation  = attribute.Key("gen_ai.operation.name")
)

// noSpan is what the span helpers hand back when tracing is off: a span
// that records nothing and, unlike trace.SpanFromContext, never ends a span
// the caller's own instrumentation put in ctx.
var noSpan trace.Span = noop.Span{}

// traceContext is the one propagation format the engine stores: W3C Trace
// Context, whatever propagator the process uses for HTTP.
var traceContext propagation.TraceContext

// traceParentOf returns the W3C traceparent of ctx's span, or "" when ctx
// carries no valid span context (or tracing is off: nothing is stored).
func (e *Engine) traceParentOf(ctx context.Context) string {
	if e.tracer == nil || !trace.SpanContextFromContext(ctx).IsValid() {
		return ""
	}
	c := propagation.MapCarrier{}
	traceContext.Inject(ctx, c)
	return c["traceparent"]
}

// storedSpanContext is the span context a proposal's TraceParent names.
func storedSpanContext(p *cstype.Proposal) trace.SpanContext {
	if p == nil || p.TraceParent == "" {
		return trace.SpanContext{}
	}
	ctx := traceContext.Extract(context.Background(), propagation.MapCarrier{"traceparent": p.TraceParent})
	return trace.SpanContextFromContext(ctx)
}

// startSpan starts a span named name about proposal p (nil when it is not
// known yet). The one rule that links every span about a proposal into one
// trace: when p carries the trace context of the call that made it, and
// ctx's span belongs to another trace (or none: the worker), the span is a
// child of the stored context and links to ctx's span; otherwise it is a
// child of ctx's span. With tracing off it costs a nil check.
func (e *Engine) startSpan(ctx context.Context, name string, p *cstype.Proposal, opts ...trace.SpanStartOption) (context.Context, trace.Span) {
	if e.tracer == nil {
		return ctx, noSpan
	}
	if stored := storedSpanContext(p); stored.IsValid() {
		if cur := trace.SpanContextFromContext(ctx); cur.TraceID() != stored.TraceID() {
			if cur.IsValid() {
				opts = append(opts, trace.WithLinks(trace.Link{SpanContext: cur}))
			}
			ctx = trace.ContextWithRemoteSpanContext(ctx, stored)
		}
	}
	ctx, span := e.tracer.Start(ctx, name, opts...)
	if p != nil {
		span.SetAttributes(proposalAttrs(p)...)
	}
	return ctx, span
}

// proposalAttrs are the attributes every span about p carries.
func proposalAttrs(p *cstype.Proposal) []attribute.KeyValue {
	return []attribute.KeyValue{
		attrProposalID.String(p.ID), attrTenant.String(p.Tenant), attrAction.String(p.Action),
		attrToolName.String(p.Action), attrToolCallID.String(p.ToolCallID),
	}
}

// endSpan ends span, recording err (when not nil) and the proposal's
// status (when p is not nil).
func endSpan(span trace.Span, p *cstype.Proposal, err error) {
	if !span.IsRecording() {
		return
	}
	if p != nil {
		span.SetAttributes(attrProposalID.String(p.ID), attrStatus.String(string(p.Status)))
	}
	if err != nil {
		span.RecordError(err)
		span.SetStatus(codes.Error, err.Error())
	}
	span.End()
}

// claimSpan records a claim of p asked for at asked, which has returned:
// a span from asked to now in p's trace.
func (e *Engine) claimSpan(ctx context.Context, p *cstype.Proposal, asked time.Time, err error) {
	if e.tracer == nil {
		return
	}
	_, span := e.startSpan(ctx, spanClaim, p, trace.WithTimestamp(asked))
	endSpan(span, p, err)
}
