package main

import (
	"cmp"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"runtime/metrics"
	"runtime/pprof"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
)

func init() {
	register(scenario{ID: "tracing", order: 66, perStore: true,
		Title: "Tracing's cost to B3 and B6",
		Method: "B3 (at its main load, -agents, alone) and B6 exactly as above, each run R times with OpenTelemetry tracing on and R times " +
			"off, in alternating order (off, on; then on, off; …) so that a drift of the machine falls on both. On: the engine and the " +
			"HTTP server traced as `countersign serve` traces them with `tracing:` configured (a span for each call, decision, claim, " +
			"execution and settlement, and one per HTTP request through otelhttp), every trace sampled (100 %), the spans batched and " +
			"exported over OTLP/HTTP protobuf, as serve exports them, to a sink in this process that reads and discards each export " +
			"(so the export's encoding and its HTTP request are paid, a collector's work is not). Each figure is the median of its R runs; " +
			"the ratio is the median of the rounds' on ÷ off (1.00: no cost; the goal is at least 0.90), each round's two runs side by " +
			"side in time. As for the audit chain's cost, the CPU time of this process (and, on PostgreSQL, of the run's server backends) " +
			"per action or decision is measured too: on a CPU-bound machine off ÷ on is the throughput tracing keeps; and the Go heap " +
			"allocated per action or decision (bytes and objects, runtime/metrics), which the machine's noise does not move. " +
			"-tracing-parts traces one part alone, to tell the parts' costs apart: the engine's spans (HTTP untraced), otelhttp's " +
			"server spans (the engine untraced), or everything with the batches dropped instead of exported; its figures' keys " +
			"then end in the part's name (tracing.<store>.b6.http.ratio).",
		run: tracingCost})
}

// What the tracing scenario traces (-tracing-parts).
const (
	tracingAll        = "all"        // the engine and the HTTP server, exported: as serve does
	tracingEngine     = "engine"     // the engine's spans only
	tracingHTTP       = "http"       // otelhttp's server spans only
	tracingUnexported = "unexported" // everything, the batches dropped, not exported
)

// tracingCost runs B3 and B6 with and without tracing, alternating.
func tracingCost(e *env) ([]Figure, error) {
	rounds := max(e.cfg.TracingRounds, 1)
	parts := cmp.Or(e.cfg.TracingParts, tracingAll)
	if !slices.Contains([]string{tracingAll, tracingEngine, tracingHTTP, tracingUnexported}, parts) {
		return nil, fmt.Errorf("-tracing-parts %q: want all, engine, http or unexported", parts)
	}
	measures := costMeasures(e)
	if len(e.cfg.TracingMeasures) > 0 {
		measures = slices.DeleteFunc(measures, func(m costMeasure) bool {
			return !slices.ContainsFunc(e.cfg.TracingMeasures, func(id string) bool { return strings.EqualFold(strings.TrimSpace(id), m.id) })
		})
		if len(measures) == 0 {
			return nil, fmt.Errorf("-tracing-measures %q: want B3, B6 or both", strings.Join(e.cfg.TracingMeasures, ","))
		}
	}
	sink, err := newOTLPSink()
	if err != nil {
		return nil, err
	}
	defer sink.close()
	var figs []Figure
	for _, m := range measures {
		got := map[bool][]float64{}
		cpu := map[bool][]float64{}
		allocBytes, allocObjects := map[bool][]float64{}, map[bool][]float64{}
		var ratios, cpuRatios, spans []float64
		for r := range rounds {
			order := []bool{false, true}
			if r%2 == 1 {
				order = []bool{true, false}
			}
			for _, on := range order {
				quiet(e.cfg)
				run := *e
				var tp *sdktrace.TracerProvider
				if on {
					if tp, err = sink.provider(e.ctx, parts != tracingUnexported); err != nil {
						return figs, err
					}
					if parts != tracingHTTP {
						run.tracer = tp
					}
					if parts != tracingEngine {
						run.httpTracer = tp
					}
				}
				before := sink.spans.Load()
				meter, err := startCPU(e.target.name == "postgres")
				if err != nil {
					return figs, err
				}
				heapBefore := readHeapAllocs()
				stopProfile, err := startRunProfile(e.cfg.TracingProfiles, fmt.Sprintf("%s-%s-%s-%d", e.target.name, strings.ToLower(m.id), onOff(on), r))
				if err != nil {
					return figs, err
				}
				out, err := m.run(&run)
				stopProfile()
				if tp != nil {
					// The spans still batched are exported before the
					// run's CPU time is read: their cost is the run's.
					sctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
					if serr := tp.Shutdown(sctx); serr != nil && err == nil {
						err = fmt.Errorf("export the last spans: %w", serr)
					}
					cancel()
					spans = append(spans, float64(sink.spans.Load()-before)/float64(m.units))
				}
				self, pg := meter.stop()
				cpu[on] = append(cpu[on], (self+pg)/float64(m.units)*1e6)
				heap := readHeapAllocs().since(heapBefore)
				allocBytes[on] = append(allocBytes[on], heap.bytes/float64(m.units))
				allocObjects[on] = append(allocObjects[on], heap.objects/float64(m.units))
				if err != nil {
					return figs, fmt.Errorf("%s (tracing %v): %w", m.id, on, err)
				}
				v, err := m.value(out)
				if err != nil {
					return figs, err
				}
				got[on] = append(got[on], v)
			}
			ratios = append(ratios, got[true][r]/got[false][r])
			cpuRatios = append(cpuRatios, cpu[false][r]/cpu[true][r])
		}
		k := "tracing." + e.target.name + "." + strings.ToLower(m.id)
		if parts != tracingAll {
			k += "." + parts
		}
		figs = append(figs,
			Figure{Key: k + ".off", Label: fmt.Sprintf("%s without tracing, median of %d (%s)", m.label, rounds, runs(got[false])), Value: median(got[false]), Unit: m.unit},
			Figure{Key: k + ".on", Label: fmt.Sprintf("%s with tracing (100 %% sampled, exported), median of %d (%s)", m.label, rounds, runs(got[true])), Value: median(got[true]), Unit: m.unit},
			Figure{Key: k + ".ratio", Label: fmt.Sprintf("%s: on ÷ off, median of the rounds' (%s)", m.label, ratioList(ratios)), Value: median(ratios), Unit: "ratio"},
			Figure{Key: k + ".cpu_off", Label: fmt.Sprintf("%s: CPU time per %s without tracing, median (%s)", m.label, m.per, runs(cpu[false])), Value: median(cpu[false]), Unit: "µs"},
			Figure{Key: k + ".cpu_on", Label: fmt.Sprintf("%s: CPU time per %s with tracing, median (%s)", m.label, m.per, runs(cpu[true])), Value: median(cpu[true]), Unit: "µs"},
			Figure{Key: k + ".cpu_ratio", Label: fmt.Sprintf("%s: CPU off ÷ on, median of the rounds' (%s): the throughput a CPU-bound machine keeps", m.label, ratioList(cpuRatios)), Value: median(cpuRatios), Unit: "ratio"},
			Figure{Key: k + ".spans", Label: m.label + ": spans exported per " + m.per + " (median)", Value: median(spans), Unit: "spans"},
			Figure{Key: k + ".alloc_off", Label: fmt.Sprintf("%s: Go heap allocated per %s without tracing, median (%s)", m.label, m.per, runs(allocBytes[false])), Value: median(allocBytes[false]), Unit: "bytes"},
			Figure{Key: k + ".alloc_on", Label: fmt.Sprintf("%s: Go heap allocated per %s with tracing, median (%s)", m.label, m.per, runs(allocBytes[true])), Value: median(allocBytes[true]), Unit: "bytes"},
			Figure{Key: k + ".objects_off", Label: fmt.Sprintf("%s: Go heap objects allocated per %s without tracing, median (%s)", m.label, m.per, runs(allocObjects[false])), Value: median(allocObjects[false]), Unit: "objects"},
			Figure{Key: k + ".objects_on", Label: fmt.Sprintf("%s: Go heap objects allocated per %s with tracing, median (%s)", m.label, m.per, runs(allocObjects[true])), Value: median(allocObjects[true]), Unit: "objects"})
	}
	return figs, nil
}

func onOff(on bool) string {
	if on {
		return "on"
	}
	return "off"
}

// startRunProfile writes a CPU profile of one run to dir/name.prof (no
// dir: none), so that runs can be compared (the tracing scenario's traced
// and untraced runs, B1's worker processes); the func it returns stops it.
func startRunProfile(dir, name string) (func(), error) {
	if dir == "" {
		return func() {}, nil
	}
	f, err := os.Create(filepath.Join(dir, name+".prof"))
	if err != nil {
		return nil, err
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		_ = f.Close()
		return nil, fmt.Errorf("CPU profile %s: %w (one at a time in a process: -cpuprofile excludes -tracing-profiles)", name, err)
	}
	return func() { pprof.StopCPUProfile(); _ = f.Close() }, nil
}

// heapAllocs is what this process has allocated on the Go heap since it
// started (runtime/metrics): bytes and objects.
type heapAllocs struct{ bytes, objects float64 }

func readHeapAllocs() heapAllocs {
	samples := []metrics.Sample{{Name: "/gc/heap/allocs:bytes"}, {Name: "/gc/heap/allocs:objects"}}
	metrics.Read(samples)
	return heapAllocs{float64(samples[0].Value.Uint64()), float64(samples[1].Value.Uint64())}
}

func (h heapAllocs) since(before heapAllocs) heapAllocs {
	return heapAllocs{h.bytes - before.bytes, h.objects - before.objects}
}

// otlpSink is an OTLP/HTTP receiver that reads each export whole and
// answers 200 with an empty ExportTraceServiceResponse. The spans are
// counted as they end, by the provider's spanCounter.
type otlpSink struct {
	srv   *http.Server
	ln    net.Listener
	spans atomic.Int64
	bytes atomic.Int64
}

func newOTLPSink() (*otlpSink, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	s := &otlpSink{ln: ln}
	s.srv = &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n, _ := io.Copy(io.Discard, r.Body)
		s.bytes.Add(n)
		w.Header().Set("Content-Type", "application/x-protobuf")
		w.WriteHeader(http.StatusOK)
	}), ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = s.srv.Serve(ln) }()
	return s, nil
}

// provider is a tracer provider exporting to the sink as serve's exports
// to a collector: OTLP/HTTP protobuf through the batch span processor,
// every trace sampled; each span ended is counted. Not exporting, the
// batches go to an exporter that drops them.
func (s *otlpSink) provider(ctx context.Context, exporting bool) (*sdktrace.TracerProvider, error) {
	var exp sdktrace.SpanExporter = droppingExporter{}
	if exporting {
		otlp, err := otlptracehttp.New(ctx, otlptracehttp.WithEndpointURL("http://"+s.ln.Addr().String()+"/v1/traces"))
		if err != nil {
			return nil, fmt.Errorf("tracing: OTLP exporter: %w", err)
		}
		exp = otlp
	}
	res := resource.NewSchemaless(attribute.String("service.name", "countersign"), attribute.String("countersign.role", "bench"))
	return sdktrace.NewTracerProvider(sdktrace.WithBatcher(exp), sdktrace.WithResource(res), sdktrace.WithSampler(sdktrace.AlwaysSample()),
		sdktrace.WithSpanProcessor(spanCounter{&s.spans})), nil
}

func (s *otlpSink) close() { _ = s.srv.Close() }

// droppingExporter takes each batch and drops it.
type droppingExporter struct{}

func (droppingExporter) ExportSpans(context.Context, []sdktrace.ReadOnlySpan) error { return nil }
func (droppingExporter) Shutdown(context.Context) error                             { return nil }

// spanCounter counts the spans that end.
type spanCounter struct{ n *atomic.Int64 }

func (c spanCounter) OnStart(context.Context, sdktrace.ReadWriteSpan) {}
func (c spanCounter) OnEnd(sdktrace.ReadOnlySpan)                     { c.n.Add(1) }
func (c spanCounter) Shutdown(context.Context) error                  { return nil }
func (c spanCounter) ForceFlush(context.Context) error                { return nil }
