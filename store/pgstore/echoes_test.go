package pgstore

import "testing"

// TestEchoBook: a log takes what was sent while it was open, as many of a
// payload as were sent; a failed send is taken back; a log past maxEchoes
// starts again.
func TestEchoBook(t *testing.T) {
	var b echoBook
	early := b.open()
	b.sending([]string{"t:1:aprp_1", "t:1:aprp_1", "w"})
	late := b.open() // opened after that send: it expects none of it
	taken := 0
	for range 3 {
		if b.received(early, "t:1:aprp_1") {
			taken++
		}
	}
	if taken != 2 {
		t.Errorf("two identical payloads sent, three received: %d taken as this store's, want 2", taken)
	}
	if !b.received(early, "w") || b.received(late, "w") || b.received(late, "t:1:aprp_1") {
		t.Error("a log expects only what was sent while it was open")
	}

	b.sending([]string{"t:1:aprp_2"})
	b.failed([]string{"t:1:aprp_2"})
	if b.received(early, "t:1:aprp_2") || b.received(late, "t:1:aprp_2") {
		t.Error("a failed send's payloads were still expected")
	}

	b.close(late)
	b.sending([]string{"t:1:aprp_3"})
	if late.total != 0 || len(late.sent) != 0 {
		t.Error("a closed log was written to")
	}

	// Past maxEchoes (a listener that stopped reading) the log starts
	// again, with the send that overflowed it.
	batch := make([]string, maxNotifyBatch)
	for i := range batch {
		batch[i] = "w"
	}
	for early.total+len(batch) <= maxEchoes {
		b.sending(batch)
	}
	if early.sent["t:1:aprp_3"] != 1 {
		t.Fatal("the log lost a payload before it was full")
	}
	b.sending(batch)
	if early.total != len(batch) || early.sent["w"] != len(batch) || early.sent["t:1:aprp_3"] != 0 {
		t.Errorf("after overflowing: %d payloads, %d of w; want only the last send's %d", early.total, early.sent["w"], len(batch))
	}
}
