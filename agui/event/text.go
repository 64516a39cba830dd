package event

import "encoding/json"

// TextMessageStart opens a streamed text message; its text follows as
// TEXT_MESSAGE_CONTENT deltas and TEXT_MESSAGE_END closes it.
type TextMessageStart struct {
	MessageID string `json:"messageId"`
	// Role is who the message is from; empty leaves it out, which means
	// RoleAssistant.
	Role      string `json:"role,omitempty"`
	Timestamp int64  `json:"timestamp,omitempty"`
}

// TextMessageContent appends Delta to the open message MessageID. Deltas
// concatenate in arrival order.
type TextMessageContent struct {
	MessageID string `json:"messageId"`
	// Delta is the next piece of text. AG-UI 1.0 allows an empty delta;
	// Countersign sends none (clients before @ag-ui/core 0.0.50 reject one,
	// and it carries nothing), and the Verifier holds it to that.
	Delta     string `json:"delta"`
	Timestamp int64  `json:"timestamp,omitempty"`
}

// TextMessageEnd closes the message MessageID.
type TextMessageEnd struct {
	MessageID string `json:"messageId"`
	Timestamp int64  `json:"timestamp,omitempty"`
}

// Type returns "TEXT_MESSAGE_START".
func (*TextMessageStart) Type() string { return TypeTextMessageStart }

// Type returns "TEXT_MESSAGE_CONTENT".
func (*TextMessageContent) Type() string { return TypeTextMessageContent }

// Type returns "TEXT_MESSAGE_END".
func (*TextMessageEnd) Type() string { return TypeTextMessageEnd }

func (*TextMessageStart) event()   {}
func (*TextMessageContent) event() {}
func (*TextMessageEnd) event()     {}

// MarshalJSON writes the event with its "type".
func (e TextMessageStart) MarshalJSON() ([]byte, error) {
	type fields TextMessageStart
	b, err := json.Marshal(fields(e))
	return withType(TypeTextMessageStart, b, err)
}

// MarshalJSON writes the event with its "type".
func (e TextMessageContent) MarshalJSON() ([]byte, error) {
	type fields TextMessageContent
	b, err := json.Marshal(fields(e))
	return withType(TypeTextMessageContent, b, err)
}

// MarshalJSON writes the event with its "type".
func (e TextMessageEnd) MarshalJSON() ([]byte, error) {
	type fields TextMessageEnd
	b, err := json.Marshal(fields(e))
	return withType(TypeTextMessageEnd, b, err)
}
