package sktls

import (
	"bytes"
	"devhost/host/signalk/sktest/testcert"
	"slices"
	"testing"
	"time"
)

// FuzzParseCertificatesPEM: the PEM decoder of PUT /sk/tls/ca and sk.ca_pem never panics,
// never accepts more than MaxCAPEM bytes, and what it accepts survives its own encoding.
func FuzzParseCertificatesPEM(f *testing.F) {
	ca := testcert.NewCA(f, "Fuzz CA")
	good := pemOf(ca.Cert)
	f.Add([]byte(good))
	f.Add([]byte(good + good))
	f.Add([]byte("\n  " + good + "\r\n"))
	f.Add([]byte(good + "x"))
	f.Add([]byte("-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n"))
	f.Add([]byte("-----BEGIN PRIVATE KEY-----\nAAAA\n-----END PRIVATE KEY-----\n"))
	f.Add([]byte("-----BEGIN CERTIFICATE-----\nProc-Type: 4,ENCRYPTED\n\nAAAA\n-----END CERTIFICATE-----\n"))
	f.Add([]byte(""))
	f.Add([]byte("-----BEGIN "))
	f.Fuzz(func(t *testing.T, b []byte) {
		certs, err := ParseCertificatesPEM(b)
		if err != nil {
			if certs != nil {
				t.Fatal("certificates returned with an error")
			}
			return
		}
		if len(b) > MaxCAPEM || len(certs) == 0 {
			t.Fatalf("accepted %d bytes, %d certificates", len(b), len(certs))
		}
		again, err := ParseCertificatesPEM([]byte(encodePEM(certs)))
		if err != nil || len(again) != len(certs) {
			t.Fatalf("re-encoding does not parse: %v", err)
		}
		for i := range certs {
			if !bytes.Equal(certs[i].Raw, again[i].Raw) {
				t.Fatal("re-encoding changed a certificate")
			}
		}
	})
}

// FuzzDecodeAnchor: a stored anchor, whatever the bytes, decodes to a usable anchor or an
// error, and a decoded anchor encodes back to itself.
func FuzzDecodeAnchor(f *testing.F) {
	ca := testcert.NewCA(f, "Fuzz CA")
	leaf := ca.Issue(f, testcert.Loopback)
	now := time.Unix(1700000000, 0).UTC()
	for _, a := range []*anchor{
		{Kind: KindCA, Cert: ca.Cert, SANs: []string{"127.0.0.1", "localhost"}, PinnedAt: now},
		{Kind: KindLeaf, Cert: leaf.Leaf, PinnedAt: now},
	} {
		s, err := encodeAnchor(a)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(s)
	}
	f.Add(`{"v":1,"kind":"ca","cert":"","sans":["a"]}`)
	f.Add(`{"v":1,"kind":"leaf","cert":"AAAA"}`)
	f.Add(`{"v":2}`)
	f.Add(`{"v":1,"kind":"ca","cert":"AAAA","sans":["B","a"]} {}`)
	f.Add(`null`)
	f.Add(``)
	f.Fuzz(func(t *testing.T, s string) {
		a, err := decodeAnchor(s)
		if err != nil {
			if a != nil {
				t.Fatal("anchor returned with an error")
			}
			return
		}
		if a.Cert == nil || (a.Kind != KindCA && a.Kind != KindLeaf) {
			t.Fatalf("unusable anchor %+v", a)
		}
		if a.Kind == KindCA && (len(a.SANs) == 0 || !isCA(a.Cert)) {
			t.Fatal("CA anchor without names or CA")
		}
		enc, err := encodeAnchor(a)
		if err != nil {
			t.Fatal(err)
		}
		b, err := decodeAnchor(enc)
		if err != nil || b.Kind != a.Kind || !bytes.Equal(b.Cert.Raw, a.Cert.Raw) || !slices.Equal(b.SANs, a.SANs) || !b.PinnedAt.Equal(a.PinnedAt) {
			t.Fatalf("round trip: %v", err)
		}
	})
}

// FuzzStatusPrefix: the proof recogniser agrees with a direct reading of the status line.
func FuzzStatusPrefix(f *testing.F) {
	f.Add([]byte("HTTP/1.1 200 OK"))
	f.Add([]byte("HTTP/1.0 101\r"))
	f.Add([]byte("HTTP/1.1 2"))
	f.Add([]byte("HTTP/2 200 "))
	f.Fuzz(func(t *testing.T, b []byte) {
		if len(b) > statusLineLen {
			b = b[:statusLineLen]
		}
		got := isStatusPrefix(b)
		want := true
		tmpl := "HTTP/1.x NNN "
		for i, ch := range b {
			switch tmpl[i] {
			case 'x':
				want = want && (ch == '0' || ch == '1')
			case 'N':
				lo := byte('0')
				if i == 9 {
					lo = '1'
				}
				hi := byte('9')
				if i == 9 {
					hi = '5'
				}
				want = want && ch >= lo && ch <= hi
			case ' ':
				want = want && (ch == ' ' || (i == 12 && ch == '\r'))
			default:
				want = want && ch == tmpl[i]
			}
		}
		if got != want {
			t.Fatalf("%q: recogniser %v, reading %v", b, got, want)
		}
	})
}
