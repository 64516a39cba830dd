package server

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"sync"
)

// MaxBodyBytes bounds a request body; a larger one answers 413 BODY_TOO_LARGE.
const MaxBodyBytes = 1 << 20

// readBody reads a request body of at most MaxBodyBytes and decodes it
// strictly into dst, a pointer to a struct with json tags. When allowEmpty is
// set, an empty body means {}, whatever its Content-Type.
//
// Strict means: a Content-Type of application/json (else 415), one JSON
// object and nothing after it, no key twice in one object at any depth
// (encoding/json alone keeps the last), no field that dst does not name
// exactly (encoding/json alone would accept "THREAD_ID" for "thread_id"),
// and every field of the right type. Each failure of the body itself is a
// 400 INVALID_BODY whose details name the field.
func readBody(w http.ResponseWriter, r *http.Request, dst any, allowEmpty bool) error {
	b, err := io.ReadAll(http.MaxBytesReader(innermost(w), r.Body, MaxBodyBytes))
	if err != nil {
		if _, ok := errors.AsType[*http.MaxBytesError](err); ok {
			return newError(http.StatusRequestEntityTooLarge, CodeBodyTooLarge, "the body is larger than %d bytes", MaxBodyBytes)
		}
		return errBadBody("", "cannot read the body: "+err.Error())
	}
	if !(allowEmpty && len(bytes.Trim(b, " \t\r\n")) == 0) {
		if err := jsonContentType(r.Header.Get("Content-Type")); err != nil {
			return err
		}
	}
	if err := decodeStrict(b, dst, allowEmpty); err != nil {
		return err
	}
	return nil
}

// decodeStrict is readBody's decoder, separate so that fuzz tests reach it.
func decodeStrict(b []byte, dst any, allowEmpty bool) *apiError {
	trimmed := bytes.Trim(b, " \t\r\n")
	if len(trimmed) == 0 {
		if allowEmpty {
			return nil
		}
		return errBadBody("", "the body is empty; want a JSON object")
	}
	if trimmed[0] != '{' {
		return errBadBody("", "want a JSON object")
	}
	var fields map[string]json.RawMessage
	dec := json.NewDecoder(bytes.NewReader(b))
	if err := dec.Decode(&fields); err != nil {
		return jsonError(err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return errBadBody("", "unexpected data after the JSON object")
	}
	if path, ok := duplicateKey(b); ok {
		return errBadKey(path, "duplicate key")
	}
	known := jsonFields(reflect.TypeOf(dst).Elem())
	var unknown []string
	for k := range fields {
		if !slices.Contains(known, k) {
			unknown = append(unknown, k)
		}
	}
	if len(unknown) > 0 {
		slices.Sort(unknown)
		e := errBadKey(unknown[0], "unknown field")
		if len(unknown) > 1 {
			ps := make([]problem, len(unknown))
			for i, k := range unknown {
				ps[i] = problem{Path: k, Message: "unknown field"}
			}
			e.details = ps
		}
		return e
	}
	// Field by field, so that a type error names its field whatever
	// encoding/json's error says.
	v := reflect.ValueOf(dst).Elem()
	for i := range v.NumField() {
		name := jsonName(v.Type().Field(i))
		raw, ok := fields[name]
		if !ok || name == "" {
			continue
		}
		if err := json.Unmarshal(raw, v.Field(i).Addr().Interface()); err != nil {
			return errBadBody(name, "want "+jsonKind(v.Type().Field(i).Type))
		}
	}
	return nil
}

// jsonContentType refuses, with 415 UNSUPPORTED_MEDIA_TYPE, a body whose
// Content-Type is not application/json: a form or text/plain body that
// happens to hold JSON is not a JSON request (browsers send those
// cross-origin without a preflight). A charset parameter, if any, must be
// UTF-8, the only encoding JSON has.
func jsonContentType(header string) *apiError {
	if header == "" {
		return newError(http.StatusUnsupportedMediaType, CodeUnsupportedMedia, "the body has no Content-Type; want application/json")
	}
	mt, params, err := mime.ParseMediaType(header)
	switch {
	case err != nil:
		return newError(http.StatusUnsupportedMediaType, CodeUnsupportedMedia, "Content-Type %q does not parse; want application/json", header)
	case mt != "application/json":
		return newError(http.StatusUnsupportedMediaType, CodeUnsupportedMedia, "Content-Type %s is not supported; want application/json", mt)
	}
	if cs, ok := params["charset"]; ok && !strings.EqualFold(cs, "utf-8") {
		return newError(http.StatusUnsupportedMediaType, CodeUnsupportedMedia, "charset %q is not supported; want utf-8", cs)
	}
	return nil
}

// duplicateKey returns the path (input.customer, items[2].id) of the first
// key that appears twice in one object of b, a JSON document that decoded,
// and true, or false when there is none. Keys compare after unescaping: "a" and "\u0061"
// are one key. It walks with an explicit stack, so that nesting costs no
// recursion.
func duplicateKey(b []byte) (string, bool) {
	type frame struct {
		obj     bool
		path    string
		keys    map[string]struct{}
		key     string // the member being read, in an object
		wantKey bool
		index   int // the element being read, in an array
	}
	var stack []*frame
	// next is the path of the value about to begin.
	next := func() string {
		if len(stack) == 0 {
			return ""
		}
		f := stack[len(stack)-1]
		if !f.obj {
			return f.path + "[" + strconv.Itoa(f.index) + "]"
		}
		if len(stack) == 1 {
			return f.key // a top-level field is named bare
		}
		return f.path + "." + f.key
	}
	// ended marks the end of a value in the innermost container.
	ended := func() {
		if len(stack) == 0 {
			return
		}
		if f := stack[len(stack)-1]; f.obj {
			f.wantKey = true
		} else {
			f.index++
		}
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	for {
		tok, err := dec.Token()
		if err != nil {
			return "", false // the caller's decoding reported any syntax error
		}
		if n := len(stack); n > 0 && stack[n-1].obj && stack[n-1].wantKey {
			f := stack[n-1]
			if k, ok := tok.(string); ok {
				if _, dup := f.keys[k]; dup {
					f.key = k
					return next(), true
				}
				f.keys[k] = struct{}{}
				f.key, f.wantKey = k, false
				continue
			}
			// Only '}' can stand where a key would.
		}
		switch tok {
		case json.Delim('{'):
			stack = append(stack, &frame{obj: true, path: next(), keys: map[string]struct{}{}, wantKey: true})
			continue
		case json.Delim('['):
			stack = append(stack, &frame{path: next()})
			continue
		case json.Delim('}'), json.Delim(']'):
			stack = stack[:len(stack)-1]
		}
		ended()
		if len(stack) == 0 {
			return "", false
		}
	}
}

// errBadKey is errBadBody for a key of the body, which may be "" (a key
// of the body can be empty, and the details still name it).
func errBadKey(path, message string) *apiError {
	if path != "" {
		return errBadBody(path, message)
	}
	e := newError(http.StatusBadRequest, CodeInvalidBody, "the key \"\": %s", message)
	e.details = []problem{{Path: path, Message: message}}
	return e
}

// jsonError turns a decoding error of the whole body into INVALID_BODY.
func jsonError(err error) *apiError {
	if se, ok := errors.AsType[*json.SyntaxError](err); ok {
		return errBadBody("", fmt.Sprintf("invalid JSON at byte %d: %s", se.Offset, strings.TrimPrefix(se.Error(), "json: ")))
	}
	if errors.Is(err, io.ErrUnexpectedEOF) {
		return errBadBody("", "invalid JSON: unexpected end of the body")
	}
	return errBadBody("", "invalid JSON: "+strings.TrimPrefix(err.Error(), "json: "))
}

var fieldCache sync.Map // reflect.Type → []string

// jsonFields lists the JSON names of a struct's fields.
func jsonFields(t reflect.Type) []string {
	if v, ok := fieldCache.Load(t); ok {
		return v.([]string)
	}
	var names []string
	for i := range t.NumField() {
		if n := jsonName(t.Field(i)); n != "" {
			names = append(names, n)
		}
	}
	fieldCache.Store(t, names)
	return names
}

func jsonName(f reflect.StructField) string {
	tag, _, _ := strings.Cut(f.Tag.Get("json"), ",")
	if tag == "-" || !f.IsExported() {
		return ""
	}
	return tag
}

// jsonKind names the JSON type a Go field wants, for error messages.
func jsonKind(t reflect.Type) string {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch {
	case t == reflect.TypeFor[json.RawMessage]():
		return "any JSON value"
	case t.Kind() == reflect.String:
		return "a string"
	case t.Kind() == reflect.Bool:
		return "a boolean"
	case t.Kind() >= reflect.Int && t.Kind() <= reflect.Float64:
		return "a number"
	case t.Kind() == reflect.Slice:
		return "an array"
	}
	return "an object"
}
