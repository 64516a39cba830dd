package passkey_test

import (
	"errors"
	"testing"

	"github.com/countersign/countersign/internal/passkeytest"
	"github.com/countersign/countersign/passkey"
)

const publicURL = "https://countersign.acme.example"

// enrol registers a credential of acme/bob with auth and returns its record.
func enrol(t *testing.T, rp *passkey.RP, auth *passkeytest.Authenticator) *passkey.Credential {
	t.Helper()
	c, err := rp.BeginRegistration("acme", "bob", nil)
	if err != nil {
		t.Fatal(err)
	}
	body, err := auth.Create(c.Options)
	if err != nil {
		t.Fatal(err)
	}
	att, err := passkey.ParseAttestation(body)
	if err != nil {
		t.Fatal(err)
	}
	if att.Challenge() != c.Challenge {
		t.Fatalf("attestation challenge %q, want %q", att.Challenge(), c.Challenge)
	}
	cred, err := rp.FinishRegistration("acme", "bob", nil, c.Session, att)
	if err != nil {
		t.Fatalf("finish registration: %v", err)
	}
	return cred
}

func TestNew(t *testing.T) {
	t.Parallel()
	for _, bad := range []string{"", "countersign.acme.example", "ftp://x.example", "https://", "https://u:p@x.example", "::", "http://127.0.0.1:8080"} {
		if _, err := passkey.New(bad); err == nil {
			t.Errorf("New(%q): no error", bad)
		}
	}
	rp, err := passkey.New("http://localhost:8080/")
	if err != nil {
		t.Fatal(err)
	}
	if rp.ID() != "localhost" || rp.Origin() != "http://localhost:8080" {
		t.Errorf("id %q origin %q", rp.ID(), rp.Origin())
	}
}

func TestRegisterThenLogin(t *testing.T) {
	t.Parallel()
	rp, err := passkey.New(publicURL)
	if err != nil {
		t.Fatal(err)
	}
	auth := passkeytest.New(publicURL)
	cred := enrol(t, rp, auth)
	records := [][]byte{cred.Record}

	login := func(records [][]byte) (*passkey.Credential, error) {
		c, err := rp.BeginLogin("acme", "bob", records)
		if err != nil {
			t.Fatal(err)
		}
		body, err := auth.Get(c.Options)
		if err != nil {
			t.Fatal(err)
		}
		a, err := passkey.ParseAssertion(body)
		if err != nil {
			t.Fatal(err)
		}
		if a.Challenge() != c.Challenge || a.CredentialID() != cred.ID {
			t.Fatalf("assertion names challenge %q and credential %q", a.Challenge(), a.CredentialID())
		}
		return rp.FinishLogin("acme", "bob", records, c.Session, a)
	}
	got, err := login(records)
	if err != nil {
		t.Fatalf("login: %v", err)
	}
	if got.ID != cred.ID {
		t.Errorf("login by %s, want %s", got.ID, cred.ID)
	}
	// The counter moved; an old record is still accepted by the library
	// once, but a record whose counter is ahead of the authenticator's
	// says the passkey was copied.
	if _, err := login([][]byte{got.Record}); err != nil {
		t.Fatalf("second login: %v", err)
	}

	// Someone else's session: carol's ceremony cannot be answered by bob.
	c, err := rp.BeginLogin("acme", "bob", records)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := auth.Get(c.Options)
	a, _ := passkey.ParseAssertion(body)
	if _, err := rp.FinishLogin("acme", "carol", records, c.Session, a); err == nil {
		t.Error("bob's assertion verified as carol's")
	}
}

func TestUserVerificationRequired(t *testing.T) {
	t.Parallel()
	rp, _ := passkey.New(publicURL)
	auth := passkeytest.New(publicURL)
	cred := enrol(t, rp, auth)
	auth.UV = false
	c, _ := rp.BeginLogin("acme", "bob", [][]byte{cred.Record})
	body, _ := auth.Get(c.Options)
	a, err := passkey.ParseAssertion(body)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := rp.FinishLogin("acme", "bob", [][]byte{cred.Record}, c.Session, a); !errors.Is(err, passkey.ErrInvalid) {
		t.Errorf("an assertion without user verification: %v, want ErrInvalid", err)
	}
	r, _ := rp.BeginRegistration("acme", "bob", nil)
	body, _ = auth.Create(r.Options)
	att, _ := passkey.ParseAttestation(body)
	if _, err := rp.FinishRegistration("acme", "bob", nil, r.Session, att); !errors.Is(err, passkey.ErrInvalid) {
		t.Errorf("a registration without user verification: %v, want ErrInvalid", err)
	}
}

func TestOtherOrigin(t *testing.T) {
	t.Parallel()
	rp, _ := passkey.New(publicURL)
	cred := enrol(t, rp, passkeytest.New(publicURL))
	// A phishing page's authenticator answer carries its own origin.
	evil := passkeytest.New("https://countersign.acme.example.evil.example")
	r, _ := rp.BeginRegistration("acme", "bob", [][]byte{cred.Record})
	body, _ := evil.Create(r.Options)
	att, _ := passkey.ParseAttestation(body)
	if _, err := rp.FinishRegistration("acme", "bob", [][]byte{cred.Record}, r.Session, att); !errors.Is(err, passkey.ErrInvalid) {
		t.Errorf("a registration from another origin: %v, want ErrInvalid", err)
	}
}

func FuzzParse(f *testing.F) {
	rp, _ := passkey.New(publicURL)
	auth := passkeytest.New(publicURL)
	r, _ := rp.BeginRegistration("acme", "bob", nil)
	created, _ := auth.Create(r.Options)
	att, _ := passkey.ParseAttestation(created)
	cred, _ := rp.FinishRegistration("acme", "bob", nil, r.Session, att)
	l, _ := rp.BeginLogin("acme", "bob", [][]byte{cred.Record})
	asserted, _ := auth.Get(l.Options)
	f.Add(created)
	f.Add(asserted)
	f.Add([]byte(`{}`))
	f.Add([]byte(`{"id":"","rawId":"","type":"public-key","response":{}}`))
	f.Add([]byte(`null`))
	f.Fuzz(func(t *testing.T, body []byte) {
		if a, err := passkey.ParseAssertion(body); err == nil {
			_, _ = rp.FinishLogin("acme", "bob", [][]byte{cred.Record}, l.Session, a)
		} else if !errors.Is(err, passkey.ErrInvalid) {
			t.Fatalf("ParseAssertion: %v, want ErrInvalid", err)
		}
		if a, err := passkey.ParseAttestation(body); err == nil {
			_, _ = rp.FinishRegistration("acme", "bob", nil, r.Session, a)
		} else if !errors.Is(err, passkey.ErrInvalid) {
			t.Fatalf("ParseAttestation: %v, want ErrInvalid", err)
		}
	})
}
