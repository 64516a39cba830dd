package notify

import (
	"sync"
	"testing"
)

func TestPublishWakesEverySubscriber(t *testing.T) {
	t.Parallel()
	var h Hub
	a, endA := h.Subscribe("p1")
	b, endB := h.Subscribe("p1")
	c, endC := h.Subscribe("p2")
	defer endC()
	h.Publish("p1")
	h.Publish("p1") // coalesced: one pending wake-up per subscriber
	for _, ch := range []<-chan struct{}{a, b} {
		select {
		case <-ch:
		default:
			t.Fatal("subscriber of p1 not woken")
		}
		select {
		case <-ch:
			t.Fatal("wake-ups not coalesced")
		default:
		}
	}
	select {
	case <-c:
		t.Fatal("subscriber of p2 woken by p1")
	default:
	}
	endA()
	endB()
	if n := h.Subscribers("p1"); n != 0 {
		t.Fatalf("Subscribers(p1) = %d after unsubscribe, want 0", n)
	}
}

func TestConcurrentSubscribePublish(t *testing.T) {
	t.Parallel()
	var h Hub
	var wg sync.WaitGroup
	for i := 0; i < 64; i++ {
		wg.Add(2)
		go func() {
			defer wg.Done()
			ch, end := h.Subscribe("k")
			defer end()
			h.Publish("k")
			<-ch // our own publish (or another's) always reaches us
		}()
		go func() {
			defer wg.Done()
			h.Publish("k")
		}()
	}
	wg.Wait()
	if n := h.Subscribers("k"); n != 0 {
		t.Fatalf("Subscribers = %d, want 0", n)
	}
}

func TestUnsubscribeInAnyOrder(t *testing.T) {
	t.Parallel()
	var h Hub
	chs := make([]<-chan struct{}, 3)
	ends := make([]func(), 3)
	for i := range chs {
		chs[i], ends[i] = h.Subscribe("k")
	}
	ends[1]()
	ends[1]() // a second call is harmless
	h.Publish("k")
	for _, i := range []int{0, 2} {
		select {
		case <-chs[i]:
		default:
			t.Fatalf("subscriber %d not woken after another left", i)
		}
	}
	select {
	case <-chs[1]:
		t.Fatal("a finished subscription was woken")
	default:
	}
	ends[2]()
	ends[0]()
	if n := h.Keys(); n != 0 {
		t.Fatalf("Keys = %d after every subscription ended, want 0", n)
	}
}

func TestSubscribeToSeveralKeys(t *testing.T) {
	t.Parallel()
	var h Hub
	ch, end := h.Subscribe("a", "b")
	for _, key := range []string{"a", "b"} {
		h.Publish(key)
		select {
		case <-ch:
		default:
			t.Fatalf("a subscriber of a and b not woken by %s", key)
		}
	}
	h.Publish("c")
	select {
	case <-ch:
		t.Fatal("a subscriber of a and b woken by c")
	default:
	}
	end()
	if n := h.Keys(); n != 0 {
		t.Fatalf("Keys() = %d after the subscription ended, want 0", n)
	}
}
