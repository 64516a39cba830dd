package event

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"reflect"
	"slices"
	"strings"
)

// MaxFrameBytes bounds what the decoder reads into memory at once: one
// line, and the data of one frame.
const MaxFrameBytes = 4 << 20

// ErrTruncated is the error of a stream that ends inside a frame, its data
// not closed by a blank line: the connection dropped mid-event.
var ErrTruncated = errors.New("the stream ends inside a frame")

// Decode reads an AG-UI event stream, as Writer writes it, and returns its
// events in order. It is for tests: it reads until r ends and checks each
// event strictly (see Parse). On an error it returns the events before it.
func Decode(r io.Reader) ([]Event, error) {
	frames, err := DecodeFrames(r)
	events := make([]Event, 0, len(frames))
	for i, data := range frames {
		e, perr := Parse(data)
		if perr != nil {
			return events, fmt.Errorf("frame %d: %w", i, perr)
		}
		events = append(events, e)
	}
	return events, err
}

// DecodeFrames reads a server-sent event stream and returns the data of
// each event, in order, as the SSE standard assembles it: lines end with
// LF, CRLF or CR; a leading byte order mark is dropped; comment lines and
// fields other than data (event, id, retry) are ignored; the data lines of
// one event join with LF; a blank line ends the event, and an event with
// no data line is none. A line or a frame over MaxFrameBytes is an error,
// and so is a stream that ends inside a frame (ErrTruncated). On an error
// it returns the frames before it.
func DecodeFrames(r io.Reader) ([][]byte, error) {
	sc := bufio.NewScanner(r)
	sc.Buffer(nil, MaxFrameBytes+2) // +2: the line end
	sc.Split(splitLines)
	var (
		frames  [][]byte
		data    []byte
		pending bool // a data line since the last dispatch
		first   = true
	)
	for sc.Scan() {
		line := sc.Bytes()
		if first {
			line = bytes.TrimPrefix(line, []byte("\uFEFF"))
			first = false
		}
		if len(line) == 0 {
			if pending {
				frames = append(frames, bytes.TrimSuffix(data, []byte("\n")))
			}
			data, pending = nil, false
			continue
		}
		if line[0] == ':' {
			continue
		}
		field, value, found := bytes.Cut(line, []byte(":"))
		if found {
			value = bytes.TrimPrefix(value, []byte(" "))
		}
		if string(field) != "data" {
			continue
		}
		if len(data)+len(value)+1 > MaxFrameBytes {
			return frames, fmt.Errorf("frame %d: its data is over %d bytes", len(frames), MaxFrameBytes)
		}
		data = append(append(data, value...), '\n')
		pending = true
	}
	if err := sc.Err(); err != nil {
		if errors.Is(err, bufio.ErrTooLong) {
			return frames, fmt.Errorf("frame %d: a line over %d bytes", len(frames), MaxFrameBytes)
		}
		return frames, fmt.Errorf("read event stream: %w", err)
	}
	if pending {
		return frames, fmt.Errorf("frame %d: %w", len(frames), ErrTruncated)
	}
	return frames, nil
}

// splitLines is a bufio.SplitFunc for SSE lines, which end with LF, CRLF
// or a lone CR.
func splitLines(data []byte, atEOF bool) (advance int, token []byte, err error) {
	if i := bytes.IndexAny(data, "\r\n"); i >= 0 {
		switch {
		case data[i] == '\n':
			return i + 1, data[:i], nil
		case i+1 < len(data) && data[i+1] == '\n':
			return i + 2, data[:i], nil
		case i+1 < len(data) || atEOF:
			return i + 1, data[:i], nil
		}
		return 0, nil, nil // a CR last: whether an LF follows is not known yet
	}
	if atEOF && len(data) > 0 {
		return len(data), data, nil
	}
	return 0, nil, nil
}

// newEvent makes an empty event of each type.
var newEvent = map[string]func() Event{
	TypeRunStarted:         func() Event { return new(RunStarted) },
	TypeRunFinished:        func() Event { return new(RunFinished) },
	TypeRunError:           func() Event { return new(RunError) },
	TypeStepStarted:        func() Event { return new(StepStarted) },
	TypeStepFinished:       func() Event { return new(StepFinished) },
	TypeTextMessageStart:   func() Event { return new(TextMessageStart) },
	TypeTextMessageContent: func() Event { return new(TextMessageContent) },
	TypeTextMessageEnd:     func() Event { return new(TextMessageEnd) },
	TypeToolCallStart:      func() Event { return new(ToolCallStart) },
	TypeToolCallArgs:       func() Event { return new(ToolCallArgs) },
	TypeToolCallEnd:        func() Event { return new(ToolCallEnd) },
	TypeToolCallResult:     func() Event { return new(ToolCallResult) },
	TypeStateSnapshot:      func() Event { return new(StateSnapshot) },
	TypeMessagesSnapshot:   func() Event { return new(MessagesSnapshot) },
	TypeCustom:             func() Event { return new(Custom) },
	TypeRaw:                func() Event { return new(Raw) },
}

// field is what Parse knows of one top-level field of an event.
type field struct {
	required bool // its tag has no omitempty or omitzero
	nullable bool // required and of interface type: any JSON value, null too
}

// fields maps each event type to its fields by JSON name, read from the
// structs' tags.
var fields = func() map[string]map[string]field {
	all := make(map[string]map[string]field, len(newEvent))
	for typ, mk := range newEvent {
		t := reflect.TypeOf(mk()).Elem()
		fs := make(map[string]field, t.NumField())
		for sf := range t.Fields() {
			name, opts, _ := strings.Cut(sf.Tag.Get("json"), ",")
			optional := slices.ContainsFunc(strings.Split(opts, ","), func(o string) bool { return o == "omitempty" || o == "omitzero" })
			fs[name] = field{required: !optional, nullable: !optional && sf.Type.Kind() == reflect.Interface}
		}
		all[typ] = fs
	}
	return all
}()

// Parse reads one event's JSON strictly, as a test of what Countersign
// sends: a JSON object whose "type" is one of this package's events, with
// every required field, no field the event does not define (at any depth;
// metadata, schemas and payloads are open), and no null standing for an
// absent field. As in encoding/json, a key given twice keeps its last
// value.
func Parse(data []byte) (Event, error) {
	var obj map[string]json.RawMessage
	if err := json.Unmarshal(data, &obj); err != nil || obj == nil {
		return nil, errors.New("not a JSON object")
	}
	var typ string
	if raw, ok := obj["type"]; !ok || isNull(raw) || json.Unmarshal(raw, &typ) != nil {
		return nil, errors.New(`no string "type"`)
	}
	mk, ok := newEvent[typ]
	if !ok {
		return nil, fmt.Errorf("unknown event type %q", typ)
	}
	delete(obj, "type")
	fs := fields[typ]
	for _, name := range slices.Sorted(maps.Keys(obj)) {
		f, ok := fs[name]
		switch {
		case !ok:
			return nil, fmt.Errorf("%s: unknown field %q", typ, name)
		case !f.nullable && isNull(obj[name]):
			return nil, fmt.Errorf("%s: %q is null (an absent field is left out)", typ, name)
		}
	}
	for _, name := range slices.Sorted(maps.Keys(fs)) {
		if _, ok := obj[name]; fs[name].required && !ok {
			return nil, fmt.Errorf("%s: no %q", typ, name)
		}
	}
	rest, err := json.Marshal(obj)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", typ, err)
	}
	e := mk()
	dec := json.NewDecoder(bytes.NewReader(rest))
	dec.DisallowUnknownFields()
	if err := dec.Decode(e); err != nil {
		return nil, fmt.Errorf("%s: %w", typ, err)
	}
	return e, nil
}

// isNull reports whether raw, a JSON value, is null.
func isNull(raw json.RawMessage) bool {
	return bytes.Equal(bytes.TrimSpace(raw), []byte("null"))
}
