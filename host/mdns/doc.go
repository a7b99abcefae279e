// Package mdns owns the device's multicast DNS: the responder for `<hostname>.local` and its
// DNS-SD services (the device's own `_http._tcp` and `_dev._tcp`, and the application service
// slots), and browsing for other hosts' services (Signal K server discovery uses it).
//
// The host name's A answers come from github.com/pion/mdns/v2. This package adds what
// that library lacks, on its own socket on port 5353 (SO_REUSEADDR and SO_REUSEPORT, so the
// library's socket and other stacks on the host share the port), with
// golang.org/x/net/dns/dnsmessage:
//   - the DNS-SD records: PTR, SRV and TXT answers (with the SRV, TXT and A records as
//     additionals), service type enumeration, known-answer suppression, legacy unicast
//     answers (ID and question echoed, TTL at most 10 s), and QU answers (unicast, or
//     multicast when the records were not multicast for a quarter of their TTL, RFC 6762
//     §5.4);
//   - probing of the host name and of every service instance name before use (three probes
//     250 ms apart after a random 0–250 ms wait), simultaneous-probe tie-breaking, and
//     renaming on conflict ("name-2" for the host, "Instance (2)" for services), also when a
//     conflicting record shows up after the name was announced;
//   - announcements (two, one second apart) after probing, after UpdateTXT and for the
//     services again when the host name changed; a service is announced only once the host
//     name is, since its SRV record names the host;
//   - goodbyes (TTL 0) on Unregister, SetHostname and Close;
//   - Browse with Added, Updated and Removed events: a record cache with TTLs, cache-flush
//     handling, refresh queries at 80 % and 90 % of a TTL, periodic queries at growing
//     intervals (1 s, 2 s, 4 s … 1 h), and goodbyes removing an instance one second later.
//
// The library's own service support is not used: it refuses service types longer than 15
// characters, which the spec's limits allow (under 32), and its browse reports an instance
// once per session with one address and no TTL, so it cannot report removals.
//
// Choices where the spec is silent:
//   - Limits (refused with ErrInvalid, never truncated): a service type starts with '_', is
//     at most 31 characters of letters, digits, '-' and '_'; proto is _tcp or _udp; at most 8
//     TXT items whose "key=value" strings total at most 256 bytes (length octets not
//     counted), keys unique regardless of case; an instance name is 1..63 bytes of UTF-8
//     without control characters or dots (the wire library cannot carry a dot inside a
//     label). The device's own services (Register) obey the same limits but take no
//     application slot; RegisterApp takes one of Config.Slots (6 by default, 1..16).
//   - An empty instance name means the host name, and follows SetHostname (goodbye for the
//     old instance, probing and announcing under the new one).
//   - IPv4 only: the device's network is IPv4. AAAA questions for the host are still
//     answered (over IPv4 mDNS) with the interface's IPv6 addresses, link-local included, and
//     those records get goodbyes with the A records.
//   - By default every interface that is up, multicast-capable, not loopback and has an
//     IPv4 address is used; Config.Interfaces names others (loopback included).
//   - NetworkChanged re-opens the socket and probes and announces everything again;
//     NetworkDown leaves without goodbyes (the link is already gone).
//   - Browse reports an instance once it has its SRV, TXT and at least one address; TXT keys
//     are lower-cased, the first of a repeated key wins, a bare key maps to "".
//   - A browse keeps at most 512 records; a packet adds at most 256. Packets from another
//     port than 5353 are not taken as responses. Unicast answers go only to on-link
//     queriers.
//
// Where things are: responder.go holds the Responder, its configuration and its life on the
// network (Start, NetworkChanged, NetworkDown, Close); names.go the names it owns (the host
// name, registered services, their slots and TXT); probe.go probing, announcing, conflicts,
// tie-breaking and goodbyes (RFC 6762 §8, §9); packets.go the records it builds, the packets
// it receives, its answers and its queries; browse.go browsing; records.go and service.go the
// wire records and service validation; transport.go and link.go the socket; pion.go the
// library's A answers.
//
// Locks: one, Responder.mu. It guards the names, the link and the browse sessions, and is
// taken by every exported method, by the timers' tick, by the link's read loop (handle) and
// by a browse's queries; functions without their own Lock call (the probe, answer and
// record helpers, the *Locked ones) run with it held. Nothing under it waits for another
// party: packets are written to the UDP socket, a browse session gets its packets through a
// buffered channel that drops when full and calls its fn without the lock, and Close waits
// for the read loop only after releasing it. A timer that fires after its name moved on
// sees a newer generation and does nothing.
package mdns
