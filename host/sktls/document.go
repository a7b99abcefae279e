package sktls

import (
	"crypto/x509"
	"time"
)

// Document is GET /sk/tls and the `sk_tls` event: the current server's pinned identity beside
// the one it presented last.
type Document struct {
	Server string `json:"server"` // host:port of the current server, "" before any
	Mode   string `json:"mode"`   // sk.tls_trust
	State  string `json:"state"`  // none, pending, trusted, mismatch
	// Anchor is the kind of anchor in force for the server: "ca" or "leaf" (a tofu pin),
	// "ca" (mode ca), "bundle", or null (tofu with nothing pinned yet).
	Anchor    *string    `json:"anchor"`
	Pinned    *Pinned    `json:"pinned"`
	Presented *Presented `json:"presented"`
	// CAs are the CAs the device holds: from sk.ca_pem (source "config") and from PUT
	// /sk/tls/ca (source "operator"). DELETE /sk/tls forgets pins only; both kinds stay.
	CAs   []CA   `json:"cas"`
	Error string `json:"error"` // why the last handshake was refused, or why a stored anchor is unusable
}

// Pinned is a tofu pin. For a CA anchor the identity is the CA's and Names are the leaf names
// it is trusted for; for a leaf anchor the identity is the leaf's and SHA256 is the pin.
type Pinned struct {
	Kind string `json:"kind"`
	Identity
	Names    []string  `json:"names"`
	PinnedAt time.Time `json:"pinned_at"`
}

// Presented is the chain the server presented at its last handshake.
type Presented struct {
	Identity
	// CA is the highest CA certificate of the chain, null when the chain has none.
	CA          *Identity `json:"ca"`
	ChainLength int       `json:"chain_length"`
	SeenAt      time.Time `json:"seen_at"`
}

// CA is one CA certificate the device holds.
type CA struct {
	Identity
	Source string `json:"source"` // config or operator
}

// Document builds the /sk/tls document.
func (m *Manager) Document() Document {
	m.mu.Lock()
	defer m.mu.Unlock()
	mode := m.modeLocked()
	cfgCAs := m.configCAsLocked()
	d := Document{Server: m.current, Mode: mode, State: StateNone, CAs: []CA{}}
	for _, c := range cfgCAs {
		d.CAs = append(d.CAs, CA{Identity: identityOf(c), Source: "config"})
	}
	for _, c := range m.operator {
		d.CAs = append(d.CAs, CA{Identity: identityOf(c), Source: "operator"})
	}
	if p := m.pins[m.current]; p != nil {
		pn := &Pinned{Kind: p.Kind, Identity: identityOf(p.Cert), PinnedAt: p.PinnedAt.UTC()}
		if p.Kind == KindCA {
			pn.Names = p.SANs
		} else {
			pn.Names = pn.SANs
		}
		d.Pinned = pn
	}
	switch mode {
	case ModeCA:
		d.Anchor = ptr(KindCA)
	case ModeBundle:
		d.Anchor = ptr(ModeBundle)
	default:
		if d.Pinned != nil {
			d.Anchor = ptr(d.Pinned.Kind)
		}
	}
	if hs := m.hosts[m.current]; hs != nil {
		d.State, d.Error = hs.state, hs.err
		if len(hs.presented) > 0 {
			d.Presented = &Presented{Identity: identityOf(hs.presented[0]), ChainLength: len(hs.presented), SeenAt: hs.seenAt.UTC()}
			if ca := highestCA(hs.presented); ca != nil {
				id := identityOf(ca)
				d.Presented.CA = &id
			}
		}
	}
	if err := m.broken[m.current]; err != nil && mode == ModeTOFU && d.Error == "" {
		d.Error = "stored pin unreadable (DELETE /sk/tls trusts the server again): " + err.Error()
	}
	if m.cfgErr != nil && mode == ModeCA && d.Error == "" {
		d.Error = m.cfgErr.Error()
	}
	return d
}

func highestCA(chain []*x509.Certificate) *x509.Certificate {
	for i := len(chain) - 1; i >= 1; i-- {
		if isCA(chain[i]) {
			return chain[i]
		}
	}
	return nil
}

func ptr[T any](v T) *T { return &v }
