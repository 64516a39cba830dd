package pgstore

import "sync"

// This file tells a listener which notifications its own Store sent: the
// echoes of changes this process made through it, which the engine already
// announced in process (store.Notification.Local).
//
// The sender records each payload it is about to send in the log of every
// listener connected at that moment; a listener that receives a payload
// its log holds takes one of it and marks the notification Local. Payloads
// carry no sender, but identical ones are interchangeable (the same
// proposal changed): of n identical notifications a listener receives,
// as many are taken as this Store sent, and the rest are another
// process's. Notifications are delivered to every session listening when
// their transaction commits, so a recorded payload is received unless the
// listener's connection fails first; a failed connection's log goes with
// it, and a send that fails takes its payloads back out. A log that grows
// past maxEchoes (a listener that stopped reading) is emptied: its
// notifications then count as another process's, which costs a wake-up
// and loses none.

// maxEchoes bounds the payloads one listener's log holds.
const maxEchoes = 100_000

// echoBook is a Store's listeners' logs.
type echoBook struct {
	mu   sync.Mutex
	logs map[*echoLog]struct{}
}

// echoLog is one listening connection's payloads sent and not yet received.
type echoLog struct {
	sent  map[string]int
	total int
}

// open starts a log for a connection that has begun to listen.
func (b *echoBook) open() *echoLog {
	l := &echoLog{sent: map[string]int{}}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.logs == nil {
		b.logs = map[*echoLog]struct{}{}
	}
	b.logs[l] = struct{}{}
	return l
}

// close drops a log whose connection stopped listening.
func (b *echoBook) close(l *echoLog) {
	b.mu.Lock()
	defer b.mu.Unlock()
	delete(b.logs, l)
}

// sending records payloads, about to be sent, in every open log.
func (b *echoBook) sending(payloads []string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	for l := range b.logs {
		if l.total+len(payloads) > maxEchoes {
			clear(l.sent)
			l.total = 0
		}
		for _, p := range payloads {
			l.sent[p]++
		}
		l.total += len(payloads)
	}
}

// failed takes back payloads whose send failed: they may never arrive.
func (b *echoBook) failed(payloads []string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	for l := range b.logs {
		for _, p := range payloads {
			l.take(p)
		}
	}
}

// received reports whether payload, received by l's connection, is one
// this Store sent, and takes it from the log.
func (b *echoBook) received(l *echoLog, payload string) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return l.take(payload)
}

func (l *echoLog) take(p string) bool {
	n := l.sent[p]
	if n == 0 {
		return false
	}
	if n == 1 {
		delete(l.sent, p)
	} else {
		l.sent[p] = n - 1
	}
	l.total--
	return true
}
