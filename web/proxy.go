package web

import (
	"net/http"
	"net/netip"
	"strings"
)

// Requests through trusted proxies. A reverse proxy the configuration trusts
// (Options.TrustedProxies) tells the client's address in X-Forwarded-For and
// the client's scheme in X-Forwarded-Proto; anyone else's headers say
// nothing, since a client can send them too.

// trusted reports whether addr is one of the trusted proxies.
func (in *Inbox) trusted(addr netip.Addr) bool {
	addr = addr.Unmap()
	for _, p := range in.proxies {
		if p.Contains(addr) {
			return true
		}
	}
	return false
}

// peer is the address of the connection's other end; the zero Addr when
// RemoteAddr is not an address (a test's, or a Unix socket's).
func peer(r *http.Request) netip.Addr {
	if ap, err := netip.ParseAddrPort(r.RemoteAddr); err == nil {
		return ap.Addr().Unmap()
	}
	if a, err := netip.ParseAddr(r.RemoteAddr); err == nil {
		return a.Unmap()
	}
	return netip.Addr{}
}

// clientAddr is the address of the client: the peer, or, when the peer is
// a trusted proxy, the last hop of X-Forwarded-For that is not a trusted
// proxy. Hops left of it were written by the client and prove nothing.
func (in *Inbox) clientAddr(r *http.Request) netip.Addr {
	addr := peer(r)
	if !addr.IsValid() || !in.trusted(addr) {
		return addr
	}
	hops := strings.Split(strings.Join(r.Header.Values("X-Forwarded-For"), ","), ",")
	for i := len(hops) - 1; i >= 0; i-- {
		hop, err := netip.ParseAddr(strings.TrimSpace(hops[i]))
		if err != nil {
			if ap, perr := netip.ParseAddrPort(strings.TrimSpace(hops[i])); perr == nil {
				hop, err = ap.Addr(), nil
			}
		}
		if err != nil {
			// A trusted proxy wrote something that is no address: the
			// client is as far as the chain can be followed.
			return addr
		}
		addr = hop.Unmap()
		if !in.trusted(addr) {
			return addr
		}
	}
	return addr
}

// clientKey is the bucket a client's sign-ins count against: its IPv4
// address, or its IPv6 /64, which one subscriber usually holds whole.
func (in *Inbox) clientKey(r *http.Request) netip.Prefix {
	addr := in.clientAddr(r)
	if !addr.IsValid() {
		return netip.Prefix{}
	}
	bits := 32
	if addr.Is6() {
		bits = 64
	}
	p, _ := addr.Prefix(bits)
	return p
}

// secureRequest reports whether cookies for r must be Secure: always, never,
// or (auto) when the request came over TLS, or from a trusted proxy whose
// X-Forwarded-Proto says the client used https.
func (in *Inbox) secureRequest(r *http.Request) bool {
	switch in.secure {
	case SecureCookiesAlways:
		return true
	case SecureCookiesNever:
		return false
	}
	if r.TLS != nil {
		return true
	}
	if !in.trusted(peer(r)) {
		return false
	}
	// The last value is the one the trusted peer wrote; one before it may
	// be the client's own.
	protos := strings.Split(strings.Join(r.Header.Values("X-Forwarded-Proto"), ","), ",")
	return strings.EqualFold(strings.TrimSpace(protos[len(protos)-1]), "https")
}
