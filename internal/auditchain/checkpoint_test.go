package auditchain

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"encoding/pem"
	"errors"
	"strings"
	"testing"
	"time"
)

// testKey is a fixed signing key; seed picks which.
func testKey(seed byte) ed25519.PrivateKey {
	return ed25519.NewKeyFromSeed(bytes.Repeat([]byte{seed}, ed25519.SeedSize))
}

var t0 = time.Date(2026, 12, 4, 10, 0, 0, 123456000, time.UTC)

// signed is a checkpoint of evs's event at seq, at t, signed with key.
func signed(key ed25519.PrivateKey, evs []*Event, seq int64, t time.Time) *Checkpoint {
	c := &Checkpoint{Tenant: "acme", Seq: seq, Hash: evs[seq-1].Hash, At: FormatTime(t)}
	Sign(c, key)
	return c
}

func cpLine(t *testing.T, c *Checkpoint) []byte {
	t.Helper()
	b, err := json.Marshal(map[string]any{"checkpoint": c})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func endLine(at time.Time) []byte {
	return []byte(`{"exported_at":"` + FormatTime(at) + `"}`)
}

// export writes evs as an export does: each checkpoint of cps right after
// the event it covers (one beyond the events at the end), then exported_at
// unless end is zero.
func export(t *testing.T, evs []*Event, cps []*Checkpoint, end time.Time) [][]byte {
	t.Helper()
	var out [][]byte
	i := 0
	for _, e := range evs {
		// A checkpoint before the events (of the seq they follow) first.
		for ; i < len(cps) && cps[i].Seq < e.Seq; i++ {
			out = append(out, cpLine(t, cps[i]))
		}
		out = append(out, lines(t, []*Event{e})...)
		for ; i < len(cps) && cps[i].Seq == e.Seq; i++ {
			out = append(out, cpLine(t, cps[i]))
		}
	}
	for ; i < len(cps); i++ {
		out = append(out, cpLine(t, cps[i]))
	}
	if !end.IsZero() {
		out = append(out, endLine(end))
	}
	return out
}

func verifyExport(v *ExportVerifier, ls [][]byte) (ExportResult, error) {
	for _, l := range ls {
		if err := v.Line(l); err != nil {
			return ExportResult{}, err
		}
	}
	return v.Finish()
}

// TestCheckpointIsTheContractsDefinition: key_id is the first 16 hex of the
// SHA-256 of the key's SPKI DER, and the signature is Ed25519 over the RFC
// 8785 JSON of the checkpoint without its signature, standard base64.
func TestCheckpointIsTheContractsDefinition(t *testing.T) {
	t.Parallel()
	key := testKey(1)
	pub := key.Public().(ed25519.PublicKey)
	// An Ed25519 SubjectPublicKeyInfo is this 12-byte header and the key.
	spki := append([]byte{0x30, 0x2a, 0x30, 0x05, 0x06, 0x03, 0x2b, 0x65, 0x70, 0x03, 0x21, 0x00}, pub...)
	sum := sha256.Sum256(spki)
	if got, want := KeyID(pub), hex.EncodeToString(sum[:])[:16]; got != want {
		t.Fatalf("KeyID = %s, want %s", got, want)
	}
	c := &Checkpoint{Tenant: "acmé<", Seq: 7, Hash: strings.Repeat("ab", 32), At: "2026-12-04T10:00:00.123456Z"}
	Sign(c, key)
	canon := `{"at":"2026-12-04T10:00:00.123456Z","hash":"` + c.Hash + `","key_id":"` + KeyID(pub) + `","seq":7,"tenant":"acmé<"}`
	sig, err := base64.StdEncoding.DecodeString(c.Signature)
	if err != nil || !ed25519.Verify(pub, []byte(canon), sig) {
		t.Fatalf("the signature %q does not verify over %s (%v)", c.Signature, canon, err)
	}
	if err := NewKeys(pub).VerifySignature(c); err != nil {
		t.Errorf("VerifySignature: %v", err)
	}
	c.At = "2026-12-04T10:00:01Z"
	if err := NewKeys(pub).VerifySignature(c); !errors.Is(err, ErrBadSignature) {
		t.Errorf("VerifySignature of a changed checkpoint: %v, want ErrBadSignature", err)
	}
	if err := NewKeys(testKey(2).Public().(ed25519.PublicKey)).VerifySignature(c); !errors.Is(err, ErrUnknownKey) {
		t.Errorf("VerifySignature under another key: %v, want ErrUnknownKey", err)
	}
}

func TestExportVerifier(t *testing.T) {
	t.Parallel()
	key, other := testKey(1), testKey(2)
	keys := NewKeys(key.Public().(ed25519.PublicKey))
	evs := chain(5)
	// Checkpoints at seq 2 and 5, a minute apart; exported 90 s after the
	// newest, within two checkpoint_every (1m) of it.
	cp2, cp5 := signed(key, evs, 2, t0), signed(key, evs, 5, t0.Add(time.Minute))
	end := t0.Add(150 * time.Second)
	good := export(t, evs, []*Checkpoint{cp2, cp5}, end)

	v := &ExportVerifier{Keys: keys, Every: time.Minute}
	res, err := verifyExport(v, good)
	if err != nil {
		t.Fatalf("a good export: %v", err)
	}
	if res.Head.Seq != 5 || res.Checkpoints != 2 || res.Newest == nil || res.Newest.Seq != 5 {
		t.Errorf("result = %+v, want head 5, 2 checkpoints, the newest at seq 5", res)
	}

	// rewritten is the chain with the event at seq 3 edited and every hash
	// from there recomputed: it links, and its old checkpoints no longer
	// match it.
	rewritten := chain(5)
	rewritten[2].Detail = "rewritten"
	for i := 2; i < 5; i++ {
		if i > 2 {
			rewritten[i].PrevHash = rewritten[i-1].Hash
		}
		rewritten[i].Hash = Hash(rewritten[i])
	}
	swap := func(c *Checkpoint, f func(c *Checkpoint)) *Checkpoint { cp := *c; f(&cp); return &cp }
	otherSigned := signed(other, evs, 5, t0.Add(time.Minute))
	reorderedLine := []byte(` { "checkpoint" : {"signature":"` + cp5.Signature + `", "at":"` + cp5.At + `","tenant":"acme","seq":5,` +
		`"key_id":"` + cp5.KeyID + `","hash":"` + cp5.Hash + `"} } `)
	withLine := func(ls [][]byte, i int, l []byte) [][]byte {
		out := append([][]byte(nil), ls...)
		out[i] = l
		return out
	}
	for _, tc := range []struct {
		name   string
		ls     [][]byte
		v      *ExportVerifier
		seq    int64
		reason string
	}{
		{"reordered, spaced checkpoint", withLine(good, 6, reorderedLine), nil, 0, ""},
		{"replayed signature", export(t, evs, []*Checkpoint{cp2, swap(cp5, func(c *Checkpoint) { c.Signature = cp2.Signature })}, end), nil, 5, "signature does not verify"},
		{"at moved on", export(t, evs, []*Checkpoint{cp2, swap(cp5, func(c *Checkpoint) { c.At = FormatTime(end) })}, end), nil, 5, "signature does not verify"},
		{"not base64", export(t, evs, []*Checkpoint{swap(cp2, func(c *Checkpoint) { c.Signature = "%%" }), cp5}, end), nil, 2, "signature does not verify"},
		{"signed by another key", export(t, evs, []*Checkpoint{cp2, otherSigned}, end), nil, 5, `key_id "` + otherSigned.KeyID + `" matches no given public key`},
		{"forged under our key_id", export(t, evs, []*Checkpoint{cp2, swap(otherSigned, func(c *Checkpoint) { c.KeyID = cp5.KeyID })}, end), nil, 5, "signature does not verify"},
		{"another key given too", export(t, evs, []*Checkpoint{cp2, otherSigned}, end), &ExportVerifier{Keys: NewKeys(key.Public().(ed25519.PublicKey), other.Public().(ed25519.PublicKey))}, 0, ""},
		{"rewritten, rehashed", export(t, rewritten, []*Checkpoint{cp2, cp5}, end), nil, 5, "hash differs from the signed checkpoint's: the chain was rewritten"},
		{"rewritten, rehashed, checkpoints after it dropped", export(t, rewritten, []*Checkpoint{cp2}, end), nil, 3, "the newest signed checkpoint (seq 2, at " + cp2.At + ") is more than 2m0s older than exported_at"},
		{"cut short, checkpoint kept", export(t, evs[:3], []*Checkpoint{cp2, cp5}, end), nil, 5, "covers seq 5, but the events before it end at seq 3: the chain was cut short"},
		{"cut short, checkpoint dropped", export(t, evs[:3], []*Checkpoint{cp2}, end), nil, 3, "more than 2m0s older"},
		{"no checkpoint", export(t, evs, nil, end), nil, 1, "no checkpoint signed by a given public key"},
		{"no exported_at", export(t, evs, []*Checkpoint{cp2, cp5}, time.Time{}), nil, 6, "no exported_at line: it may be cut short"},
		{"a line after exported_at", append(slicesClone(good), lines(t, chain(1))[0]), nil, 6, "a line follows the exported_at line"},
		{"a bad exported_at", withLine(good, len(good)-1, []byte(`{"exported_at":"yesterday"}`)), nil, 6, "exported_at is not an RFC 3339 time"},
		{"exported_at with more", withLine(good, len(good)-1, []byte(`{"exported_at":"`+FormatTime(end)+`","x":1}`)), nil, 6, "members other than exported_at"},
		{"checkpoint out of place", withLine(withLine(good, 2, good[3]), 3, good[2]), nil, 2, "a checkpoint of seq 2 is out of place: it follows seq 3"},
		{"checkpoint line with more", withLine(good, 2, []byte(`{"checkpoint":{},"x":1}`)), nil, 3, "members other than checkpoint"},
		{"another tenant", export(t, evs, []*Checkpoint{cp2, func() *Checkpoint {
			c := &Checkpoint{Tenant: "globex", Seq: 5, Hash: evs[4].Hash, At: cp5.At}
			Sign(c, key)
			return c
		}()}, end), nil, 5, `a checkpoint of tenant "globex" among checkpoints of tenant "acme"`},
		{"an added member", withLine(good, 6, bytes.Replace(cpLine(t, cp5), []byte(`"tenant"`), []byte(`"extra":1,"tenant"`), 1)), nil, 5, "signature does not verify"},
		{"a missing member", withLine(good, 6, bytes.Replace(cpLine(t, cp5), []byte(`"at":"`+cp5.At+`",`), nil, 1)), nil, 5, "a checkpoint has no at"},
		{"a duplicate member", withLine(good, 6, []byte(`{"checkpoint":{"seq":5,"seq":5}}`)), nil, 6, "not a JSON event"},
		{"against a server, fresh", export(t, evs, []*Checkpoint{cp2, cp5}, time.Time{}), &ExportVerifier{Keys: keys, Now: t0.Add(2 * time.Minute)}, 0, ""},
		{"against a server, stale", export(t, evs, []*Checkpoint{cp2, cp5}, time.Time{}), &ExportVerifier{Keys: keys, Now: t0.Add(time.Hour)}, 6, "more than 2m0s older than now"},
		{"a longer checkpoint_every", export(t, evs, []*Checkpoint{cp2, cp5}, time.Time{}), &ExportVerifier{Keys: keys, Every: time.Hour, Now: t0.Add(time.Hour)}, 0, ""},
		{"a part, the checkpoint where it starts", export(t, evs[2:], []*Checkpoint{cp2, cp5}, end), &ExportVerifier{Keys: keys, Chain: Verifier{After: 2, PrevHash: evs[1].Hash}}, 0, ""},
		{"a part, no hash given", export(t, evs[2:], []*Checkpoint{cp2, cp5}, end), &ExportVerifier{Keys: keys, Chain: Verifier{After: 2}}, 2, "whose hash is not given"},
		{"a kept head, still checked", good, &ExportVerifier{Keys: keys, Chain: Verifier{Expect: &Head{Seq: 4, Hash: "00"}}}, 4, "differs from the kept head's"},
		// Without keys, verify is what it was: the chain alone, checkpoint
		// and exported_at lines passed over, whatever they hold.
		{"no keys: good", good, &ExportVerifier{}, 0, ""},
		{"no keys: a bad signature", export(t, evs, []*Checkpoint{swap(cp5, func(c *Checkpoint) { c.Signature = "x" })}, end), &ExportVerifier{}, 0, ""},
		{"no keys: rewritten, rehashed", export(t, rewritten, []*Checkpoint{cp2, cp5}, end), &ExportVerifier{}, 0, ""},
		{"no keys: cut short", export(t, evs[:3], []*Checkpoint{cp2, cp5}, end), &ExportVerifier{}, 0, ""},
		{"no keys: events only", lines(t, evs), &ExportVerifier{}, 0, ""},
		{"no keys: an edited event", export(t, func() []*Event { e := chain(5); e[1].Actor = "mallory"; return e }(), nil, end), &ExportVerifier{}, 2, "hash does not match the event"},
		{"keys: events only", lines(t, evs), nil, 1, "no checkpoint signed"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			v := tc.v
			if v == nil {
				v = &ExportVerifier{Keys: keys, Every: time.Minute}
			}
			_, err := verifyExport(v, tc.ls)
			if tc.seq == 0 {
				if err != nil {
					t.Fatalf("verify: %v, want it to hold", err)
				}
				return
			}
			var be *BreakError
			if !errors.As(err, &be) || !errors.Is(err, ErrBroken) {
				t.Fatalf("verify: %v, want a *BreakError", err)
			}
			if be.Seq != tc.seq || !strings.Contains(be.Reason, tc.reason) {
				t.Errorf("verify: %q, want broken at seq %d: …%s…", err, tc.seq, tc.reason)
			}
		})
	}
}

func slicesClone(ls [][]byte) [][]byte { return append([][]byte(nil), ls...) }

func TestKeysPEM(t *testing.T) {
	t.Parallel()
	priv, pub, err := GenerateKey()
	if err != nil {
		t.Fatal(err)
	}
	key, err := ParsePrivateKey(priv)
	if err != nil {
		t.Fatalf("ParsePrivateKey of a generated key: %v", err)
	}
	pk, err := ParsePublicKey(pub)
	if err != nil {
		t.Fatalf("ParsePublicKey of a generated key: %v", err)
	}
	if !pk.Equal(key.Public()) {
		t.Fatal("the public key is not the private key's")
	}
	if !bytes.HasPrefix(priv, []byte("-----BEGIN PRIVATE KEY-----\n")) || !bytes.HasPrefix(pub, []byte("-----BEGIN PUBLIC KEY-----\n")) {
		t.Errorf("PEM types: %q, %q; want PRIVATE KEY (PKCS#8) and PUBLIC KEY (PKIX)", priv[:28], pub[:27])
	}
	ec, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	ecDER, _ := x509.MarshalPKCS8PrivateKey(ec)
	ecPubDER, _ := x509.MarshalPKIXPublicKey(&ec.PublicKey)
	ecPEM := pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: ecDER})
	for _, tc := range []struct {
		name string
		data []byte
		want string
	}{
		{"not PEM", []byte("hello"), "not PEM"},
		{"the public key", pub, `a PEM block of type "PUBLIC KEY", want "PRIVATE KEY" (PKCS#8)`},
		{"an ECDSA key", ecPEM, "a PKCS#8 key of type *ecdsa.PrivateKey, want Ed25519"},
		{"an old-style EC key", pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: ecDER}), `type "EC PRIVATE KEY"`},
		{"garbage DER", pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: []byte{1, 2, 3}}), "not a PKCS#8 private key"},
		{"two blocks", append(append([]byte{}, priv...), priv...), "more than one PEM block"},
	} {
		if _, err := ParsePrivateKey(tc.data); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("ParsePrivateKey(%s) = %v, want …%s…", tc.name, err, tc.want)
		}
	}
	for _, tc := range []struct {
		name string
		data []byte
		want string
	}{
		{"the private key", priv, `want "PUBLIC KEY" (PKIX)`},
		{"an ECDSA key", pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: ecPubDER}), "a PKIX key of type *ecdsa.PublicKey, want Ed25519"},
		{"garbage DER", pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: []byte{1}}), "not a PKIX public key"},
	} {
		if _, err := ParsePublicKey(tc.data); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("ParsePublicKey(%s) = %v, want …%s…", tc.name, err, tc.want)
		}
	}
}
