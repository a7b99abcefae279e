package pemcert

import (
	"encoding/pem"
	"strings"
	"testing"

	"devhost/host/signalk/sktest/testcert"
)

// TestParse: each refusal reason is named in the error; two certificates come back in order.
func TestParse(t *testing.T) {
	a, b := testcert.NewCA(t, "A"), testcert.NewCA(t, "B")
	cert := func(der []byte) string {
		return string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}))
	}
	headed := string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Headers: map[string]string{"Proc-Type": "4,ENCRYPTED"}, Bytes: a.Cert.Raw}))
	for text, reason := range map[string]string{
		"":                                 "no CERTIFICATE block",
		"hello":                            "text outside a PEM block",
		"-----BEGIN CERTIFICATE-----\nAAA": "malformed PEM block",
		cert(a.Cert.Raw) + "-----BEGIN RSA PRIVATE KEY-----\nAQID\n-----END RSA PRIVATE KEY-----\n": `"RSA PRIVATE KEY" is not a CERTIFICATE`,
		headed:                          "headers",
		cert([]byte{0x30, 0x03, 1}):     "certificate 1",
		strings.Repeat(" ", MaxBytes+1): "at most 4096",
	} {
		if _, err := Parse([]byte(text)); err == nil || !strings.Contains(err.Error(), reason) {
			t.Errorf("Parse(%.40q) = %v, want an error saying %q", text, err, reason)
		}
	}
	certs, err := Parse([]byte("\n" + cert(a.Cert.Raw) + "\r\n" + cert(b.Cert.Raw)))
	if err != nil || len(certs) != 2 || !certs[0].Equal(a.Cert) || !certs[1].Equal(b.Cert) {
		t.Fatalf("two CAs: %v, %d certificates", err, len(certs))
	}
}
