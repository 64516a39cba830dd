package tcpproxy

import (
	"net"
	"sync"
)

type mode int

const (
	pass mode = iota
	down
	blackHole
)

// Proxy forwards connections from its loopback address to a target. It is
// safe for concurrent use.
type Proxy struct {
	target string
	addr   string

	mu       sync.Mutex
	cond     *sync.Cond // signalled when the mode changes
	mode     mode
	ln       net.Listener
	conns    map[*link]struct{}
	closed   bool
	accepted int
	wg       sync.WaitGroup
}

// link is one proxied connection: the client's side and the target's.
type link struct {
	client, server net.Conn
}

// New listens on a free loopback port and forwards to target (host:port).
func New(target string) (*Proxy, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	p := &Proxy{target: target, addr: ln.Addr().String(), conns: map[*link]struct{}{}}
	p.cond = sync.NewCond(&p.mu)
	p.serve(ln)
	return p, nil
}

// Addr is the proxy's host:port; clients connect here.
func (p *Proxy) Addr() string { return p.addr }

// Accepted counts the connections accepted so far.
func (p *Proxy) Accepted() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.accepted
}

// Pass forwards: the listener is open again and stalled connections move.
func (p *Proxy) Pass() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return net.ErrClosed
	}
	p.mode = pass
	p.cond.Broadcast()
	if p.ln == nil {
		ln, err := net.Listen("tcp", p.addr)
		if err != nil {
			return err
		}
		p.serve(ln)
	}
	return nil
}

// Down is a stopped server: the listener closes (a new connection is
// refused) and every open connection is reset.
func (p *Proxy) Down() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.mode = down
	if p.ln != nil {
		_ = p.ln.Close()
		p.ln = nil
	}
	p.resetLocked()
	p.cond.Broadcast()
}

// Reset resets every open connection (both sides see it end at once, as
// when a server process dies) and goes on serving new ones.
func (p *Proxy) Reset() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.resetLocked()
}

// BlackHole is a partition: nothing is forwarded either way, open
// connections stay open and new ones are accepted but never answered,
// until Pass, Down or Close.
func (p *Proxy) BlackHole() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.mode = blackHole
	p.cond.Broadcast()
}

// Close stops the proxy and ends every connection.
func (p *Proxy) Close() error {
	p.mu.Lock()
	p.closed = true
	p.mode = down
	if p.ln != nil {
		_ = p.ln.Close()
		p.ln = nil
	}
	p.resetLocked()
	p.cond.Broadcast()
	p.mu.Unlock()
	p.wg.Wait()
	return nil
}

func (p *Proxy) resetLocked() {
	for l := range p.conns {
		abort(l.client)
		abort(l.server)
		delete(p.conns, l)
	}
}

// abort closes c with a reset rather than an orderly shutdown.
func abort(c net.Conn) {
	if c == nil {
		return
	}
	if tc, ok := c.(*net.TCPConn); ok {
		_ = tc.SetLinger(0)
	}
	_ = c.Close()
}

func (p *Proxy) serve(ln net.Listener) {
	p.ln = ln
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return // closed by Down or Close
			}
			p.wg.Add(1)
			go func() {
				defer p.wg.Done()
				p.handle(c)
			}()
		}
	}()
}

// handle dials the target for c (once the mode lets traffic through) and
// copies both ways.
func (p *Proxy) handle(c net.Conn) {
	l := &link{client: c}
	p.mu.Lock()
	if p.closed || p.mode == down {
		p.mu.Unlock()
		abort(c)
		return
	}
	p.accepted++
	p.conns[l] = struct{}{}
	for p.mode == blackHole {
		p.cond.Wait()
	}
	_, live := p.conns[l]
	p.mu.Unlock()
	if !live {
		return // reset while it waited
	}
	s, err := net.Dial("tcp", p.target)
	if err != nil {
		p.drop(l)
		return
	}
	p.mu.Lock()
	if _, live := p.conns[l]; !live {
		p.mu.Unlock()
		abort(s)
		return
	}
	l.server = s
	p.mu.Unlock()
	done := make(chan struct{}, 2)
	go func() { p.copy(s, c); done <- struct{}{} }()
	go func() { p.copy(c, s); done <- struct{}{} }()
	<-done
	p.drop(l)
	<-done
}

// drop ends l and forgets it.
func (p *Proxy) drop(l *link) {
	p.mu.Lock()
	delete(p.conns, l)
	p.mu.Unlock()
	abort(l.client)
	abort(l.server)
}

// copy moves bytes from src to dst, holding each read back while the proxy
// black-holes.
func (p *Proxy) copy(dst, src net.Conn) {
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			p.mu.Lock()
			for p.mode == blackHole {
				p.cond.Wait()
			}
			stop := p.mode == down
			p.mu.Unlock()
			if stop {
				return
			}
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			return // EOF or a reset: the link ends both ways
		}
	}
}
