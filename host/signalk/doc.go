// Package signalk is the device's Signal K client core and its face to the rest of the device:
// server choice, the access-token state machine (spec "Signal K access token"), the HTTP
// helper to the server, the REST endpoints /sk/status, /sk/servers, /sk/request, /sk/token and
// /sk/put, the SSE events sk, sk_servers and sk_ws, the health conditions skLinkStalled and
// skCertificate, the health sink that turns conditions into Signal K notifications, health
// telemetry, the time fallback from navigation.datetime, and the Go API the device and the
// plugin host publish, subscribe and PUT through. The delta stream itself (host/skstream),
// mDNS discovery (host/skdiscovery) and TLS trust (host/sktls) sit behind small interfaces
// (Stream, Discovery, TLS); StreamFrom and TLSFrom adapt the concrete packages.
//
// Choices where the spec is silent:
//
//   - Device state lives in the store under state/sk/: client_id (the v4 UUID), server/<key>
//     (per server: token, pending href, a refusal), addr/<host:port> (the self URN learned at
//     an address) and current (the last choice, which sk.server_pin keeps across reboots).
//     <key> is the server's self URN. A manual server's URN is unknown until a token is
//     verified (GET /signalk/v1/api/self answers it), so until then its record is keyed
//     "addr:<host>:<port>" and is moved to the URN in one batch when it is learned.
//   - DENIED is remembered per server, so a reboot does not ask again on its own; POST
//     /sk/request forgets the token, the pending request and the refusal, and asks at once.
//     A 403 to the request itself (device requests disabled) is DENIED too.
//   - The plaintext 401 rule applies to 403 as well. A second refusal before the 5 s re-check
//     counts as "two in a row"; any accepted call (a 200, a WebSocket 101) breaks the run.
//     Over https one refusal drops the token at once (no re-check leg). A dropped token sends
//     the device back to IDLE, which asks for access again at once.
//   - The error backoff doubles: 10, 20, 40, 80, 160, 300 s, then stays at 5 min; any answer
//     the machine can act on resets it. The poll delay is 5 s × 1.5 per PENDING answer, capped
//     at 60 s (5, 7.5, 11.25 … 60). VERIFYING without an answer retries on the error backoff
//     (never later than sk.check_s once APPROVED); the token is kept. A poll that gets no usable
//     answer keeps polling; only 404 or a 500 whose text says "not found" forgets the request.
//     A 202 without a PENDING state and an href, an HTML page, junk or an answer over 16 KiB
//     counts as a server error (ERROR with the backoff). The href is polled on the same server
//     (only its path is used), never on a host an answer names.
//   - A certificate refusal in any state enters cert_error (flat 60 s retry, token kept, stream
//     target cleared) and resumes the interrupted flow; RetryNow (DELETE /sk/tls, a new CA)
//     and network-up retry at once.
//   - The stream is given a target while APPROVED or VERIFYING with a token (so a re-check does
//     not drop a working socket) and, without a token, while OPEN; never otherwise.
//   - A transport failure (no HTTP status) marks a discovered server unreachable: it is
//     skipped for 5 minutes, unless every discovered server is skipped (trying one beats none).
//     A server is known by its self URN and by its address (host:port), so one that
//     advertises no self is skipped and kept sticky by address. sk.server_self names one
//     server, so skipping does not apply to it. A server advertised as both
//     _signalk-http._tcp and _signalk-https._tcp (same self, or same host without one) is
//     reached over https only: the token never crosses in clear when TLS is on offer. Among
//     candidates, "sticky" prefers the last choice, then the lowest self URN with a token or
//     pending request; then the master with the lowest self URN; then the lowest self URN.
//     sk.server_pin keeps a discovered choice even when a pass misses it.
//   - A manual server whose probe got no answer is reached over plain http as a guess; the
//     probe runs again after each attempt on the guess (a token call or a stream failure)
//     and at network-up, and its first answer ends the guess.
//   - A stream refused with 401 or 403 sends the token machine to VERIFYING; when the
//     re-check approves the same token, the stream is retried at once.
//   - POST /sk/request takes no body (an empty object is tolerated) and answers 202 with the
//     status document. POST /sk/token {token} answers 200 with the status document when the
//     server accepted it, 202 when it could not be verified yet (kept, VERIFYING or
//     cert_error), 400 validation (path "token") when the server refused it (nothing kept).
//     Both answer 409 conflict without a chosen server.
//   - POST /sk/put {path, value} answers 202 {path, state: PENDING}; 409 conflict while the
//     stream is down, 409 busy with 8 PUTs in flight. GET /sk/put answers the last PUT sent
//     this way: {path, value, state (PENDING, COMPLETED, FAILED, TIMEOUT), statusCode,
//     message, age_s}, or {state: NONE} before any.
//   - /sk/status: server {host, port, scheme, self, source manual|discovered|none,
//     scheme_guessed}, token {state, since_s, next_retry_s (null when nothing is scheduled),
//     client_id, has_token, pending_href, reason, resume (cert_error only)}, ws (the stream's
//     own object), time_subscribed. /sk/servers: {servers: [{self, roles, swname, swvers, host,
//     port, scheme, txt, age_s, skipped_s, chosen}]}.
//   - skLinkStalled counts from the later of "the stream went down" and "the network came up";
//     it clears when the stream reconnects and while the network is down. The notifications
//     path uses the effective hostname: notifications.dev.<hostname>.<key>, value {state,
//     message, method: [visual]}; health states map to the Signal K states of the same names.
//   - Telemetry values are numbers in SI-free raw units (seconds, bytes, dBm, counts); rssi is
//     null off WiFi; skReconnects counts stream connects after the first this boot.
//   - The time subscription is held while time.sk_fallback is on and the clock is unsynced or
//     set by Signal K (so it keeps refreshing); a manual or SNTP set drops it. It is
//     re-evaluated on config and clock changes and every minute (a carried RTC value goes
//     stale silently). navigation.datetime must be an RFC 3339 string; anything else is ignored.
//   - Paths given to the Go API and POST /sk/put are dotted segments of letters, digits and
//     `_-:@`, at most 256 bytes.
package signalk
