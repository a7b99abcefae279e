package sktls

import (
	"bytes"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"slices"
	"time"
)

// Trust modes (sk.tls_trust).
const (
	ModeTOFU   = "tofu"
	ModeCA     = "ca"
	ModeBundle = "bundle"
)

// CertRetry is the flat retry interval of the token state `cert_error`.
const CertRetry = 60 * time.Second

// Reasons a CertError carries.
const (
	ReasonMismatch      = "mismatch"       // the server no longer matches its pinned anchor
	ReasonUnreadablePin = "unreadable_pin" // the stored pin cannot be decoded
	ReasonNoAnchor      = "no_anchor"      // `ca` mode without any CA
	ReasonUntrusted     = "untrusted"      // the chain does not verify to the mode's anchors
	ReasonNoCertificate = "no_certificate" // the server presented nothing
)

// CertError is a TLS connection refused by the device's certificate check: the token machine's
// `cert_error` (token kept, retry flat CertRetry, no plaintext fallback). Every other dial or
// handshake failure is an ordinary transport error.
type CertError struct {
	Addr   string // host:port dialled
	Mode   string // sk.tls_trust at the time
	Reason string
	Err    error // the verification detail, when there is one
}

func (e *CertError) Error() string {
	msg := fmt.Sprintf("sktls: certificate of %s refused (%s, mode %s)", e.Addr, e.Reason, e.Mode)
	if e.Err != nil {
		msg += ": " + e.Err.Error()
	}
	return msg
}

func (e *CertError) Unwrap() error { return e.Err }

// IsCertError reports whether err (however wrapped, e.g. by net/http or a WebSocket dial) is a
// refusal by the certificate check.
func IsCertError(err error) bool {
	var ce *CertError
	return errors.As(err, &ce)
}

// verdict is the trust decision for one presented chain.
type verdict struct {
	err *CertError
	// capture is the anchor to commit once the connection proves itself (tofu only).
	capture *anchor
}

// trust is what a decision needs, snapshotted under the manager's lock.
type trust struct {
	mode      string
	pin       *anchor // tofu pin of this server
	pinBroken error   // the stored pin exists but cannot be read
	operator  []*x509.Certificate
	config    []*x509.Certificate
	roots     *x509.CertPool // bundle; nil means the system pool
	now       time.Time
}

func judge(addr, host string, chain []*x509.Certificate, t trust) verdict {
	refuse := func(reason string, err error) verdict {
		return verdict{err: &CertError{Addr: addr, Mode: t.mode, Reason: reason, Err: err}}
	}
	if len(chain) == 0 {
		return refuse(ReasonNoCertificate, nil)
	}
	switch t.mode {
	case ModeCA:
		roots := append(slices.Clone(t.config), t.operator...)
		if len(roots) == 0 {
			return refuse(ReasonNoAnchor, errors.New("no CA in sk.ca_pem or set by PUT /sk/tls/ca"))
		}
		if err := verifyTo(chain, roots); err != nil {
			return refuse(ReasonUntrusted, err)
		}
		return verdict{}
	case ModeBundle:
		opts := x509.VerifyOptions{
			Roots:         t.roots,
			Intermediates: pool(chain[1:]),
			DNSName:       host,
			CurrentTime:   t.now,
			KeyUsages:     []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		}
		if _, err := chain[0].Verify(opts); err != nil {
			return refuse(ReasonUntrusted, err)
		}
		return verdict{}
	default: // tofu
		if t.pinBroken != nil {
			return refuse(ReasonUnreadablePin, t.pinBroken)
		}
		if t.pin != nil {
			if err := matches(t.pin, chain); err == nil {
				return verdict{}
			} else if len(t.operator) > 0 && verifyTo(chain, t.operator) == nil {
				// The operator vouched for this CA: the replacement is trusted and, once
				// proven, becomes the pin.
				return verdict{capture: captureAnchor(chain, t.now)}
			} else {
				return refuse(ReasonMismatch, err)
			}
		}
		return verdict{capture: captureAnchor(chain, t.now)}
	}
}

// matches checks a presented chain against a pinned anchor.
func matches(a *anchor, chain []*x509.Certificate) error {
	leaf := chain[0]
	if a.Kind == KindLeaf {
		if bytes.Equal(leaf.Raw, a.Cert.Raw) {
			return nil
		}
		return fmt.Errorf("leaf %s is not the pinned %s", fingerprint(leaf)[:16], fingerprint(a.Cert)[:16])
	}
	if err := verifyTo(chain, []*x509.Certificate{a.Cert}); err != nil {
		return fmt.Errorf("leaf does not chain to the pinned CA %q: %w", a.Cert.Subject.String(), err)
	}
	if got := sanSet(leaf); !slices.Equal(got, a.SANs) {
		return fmt.Errorf("leaf names %v differ from the pinned %v", got, a.SANs)
	}
	return nil
}

// captureAnchor chooses the anchor a first use pins: the highest CA of the presented chain with
// the leaf's names when the leaf has names and really chains to that CA; otherwise the leaf.
func captureAnchor(chain []*x509.Certificate, now time.Time) *anchor {
	leaf := chain[0]
	sans := sanSet(leaf)
	if len(sans) > 0 {
		for i := len(chain) - 1; i >= 1; i-- {
			if !isCA(chain[i]) {
				continue
			}
			if verifyTo(chain, []*x509.Certificate{chain[i]}) == nil {
				return &anchor{Kind: KindCA, Cert: chain[i], SANs: sans, PinnedAt: now}
			}
			break
		}
	}
	return &anchor{Kind: KindLeaf, Cert: leaf, PinnedAt: now}
}

// verifyTo checks that the leaf chains to one of roots through the presented intermediates.
// Outside `bundle` the anchor is the trust decision and the device's clock may be unset, so
// validity dates are not judged: the chain is checked at the leaf's own start of validity,
// when a correctly issued chain is valid throughout. Names are judged by the caller.
func verifyTo(chain []*x509.Certificate, roots []*x509.Certificate) error {
	leaf := chain[0]
	_, err := leaf.Verify(x509.VerifyOptions{
		Roots:         pool(roots),
		Intermediates: pool(chain[1:]),
		CurrentTime:   leaf.NotBefore,
		KeyUsages:     []x509.ExtKeyUsage{x509.ExtKeyUsageAny},
	})
	return err
}

func pool(certs []*x509.Certificate) *x509.CertPool {
	p := x509.NewCertPool()
	for _, c := range certs {
		p.AddCert(c)
	}
	return p
}

// hostOf is the host part of addr for SNI and the bundle name check.
func hostOf(addr string) string {
	h, _, err := net.SplitHostPort(addr)
	if err != nil {
		return addr
	}
	return h
}
