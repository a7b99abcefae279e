// Package pemcert reads the CA certificates an operator hands the device as PEM text. One
// rule serves both ways in: PUT /sk/tls/ca (host/sktls) and the sk.ca_pem configuration key
// (host/config, which checks it on every write), so a CA one of them takes the other takes too.
package pemcert

import (
	"bytes"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
)

// MaxBytes is the largest PEM text taken, the bound of sk.ca_pem.
const MaxBytes = 4096

// Parse decodes a PEM text holding one or more CERTIFICATE blocks and nothing else but
// whitespace. Other block types (a private key pasted by mistake), PEM headers, certificates
// that do not parse and text outside the blocks are refused, so what is stored is exactly
// what the operator meant to trust. The error says what was wrong, for the operator.
func Parse(b []byte) ([]*x509.Certificate, error) {
	if len(b) > MaxBytes {
		return nil, fmt.Errorf("PEM is %d bytes, at most %d", len(b), MaxBytes)
	}
	var out []*x509.Certificate
	rest := b
	for {
		trimmed := bytes.TrimLeft(rest, " \t\r\n")
		if len(trimmed) == 0 {
			break
		}
		if !bytes.HasPrefix(trimmed, []byte("-----BEGIN ")) {
			return nil, errors.New("text outside a PEM block")
		}
		blk, next := pem.Decode(trimmed)
		if blk == nil {
			return nil, errors.New("malformed PEM block")
		}
		if blk.Type != "CERTIFICATE" {
			return nil, fmt.Errorf("PEM block %q is not a CERTIFICATE", blk.Type)
		}
		if len(blk.Headers) != 0 {
			return nil, errors.New("PEM headers are not allowed")
		}
		c, err := x509.ParseCertificate(blk.Bytes)
		if err != nil {
			return nil, fmt.Errorf("certificate %d: %w", len(out)+1, err)
		}
		out = append(out, c)
		rest = next
	}
	if len(out) == 0 {
		return nil, errors.New("no CERTIFICATE block")
	}
	return out, nil
}
