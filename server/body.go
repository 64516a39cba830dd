package server

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"reflect"
	"slices"
	"strings"
	"sync"
)

// MaxBodyBytes bounds a request body; a larger one answers 413 BODY_TOO_LARGE.
const MaxBodyBytes = 1 << 20

// readBody reads a request body of at most MaxBodyBytes and decodes it
// strictly into dst, a pointer to a struct with json tags. When allowEmpty is
// set, an empty body means {}.
//
// Strict means: one JSON object and nothing after it, no field that dst does
// not name exactly (encoding/json alone would accept "THREAD_ID" for
// "thread_id"), and every field of the right type. Each failure is a 400
// INVALID_BODY whose details name the field.
func readBody(w http.ResponseWriter, r *http.Request, dst any, allowEmpty bool) error {
	b, err := io.ReadAll(http.MaxBytesReader(innermost(w), r.Body, MaxBodyBytes))
	if err != nil {
		if _, ok := errors.AsType[*http.MaxBytesError](err); ok {
			return newError(http.StatusRequestEntityTooLarge, CodeBodyTooLarge, "the body is larger than %d bytes", MaxBodyBytes)
		}
		return errBadBody("", "cannot read the body: "+err.Error())
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
	known := jsonFields(reflect.TypeOf(dst).Elem())
	var unknown []string
	for k := range fields {
		if !slices.Contains(known, k) {
			unknown = append(unknown, k)
		}
	}
	if len(unknown) > 0 {
		slices.Sort(unknown)
		e := errBadBody(unknown[0], "unknown field")
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
