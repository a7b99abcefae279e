// Package sktls owns the Signal K client's TLS: the scheme decision under sk.scheme (with the
// one unauthenticated probe), the trust modes of sk.tls_trust (tofu, ca, bundle), first-use
// anchors (CA anchors and leaf anchors) kept in device state, the rule that a capture is
// committed only after the connection proved itself, the device-wide one-handshake gate with
// the tlsMemory condition, the classification of trust refusals (the token state cert_error),
// the /sk/tls document with its `sk_tls` event, and the endpoints GET and DELETE /sk/tls and
// PUT /sk/tls/ca.
//
// Callers dial with Manager.DialTLSContext (http.Transport.DialTLSContext,
// websocket.Dialer.NetDialTLSContext); every other TLS client of the device shares the Gate.
//
// Choices where the spec is silent or leaves room:
//
//   - Proof. The connection DialTLSContext returns watches the first bytes the server sends: a
//     well-formed HTTP/1.x status line (any status, a WebSocket 101 or a 401 included) is the
//     proof, and the capture of that very connection is committed then. A hang-up or non-HTTP
//     bytes commit nothing. Proven and ProvenConn exist for callers that handshake themselves.
//     A capture judged before another pin was committed for the same server is dropped, so two
//     racing first uses with different certificates cannot overwrite each other.
//   - Pins are kept per server (host:port, host lower-cased) under state/sk/tls/pin/<host:port>
//     as JSON with the anchor certificate's DER, so moving between discovered servers does not
//     turn into a mismatch. At most 8 servers keep a pin; pinning a ninth forgets the oldest.
//     A stored pin that cannot be read refuses its server (reason unreadable_pin) until DELETE
//     /sk/tls: it is never silently replaced by a new first use.
//   - CA anchor: the highest certificate of the presented chain (not the leaf itself) whose
//     basic constraints say CA, when the leaf has DNS or IP SANs and verifies to it through the
//     presented intermediates; the anchored names are the leaf's DNS names (lower-case, no
//     trailing dot) and IP addresses. A renewal must be issued under that CA and carry exactly
//     the same set of names (order and case do not matter). Otherwise the anchor is the leaf's
//     exact bytes (its SHA-256 is shown).
//   - Validity dates are judged only in `bundle`. In tofu and ca the anchor is the trust
//     decision and a boat device often has no time yet: chains are checked at the leaf's own
//     start of validity, and a leaf anchor matches whatever its dates.
//   - The name check (SANs, never the common name) runs only in `bundle`, against the host
//     dialled. TLS 1.2 is the minimum; sessions are not resumed, so every connection is judged.
//   - The CA of PUT /sk/tls/ca lives in device state (state/sk/tls/ca), not in the exported
//     configuration. In `ca` it is trusted beside sk.ca_pem. In `tofu` it vouches for a server
//     whose certificate chains to it even when the pin differs; once that connection proves
//     itself its capture replaces the pin. `bundle` uses public roots only and ignores both.
//     PUT /config refuses an sk.ca_pem that is not PEM certificates (the same rule,
//     pemcert.Parse); one stored before that check counts as no CA and the document says why.
//   - PUT /sk/tls/ca takes {"pem": string}: one or more CERTIFICATE blocks (at most 4096 bytes,
//     the sk.ca_pem bound), nothing but whitespace around them, no PEM headers, no other block
//     types (a pasted private key is refused). Any other body, member or value is 400
//     `validation` naming `pem` (or the unknown member, or "" for a body that is not an
//     object). Success is 200 with the /sk/tls document.
//   - DELETE /sk/tls forgets the current server's pin (every pin when no server was used yet),
//     including a pin that cannot be read, then asks the client to retry at once; it answers
//     200 with the /sk/tls document as it is afterwards. The CA of PUT /sk/tls/ca and sk.ca_pem
//     stay: only first-use captures are forgotten, so `ca` mode keeps its anchor. A PUT of
//     another CA replaces the operator's CA.
//     PUT /sk/tls/ca and a change of sk.tls_trust or sk.ca_pem also retry at once, since each
//     may be what clears a cert_error.
//   - The probe keeps the configured host and takes only the port from an https Location; a
//     Location without a port keeps the configured port. Any other HTTP answer (a 30x to http,
//     200, 404, a Go TLS server's 400) means plain http. The https retry counts a completed
//     TLS handshake as the answer; it trusts and records nothing, since the real connection is
//     judged by the anchors. Each leg is bounded by 6 s. Answers are remembered in RAM until
//     sk.scheme, sk.server_host or sk.server_port changes (or ForgetScheme); a guess never is,
//     so the next Resolve asks again.
//   - Gate: one handshake at a time device-wide (the TCP connect is outside it), each bounded
//     by 10 s so a silent server cannot hold the slot. The embedded rule "deferred for lack of
//     contiguous internal RAM" maps to the board's largest free internal block: below 17 KiB
//     (the TLS stack's 16 KiB incoming record buffer plus overhead, one allocation) the
//     handshake waits, re-checking every second, and tlsMemory is warn; it returns to normal
//     when a deferred handshake proceeds. A deferral abandoned by its caller leaves the warn
//     until a handshake proceeds, since the shortage is still there.
//   - The /sk/tls document: server, mode, state (none, pending, trusted, mismatch), anchor
//     (ca, leaf, bundle or null), pinned {kind, subject, issuer, sans, not_before, not_after,
//     sha256, is_ca, names, pinned_at}, presented {the same identity, ca (the chain's highest
//     CA or null), chain_length, seen_at}, cas [{identity, source config|operator}], error.
//     `sk_tls` is published when the pin or CAs change, when the current server changes, and
//     when a handshake changes the state or presents another leaf; a repeat of the same
//     trusted connection publishes nothing.
package sktls
