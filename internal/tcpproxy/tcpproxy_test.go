package tcpproxy_test

import (
	"bufio"
	"errors"
	"io"
	"net"
	"syscall"
	"testing"
	"time"

	"github.com/countersign/countersign/internal/tcpproxy"
)

// echo serves a line-echo server and returns its address.
func echo(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				_, _ = io.Copy(c, c)
			}()
		}
	}()
	return ln.Addr().String()
}

// roundTrip writes a line on c and reads it back within d.
func roundTrip(c net.Conn, r *bufio.Reader, d time.Duration) error {
	_ = c.SetDeadline(time.Now().Add(d))
	defer c.SetDeadline(time.Time{})
	if _, err := c.Write([]byte("ping\n")); err != nil {
		return err
	}
	line, err := r.ReadString('\n')
	if err != nil {
		return err
	}
	if line != "ping\n" {
		return errors.New("echoed " + line)
	}
	return nil
}

func dial(t *testing.T, p *tcpproxy.Proxy) (net.Conn, *bufio.Reader) {
	t.Helper()
	c, err := net.Dial("tcp", p.Addr())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c, bufio.NewReader(c)
}

func TestProxyModes(t *testing.T) {
	p, err := tcpproxy.New(echo(t))
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()

	c, r := dial(t, p)
	if err := roundTrip(c, r, time.Second); err != nil {
		t.Fatalf("pass: %v", err)
	}

	// Black hole: the open connection stalls, and moves again after Pass.
	p.BlackHole()
	if err := roundTrip(c, r, 200*time.Millisecond); !isTimeout(err) {
		t.Fatalf("black hole: round trip answered %v, want a time-out", err)
	}
	c2, r2 := dial(t, p) // accepted, never answered
	if err := roundTrip(c2, r2, 200*time.Millisecond); !isTimeout(err) {
		t.Fatalf("black hole: new connection answered %v, want a time-out", err)
	}
	if err := p.Pass(); err != nil {
		t.Fatal(err)
	}
	// The stalled ping arrives first, then this one.
	if line, err := r.ReadString('\n'); err != nil || line != "ping\n" {
		t.Fatalf("after the black hole: %q %v", line, err)
	}
	if err := roundTrip(c, r, time.Second); err != nil {
		t.Fatalf("after the black hole: %v", err)
	}
	if line, err := r2.ReadString('\n'); err != nil || line != "ping\n" {
		t.Fatalf("connection made in the black hole: %q %v", line, err)
	}

	// Reset: open connections end, new ones are served.
	p.Reset()
	if err := roundTrip(c, r, time.Second); err == nil {
		t.Fatal("reset: the old connection still answers")
	}
	c, r = dial(t, p)
	if err := roundTrip(c, r, time.Second); err != nil {
		t.Fatalf("after reset: %v", err)
	}

	// Down: refused like a stopped server, open connections reset.
	p.Down()
	if err := roundTrip(c, r, time.Second); err == nil {
		t.Fatal("down: the old connection still answers")
	}
	if _, err := net.Dial("tcp", p.Addr()); !errors.Is(err, syscall.ECONNREFUSED) {
		t.Fatalf("down: dial answered %v, want connection refused", err)
	}
	if err := p.Pass(); err != nil {
		t.Fatal(err)
	}
	c, r = dial(t, p)
	if err := roundTrip(c, r, time.Second); err != nil {
		t.Fatalf("after down: %v", err)
	}
	if n := p.Accepted(); n != 4 {
		t.Errorf("accepted %d connections, want 4", n)
	}
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}
