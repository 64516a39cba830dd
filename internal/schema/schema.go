// Package schema compiles JSON Schemas and validates inputs against them,
// reporting every failing location, not just the first.
package schema

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"golang.org/x/text/language"
	"golang.org/x/text/message"
)

// MaxInputBytes bounds an input's size before it is parsed.
const MaxInputBytes = 1 << 20

// Problem is one failing location of an input.
type Problem struct {
	// Path is a JSON Pointer into the input ("" for the whole input).
	Path    string `json:"path"`
	Message string `json:"message"`
}

// Error lists every problem of an invalid input.
type Error struct {
	Problems []Problem
}

func (e *Error) Error() string {
	parts := make([]string, len(e.Problems))
	for i, p := range e.Problems {
		path := p.Path
		if path == "" {
			path = "(root)"
		}
		parts[i] = path + ": " + p.Message
	}
	return strings.Join(parts, "; ")
}

// Validator checks inputs against one compiled schema. It is safe for
// concurrent use.
type Validator struct {
	schema *jsonschema.Schema
}

var printer = message.NewPrinter(language.English)

// Compile compiles a JSON Schema document (draft 2020-12 unless it says
// otherwise).
func Compile(doc json.RawMessage) (*Validator, error) {
	v, err := decode(doc)
	if err != nil {
		return nil, fmt.Errorf("parse schema: %w", err)
	}
	c := jsonschema.NewCompiler()
	c.DefaultDraft(jsonschema.Draft2020)
	// No loader: a schema may not reach out to files or the network.
	c.UseLoader(noLoader{})
	if err := c.AddResource("input.json", v); err != nil {
		return nil, fmt.Errorf("add schema: %w", err)
	}
	s, err := c.Compile("input.json")
	if err != nil {
		return nil, fmt.Errorf("compile schema: %w", err)
	}
	return &Validator{schema: s}, nil
}

type noLoader struct{}

func (noLoader) Load(url string) (any, error) {
	return nil, fmt.Errorf("schema references %s: external references are not allowed", url)
}

func decode(raw []byte) (any, error) {
	if len(raw) > MaxInputBytes {
		return nil, fmt.Errorf("larger than %d bytes", MaxInputBytes)
	}
	d := json.NewDecoder(bytes.NewReader(raw))
	d.UseNumber()
	var v any
	if err := d.Decode(&v); err != nil {
		return nil, err
	}
	if _, err := d.Token(); !errors.Is(err, io.EOF) {
		return nil, fmt.Errorf("unexpected data after the JSON value")
	}
	return v, nil
}

// Validate checks raw JSON. It returns *Error listing every failing location,
// or nil.
func (v *Validator) Validate(raw json.RawMessage) error {
	doc, err := decode(raw)
	if err != nil {
		return &Error{Problems: []Problem{{Path: "", Message: "invalid JSON: " + err.Error()}}}
	}
	err = v.schema.Validate(doc)
	if err == nil {
		return nil
	}
	var ve *jsonschema.ValidationError
	if !errors.As(err, &ve) {
		return &Error{Problems: []Problem{{Path: "", Message: err.Error()}}}
	}
	var out []Problem
	collect(ve, &out)
	slices.SortFunc(out, func(a, b Problem) int {
		if c := strings.Compare(a.Path, b.Path); c != 0 {
			return c
		}
		return strings.Compare(a.Message, b.Message)
	})
	out = slices.Compact(out)
	return &Error{Problems: out}
}

// collect flattens the error tree to its leaves: the concrete failures.
func collect(e *jsonschema.ValidationError, out *[]Problem) {
	if len(e.Causes) == 0 {
		*out = append(*out, Problem{Path: pointer(e.InstanceLocation), Message: e.ErrorKind.LocalizedString(printer)})
		return
	}
	for _, c := range e.Causes {
		collect(c, out)
	}
}

func pointer(loc []string) string {
	var b strings.Builder
	for _, s := range loc {
		b.WriteByte('/')
		s = strings.ReplaceAll(s, "~", "~0")
		b.WriteString(strings.ReplaceAll(s, "/", "~1"))
	}
	return b.String()
}
