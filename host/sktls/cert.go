package sktls

import (
	"bytes"
	"crypto/sha256"
	"crypto/x509"
	"encoding/hex"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"net"
	"slices"
	"strings"
	"time"

	"devhost/host/sktls/pemcert"
)

// MaxCAPEM is the largest CA PEM PUT /sk/tls/ca accepts, the same bound as sk.ca_pem.
const MaxCAPEM = pemcert.MaxBytes

// Anchor kinds.
const (
	KindCA   = "ca"
	KindLeaf = "leaf"
)

// Identity describes one certificate for the /sk/tls document.
type Identity struct {
	Subject   string    `json:"subject"`
	Issuer    string    `json:"issuer"`
	SANs      []string  `json:"sans"`
	NotBefore time.Time `json:"not_before"`
	NotAfter  time.Time `json:"not_after"`
	SHA256    string    `json:"sha256"`
	IsCA      bool      `json:"is_ca"`
}

func identityOf(c *x509.Certificate) Identity {
	return Identity{
		Subject:   c.Subject.String(),
		Issuer:    c.Issuer.String(),
		SANs:      sanSet(c),
		NotBefore: c.NotBefore.UTC(),
		NotAfter:  c.NotAfter.UTC(),
		SHA256:    fingerprint(c),
		IsCA:      c.BasicConstraintsValid && c.IsCA,
	}
}

func fingerprint(c *x509.Certificate) string {
	sum := sha256.Sum256(c.Raw)
	return hex.EncodeToString(sum[:])
}

// sanSet is the certificate's subject alternative names that identify a server (DNS names,
// lower-cased without a trailing dot, and IP addresses in canonical form), sorted and without
// duplicates, so two certificates for the same names compare equal whatever their order.
func sanSet(c *x509.Certificate) []string {
	out := make([]string, 0, len(c.DNSNames)+len(c.IPAddresses))
	for _, d := range c.DNSNames {
		out = append(out, strings.TrimSuffix(strings.ToLower(d), "."))
	}
	for _, ip := range c.IPAddresses {
		out = append(out, ip.String())
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// isCA reports whether c may anchor a chain: a certificate whose basic constraints say CA.
func isCA(c *x509.Certificate) bool { return c.BasicConstraintsValid && c.IsCA }

// anchor is a trust anchor for one server. A CA anchor trusts leaves that chain to Cert and
// carry exactly SANs; a leaf anchor trusts exactly the certificate Cert.
type anchor struct {
	Kind     string
	Cert     *x509.Certificate
	SANs     []string
	PinnedAt time.Time
}

// storedAnchor is the anchor's form in the store (JSON; DER as base64).
type storedAnchor struct {
	V        int       `json:"v"`
	Kind     string    `json:"kind"`
	Cert     []byte    `json:"cert"`
	SANs     []string  `json:"sans,omitempty"`
	PinnedAt time.Time `json:"pinned_at"`
}

const anchorVersion = 1

func encodeAnchor(a *anchor) (string, error) {
	b, err := json.Marshal(storedAnchor{V: anchorVersion, Kind: a.Kind, Cert: a.Cert.Raw, SANs: a.SANs, PinnedAt: a.PinnedAt.UTC()})
	if err != nil {
		return "", fmt.Errorf("sktls: encode anchor: %w", err)
	}
	return string(b), nil
}

// errBadAnchor marks a stored anchor that cannot be used.
var errBadAnchor = errors.New("sktls: unreadable stored anchor")

// decodeAnchor parses a stored anchor. Anything that is not exactly what encodeAnchor writes
// is refused: a CA anchor must hold a CA certificate and a non-empty, canonical name set.
func decodeAnchor(s string) (*anchor, error) {
	dec := json.NewDecoder(strings.NewReader(s))
	dec.DisallowUnknownFields()
	var st storedAnchor
	if err := dec.Decode(&st); err != nil {
		return nil, fmt.Errorf("%w: %v", errBadAnchor, err)
	}
	if dec.More() {
		return nil, fmt.Errorf("%w: trailing data", errBadAnchor)
	}
	if st.V != anchorVersion {
		return nil, fmt.Errorf("%w: version %d", errBadAnchor, st.V)
	}
	if len(st.Cert) == 0 {
		return nil, fmt.Errorf("%w: no certificate", errBadAnchor)
	}
	c, err := x509.ParseCertificate(st.Cert)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", errBadAnchor, err)
	}
	a := &anchor{Kind: st.Kind, Cert: c, PinnedAt: st.PinnedAt}
	switch st.Kind {
	case KindCA:
		if !isCA(c) {
			return nil, fmt.Errorf("%w: CA anchor holds a non-CA certificate", errBadAnchor)
		}
		if len(st.SANs) == 0 {
			return nil, fmt.Errorf("%w: CA anchor without names", errBadAnchor)
		}
		canon := slices.Clone(st.SANs)
		for i, n := range canon {
			canon[i] = canonName(n)
		}
		slices.Sort(canon)
		canon = slices.Compact(canon)
		if !slices.Equal(canon, st.SANs) {
			return nil, fmt.Errorf("%w: names not canonical", errBadAnchor)
		}
		a.SANs = st.SANs
	case KindLeaf:
		if len(st.SANs) != 0 {
			return nil, fmt.Errorf("%w: leaf anchor with names", errBadAnchor)
		}
	default:
		return nil, fmt.Errorf("%w: kind %q", errBadAnchor, st.Kind)
	}
	return a, nil
}

// canonName is the sanSet form of one name.
func canonName(n string) string {
	if ip := net.ParseIP(n); ip != nil {
		return ip.String()
	}
	return strings.TrimSuffix(strings.ToLower(n), ".")
}

// ParseCertificatesPEM is the rule of PUT /sk/tls/ca and sk.ca_pem (pemcert.Parse).
func ParseCertificatesPEM(b []byte) ([]*x509.Certificate, error) { return pemcert.Parse(b) }

// encodePEM is the canonical PEM text of certs.
func encodePEM(certs []*x509.Certificate) string {
	var buf bytes.Buffer
	for _, c := range certs {
		_ = pem.Encode(&buf, &pem.Block{Type: "CERTIFICATE", Bytes: c.Raw})
	}
	return buf.String()
}
