package web

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"strings"
)

// A call's input as the proposal page shows it for reading: its top-level
// fields as a definition list, a string with line breaks as text that keeps
// them, nested objects and arrays as nested lists. The fields come in the
// order the stored input holds them (the engine keeps it canonical: keys
// sorted), and nothing is left out. The exact JSON stays on the page,
// folded.

// inputMaxDepth is how deep the page nests lists; a value deeper than that
// shows as its compact JSON.
const inputMaxDepth = 6

// The kinds of inputValue.
const (
	kindObject    = "object"
	kindArray     = "array"
	kindString    = "string"
	kindMultiline = "multiline" // a string with a line break
	kindLiteral   = "literal"   // a number, true, false or null
	kindJSON      = "json"      // too deep to nest: compact JSON
)

// inputValue is one JSON value, ready for the page's "value" template. Its
// texts are the input's own: the template shows them as plain text.
type inputValue struct {
	Kind   string
	Text   string       // a string's text, a literal's, or compact JSON
	Fields []inputField // an object's, in order
	Items  []inputValue // an array's
}

// inputField is one field of an object.
type inputField struct {
	Name  string
	Value inputValue
}

// readInput reads a call's input for the page. An input it cannot read
// (never one the engine took) is nil: the page shows the JSON alone.
func readInput(raw json.RawMessage) *inputValue {
	d := json.NewDecoder(bytes.NewReader(raw))
	d.UseNumber()
	v, err := readValue(d, 0)
	if err != nil {
		return nil
	}
	if _, err := d.Token(); !errors.Is(err, io.EOF) {
		return nil // more than one value
	}
	return &v
}

func readValue(d *json.Decoder, depth int) (inputValue, error) {
	if depth >= inputMaxDepth {
		var raw json.RawMessage
		if err := d.Decode(&raw); err != nil {
			return inputValue{}, err
		}
		var b bytes.Buffer
		if err := json.Compact(&b, raw); err != nil {
			return inputValue{}, err
		}
		return inputValue{Kind: kindJSON, Text: b.String()}, nil
	}
	tok, err := d.Token()
	if err != nil {
		return inputValue{}, err
	}
	switch t := tok.(type) {
	case json.Delim:
		if t == '{' {
			v := inputValue{Kind: kindObject}
			for d.More() {
				k, err := d.Token()
				if err != nil {
					return inputValue{}, err
				}
				name, _ := k.(string)
				fv, err := readValue(d, depth+1)
				if err != nil {
					return inputValue{}, err
				}
				v.Fields = append(v.Fields, inputField{Name: name, Value: fv})
			}
			_, err := d.Token() // }
			return v, err
		}
		v := inputValue{Kind: kindArray}
		for d.More() {
			iv, err := readValue(d, depth+1)
			if err != nil {
				return inputValue{}, err
			}
			v.Items = append(v.Items, iv)
		}
		_, err := d.Token() // ]
		return v, err
	case string:
		if strings.Contains(t, "\n") {
			return inputValue{Kind: kindMultiline, Text: t}, nil
		}
		return inputValue{Kind: kindString, Text: t}, nil
	case json.Number:
		return inputValue{Kind: kindLiteral, Text: t.String()}, nil
	case bool:
		if t {
			return inputValue{Kind: kindLiteral, Text: "true"}, nil
		}
		return inputValue{Kind: kindLiteral, Text: "false"}, nil
	case nil:
		return inputValue{Kind: kindLiteral, Text: "null"}, nil
	}
	return inputValue{}, errors.New("web: unexpected JSON token")
}
