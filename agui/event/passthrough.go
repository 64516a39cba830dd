package event

import "encoding/json"

// CustomActionProposalDecision is the name of the CUSTOM event that
// carries a text decision made in a conversation: its value is
// {"threadId", "proposalDecision"}, as the chat route answers it.
const CustomActionProposalDecision = "countersign.action-proposal-decision"

// Custom is an application's own event, the protocol's extension point.
type Custom struct {
	// Name says what the event is, so a consumer can route it.
	Name string `json:"name"`
	// Value is the payload, any JSON value (nil is null).
	Value     any   `json:"value"`
	Timestamp int64 `json:"timestamp,omitempty"`
}

// Raw passes a provider's own event through untranslated.
type Raw struct {
	// Event is the provider's event, any JSON value (nil is null).
	Event any `json:"event"`
	// Source names the provider or framework it came from.
	Source    string `json:"source,omitempty"`
	Timestamp int64  `json:"timestamp,omitempty"`
}

// Type returns "CUSTOM".
func (*Custom) Type() string { return TypeCustom }

// Type returns "RAW".
func (*Raw) Type() string { return TypeRaw }

func (*Custom) event() {}
func (*Raw) event()    {}

// MarshalJSON writes the event with its "type".
func (e Custom) MarshalJSON() ([]byte, error) {
	type fields Custom
	b, err := json.Marshal(fields(e))
	return withType(TypeCustom, b, err)
}

// MarshalJSON writes the event with its "type".
func (e Raw) MarshalJSON() ([]byte, error) {
	type fields Raw
	b, err := json.Marshal(fields(e))
	return withType(TypeRaw, b, err)
}
