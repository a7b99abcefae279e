// Package testcert issues the certificates the TLS tests serve, for host/sktls's own tests
// and the device's end-to-end tests against the real signalk-server: a test CA, leaves it
// signs and self-signed server certificates, each with a fresh ECDSA P-256 key and a random
// serial, so two CAs of the same name are still different CAs.
package testcert

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/hex"
	"encoding/pem"
	"math/big"
	"net"
	"testing"
	"time"

	"devhost/host/signalk/sktest"
)

// CA is a test certificate authority.
type CA struct {
	Cert *x509.Certificate
	Key  *ecdsa.PrivateKey
}

// NewCA makes a CA named cn, valid from two hours ago for ten years.
func NewCA(t testing.TB, cn string) *CA {
	t.Helper()
	k := newKey(t)
	tmpl := &x509.Certificate{
		SerialNumber:          serial(t),
		Subject:               pkix.Name{CommonName: cn, Organization: []string{"devhost test"}},
		NotBefore:             time.Now().Add(-2 * time.Hour),
		NotAfter:              time.Now().Add(10 * 365 * 24 * time.Hour),
		IsCA:                  true,
		BasicConstraintsValid: true,
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
	}
	return &CA{Cert: sign(t, tmpl, tmpl, &k.PublicKey, k), Key: k}
}

// Leaf shapes a server certificate; the zero value is "signalk" with no names, valid from an
// hour ago for a year.
type Leaf struct {
	CN        string
	DNS       []string
	IPs       []string
	NotBefore time.Time
	NotAfter  time.Time
	NoChain   bool // send only the leaf, not the CA
}

// Loopback names the addresses a test server on this machine answers on.
var Loopback = Leaf{DNS: []string{"localhost", "sk.local"}, IPs: []string{"127.0.0.1"}}

// Issue signs a server certificate for o with a new key; the chain sent carries the CA
// unless o.NoChain.
func (ca *CA) Issue(t testing.TB, o Leaf) tls.Certificate {
	t.Helper()
	k := newKey(t)
	c := sign(t, o.template(t), ca.Cert, &k.PublicKey, ca.Key)
	chain := [][]byte{c.Raw}
	if !o.NoChain {
		chain = append(chain, ca.Cert.Raw)
	}
	return tls.Certificate{Certificate: chain, PrivateKey: k, Leaf: c}
}

// SelfSigned is a self-signed server certificate (not a CA) for o.
func SelfSigned(t testing.TB, o Leaf) tls.Certificate {
	t.Helper()
	k := newKey(t)
	tmpl := o.template(t)
	c := sign(t, tmpl, tmpl, &k.PublicKey, k)
	return tls.Certificate{Certificate: [][]byte{c.Raw}, PrivateKey: k, Leaf: c}
}

// Files is c as signalk-server's ssl-cert.pem (the chain, leaf first) and ssl-key.pem.
func Files(t testing.TB, c tls.Certificate) *sktest.TLSFiles {
	t.Helper()
	var cert bytes.Buffer
	for _, der := range c.Certificate {
		if err := pem.Encode(&cert, &pem.Block{Type: "CERTIFICATE", Bytes: der}); err != nil {
			t.Fatal(err)
		}
	}
	key := must(x509.MarshalPKCS8PrivateKey(c.PrivateKey))(t)
	return &sktest.TLSFiles{CertPEM: cert.Bytes(), KeyPEM: pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: key})}
}

// Fingerprint is the certificate's SHA-256 in lowercase hex, as GET /sk/tls shows it.
func Fingerprint(c *x509.Certificate) string {
	sum := sha256.Sum256(c.Raw)
	return hex.EncodeToString(sum[:])
}

func (o Leaf) template(t testing.TB) *x509.Certificate {
	if o.CN == "" {
		o.CN = "signalk"
	}
	if o.NotBefore.IsZero() {
		o.NotBefore = time.Now().Add(-time.Hour)
	}
	if o.NotAfter.IsZero() {
		o.NotAfter = time.Now().Add(365 * 24 * time.Hour)
	}
	tmpl := &x509.Certificate{
		SerialNumber: serial(t),
		Subject:      pkix.Name{CommonName: o.CN},
		NotBefore:    o.NotBefore,
		NotAfter:     o.NotAfter,
		DNSNames:     o.DNS,
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	for _, s := range o.IPs {
		tmpl.IPAddresses = append(tmpl.IPAddresses, net.ParseIP(s))
	}
	return tmpl
}

func newKey(t testing.TB) *ecdsa.PrivateKey {
	t.Helper()
	return must(ecdsa.GenerateKey(elliptic.P256(), rand.Reader))(t)
}

func serial(t testing.TB) *big.Int {
	t.Helper()
	return must(rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 62)))(t)
}

func sign(t testing.TB, tmpl, parent *x509.Certificate, pub any, signer *ecdsa.PrivateKey) *x509.Certificate {
	t.Helper()
	der := must(x509.CreateCertificate(rand.Reader, tmpl, parent, pub, signer))(t)
	return must(x509.ParseCertificate(der))(t)
}

// must(v, err)(t) is v, failing t on err: every step here either works or the test cannot
// go on. (The result is a function of t because a call answering (v, err) must be the only
// argument of the call it feeds.)
func must[T any](v T, err error) func(testing.TB) T {
	return func(t testing.TB) T {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
}
