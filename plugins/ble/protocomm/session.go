// Package protocomm is the device side of Espressif's protocomm as ESP-IDF's unified
// provisioning speaks it: the security session (security 0, or security 1: X25519 key
// exchange with the proof of possession folded into the shared key, then AES-256-CTR over
// everything that follows) and the endpoints proto-ver, prov-session, prov-config, prov-scan
// and prov-ctrl. It knows no transport: the SoftAP (HTTP) and BLE (GATT) transports hand it
// one request body per exchange with the Session that the connection owns.
//
// Wire facts (from ESP-IDF's protocomm_security1 and esp_prov): the AES key is the X25519
// shared secret XOR SHA-256(PoP) (no XOR without a PoP); the 16-byte device_random is the
// initial CTR counter block; one keystream serves the whole session, consumed in the order
// the messages pass (client verify, device verify, then each request and its response). A
// refused exchange ends the session, as on the device: the client starts a new one.
package protocomm

import (
	"bytes"
	"crypto/aes"
	"crypto/cipher"
	"crypto/ecdh"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"errors"
	"fmt"
	"io"

	"google.golang.org/protobuf/encoding/protowire"
)

// Errors a transport maps to its refusal (HTTP: a non-200 answer; GATT: an error response).
var (
	// ErrProto is a body that is not the protocol's message or not the one expected now.
	ErrProto = errors.New("protocomm: malformed or unexpected message")
	// ErrSession is a request on an endpoint that needs an established session.
	ErrSession = errors.New("protocomm: no established session")
	// ErrPoP is a security 1 handshake whose client verification failed (wrong PoP).
	ErrPoP = errors.New("protocomm: client verification failed (wrong proof of possession)")
	// ErrScheme is a session request for a security scheme this device does not run.
	ErrScheme = errors.New("protocomm: security scheme not offered")
)

// Security schemes.
const (
	Sec0 = 0
	Sec1 = 1
)

type sessState int

const (
	stateNone sessState = iota
	stateCmd0Done
	stateEstablished
)

// Session is one client's security session. It is not safe for concurrent use: a transport
// serialises the exchanges of one connection.
type Session struct {
	sec    int
	pop    []byte
	rand   io.Reader
	state  sessState
	stream cipher.Stream
	devPub []byte
	cliPub []byte
}

// NewSession starts a session of the given scheme; pop is the proof of possession (security 1;
// empty means none). random is the entropy source (nil: crypto/rand), fixed only by tests.
func NewSession(sec int, pop []byte, random io.Reader) *Session {
	if random == nil {
		random = rand.Reader
	}
	return &Session{sec: sec, pop: bytes.Clone(pop), rand: random}
}

// Established reports whether the handshake completed.
func (s *Session) Established() bool { return s.state == stateEstablished }

// reset forgets the handshake: a refused exchange ends the session.
func (s *Session) reset() {
	s.state, s.stream, s.devPub, s.cliPub = stateNone, nil, nil, nil
}

// Handshake answers one prov-session body.
func (s *Session) Handshake(body []byte) ([]byte, error) {
	req, err := decode(body)
	if err != nil {
		s.reset()
		return nil, fmt.Errorf("%w: session data: %v", ErrProto, err)
	}
	if ver := req.varint(fSecVer); ver != uint64(s.sec) {
		s.reset()
		return nil, fmt.Errorf("%w: client asks for security %d, device runs %d", ErrScheme, int32(ver), s.sec)
	}
	switch s.sec {
	case Sec0:
		return s.sec0(req)
	case Sec1:
		return s.sec1(req)
	}
	return nil, fmt.Errorf("%w: security %d", ErrScheme, s.sec)
}

// secPayload is the SessionData's Sec0Payload or Sec1Payload (field num) with its type and
// the member set among members; an error unless it is there.
func secPayload(req message, num protowire.Number, members ...protowire.Number) (uint64, protowire.Number, message, error) {
	set, p, err := req.oneof(fSec0, fSec1)
	if err == nil && set != num {
		err = fmt.Errorf("security %d payload missing", num-fSec0)
	}
	if err != nil {
		return 0, 0, nil, err
	}
	member, sub, err := p.oneof(members...)
	return p.varint(fMsg), member, sub, err
}

func (s *Session) sec0(req message) ([]byte, error) {
	msgType, member, _, err := secPayload(req, fSec0, fS0Cmd, fS0Resp)
	if err != nil || msgType != s0Command || member != fS0Cmd {
		s.reset()
		return nil, fmt.Errorf("%w: security 0 expects S0_Session_Command", ErrProto)
	}
	s.state = stateEstablished
	resp := enc(nil).varint(fMsg, s0Response).msg(fS0Resp, enc(nil).varint(1, uint64(StatusSuccess))) // S0SessionResp.status
	return enc(nil).varint(fSecVer, Sec0).msg(fSec0, resp), nil
}

func (s *Session) sec1(req message) ([]byte, error) {
	msgType, member, sub, err := secPayload(req, fSec1, fSC0, fSR0, fSC1, fSR1)
	if err != nil {
		s.reset()
		return nil, fmt.Errorf("%w: security 1: %v", ErrProto, err)
	}
	switch {
	case msgType == s1Command0 && member == fSC0:
		// A new SessionCmd0 starts over, whatever the state (the client reconnected).
		s.reset()
		return s.cmd0(sub)
	case msgType == s1Command1 && member == fSC1 && s.state == stateCmd0Done:
		return s.cmd1(sub)
	}
	s.reset()
	return nil, fmt.Errorf("%w: security 1 message %d in the wrong state", ErrProto, int32(msgType))
}

// sec1Response is a SessionData of security 1 carrying a session response.
func sec1Response(msgType uint64, member protowire.Number, resp enc) []byte {
	return enc(nil).varint(fSecVer, Sec1).msg(fSec1, enc(nil).varint(fMsg, msgType).msg(member, resp))
}

func (s *Session) cmd0(c message) ([]byte, error) {
	cli, err := ecdh.X25519().NewPublicKey(c.bytes(1)) // SessionCmd0.client_pubkey
	if err != nil {
		return nil, fmt.Errorf("%w: client public key: %v", ErrProto, err)
	}
	priv, err := NewKey(s.rand)
	if err != nil {
		return nil, fmt.Errorf("protocomm: device key: %w", err)
	}
	devRandom := make([]byte, aes.BlockSize)
	if _, err := io.ReadFull(s.rand, devRandom); err != nil {
		return nil, fmt.Errorf("protocomm: device random: %w", err)
	}
	shared, err := priv.ECDH(cli)
	if err != nil {
		return nil, fmt.Errorf("%w: key exchange: %v", ErrProto, err)
	}
	stream, err := Stream(shared, s.pop, devRandom)
	if err != nil {
		return nil, err
	}
	s.stream, s.devPub, s.cliPub, s.state = stream, priv.PublicKey().Bytes(), cli.Bytes(), stateCmd0Done
	// SessionResp0: status 1, device_pubkey 3, device_random 4.
	return sec1Response(s1Response0, fSR0, enc(nil).varint(1, uint64(StatusSuccess)).bytes(3, s.devPub).bytes(4, devRandom)), nil
}

func (s *Session) cmd1(c message) ([]byte, error) {
	got := c.bytes(2) // SessionCmd1.client_verify_data
	check := make([]byte, len(got))
	s.stream.XORKeyStream(check, got)
	if subtle.ConstantTimeCompare(check, s.devPub) != 1 {
		s.reset()
		return nil, ErrPoP
	}
	verify := make([]byte, len(s.cliPub))
	s.stream.XORKeyStream(verify, s.cliPub)
	s.state = stateEstablished
	// SessionResp1: status 1, device_verify_data 3.
	return sec1Response(s1Response1, fSR1, enc(nil).varint(1, uint64(StatusSuccess)).bytes(3, verify)), nil
}

// Crypt passes data through the session's keystream (security 1; security 0 returns it as
// it is). Decrypting a request and encrypting its response are both this call, in order.
func (s *Session) Crypt(data []byte) ([]byte, error) {
	if s.state != stateEstablished {
		return nil, ErrSession
	}
	if s.stream == nil {
		return bytes.Clone(data), nil
	}
	out := make([]byte, len(data))
	s.stream.XORKeyStream(out, data)
	return out, nil
}

// Stream is security 1's cipher: AES-256-CTR keyed with the X25519 shared secret XOR
// SHA-256(pop) (no XOR for an empty pop), the 16-byte device random as the counter block.
// The client side (devctl prov) builds the same stream.
func Stream(shared, pop, devRandom []byte) (cipher.Stream, error) {
	if len(shared) != 32 || len(devRandom) != aes.BlockSize {
		return nil, fmt.Errorf("%w: key %d bytes, random %d bytes", ErrProto, len(shared), len(devRandom))
	}
	key := bytes.Clone(shared)
	if len(pop) > 0 {
		h := sha256.Sum256(pop)
		for i := range key {
			key[i] ^= h[i]
		}
	}
	block, err := aes.NewCipher(key)
	if err != nil {
		return nil, fmt.Errorf("protocomm: aes: %w", err)
	}
	return cipher.NewCTR(block, devRandom), nil
}

// NewKey reads an X25519 private key from random (32 bytes, clamped by X25519 itself), so a
// test's fixed reader gives a known key. The client side makes its key the same way.
func NewKey(random io.Reader) (*ecdh.PrivateKey, error) {
	b := make([]byte, 32)
	if _, err := io.ReadFull(random, b); err != nil {
		return nil, fmt.Errorf("protocomm: key: %w", err)
	}
	k, err := ecdh.X25519().NewPrivateKey(b)
	if err != nil {
		return nil, fmt.Errorf("protocomm: key: %w", err)
	}
	return k, nil
}
