// Package skstream owns the device's Signal K delta stream over a WebSocket: publishing values
// for vessels.self (and for other contexts, such as AIS targets) in batches, the offline ring and its drain, raw frames, flush, subscriptions
// and inbound deltas, PUT in both directions, and metadata reconciliation for non-standard
// paths (spec "Signal K client behaviour", "Signal K wire documents", the sk.* keys). Server
// choice, the access token, TLS trust and the REST face live elsewhere; they hand this package
// a Target and listen to its callbacks.
//
// Choices where the spec is silent:
//
// Publishing and batching
//   - A batch window opens with its first value and closes sk.batch_ms later; sk.batch_ms 0
//     sends every value as its own message (PublishValues still sends its values together).
//     A message carries one update; its `timestamp` is the newest measurement time among its
//     values, taken when each value was published, so a buffered message keeps the time its
//     values were measured. The device clock is read at most once per 100 ms and carried
//     forward with the monotonic clock in between (stamp.go), so a clock set or step shows
//     in the stamps within 100 ms.
//   - Values for another context (PublishContext: `vessels.urn:mrn:imo:mmsi:...`) join the
//     same window in a group of their own: each context is one message when the window
//     closes (the own vessel's first), under the same ring, drain and size rules. A window
//     holds at most MaxBatchContexts other contexts; one more closes it early. A group that
//     fills its message goes out by itself while the window stays open for the others.
//   - Values with a source of their own (PublishSource: an NMEA 2000 sender's address and
//     PGN, source.go) are grouped the same way by context and source: one update each, with
//     the device's label and that source, counted among the MaxBatchContexts others.
//   - A message is at most 16 KiB: a batch that would grow past it closes early, and a single
//     value that cannot fit is refused with ErrInvalidArgument. NaN and infinities are sent as
//     null. Paths are 1..256 bytes of letters, digits and `._-:` without empty segments.
//
// Ring, drain, raw frames and flush
//   - The ring (sk.buffer_msgs, sk.buffer_kb) holds raw frames and delta messages under one
//     budget; the oldest message of either kind is dropped first and counted in `dropped`.
//     While connected the ring is also the send queue, so a server slower than the publishers
//     loses the oldest messages too. While connected the newest message is always kept, so
//     sk.buffer_msgs 0 means "no offline buffering" but live data still flows.
//   - A drain starts when a connection reaches the hello with deltas waiting: the first goes at
//     once, then one every 1/sk.drain_per_s seconds until the ring is empty; anything published
//     meanwhile waits behind the backlog. Raw frames and control frames (subscriptions, PUTs,
//     PUT answers) are never paced and go out first.
//   - Flush waits for the ring, the control frames and the frame being written; values
//     published after the call start a new batch and are not waited for. Its timeout runs on
//     the device clock; an ended ctx returns ctx.Err().
//   - WaitBuffered is for a publisher that would rather wait than lose its oldest messages:
//     it sleeps until the ring holds at most a given number of bytes and is woken once, by
//     whatever change of the ring satisfies it, so a waiting publisher costs nothing per
//     message written. Nothing in the stream itself waits: publishing never blocks.
//
// Connection
//   - The network is assumed up until NetworkDown. `sendMeta=all` is asked for when at least
//     one subscription exists at dial time. The hello must be the first frame, a JSON object
//     with a `version` or `self`, within 10 s (device clock); otherwise the attempt failed.
//   - Both 401 and 403 on the upgrade are reported as unauthorized; the stream then waits for
//     SetTarget or Retry. With Options.IsCertError, a certificate refusal is handled the same
//     way (the token machine owns the flat 60 s retry). Any other failure backs off: 1 s ×
//     2^round capped at wifi.backoff_max_s, ±25 % jitter; the round resets when a hello is
//     consumed, so the first retry after a working connection drops comes after about 1 s.
//     Network up or changed, a new target, Retry and enabling the stream dial at once.
//   - Socket handshake and write deadlines are real time (10 s each), since a socket's own
//     deadlines cannot follow the device clock. A frame written when the socket fails goes back
//     to the front of the ring.
//   - Inbound frames over 16 KiB are dropped (`in.oversize`) whatever their size and the
//     connection stays up: the frame is read through, keeping only its first 16 KiB + 1 bytes,
//     never the whole of it. An oversized first frame is not a hello, so it fails the attempt.
//     Binary and unparseable frames are dropped (`in.bad`). A bare JSON string is a server
//     notice and only logged. `in.frames` counts every frame after the hello; `in.received`
//     counts the values and meta entries of inbound deltas.
//
// Subscriptions
//   - The limit of 48 counts Subscribe calls; several subscribers of one pattern share one
//     server row. The server is kept subscribed to the smallest set of patterns that covers
//     all of them, so nothing is delivered twice. signalk-server accepts only the
//     unsubscribe-everything form, so "unsubscribe" is `{"context":"*","unsubscribe":[{"path":"*"}]}`
//     followed by a subscribe of what is still needed. Rows carry period 0 and minPeriod 0:
//     signalk-server reads a non-zero period as policy fixed and a non-zero minPeriod as a
//     debounce that drops values.
//   - Each subscription has its own goroutine and a queue of 256 values; when a slow callback
//     lets it fill, the oldest waiting value is dropped and counted in `in.dropped`. The read
//     loop never waits for a callback. A panicking callback is logged and contained.
//
// PUT
//   - Outbound: a PENDING answer keeps waiting within the same 10 s; the connection ending
//     first ends the PUT as FAILED ("stream closed"). `put.ok` counts COMPLETED answers with a
//     2xx status, `put.failed` everything else. Callbacks run on one result goroutine.
//   - Inbound: handlers are registered per exact path or family (longest prefix wins). One
//     worker runs them in arrival order off the read loop; 16 requests may wait, more are
//     answered COMPLETED 502 "busy". When any path of a request has no handler the answer is
//     405 and no handler runs; a missing or malformed path is 400, an empty request 400. The
//     answer is the worst status of its paths; PENDING 202 when a handler deferred and none
//     failed, then COMPLETED when every deferred path completed (a failure answers at once and
//     later completions are ignored). A deferred request that is never completed stays pending
//     (signalk-server ends it after 60 s). A request without requestId cannot be answered and
//     is dropped. Answers go over the live connection only.
//   - The state of PUT-able paths is published at Start, at registration, on every connect
//     (behind any backlog) and after each successful or completed PUT: signalk-server routes a
//     PUT only to a connection that has published the path, and forgets it when that
//     connection closes.
//
// Metadata
//   - A declaration is a JSON object; a period adds or replaces `timeout`. At most 128 paths.
//     On every connect each is fetched: 200 means the server's copy wins, 404 PUTs ours, any
//     other answer is logged and tried again on the next connect or declaration.
//     `meta.reconciled` counts the paths settled on the current connection.
//
// Status
//   - `state` is one of stopped, no_target, disabled, network_down, unauthorized, cert_error,
//     connecting, backoff, connected. `next_retry_s` is the wait left while backing off,
//     rounded up, else 0. Drops are reported through OnStatus at most once a second.
//   - Health's downSince is the device-clock time the last connection that reached the hello
//     ended; zero while connected or before the first such connection.
//
// # Code layout
//
// Stream's state is split into parts under its one mutex (the lock order is written at
// Stream.mu): stream.go the Stream itself, its lifecycle and status; batch.go publishing and
// the open batch; queue.go the outbound queues (control frames, the offline ring, draining);
// link.go the link manager (targets, dialing and backoff, the session's read and write
// loops); subs.go subscriptions; put.go the PUT table; meta.go metadata; frame.go the wire
// format.
package skstream
