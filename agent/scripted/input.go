package scripted

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"strings"

	"github.com/countersign/countersign/internal/canonjson"
)

// placeholder is a {name} in an input template. A name is word characters,
// as a capture group's name is, so JSON's own braces ({"a": …}) never read
// as one.
var placeholder = regexp.MustCompile(`\{(\w+)\}`)

// sampleValue replaces every placeholder when New checks a template: it is
// valid both inside a string and where a number goes.
const sampleValue = "0"

// errNotObject says a call's input parsed but is not a JSON object.
var errNotObject = errors.New("not a JSON object")

// inputTemplate is a call's input split at its placeholders, each resolved
// to the capture groups it names, so rendering is one pass that never
// rescans substituted text.
type inputTemplate struct {
	literals []string // len(groups)+1 pieces of template text around the placeholders
	groups   [][]int  // per placeholder, the indexes of the groups of its name, leftmost first
}

// parseInput splits text at its placeholders, checks each names a group of
// re, and checks the result is a JSON object once each is replaced by
// sampleValue.
func parseInput(text string, re *regexp.Regexp) (*inputTemplate, error) {
	if text == "" {
		text = "{}"
	}
	index := map[string][]int{}
	for i, name := range re.SubexpNames() {
		if name != "" {
			// Go allows two groups of one name (in alternatives); the
			// leftmost that took part in the match gives the text.
			index[name] = append(index[name], i)
		}
	}
	t := &inputTemplate{}
	var missing []string
	last := 0
	for _, m := range placeholder.FindAllStringSubmatchIndex(text, -1) {
		name := text[m[2]:m[3]]
		groups, ok := index[name]
		if !ok {
			missing = append(missing, "{"+name+"}")
		}
		t.literals = append(t.literals, text[last:m[0]])
		t.groups = append(t.groups, groups)
		last = m[1]
	}
	t.literals = append(t.literals, text[last:])
	if len(missing) > 0 {
		return nil, fmt.Errorf("%s names no group of match", strings.Join(missing, ", "))
	}
	sample := t.render(func([]int) string { return sampleValue })
	if _, err := object(sample); err != nil {
		return nil, fmt.Errorf("is not a JSON object once each placeholder is replaced by %s (%s): %w", sampleValue, sample, err)
	}
	return t, nil
}

// render joins the template with each placeholder replaced by value(its
// groups), escaped as the inside of a JSON string.
func (t *inputTemplate) render(value func(groups []int) string) []byte {
	var b bytes.Buffer
	for i, lit := range t.literals {
		b.WriteString(lit)
		if i < len(t.groups) {
			writeStringInside(&b, value(t.groups[i]))
		}
	}
	return b.Bytes()
}

// writeStringInside writes s as a JSON string without its quotes: quotes,
// backslashes and control characters escaped, invalid UTF-8 replaced by
// U+FFFD, so no text can end the string it is placed in.
func writeStringInside(b *bytes.Buffer, s string) {
	quoted, _ := json.Marshal(s) // a string always marshals
	b.Write(quoted[1 : len(quoted)-1])
}

// object parses raw as one JSON object the engine will accept (I-JSON: no
// duplicate keys, numbers within double range) and returns its canonical
// form.
func object(raw []byte) (json.RawMessage, error) {
	canon, err := canonjson.Canonicalize(raw)
	if err != nil {
		var cerr *canonjson.Error
		if errors.As(err, &cerr) {
			// Without the package's prefix: the reader wrote a config, not
			// a call to canonjson.
			return nil, fmt.Errorf("%w at offset %d: %s", cerr.Err, cerr.Offset, cerr.Detail)
		}
		return nil, err
	}
	if canon[0] != '{' {
		return nil, errNotObject
	}
	return canon, nil
}
