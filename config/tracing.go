package config

import (
	"math"
	"net/url"
	"strings"

	"go.yaml.in/yaml/v3"
)

// Tracing configures OpenTelemetry tracing (docs/tracing.md): spans
// exported over OTLP/HTTP. Off by default: on when the file has a tracing
// section, or, when it has none, when the standard OTEL_* environment names
// an OTLP endpoint (see Config.TracingEnabled).
type Tracing struct {
	// OTLPEndpoint is the URL of the collector's OTLP/HTTP traces endpoint
	// (http://collector:4318/v1/traces; a URL without a path gets
	// /v1/traces). Empty: the OTEL_EXPORTER_OTLP_* environment's, or the
	// exporter's default (http://localhost:4318/v1/traces).
	OTLPEndpoint string
	// SampleRatio is the share of new traces sampled, 0 to 1; a span whose
	// caller's trace was sampled (or not) follows its caller. Nil: the
	// OTEL_TRACES_SAMPLER environment's, or every trace.
	SampleRatio *float64
}

// TracingEnabled reports whether the process exports spans: the file has a
// tracing section, or it has none and getenv names an OTLP endpoint
// (OTEL_EXPORTER_OTLP_ENDPOINT or OTEL_EXPORTER_OTLP_TRACES_ENDPOINT) while
// OTEL_SDK_DISABLED is not true and OTEL_TRACES_EXPORTER is not none.
func (c *Config) TracingEnabled(getenv func(string) string) bool {
	if strings.EqualFold(getenv("OTEL_SDK_DISABLED"), "true") || getenv("OTEL_TRACES_EXPORTER") == "none" {
		return false
	}
	if c.Tracing != nil {
		return true
	}
	return getenv("OTEL_EXPORTER_OTLP_ENDPOINT") != "" || getenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") != ""
}

// TracesURL is OTLPEndpoint with the traces path when it has none; "" when
// OTLPEndpoint is empty.
func (t *Tracing) TracesURL() string {
	if t == nil || t.OTLPEndpoint == "" {
		return ""
	}
	u, err := url.Parse(t.OTLPEndpoint)
	if err != nil {
		return t.OTLPEndpoint // Validate refuses it
	}
	if u.Path == "" || u.Path == "/" {
		u.Path = "/v1/traces"
	}
	return u.String()
}

func (d *decoder) tracing(c *Config, path string, n *yaml.Node) {
	t := &Tracing{}
	d.mapping(path, n, []key{
		{"otlp_endpoint", text(d, &t.OTLPEndpoint)},
		{"sample_ratio", func(p string, v *yaml.Node) {
			var r float64
			if v.Kind != yaml.ScalarNode || (v.ShortTag() != "!!float" && v.ShortTag() != "!!int") || v.Decode(&r) != nil {
				d.fail(p, v, "want a number from 0 to 1, not %s", describe(v))
				return
			}
			t.SampleRatio = &r
		}},
	})
	c.Tracing = t
}

func (v *validator) tracing(t *Tracing) {
	if t == nil {
		return
	}
	if t.OTLPEndpoint != "" {
		u, err := url.Parse(t.OTLPEndpoint)
		switch {
		case err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "":
			v.fail("tracing.otlp_endpoint", "%q: want an http:// or https:// URL", t.OTLPEndpoint)
		case u.User != nil || u.RawQuery != "" || u.Fragment != "":
			v.fail("tracing.otlp_endpoint", "want a URL without credentials, query or fragment (headers go in OTEL_EXPORTER_OTLP_HEADERS)")
		}
	}
	if r := t.SampleRatio; r != nil && (math.IsNaN(*r) || *r < 0 || *r > 1) {
		v.fail("tracing.sample_ratio", "%v: want a number from 0 to 1", *r)
	}
}
