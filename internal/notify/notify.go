// Package notify wakes in-process waiters when a proposal changes.
//
// A waiter subscribes to a key (a proposal id), re-reads the store, and then
// blocks on its channel. Publish never blocks: each channel holds one pending
// wake-up, which is all a waiter needs, since it re-reads the store on waking.
// Subscribing before re-reading is what makes a wake-up impossible to miss.
//
// A subscription costs one channel and one slice slot: thousands of waiters
// (wait-mode calls) may each hold one.
package notify

import (
	"slices"
	"sync"
)

// Hub fans wake-ups out to subscribers. The zero value is ready to use.
type Hub struct {
	mu sync.Mutex
	// subs holds each key's channels; almost every key has one.
	subs map[string][]chan struct{}
}

// Subscribe returns a channel that receives a value after each Publish of
// any of keys, and a function that ends the subscription. Call it exactly
// once.
func (h *Hub) Subscribe(keys ...string) (<-chan struct{}, func()) {
	ch := make(chan struct{}, 1)
	h.mu.Lock()
	if h.subs == nil {
		h.subs = map[string][]chan struct{}{}
	}
	for _, key := range keys {
		h.subs[key] = append(h.subs[key], ch)
	}
	h.mu.Unlock()
	return ch, func() {
		h.mu.Lock()
		defer h.mu.Unlock()
		for _, key := range keys {
			h.remove(key, ch)
		}
	}
}

// remove takes ch out of key's subscribers.
func (h *Hub) remove(key string, ch chan struct{}) {
	set := h.subs[key]
	i := slices.Index(set, ch)
	if i < 0 {
		return
	}
	if len(set) == 1 {
		delete(h.subs, key)
		return
	}
	set[i] = set[len(set)-1]
	set[len(set)-1] = nil
	h.subs[key] = set[:len(set)-1]
}

// Publish wakes every subscriber of key without blocking.
func (h *Hub) Publish(key string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, ch := range h.subs[key] {
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

// Keys counts the keys with at least one subscription.
func (h *Hub) Keys() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.subs)
}
