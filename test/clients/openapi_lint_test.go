package clients

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
)

// document is the OpenAPI document as this folder sees it. The server
// serves this file byte for byte (server.TestOpenAPIDocument).
const document = "../../server/openapi.json"

// TestOpenAPIRedoclyLint lints the document with Redocly CLI's recommended
// rules (redocly.yaml): no error and no warning. The warnings kept on
// purpose are listed, with their reason, in .redocly.lint-ignore.yaml.
func TestOpenAPIRedoclyLint(t *testing.T) {
	dir := needNode(t)
	out, errOut, err := npmBin(t, dir, "redocly", "lint", "--format=json", document)
	var report struct {
		Totals struct {
			Errors   int `json:"errors"`
			Warnings int `json:"warnings"`
			Ignored  int `json:"ignored"`
		} `json:"totals"`
		Problems []struct {
			RuleID   string `json:"ruleId"`
			Severity string `json:"severity"`
			Message  string `json:"message"`
			Location []struct {
				Pointer string `json:"pointer"`
			} `json:"location"`
		} `json:"problems"`
	}
	if jerr := json.Unmarshal(out, &report); jerr != nil {
		t.Fatalf("redocly lint: %v (exit: %v)\nstdout:\n%s\nstderr:\n%s", jerr, err, out, errOut)
	}
	for _, p := range report.Problems {
		where := ""
		if len(p.Location) > 0 {
			where = p.Location[0].Pointer
		}
		t.Errorf("redocly %s %s at %s: %s", p.Severity, p.RuleID, where, p.Message)
	}
	if report.Totals.Errors != 0 || report.Totals.Warnings != 0 || err != nil {
		t.Errorf("redocly lint: %d errors, %d warnings (exit: %v)", report.Totals.Errors, report.Totals.Warnings, err)
	}
}

// TestOpenAPISpectralLint lints the document with Spectral's spectral:oas
// ruleset (.spectral.yaml): no error and no warning; infos and hints are
// logged.
func TestOpenAPISpectralLint(t *testing.T) {
	dir := needNode(t)
	out, errOut, err := npmBin(t, dir, "spectral", "lint", "--ruleset", ".spectral.yaml", "--format", "json", "--quiet", document)
	var results []struct {
		Code     string `json:"code"`
		Message  string `json:"message"`
		Severity int    `json:"severity"` // 0 error, 1 warning, 2 info, 3 hint
		Path     []any  `json:"path"`
	}
	if jerr := json.Unmarshal(out, &results); jerr != nil {
		t.Fatalf("spectral lint: %v (exit: %v)\nstdout:\n%s\nstderr:\n%s", jerr, err, out, errOut)
	}
	for _, r := range results {
		path := make([]string, len(r.Path))
		for i, p := range r.Path {
			path[i] = fmt.Sprint(p)
		}
		report := t.Logf
		if r.Severity <= 1 {
			report = t.Errorf
		}
		report("spectral severity %d %s at %s: %s", r.Severity, r.Code, strings.Join(path, "."), r.Message)
	}
	if err != nil {
		t.Errorf("spectral lint exited with %v\nstderr:\n%s", err, errOut)
	}
}
