package event_test

import (
	"fmt"
	"net/http/httptest"
	"strings"
	"time"

	"github.com/countersign/countersign/agui/event"
)

// A run whose tool call waits for approval, streamed by a handler: it ends
// with an interrupt naming the proposal.
func ExampleWriter() {
	rec := httptest.NewRecorder() // an http.ResponseWriter
	w := event.NewWriter(rec, nil)
	for _, e := range []event.Event{
		&event.RunStarted{ThreadID: "t1", RunID: "run_1", ProtocolVersion: event.ProtocolVersion},
		&event.ToolCallStart{ToolCallID: "call_1", ToolCallName: "payments.refund"},
		&event.ToolCallArgs{ToolCallID: "call_1", Delta: `{"amount":20}`},
		&event.ToolCallEnd{ToolCallID: "call_1"},
		&event.RunFinished{ThreadID: "t1", RunID: "run_1", Outcome: &event.Outcome{
			Type:       event.OutcomeInterrupt,
			Interrupts: []event.Interrupt{{ID: "prp_1", Reason: "tool_call", ToolCallID: "call_1"}},
		}},
	} {
		if err := w.Write(e); err != nil {
			return // the client is gone
		}
	}
	fmt.Println(rec.Header().Get("Content-Type"))
	fmt.Print(rec.Body)
	// Output:
	// text/event-stream
	// data: {"type":"RUN_STARTED","threadId":"t1","runId":"run_1","protocolVersion":"1.0"}
	//
	// data: {"type":"TOOL_CALL_START","toolCallId":"call_1","toolCallName":"payments.refund"}
	//
	// data: {"type":"TOOL_CALL_ARGS","toolCallId":"call_1","delta":"{\"amount\":20}"}
	//
	// data: {"type":"TOOL_CALL_END","toolCallId":"call_1"}
	//
	// data: {"type":"RUN_FINISHED","threadId":"t1","runId":"run_1","outcome":{"type":"interrupt","interrupts":[{"id":"prp_1","reason":"tool_call","toolCallId":"call_1"}]}}
}

// A stream's one writer goroutine sends the heartbeats between events.
func ExampleWriter_Ping() {
	rec := httptest.NewRecorder()
	w := event.NewWriter(rec, nil)
	events := make(chan event.Event, 1)
	events <- &event.RunError{Message: "no agent is configured", Code: "NOT_FOUND"}
	close(events)
	heartbeat := time.NewTicker(15 * time.Second)
	defer heartbeat.Stop()
	for {
		var err error
		select {
		case e, ok := <-events:
			if !ok {
				fmt.Print(rec.Body)
				return
			}
			err = w.Write(e)
		case <-heartbeat.C:
			err = w.Ping()
		}
		if err != nil {
			return
		}
	}
	// Output:
	// data: {"type":"RUN_ERROR","message":"no agent is configured","code":"NOT_FOUND"}
}

// A test reads a recorded stream back and holds it to the protocol.
func ExampleVerify() {
	stream := "data: {\"type\":\"RUN_STARTED\",\"threadId\":\"t1\",\"runId\":\"run_1\",\"protocolVersion\":\"1.0\"}\n\n" +
		"data: {\"type\":\"TEXT_MESSAGE_START\",\"messageId\":\"msg_1\"}\n\n" +
		"data: {\"type\":\"RUN_FINISHED\",\"threadId\":\"t1\",\"runId\":\"run_1\"}\n\n"
	events, err := event.Decode(strings.NewReader(stream))
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(event.Verify(events))
	// Output:
	// AG-UI event 2 (RUN_FINISHED): text messages still open: "msg_1"
}
