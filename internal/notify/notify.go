// Package notify wakes in-process waiters when a proposal changes.
//
// A waiter subscribes to a key (a proposal id), re-reads the store, and then
// blocks on its channel. Publish never blocks: each channel holds one pending
// wake-up, which is all a waiter needs, since it re-reads the store on waking.
// Subscribing before re-reading is what makes a wake-up impossible to miss.
package notify

import "sync"

// Hub fans wake-ups out to subscribers. The zero value is ready to use.
type Hub struct {
	mu   sync.Mutex
	subs map[string]map[chan struct{}]struct{}
}

// Subscribe returns a channel that receives a value after each Publish of key,
// and a function that ends the subscription. Call it exactly once.
func (h *Hub) Subscribe(key string) (<-chan struct{}, func()) {
	ch := make(chan struct{}, 1)
	h.mu.Lock()
	if h.subs == nil {
		h.subs = map[string]map[chan struct{}]struct{}{}
	}
	set := h.subs[key]
	if set == nil {
		set = map[chan struct{}]struct{}{}
		h.subs[key] = set
	}
	set[ch] = struct{}{}
	h.mu.Unlock()
	return ch, func() {
		h.mu.Lock()
		delete(set, ch)
		if len(set) == 0 && h.subs[key] != nil && len(h.subs[key]) == 0 {
			delete(h.subs, key)
		}
		h.mu.Unlock()
	}
}

// Publish wakes every subscriber of key without blocking.
func (h *Hub) Publish(key string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for ch := range h.subs[key] {
		select {
		case ch <- struct{}{}:
		default: // a wake-up is already pending
		}
	}
}

// Subscribers counts the live subscriptions of key.
func (h *Hub) Subscribers(key string) int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.subs[key])
}
