package config

import (
	"strings"
	"testing"
)

func TestTracingParsed(t *testing.T) {
	c, err := Parse("countersign.yaml", []byte("tracing: {otlp_endpoint: \"http://collector:4318\", sample_ratio: 0.25}\n"))
	if err != nil {
		t.Fatalf("Parse: %v", err)
	}
	if c.Tracing == nil || c.Tracing.OTLPEndpoint != "http://collector:4318" || c.Tracing.SampleRatio == nil || *c.Tracing.SampleRatio != 0.25 {
		t.Fatalf("Tracing = %+v", c.Tracing)
	}
	if got := c.Tracing.TracesURL(); got != "http://collector:4318/v1/traces" {
		t.Errorf("TracesURL = %q, want the traces path added", got)
	}
	c, err = Parse("countersign.yaml", []byte("tracing: {otlp_endpoint: \"https://otel.example/custom/traces\", sample_ratio: 1}\n"))
	if err != nil {
		t.Fatalf("Parse: %v", err)
	}
	if got := c.Tracing.TracesURL(); got != "https://otel.example/custom/traces" || *c.Tracing.SampleRatio != 1 {
		t.Errorf("TracesURL = %q ratio %v, want the path kept and 1", got, *c.Tracing.SampleRatio)
	}
	c, err = Parse("countersign.yaml", []byte("tracing: {}\n"))
	if err != nil || c.Tracing == nil || c.Tracing.SampleRatio != nil || c.Tracing.TracesURL() != "" {
		t.Fatalf("an empty section: %+v, %v; want tracing on with the environment's endpoint and sampler", c.Tracing, err)
	}
}

func TestTracingRefused(t *testing.T) {
	for _, tc := range []struct{ yaml, want string }{
		{"tracing: {otlp_endpoint: \"collector:4318\"}", "tracing.otlp_endpoint"},
		{"tracing: {otlp_endpoint: \"ftp://collector\"}", "want an http:// or https:// URL"},
		{"tracing: {otlp_endpoint: \"http://user:pw@collector\"}", "without credentials"},
		{"tracing: {sample_ratio: 1.5}", "tracing.sample_ratio: 1.5: want a number from 0 to 1"},
		{"tracing: {sample_ratio: -0.1}", "want a number from 0 to 1"},
		{"tracing: {sample_ratio: \"half\"}", "want a number from 0 to 1"},
		{"tracing: {sample_ratio: .nan}", "want a number from 0 to 1"},
		{"tracing: {exporter: zipkin}", "exporter"},
		{"tracing: on", "tracing"},
	} {
		_, err := Parse("countersign.yaml", []byte(tc.yaml+"\n"))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: err %v, want one naming %q", tc.yaml, err, tc.want)
		}
	}
}

func TestTracingEnabled(t *testing.T) {
	env := func(kv ...string) func(string) string {
		m := map[string]string{}
		for i := 0; i+1 < len(kv); i += 2 {
			m[kv[i]] = kv[i+1]
		}
		return func(k string) string { return m[k] }
	}
	without, with := &Config{}, &Config{Tracing: &Tracing{}}
	for _, tc := range []struct {
		name string
		c    *Config
		env  func(string) string
		want bool
	}{
		{"off by default", without, env(), false},
		{"the section", with, env(), true},
		{"an OTLP endpoint in the environment", without, env("OTEL_EXPORTER_OTLP_ENDPOINT", "http://c:4318"), true},
		{"a traces endpoint in the environment", without, env("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "http://c:4318/v1/traces"), true},
		{"the SDK disabled", with, env("OTEL_SDK_DISABLED", "TRUE"), false},
		{"no traces exporter", without, env("OTEL_EXPORTER_OTLP_ENDPOINT", "http://c:4318", "OTEL_TRACES_EXPORTER", "none"), false},
		{"another variable only", without, env("OTEL_SERVICE_NAME", "x"), false},
	} {
		if got := tc.c.TracingEnabled(tc.env); got != tc.want {
			t.Errorf("%s: TracingEnabled = %v, want %v", tc.name, got, tc.want)
		}
	}
}
