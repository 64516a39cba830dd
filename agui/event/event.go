package event

import "reflect"

// ProtocolVersion is the AG-UI version these events speak. A 1.0 producer
// declares it on every RUN_STARTED (RunStarted.ProtocolVersion).
const ProtocolVersion = "1.0"

// The event types, the value of each event's "type".
const (
	TypeRunStarted         = "RUN_STARTED"
	TypeRunFinished        = "RUN_FINISHED"
	TypeRunError           = "RUN_ERROR"
	TypeStepStarted        = "STEP_STARTED"
	TypeStepFinished       = "STEP_FINISHED"
	TypeTextMessageStart   = "TEXT_MESSAGE_START"
	TypeTextMessageContent = "TEXT_MESSAGE_CONTENT"
	TypeTextMessageEnd     = "TEXT_MESSAGE_END"
	TypeToolCallStart      = "TOOL_CALL_START"
	TypeToolCallArgs       = "TOOL_CALL_ARGS"
	TypeToolCallEnd        = "TOOL_CALL_END"
	TypeToolCallResult     = "TOOL_CALL_RESULT"
	TypeStateSnapshot      = "STATE_SNAPSHOT"
	TypeMessagesSnapshot   = "MESSAGES_SNAPSHOT"
	TypeCustom             = "CUSTOM"
	TypeRaw                = "RAW"
)

// Event is one AG-UI event: a pointer to one of this package's event
// structs (*RunStarted, *TextMessageContent, …). The set is closed, so the
// Verifier knows every event it can be handed.
//
// Each struct marshals to the event's JSON, "type" first, then its fields;
// an optional field with no value is omitted, never sent as null.
type Event interface {
	// Type is the event's "type", one of the Type constants.
	Type() string
	event()
}

// withType returns the JSON object obj with "type":typ as its first member.
// obj is encoding/json's output for a struct: "{}" or "{…}". The types are
// constant upper-case names, which need no escaping.
func withType(typ string, obj []byte, err error) ([]byte, error) {
	if err != nil {
		return nil, err
	}
	out := make([]byte, 0, len(obj)+len(typ)+10)
	out = append(out, `{"type":"`...)
	out = append(out, typ...)
	out = append(out, '"')
	if len(obj) > 2 {
		out = append(out, ',')
	}
	return append(out, obj[1:]...), nil
}

// isNil reports whether e is no event: nil, or a nil pointer.
func isNil(e Event) bool {
	return e == nil || reflect.ValueOf(e).IsNil()
}
