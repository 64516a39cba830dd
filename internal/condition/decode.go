package condition

import (
	"encoding/json"
	"errors"
	"strconv"
)

// DecodeJSON decodes a JSON text as encoding/json decodes it into an any
// (objects map[string]any, arrays []any, numbers float64), faster: a
// call's conditions read its input, and encoding/json's reflection would
// cost more than evaluating them. Strings with escapes, rare in inputs, go
// through encoding/json.
func DecodeJSON(b []byte) (any, error) {
	d := decoder{b: b}
	v, err := d.value(0)
	if err != nil {
		return nil, err
	}
	d.space()
	if d.i != len(d.b) {
		return nil, errors.New("decode input: text after the value")
	}
	return v, nil
}

// maxNesting bounds the depth of what DecodeJSON accepts, as
// encoding/json does (10000), so a hostile input cannot exhaust the stack.
const maxNesting = 10000

var errSyntax = errors.New("decode input: invalid JSON")

type decoder struct {
	b []byte
	i int
}

func (d *decoder) space() {
	for d.i < len(d.b) {
		switch d.b[d.i] {
		case ' ', '\t', '\n', '\r':
			d.i++
		default:
			return
		}
	}
}

func (d *decoder) value(depth int) (any, error) {
	if depth > maxNesting {
		return nil, errors.New("decode input: nested too deeply")
	}
	d.space()
	if d.i >= len(d.b) {
		return nil, errSyntax
	}
	switch c := d.b[d.i]; {
	case c == '{':
		d.i++
		m := map[string]any{}
		d.space()
		if d.i < len(d.b) && d.b[d.i] == '}' {
			d.i++
			return m, nil
		}
		for {
			d.space()
			if d.i >= len(d.b) || d.b[d.i] != '"' {
				return nil, errSyntax
			}
			k, err := d.str()
			if err != nil {
				return nil, err
			}
			d.space()
			if d.i >= len(d.b) || d.b[d.i] != ':' {
				return nil, errSyntax
			}
			d.i++
			v, err := d.value(depth + 1)
			if err != nil {
				return nil, err
			}
			m[k] = v
			if end, err := d.next('}'); err != nil {
				return nil, err
			} else if end {
				return m, nil
			}
		}
	case c == '[':
		d.i++
		l := []any{}
		d.space()
		if d.i < len(d.b) && d.b[d.i] == ']' {
			d.i++
			return l, nil
		}
		for {
			v, err := d.value(depth + 1)
			if err != nil {
				return nil, err
			}
			l = append(l, v)
			if end, err := d.next(']'); err != nil {
				return nil, err
			} else if end {
				return l, nil
			}
		}
	case c == '"':
		return d.str()
	case c == 't':
		return true, d.literal("true")
	case c == 'f':
		return false, d.literal("false")
	case c == 'n':
		return nil, d.literal("null")
	case c == '-' || (c >= '0' && c <= '9'):
		return d.number()
	}
	return nil, errSyntax
}

func (d *decoder) literal(word string) error {
	if len(d.b)-d.i < len(word) || string(d.b[d.i:d.i+len(word)]) != word {
		return errSyntax
	}
	d.i += len(word)
	return nil
}

// str decodes the string at d.i (its opening quote).
func (d *decoder) str() (string, error) {
	start := d.i
	d.i++
	escaped := false
	for d.i < len(d.b) {
		switch c := d.b[d.i]; {
		case c == '"':
			d.i++
			if !escaped {
				return string(d.b[start+1 : d.i-1]), nil
			}
			var s string
			if err := json.Unmarshal(d.b[start:d.i], &s); err != nil {
				return "", errSyntax
			}
			return s, nil
		case c == '\\':
			escaped = true
			d.i += 2
		case c < 0x20:
			return "", errSyntax
		case c >= 0x80:
			// Not ASCII: let encoding/json check the UTF-8 (and replace
			// what is invalid, as it does).
			escaped = true
			d.i++
		default:
			d.i++
		}
	}
	return "", errSyntax
}

// number decodes the number at d.i, checking the JSON grammar that
// strconv.ParseFloat is more lenient than.
func (d *decoder) number() (float64, error) {
	start := d.i
	if d.b[d.i] == '-' {
		d.i++
	}
	digits := func() int {
		n := 0
		for d.i < len(d.b) && d.b[d.i] >= '0' && d.b[d.i] <= '9' {
			d.i++
			n++
		}
		return n
	}
	intStart := d.i
	if n := digits(); n == 0 || (n > 1 && d.b[intStart] == '0') {
		return 0, errSyntax
	}
	if d.i < len(d.b) && d.b[d.i] == '.' {
		d.i++
		if digits() == 0 {
			return 0, errSyntax
		}
	}
	if d.i < len(d.b) && (d.b[d.i] == 'e' || d.b[d.i] == 'E') {
		d.i++
		if d.i < len(d.b) && (d.b[d.i] == '+' || d.b[d.i] == '-') {
			d.i++
		}
		if digits() == 0 {
			return 0, errSyntax
		}
	}
	f, err := strconv.ParseFloat(string(d.b[start:d.i]), 64)
	if err != nil {
		return 0, errSyntax // out of range, as encoding/json refuses it
	}
	return f, nil
}

// rawObject is a JSON object whose fields are decoded only when read.
type rawObject []byte

// field returns the text of o's field key, and whether o has it. When a
// key repeats, the last one counts, as in encoding/json.
func (o rawObject) field(key string) (raw []byte, found bool, err error) {
	d := decoder{b: o}
	d.space()
	if d.i >= len(d.b) || d.b[d.i] != '{' {
		return nil, false, errSyntax
	}
	d.i++
	d.space()
	if d.i < len(d.b) && d.b[d.i] == '}' {
		return nil, false, nil
	}
	for {
		d.space()
		if d.i >= len(d.b) || d.b[d.i] != '"' {
			return nil, false, errSyntax
		}
		match, err := d.keyIs(key)
		if err != nil {
			return nil, false, err
		}
		d.space()
		if d.i >= len(d.b) || d.b[d.i] != ':' {
			return nil, false, errSyntax
		}
		d.i++
		d.space()
		start := d.i
		if err := d.skip(); err != nil {
			return nil, false, err
		}
		if match {
			raw, found = d.b[start:d.i], true
		}
		d.space()
		if d.i >= len(d.b) {
			return nil, false, errSyntax
		}
		switch d.b[d.i] {
		case ',':
			d.i++
		case '}':
			return raw, found, nil
		default:
			return nil, false, errSyntax
		}
	}
}

// keyIs reads the string at d.i and reports whether it is key, without
// allocating when it has no escapes and is ASCII (as keys mostly are).
func (d *decoder) keyIs(key string) (bool, error) {
	start := d.i
	for j := d.i + 1; j < len(d.b); j++ {
		switch c := d.b[j]; {
		case c == '"':
			d.i = j + 1
			return string(d.b[start+1:j]) == key, nil
		case c == '\\' || c >= 0x80 || c < 0x20:
			s, err := d.str()
			return s == key, err
		}
	}
	return false, errSyntax
}

// skip moves past the value at d.i, checking only its structure: the
// values a rawObject holds were checked when the input was validated, and
// reading one decodes it in full (DecodeJSON), which checks it again.
func (d *decoder) skip() error {
	if d.i >= len(d.b) {
		return errSyntax
	}
	switch d.b[d.i] {
	case '"':
		return d.skipString()
	case '{', '[':
		depth := 0
		for d.i < len(d.b) {
			switch d.b[d.i] {
			case '"':
				if err := d.skipString(); err != nil {
					return err
				}
				continue
			case '{', '[':
				depth++
			case '}', ']':
				depth--
				if depth == 0 {
					d.i++
					return nil
				}
			}
			d.i++
		}
		return errSyntax
	}
	// A number or a literal: up to the next delimiter.
	start := d.i
	for d.i < len(d.b) {
		switch d.b[d.i] {
		case ',', '}', ']', ' ', '\t', '\n', '\r':
			if d.i == start {
				return errSyntax
			}
			return nil
		}
		d.i++
	}
	if d.i == start {
		return errSyntax
	}
	return nil
}

func (d *decoder) skipString() error {
	for j := d.i + 1; j < len(d.b); j++ {
		switch d.b[j] {
		case '\\':
			j++
		case '"':
			d.i = j + 1
			return nil
		}
	}
	return errSyntax
}

// next reads what follows a member of an object or an element of an array:
// a comma (more follow) or the closing bracket (end).
func (d *decoder) next(closing byte) (end bool, err error) {
	d.space()
	if d.i >= len(d.b) {
		return false, errSyntax
	}
	switch d.b[d.i] {
	case ',':
		d.i++
		return false, nil
	case closing:
		d.i++
		return true, nil
	}
	return false, errSyntax
}
