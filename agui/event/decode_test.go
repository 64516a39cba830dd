package event

import (
	"bytes"
	"encoding/json"
	"errors"
	"net/http/httptest"
	"strings"
	"testing"
)

// What the Writer writes, Decode reads back: the same events.
func TestDecodeWriterStream(t *testing.T) {
	t.Parallel()
	rec := httptest.NewRecorder()
	w := NewWriter(rec, nil)
	var want [][]byte
	for _, c := range goldenCases {
		if err := w.Write(c.event); err != nil {
			t.Fatal(err)
		}
		if err := w.Ping(); err != nil {
			t.Fatal(err)
		}
		b, _ := json.Marshal(c.event)
		want = append(want, b)
	}
	events, err := Decode(rec.Body)
	if err != nil {
		t.Fatal(err)
	}
	if len(events) != len(want) {
		t.Fatalf("%d events, want %d", len(events), len(want))
	}
	for i, e := range events {
		if got, _ := json.Marshal(e); !bytes.Equal(got, want[i]) {
			t.Errorf("event %d: %s, want %s", i, got, want[i])
		}
	}
}

func TestDecodeFrames(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name   string
		stream string
		want   []string
		err    string // a part of the error, "" for none
	}{
		{"empty", "", nil, ""},
		{"one frame", "data: {}\n\n", []string{"{}"}, ""},
		{"CRLF", "data: a\r\n\r\ndata: b\r\n\r\n", []string{"a", "b"}, ""},
		{"CR", "data: a\r\rdata: b\r\r", []string{"a", "b"}, ""},
		{"mixed line ends", "data: a\r\n\ndata: b\r\r\n", []string{"a", "b"}, ""},
		{"byte order mark", "\uFEFFdata: a\n\n", []string{"a"}, ""},
		{"byte order mark only first", "data: a\n\n\uFEFFdata: b\n\n", []string{"a"}, ""},
		{"comments and other fields", ": ping\nevent: x\nid: 7\nretry: 10\ndata: a\nbogus: y\n\n: ping\n\n", []string{"a"}, ""},
		{"data lines join", "data: a\ndata: b\ndata:\n\n", []string{"a\nb\n"}, ""},
		{"no space after the colon", "data:a\n\n", []string{"a"}, ""},
		{"only one space stripped", "data:  a\n\n", []string{" a"}, ""},
		{"a field named data without a colon", "data\n\n", []string{""}, ""},
		{"a colon in the value", "data: {\"a\":\"b:c\"}\n\n", []string{`{"a":"b:c"}`}, ""},
		{"a frame without data", "event: x\n\ndata: a\n\n", []string{"a"}, ""},
		{"many blank lines", "\n\n\ndata: a\n\n\n\n", []string{"a"}, ""},
		{"truncated", "data: a\n\ndata: b\n", []string{"a"}, "ends inside a frame"},
		{"truncated mid-line", "data: a\n\ndata: {\"ty", []string{"a"}, "ends inside a frame"},
		{"ends after a comment", "data: a\n\n: ping", []string{"a"}, ""},
		{"a line too long", "data: " + strings.Repeat("x", MaxFrameBytes+1) + "\n\n", nil, "a line over"},
		{"a frame too long", strings.Repeat("data: "+strings.Repeat("x", 1<<20)+"\n", 5) + "\n", nil, "its data is over"},
		{"a NUL", "data: a\x00b\n\n", []string{"a\x00b"}, ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			frames, err := DecodeFrames(strings.NewReader(c.stream))
			if c.err == "" && err != nil || c.err != "" && (err == nil || !strings.Contains(err.Error(), c.err)) {
				t.Errorf("err %v, want %q", err, c.err)
			}
			if len(frames) != len(c.want) {
				t.Fatalf("frames %q, want %q", frames, c.want)
			}
			for i := range frames {
				if string(frames[i]) != c.want[i] {
					t.Errorf("frame %d: %q, want %q", i, frames[i], c.want[i])
				}
			}
		})
	}
	if _, err := DecodeFrames(strings.NewReader("data: a\n")); !errors.Is(err, ErrTruncated) {
		t.Errorf("truncated: %v, want ErrTruncated", err)
	}
}

func TestParseRejects(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name, data, err string
	}{
		{"empty", ``, "not a JSON object"},
		{"null", `null`, "not a JSON object"},
		{"array", `[{"type":"RUN_ERROR","message":"m"}]`, "not a JSON object"},
		{"string", `"RUN_ERROR"`, "not a JSON object"},
		{"two objects", `{"type":"RUN_ERROR","message":"m"} {}`, "not a JSON object"},
		{"invalid JSON", `{"type":"RUN_ERROR",`, "not a JSON object"},
		{"no type", `{"message":"m"}`, `no string "type"`},
		{"null type", `{"type":null,"message":"m"}`, `no string "type"`},
		{"numeric type", `{"type":7}`, `no string "type"`},
		{"unknown type", `{"type":"RUN_PAUSED"}`, `unknown event type "RUN_PAUSED"`},
		{"lower-case type", `{"type":"run_error","message":"m"}`, "unknown event type"},
		{"unknown field", `{"type":"RUN_ERROR","message":"m","details":{}}`, `unknown field "details"`},
		{"field in another case", `{"type":"RUN_STARTED","threadid":"t","runId":"r"}`, `unknown field "threadid"`},
		{"a field the package does not send", `{"type":"RUN_STARTED","threadId":"t","runId":"r","input":{}}`, `unknown field "input"`},
		{"missing required", `{"type":"TOOL_CALL_START","toolCallId":"c"}`, `no "toolCallName"`},
		{"missing delta", `{"type":"TEXT_MESSAGE_CONTENT","messageId":"m"}`, `no "delta"`},
		{"missing payload", `{"type":"CUSTOM","name":"x"}`, `no "value"`},
		{"null required string", `{"type":"RUN_ERROR","message":null}`, `"message" is null`},
		{"null optional", `{"type":"RUN_ERROR","message":"m","code":null}`, `"code" is null`},
		{"null outcome", `{"type":"RUN_FINISHED","threadId":"t","runId":"r","outcome":null}`, `"outcome" is null`},
		{"null result", `{"type":"RUN_FINISHED","threadId":"t","runId":"r","result":null}`, `"result" is null`},
		{"null messages", `{"type":"MESSAGES_SNAPSHOT","messages":null}`, `"messages" is null`},
		{"wrong type", `{"type":"RUN_ERROR","message":7}`, "cannot unmarshal"},
		{"fractional timestamp", `{"type":"RUN_ERROR","message":"m","timestamp":1.5}`, "cannot unmarshal"},
		{"huge timestamp", `{"type":"RUN_ERROR","message":"m","timestamp":1e30}`, "cannot unmarshal"},
		{"unknown outcome field", `{"type":"RUN_FINISHED","threadId":"t","runId":"r","outcome":{"type":"success","reason":"x"}}`, `unknown field "reason"`},
		{"unknown interrupt field", `{"type":"RUN_FINISHED","threadId":"t","runId":"r","outcome":{"type":"interrupt","interrupts":[{"id":"p","reason":"r","proposal":{}}]}}`, `unknown field "proposal"`},
		{"bad expiresAt", `{"type":"RUN_FINISHED","threadId":"t","runId":"r","outcome":{"type":"interrupt","interrupts":[{"id":"p","reason":"r","expiresAt":"tomorrow"}]}}`, "cannot parse"},
		{"schema not an object", `{"type":"RUN_FINISHED","threadId":"t","runId":"r","outcome":{"type":"interrupt","interrupts":[{"id":"p","reason":"r","responseSchema":true}]}}`, "cannot unmarshal"},
		{"unknown message field", `{"type":"MESSAGES_SNAPSHOT","messages":[{"id":"m","role":"user","content":"x","name":"bob"}]}`, `unknown field "name"`},
		{"tool call of another type", `{"type":"MESSAGES_SNAPSHOT","messages":[{"id":"m","role":"assistant","content":"","toolCalls":[{"id":"c","type":"code","function":{"name":"f","arguments":""}}]}]}`, `type "code"`},
		{"unknown tool call field", `{"type":"MESSAGES_SNAPSHOT","messages":[{"id":"m","role":"assistant","content":"","toolCalls":[{"id":"c","type":"function","function":{"name":"f","arguments":""},"x":1}]}]}`, `unknown field "x"`},
		{"content parts", `{"type":"TOOL_CALL_RESULT","messageId":"m","toolCallId":"c","content":[{"type":"text","text":"x"}]}`, "cannot unmarshal"},
		{"deep nesting", `{"type":"CUSTOM","name":"x","value":` + strings.Repeat("[", 20000) + strings.Repeat("]", 20000) + `}`, "not a JSON object"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			e, err := Parse([]byte(c.data))
			if err == nil || !strings.Contains(err.Error(), c.err) {
				t.Errorf("Parse: %v, %v; want an error with %q", e, err, c.err)
			}
			if err != nil && e != nil {
				t.Errorf("an event with the error: %#v", e)
			}
		})
	}
}

func TestParseAccepts(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name, data string
		check      func(Event) bool
	}{
		{"null payload", `{"type":"CUSTOM","name":"x","value":null}`, func(e Event) bool { return e.(*Custom).Value == nil }},
		{"null state", `{"type":"STATE_SNAPSHOT","snapshot":null}`, func(e Event) bool { return e.(*StateSnapshot).Snapshot == nil }},
		{"whitespace", " \n{ \"type\" : \"TEXT_MESSAGE_END\", \"messageId\" : \"m\" }\n", func(e Event) bool { return e.(*TextMessageEnd).MessageID == "m" }},
		{"type anywhere", `{"messageId":"m","type":"TEXT_MESSAGE_END"}`, func(e Event) bool { return e.(*TextMessageEnd).MessageID == "m" }},
		{"null inside a payload", `{"type":"RAW","event":{"a":null}}`, func(e Event) bool { return e.(*Raw).Event.(map[string]any)["a"] == nil }},
		{"timestamp", `{"type":"STEP_STARTED","stepName":"s","timestamp":-9007199254740991}`, func(e Event) bool { return e.(*StepStarted).Timestamp == -9007199254740991 }},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			e, err := Parse([]byte(c.data))
			if err != nil {
				t.Fatal(err)
			}
			if !c.check(e) {
				t.Errorf("Parse: %#v", e)
			}
		})
	}
}

// Decode takes any bytes without panicking, holds every frame within
// MaxFrameBytes, and reads back what it parsed: an event it accepts
// marshals to JSON that parses to the same event.
func FuzzDecode(f *testing.F) {
	rec := httptest.NewRecorder()
	w := NewWriter(rec, nil)
	for _, c := range goldenCases {
		_ = w.Write(c.event)
	}
	f.Add(rec.Body.Bytes())
	for _, seed := range []string{
		"",
		"data: {}\n\n",
		": ping\n\ndata: {\"type\":\"RUN_ERROR\",\"message\":\"m\"}\r\n\r\n",
		"\uFEFFdata:{\"type\":\"TEXT_MESSAGE_END\",\"messageId\":\"m\"}\r\r",
		"data: {\"type\":\"RUN_FINISHED\",\"threadId\":\"t\",\"runId\":\"r\",\"outcome\":{\"type\":\"interrupt\",\"interrupts\":[{\"id\":\"p\",\"reason\":\"r\",\"expiresAt\":\"2026-01-01T00:00:00+02:00\"}]}}\n\n",
		"data: {\"type\":\"CUSTOM\",\"name\":\"x\",\"value\":[[[[1]]]]}\ndata: \n\n",
		"data: {\"type\":\"RUN_STARTED\"\ndata: ,\"threadId\":\"t\",\"runId\":\"r\"}\n\n",
		"event: x\nid: 1\nretry: 5\n\n\n",
		"data: a\n",
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, stream []byte) {
		frames, _ := DecodeFrames(bytes.NewReader(stream))
		for _, fr := range frames {
			if len(fr) > MaxFrameBytes {
				t.Fatalf("a frame of %d bytes", len(fr))
			}
			e, err := Parse(fr)
			if err != nil {
				continue
			}
			b, err := json.Marshal(e)
			if err != nil {
				t.Fatalf("%s parsed but does not marshal: %v", fr, err)
			}
			back, err := Parse(b)
			if err != nil {
				t.Fatalf("%s marshals to %s, which does not parse: %v", fr, b, err)
			}
			if again, _ := json.Marshal(back); !bytes.Equal(again, b) {
				t.Fatalf("%s: %s then %s", fr, b, again)
			}
			if back.Type() != e.Type() {
				t.Fatalf("%s: type %s then %s", fr, e.Type(), back.Type())
			}
		}
		events, _ := Decode(bytes.NewReader(stream))
		for _, e := range events {
			if isNil(e) {
				t.Fatal("a nil event")
			}
		}
	})
}
