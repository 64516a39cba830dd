package config

import (
	"errors"
	"fmt"
	"slices"
)

// Error is one problem of a configuration: where it is and what is wrong.
// Load, Parse and Validate return one *Error, or several joined with
// errors.Join (see Errors); errors.As finds the first.
type Error struct {
	// File is the file's name as given to Load or Parse; empty for problems
	// that come from no file (an environment variable, a setter).
	File string
	// Line is the 1-based line of the offending YAML node; 0 when unknown.
	Line int
	// Reason names the field by its path ("policy.rules[0].quorum") and says
	// what is wrong with it.
	Reason string

	err error // the cause, such as the error reading the file
}

// Error reads "file:line: reason", leaving out what is unknown.
func (e *Error) Error() string {
	switch {
	case e.File != "" && e.Line > 0:
		return fmt.Sprintf("%s:%d: %s", e.File, e.Line, e.Reason)
	case e.File != "":
		return e.File + ": " + e.Reason
	case e.Line > 0:
		return fmt.Sprintf("line %d: %s", e.Line, e.Reason)
	}
	return e.Reason
}

// Unwrap returns the cause, such as an fs.ErrNotExist reading the file.
func (e *Error) Unwrap() error { return e.err }

// Errors lists the *Error problems in err, in the order they were reported
// (by line). It returns nil when err holds none.
func Errors(err error) []*Error {
	var out []*Error
	var walk func(error)
	walk = func(err error) {
		if e, ok := err.(*Error); ok {
			out = append(out, e)
			return
		}
		switch u := err.(type) {
		case interface{ Unwrap() []error }:
			for _, e := range u.Unwrap() {
				walk(e)
			}
		case interface{ Unwrap() error }:
			walk(u.Unwrap())
		}
	}
	if err != nil {
		walk(err)
	}
	return out
}

// join sorts problems by line, keeping the order of those on one line, and
// joins them; nil when there are none.
func join(errs []*Error) error {
	switch len(errs) {
	case 0:
		return nil
	case 1:
		return errs[0]
	}
	slices.SortStableFunc(errs, func(a, b *Error) int { return a.Line - b.Line })
	all := make([]error, len(errs))
	for i, e := range errs {
		all[i] = e
	}
	return errors.Join(all...)
}

// FieldError returns a problem of c's field at path
// ("agents[0].model.api_key_env") as Validate reports one: in the file c
// was parsed from, at the line of path or of its nearest ancestor the file
// holds (none for a configuration built in code), reading "path: reason".
// cause, when not nil, is what errors.Is and errors.As find. The
// composition root reports with it what it finds building what c describes
// (a model's key missing from the environment), so that such a problem
// points into the file as Parse's do.
func (c *Config) FieldError(path string, cause error, reason string) *Error {
	v := &validator{file: c.file, lines: c.lines}
	return &Error{File: c.file, Line: v.line(path), Reason: path + ": " + reason, err: cause}
}
