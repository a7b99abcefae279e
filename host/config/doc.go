// Package config owns the device's configuration: namespace descriptors, the stored values
// (in the store's `nvs` partition under cfg/<ns>/<key>, as JSON text), their validation, read
// semantics, secrets, versioning and migrations, run-time namespaces, the generated JSON
// Schema, and the endpoints GET /config, PUT /config and GET /config/schema. Everything is
// driven by the descriptors; no key has code of its own.
//
// Choices where the spec is silent or leaves room:
//
//   - Device checks. PUT /config and Set check type, range (min/max), length (bytes) and enum,
//     plus the shape of table keys and strict padded base64 for blobs. A descriptor's pattern
//     is schema-only, as the descriptor table says: the UI checks it, the device does not (the
//     IPv4 shapes). The exceptions are net.hostname (CheckPattern): its alphabet is a
//     device rule (a DNS label used for mDNS, DHCP and Signal K), so a write outside it is
//     400 validation; and wifi.bssidN (Key.Text), whose form the spec's key table fixes as
//     `aa:bb:cc:dd:ee:ff`: a pin in any other form could never match an access point. Go descriptors may add MinLength: a
//     non-empty value shorter than it is refused on writes. httpd.api_key (empty or 8..64),
//     wifi.pskN and wifi.portal_psk (empty or 8..63) use it, so a PUT never leaves the device
//     with a key the authentication rules call invalid. Stored values are not re-checked
//     against MinLength on read (a short stored key must not silently read as "no key"); the
//     WiFi manager still skips a slot whose stored password is outside 8..63, as the spec says.
//   - Ints are 32-bit. A JSON number is an int when its value is integral, so 80, 80.0 and 8e1
//     are the same (JSON Schema's "integer"); the check is exact on the decimal digits.
//     Floats must be finite; -0 is stored as 0. Every refusal of a number names the key's
//     range (`1e20 out of range 1..65535`, `1.5 is not an integer; allowed 1..65535`,
//     `expected an integer in 1..65535`), repeating the value when it is a short number.
//   - Strings are measured in UTF-8 bytes; the schema's maxLength holds the same number, and
//     the schema's $comment warns that a validator counts characters. MinLength appears in the
//     schema as `not: {minLength: 1, maxLength: N-1}` beside the key's pattern.
//   - readOnly members of a PUT document are ignored whatever they hold (the import rule), so
//     an export from another device imports cleanly. Set (device-internal) may write them.
//   - The secret sentinel `********` is ignored for secret keys in PUT and Set. A secret's
//     default must be empty, and a secret's maxLength must leave room for the sentinel (8 for
//     strings, 4 decoded bytes for blobs).
//   - Writing a key's current effective value stores nothing and is not a change; null deletes
//     the stored value (a change only when the effective value differed from the default).
//   - A duplicated namespace or key inside one document is 400 validation with its path.
//   - GET /config?ns= with an empty value is 404 unknown_namespace; any parameter other than a
//     single `ns` is 400 validation with path "". GET /config?ns=x answers {"x": {...}}.
//   - Schema: `x` presentation members are emitted as `x-dev-display` {displayMultiplier,
//     displayOffset, format, columns}; table keys also carry contentMediaType application/json
//     and a contentSchema describing the rows; blobs carry a base64 pattern and (unless
//     secret) contentEncoding base64. Ints always carry minimum/maximum (the 32-bit range when
//     the descriptor sets none). The deprecated wifi.hostname carries `deprecated: true` and
//     `x-dev-movesTo`. The ETag is `"<content hash>-<generation>"`: the generation counts
//     register/unregister calls, so each one yields a new ETag. Served with Cache-Control:
//     no-cache (revalidate by ETag).
//   - Table keys (`x.format: table`): the value is a JSON array of row objects; a row's
//     members must be listed in `columns` and hold scalars; a missing member is allowed.
//   - Key names: at most 15 characters of [A-Za-z0-9_], starting with a letter. A namespace
//     has at most 256 keys, a table at most 16 columns, a JSON descriptor at most 64 KiB. A
//     namespace descriptor needs a title.
//   - Versioning: a failing step (or a failed write of its result) leaves the stored version
//     at the last completed step and is retried at the next boot. A run-time namespace runs the
//     same table when it is registered; JSON descriptors have no steps (additive only).
//   - wifi.hostname: at every boot a non-empty stored value moves to net.hostname, replacing
//     what it held: the value was written since the last boot, so it is the later one. A
//     write of net.hostname drops a pending wifi.hostname (then the later value is
//     net.hostname's; the answer lists wifi.hostname as changed), and a value net.hostname
//     refuses (over 32 bytes, not a DNS label) is dropped. Either way wifi.hostname reads back
//     empty after boot, and a log line says what happened.
//   - wifi.portal_ssid defaults to dev-<id> as the spec says (BuiltinFor takes the id); an
//     empty value written later also means dev-<id>. Builtin, without an id, leaves it empty.
//   - Key.Text gives a string key a character rule the device checks (Pattern is for the UI
//     only). TextToken (time.tz) is one or more printable ASCII characters without spaces;
//     TextBSSID (wifi.bssidN) is empty or six colon-separated hex pairs, either case; like
//     TextToken it is checked on reads too, so a malformed pin stored earlier reads as none.
//     TextCertificates (the blob sk.ca_pem) is empty or PEM CERTIFICATE blocks and nothing
//     else, the rule of PUT /sk/tls/ca (host/sktls/pemcert); it is checked on writes only,
//     so a value stored earlier still reads back and the TLS document says why it is unused.
//     TextCredential (httpd.api_key) refuses a space or tab at either end and control
//     characters, which an Authorization header cannot carry; it too is checked on writes
//     only, so a key stored earlier keeps protecting the API.
//     CheckText is the one implementation, and PUT /time checks its `tz` with it too.
//   - Request bodies are decoded by api.Unmarshal: a member given twice at any depth, text
//     that is not UTF-8 and lone surrogate escapes are 400 before any key is looked at.
//   - Values of an unregistered run-time namespace stay stored until Purge.
//   - Key.MovesTo (Go descriptors only) marks a deprecated key and its successor; Migration
//     steps see raw stored JSON (Raw, Set, Delete) and commit with the version stamp as one
//     all-or-nothing batch.
//   - Bounds chosen where the spec shows none: httpd.session_ttl_s 60..2592000 (30 days);
//     wifi.ssidN at most 32 bytes; wifi.bssidN 17; wifi.ip/netmask/gateway/dns0/dns1 15 (IPv4
//     dotted quad, empty allowed); wifi.backoff_max_s default 300, 1..3600; wifi.portal_after_s
//     0..3600; wifi.portal_ssid 32; two added keys wifi.connect_tmo_s (15, 1..120 s) and
//     wifi.dhcp_tmo_s (30, 1..300 s); ota.channel 32; ota.check_h 1..720; ota.confirm_tmo_s
//     60..3600; time.server0/server1/tz 64; sk.server_host 253; sk.server_port 1..65535;
//     sk.server_self 128; wifi.sta_enabled and wifi.portal_enabled default true;
//     sk.permissions enum readonly/readwrite/admin, default readwrite; sk.ws_enabled default true; sk.server_pin default false; sk.ca_pem at most 4096 bytes;
//     sk.batch_ms 0..10000; sk.buffer_msgs 0..4096; sk.buffer_kb 1..1024; sk.drain_per_s
//     1..1000; sk.health_s 0..86400; sk.discover_s 5..3600; sk.check_s default 3600,
//     60..86400; sk.stall_s 60..86400.
package config

// keys.go holds a constant for every built-in namespace and key (KeyConstants).
//
//go:generate go run ./genkeys
