package main

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"time"

	"github.com/countersign/countersign/config"
	"github.com/countersign/countersign/internal/tracelog"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
)

// tracingShutdownTimeout bounds the export of the last spans at exit.
const tracingShutdownTimeout = 5 * time.Second

// newTracing returns the process's tracer provider, exporting over
// OTLP/HTTP, when the configuration or the OTEL_* environment turns
// tracing on (config.Config.TracingEnabled), and nil otherwise. role
// ("serve", "worker") is a resource attribute, so that a trace shows which
// process made each span. The exporter, the batch processor and, when the
// file sets no sample_ratio, the sampler read their OTEL_* variables
// themselves; OTEL_SERVICE_NAME and OTEL_RESOURCE_ATTRIBUTES override the
// resource's defaults.
func newTracing(ctx context.Context, cfg *config.Config, role string) (*sdktrace.TracerProvider, error) {
	if !cfg.TracingEnabled(os.Getenv) {
		return nil, nil
	}
	var opts []otlptracehttp.Option
	if u := cfg.Tracing.TracesURL(); u != "" {
		opts = append(opts, otlptracehttp.WithEndpointURL(u))
	}
	exp, err := otlptracehttp.New(ctx, opts...)
	if err != nil {
		return nil, fmt.Errorf("tracing: OTLP exporter: %w", err)
	}
	res, err := resource.New(ctx,
		resource.WithAttributes(attribute.String("service.name", "countersign"), attribute.String("countersign.role", role)),
		resource.WithProcessPID(), resource.WithTelemetrySDK(), resource.WithFromEnv())
	if err != nil {
		return nil, fmt.Errorf("tracing: resource: %w", err)
	}
	tpOpts := []sdktrace.TracerProviderOption{sdktrace.WithBatcher(exp), sdktrace.WithResource(res)}
	if cfg.Tracing != nil && cfg.Tracing.SampleRatio != nil {
		// A caller that sampled its trace (or not) decides for the spans
		// that continue it; the ratio samples new traces.
		tpOpts = append(tpOpts, sdktrace.WithSampler(sdktrace.ParentBased(sdktrace.TraceIDRatioBased(*cfg.Tracing.SampleRatio))))
	}
	tp := sdktrace.NewTracerProvider(tpOpts...)
	// Libraries that use the globals (and otelhttp's defaults) see the
	// same provider and W3C Trace Context.
	otel.SetTracerProvider(tp)
	otel.SetTextMapPropagator(propagation.TraceContext{})
	return tp, nil
}

// tracedLogger returns log whose lines carry the trace_id and span_id of
// the span in their context, when tracing is on.
func tracedLogger(log *slog.Logger, on bool) *slog.Logger {
	if !on {
		return log
	}
	return slog.New(tracelog.New(log.Handler()))
}

// shutdownTracing exports the spans still buffered, within
// tracingShutdownTimeout.
func shutdownTracing(tp *sdktrace.TracerProvider, log *slog.Logger) {
	if tp == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), tracingShutdownTimeout)
	defer cancel()
	if err := tp.Shutdown(ctx); err != nil {
		log.Warn("tracing: the last spans were not exported", "err", err)
	}
}
