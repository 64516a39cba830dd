package auditchain

import (
	"crypto/ed25519"
	"crypto/rand"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
)

// The PEM block types of a checkpoint key pair: PKCS#8 for the private
// key, PKIX (SubjectPublicKeyInfo) for the public one, as openssl writes
// them (`openssl genpkey -algorithm ed25519`, `openssl pkey -pubout`).
const (
	PrivateKeyPEMType = "PRIVATE KEY"
	PublicKeyPEMType  = "PUBLIC KEY"
)

// GenerateKey makes a checkpoint signing key pair and returns both halves
// as PEM: the private key as PKCS#8, the public key as PKIX.
func GenerateKey() (privatePEM, publicPEM []byte, err error) {
	pub, key, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		return nil, nil, fmt.Errorf("generate an Ed25519 key: %w", err)
	}
	der, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return nil, nil, fmt.Errorf("marshal the private key: %w", err)
	}
	pubDER, err := x509.MarshalPKIXPublicKey(pub)
	if err != nil {
		return nil, nil, fmt.Errorf("marshal the public key: %w", err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: PrivateKeyPEMType, Bytes: der}),
		pem.EncodeToMemory(&pem.Block{Type: PublicKeyPEMType, Bytes: pubDER}), nil
}

// ParsePrivateKey reads a checkpoint signing key: one PEM block of type
// PRIVATE KEY holding a PKCS#8 Ed25519 key.
func ParsePrivateKey(data []byte) (ed25519.PrivateKey, error) {
	der, err := onePEM(data, PrivateKeyPEMType, "PKCS#8")
	if err != nil {
		return nil, err
	}
	k, err := x509.ParsePKCS8PrivateKey(der)
	if err != nil {
		return nil, errors.New("not a PKCS#8 private key")
	}
	key, ok := k.(ed25519.PrivateKey)
	if !ok {
		return nil, fmt.Errorf("a PKCS#8 key of type %T, want Ed25519", k)
	}
	return key, nil
}

// ParsePublicKey reads a checkpoint verification key: one PEM block of
// type PUBLIC KEY holding a PKIX Ed25519 key.
func ParsePublicKey(data []byte) (ed25519.PublicKey, error) {
	der, err := onePEM(data, PublicKeyPEMType, "PKIX")
	if err != nil {
		return nil, err
	}
	k, err := x509.ParsePKIXPublicKey(der)
	if err != nil {
		return nil, errors.New("not a PKIX public key")
	}
	pub, ok := k.(ed25519.PublicKey)
	if !ok {
		return nil, fmt.Errorf("a PKIX key of type %T, want Ed25519", k)
	}
	return pub, nil
}

// onePEM returns the DER of the only PEM block of data, which must be of
// type typ. Its errors never quote the data: it may be a private key.
func onePEM(data []byte, typ, format string) ([]byte, error) {
	b, rest := pem.Decode(data)
	switch {
	case b == nil:
		return nil, fmt.Errorf("not PEM: want a %q block (%s)", typ, format)
	case b.Type != typ:
		return nil, fmt.Errorf("a PEM block of type %q, want %q (%s)", b.Type, typ, format)
	}
	if extra, _ := pem.Decode(rest); extra != nil {
		return nil, errors.New("more than one PEM block")
	}
	return b.Bytes, nil
}
