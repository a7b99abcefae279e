package config

import (
	"encoding/json"
	"strconv"
	"strings"

	"devhost/host/sktls/pemcert"
)

// Patterns of the built-in keys (schema only, see the package doc; Key.Text and CheckPattern
// make the device check some of the same shapes).
const (
	// A DNS label (RFC 1123) of at most 32 characters, or empty: the spec's alphabet, with
	// no hyphen at either end, where DHCP servers and resolvers refuse one.
	hostnamePattern = `^(?:[A-Za-z0-9](?:[A-Za-z0-9-]{0,30}[A-Za-z0-9])?)?$`
	bssidPattern    = `^(?:[0-9A-Fa-f]{2}(?::[0-9A-Fa-f]{2}){5})?$`
	octet           = `(?:25[0-5]|2[0-4][0-9]|1[0-9]{2}|[1-9]?[0-9])`
	optIPv4Pattern  = `^(?:(?:` + octet + `\.){3}` + octet + `)?$`
	apiKeyPattern   = `^(?:.{8,64})?$`
	pskPattern      = `^(?:.{8,63})?$`
	tokenPattern    = `^[!-~]+$`
)

// Builtin returns the descriptors of the device's own namespaces, in the order the document
// and the schema list them, for a device whose identifier is not known (defaults the spec
// writes with `<id>` are then empty).
func Builtin() []Namespace { return BuiltinFor("") }

// BuiltinFor is Builtin for the device with identifier id (4 hex digits): wifi.portal_ssid
// defaults to `dev-<id>` as the spec says.
func BuiltinFor(id string) []Namespace {
	return []Namespace{httpdNS(), netNS(), wifiNS(id), otaNS(), powerNS(), timeNS(), skNS()}
}

// intKey is an int key with an inclusive range.
func intKey(name, title string, def int, lo, hi float64, unit string) Key {
	return Key{Name: name, Type: TypeInt, Default: def, Min: Float(lo), Max: Float(hi), Unit: unit, Title: title}
}

func boolKey(name, title string, def bool) Key {
	return Key{Name: name, Type: TypeBool, Default: def, Title: title}
}

func strKey(name, title, def string, maxLen int) Key {
	return Key{Name: name, Type: TypeString, Default: def, MaxLength: maxLen, Title: title}
}

func enumKey(name, title, def string, values ...string) Key {
	return Key{Name: name, Type: TypeString, Default: def, Enum: values, Title: title}
}

func restart(k Key) Key { k.RestartRequired = true; return k }

func described(k Key, d string) Key { k.Description = d; return k }

func grouped(group string, keys ...Key) []Key {
	for i := range keys {
		keys[i].Group = group
	}
	return keys
}

// tzKey is time.tz: a POSIX TZ string, checked with the same rule as PUT /time's `tz`.
func tzKey() Key {
	k := described(strKey("tz", "Time zone", "UTC0", 64), "POSIX timezone, display only.")
	k.Text = TextToken
	k.Pattern = tokenPattern
	return k
}

// portalSSID is the default setup network name, dev-<id>.
func portalSSID(id string) string {
	if id == "" {
		return ""
	}
	return "dev-" + id
}

func httpdNS() Namespace {
	port := restart(intKey("port", "HTTP port", 80, 1, 65535, ""))
	apiKey := described(strKey("api_key", "API key", "", 64),
		"Empty leaves the API open to anyone on the network; when set, 8 to 64 characters.")
	apiKey.Secret = true
	apiKey.MinLength = 8
	apiKey.Pattern = apiKeyPattern
	apiKey.Text = TextCredential
	ttl := described(intKey("session_ttl_s", "Session lifetime", 86400, 60, 30*86400, "s"),
		"Lifetime of the login cookie.")
	return Namespace{
		Name: "httpd", Version: 1, Title: "Web server",
		Description: "The device's HTTP server and API access.",
		Keys:        []Key{port, apiKey, ttl, hostsKey()},
	}
}

// MaxHostsLen bounds httpd.hosts.
const MaxHostsLen = 256

// hostsKey is httpd.hosts: names the operator adds to those the device answers to in the Host
// header (IP addresses, localhost and <hostname>.local always work); any other name is
// refused with 421 so a web page cannot reach the device through DNS rebinding.
func hostsKey() Key {
	k := described(strKey("hosts", "Extra host names", "", MaxHostsLen),
		"Names besides IP addresses, localhost and <hostname>.local that the device answers to "+
			"(for example a DNS name pointing at it), separated by commas or spaces. Other names "+
			"are refused, which keeps web pages from reaching the device through DNS rebinding.")
	k.Pattern = `^[A-Za-z0-9.,: -]*$`
	return k
}

// HostNames splits an httpd.hosts value into names.
func HostNames(v string) []string {
	return strings.FieldsFunc(v, func(r rune) bool { return r == ',' || r == ' ' })
}

func hostnameKey(name, title string) Key {
	k := strKey(name, title, "", 32)
	k.Pattern = hostnamePattern
	return k
}

func netNS() Namespace {
	h := restart(described(hostnameKey("hostname", "Host name"),
		"Empty means dev-<id>. Used as <hostname>.local, the DHCP name and the Signal K source label."))
	h.CheckPattern = true
	return Namespace{
		Name: "net", Version: 1, Title: "Network",
		Description: "Identity of the device on the network, whatever the interface.",
		Keys:        []Key{h},
	}
}

func wifiNS(id string) Namespace {
	var networks []Key
	for i := range 4 {
		n := strconv.Itoa(i)
		ssid := strKey("ssid"+n, "Network "+n+" SSID", "", 32)
		if i == 0 {
			ssid.Description = "Slot order is priority; empty slots are skipped."
		}
		psk := described(strKey("psk"+n, "Network "+n+" password", "", 63),
			"Empty for an open network, else 8 to 63 characters.")
		psk.Secret = true
		psk.MinLength = 8
		psk.Pattern = pskPattern
		bssid := described(strKey("bssid"+n, "Network "+n+" BSSID", "", 17),
			"aa:bb:cc:dd:ee:ff pins one access point and disables roaming for this slot.")
		bssid.Pattern = bssidPattern
		bssid.Text = TextBSSID
		networks = append(networks, ssid, psk, bssid)
	}
	station := append(networks,
		described(boolKey("sta_enabled", "Station enabled", true), "Off leaves the station idle."),
		described(intKey("backoff_max_s", "Retry backoff cap", 300, 1, 3600, "s"),
			"Cap of the retry delay (1 s doubling per round, ±25 % jitter)."),
		intKey("connect_tmo_s", "Connect timeout", 15, 1, 120, "s"),
		intKey("dhcp_tmo_s", "DHCP timeout", 30, 1, 300, "s"),
	)
	ip := func(name, title string) Key {
		k := strKey(name, title, "", 15)
		k.Pattern = optIPv4Pattern
		return k
	}
	addressing := []Key{
		restart(enumKey("ip_mode", "IP mode", "dhcp", "dhcp", "static")),
		described(ip("ip", "Static address"), "Required when the IP mode is static."),
		described(ip("netmask", "Static netmask"), "Required when the IP mode is static."),
		restart(ip("gateway", "Gateway")),
		restart(described(ip("dns0", "DNS server 1"), "Empty means the gateway.")),
		restart(described(ip("dns1", "DNS server 2"), "Empty means none.")),
	}
	portalPSK := described(strKey("portal_psk", "Setup network password", "", 63),
		"Empty means an open setup network; when set, at least 8 characters.")
	portalPSK.Secret = true
	portalPSK.MinLength = 8
	portalPSK.Pattern = pskPattern
	portal := []Key{
		described(boolKey("portal_enabled", "Setup network enabled", true), "Off means the setup network never comes up."),
		described(strKey("portal_ssid", "Setup network name", portalSSID(id), 32), "Default dev-<id>; empty also means dev-<id>."),
		portalPSK,
		described(intKey("portal_after_s", "Setup network delay", 90, 0, 3600, "s"),
			"The setup network comes up after retrying this long without success."),
	}
	legacy := hostnameKey("hostname", "Host name (deprecated)")
	legacy.MovesTo = "net.hostname"
	legacy.Description = "Deprecated: moved to net.hostname at the next boot, then reads back empty."
	var keys []Key
	keys = append(keys, grouped("Networks", station...)...)
	keys = append(keys, grouped("Addressing", addressing...)...)
	keys = append(keys, grouped("Setup network", portal...)...)
	keys = append(keys, legacy)
	return Namespace{
		Name: "wifi", Version: 1, Title: "WiFi",
		Description: "WiFi station networks, addressing and the setup access point.",
		Keys:        keys,
	}
}

func otaNS() Namespace {
	return Namespace{
		Name: "ota", Version: 1, Title: "Firmware update",
		Description: "Where updates come from and when they are installed.",
		Keys: []Key{
			enumKey("manifest_src", "Manifest source", "url", "url", "signalk"),
			strKey("manifest_url", "Manifest URL", "", 256),
			strKey("manifest_path", "Manifest path on the Signal K server", "/plugins/signalk-dev-updates/manifest.json", 256),
			strKey("channel", "Channel", "stable", 32),
			boolKey("auto_check", "Check automatically", true),
			described(intKey("check_h", "Check interval", 24, 1, 720, "h"), "Hours between checks."),
			boolKey("auto_install", "Install automatically", false),
			described(boolKey("allow_insecure", "Skip certificate check", false),
				"Skips the certificate check for https image sources."),
			described(intKey("confirm_tmo_s", "Confirm timeout", 600, 60, 3600, "s"),
				"A new image that cannot reach the network this long rolls back."),
		},
	}
}

func powerNS() Namespace {
	return Namespace{
		Name: "power", Version: 1, Title: "Power",
		Description: "Optional deep-sleep duty cycle.",
		Keys: []Key{
			described(enumKey("mode", "Mode", "off", "off", "cycle"),
				"Followed live, never while an update is unconfirmed."),
			described(intKey("interval_s", "Sleep interval", 300, 10, 86400, "s"), "Sleep between wakes."),
			described(intKey("window_s", "Awake window", 300, 30, 86400, "s"), "Awake after power-on, update or crash."),
			described(intKey("awake_max_s", "Wake budget", 30, 5, 600, "s"), "Wake time budget."),
			described(intKey("publish_ms", "Publish time", 1500, 0, 60000, "ms"), "Connected this long before sleeping."),
			described(intKey("flush_ms", "Flush time", 3000, 0, 30000, "ms"), "Wait for buffered deltas."),
		},
	}
}

func timeNS() Namespace {
	return Namespace{
		Name: "time", Version: 1, Title: "Time",
		Description: "Wall clock sources.",
		Keys: []Key{
			restart(boolKey("sntp", "SNTP", true)),
			restart(strKey("server0", "NTP server 1", "pool.ntp.org", 64)),
			restart(strKey("server1", "NTP server 2", "", 64)),
			restart(described(boolKey("from_dhcp", "NTP server from DHCP", true),
				"Also use the DHCP-offered NTP server.")),
			described(boolKey("sk_fallback", "Time from Signal K", true),
				"Take time from Signal K navigation.datetime while unsynced."),
			tzKey(),
		},
	}
}

func skNS() Namespace {
	caPEM := described(Key{Name: "ca_pem", Type: TypeBlob, MaxLength: pemcert.MaxBytes, Title: "CA certificate (PEM)"},
		"CA for the ca trust mode; exported with the configuration.")
	caPEM.Text = TextCertificates
	return Namespace{
		Name: "sk", Version: 2, Title: "Signal K",
		Description: "Signal K server connection.",
		Keys: []Key{
			described(strKey("server_host", "Server host", "", 253), "Manual server host; empty means discovery."),
			intKey("server_port", "Server port", 80, 1, 65535, ""),
			described(strKey("server_self", "Server self URN", "", 128), "Pins the server with this self URN."),
			described(boolKey("server_pin", "Keep server", false), "Keeps the current choice."),
			described(enumKey("permissions", "Permissions", "readwrite", "readonly", "readwrite", "admin"),
				"readwrite is needed to publish."),
			described(boolKey("ws_enabled", "Stream enabled", true), "Off closes the stream socket and keeps buffering."),
			enumKey("scheme", "Scheme", "auto", "auto", "http", "https"),
			enumKey("tls_trust", "TLS trust", "tofu", "tofu", "ca", "bundle"),
			caPEM,
			intKey("batch_ms", "Batch window", 100, 0, 10000, "ms"),
			described(intKey("buffer_msgs", "Offline buffer messages", 128, 0, 4096, ""), "Offline ring size in messages."),
			described(intKey("buffer_kb", "Offline buffer size", 32, 1, 1024, "KiB"), "Offline ring size in KiB."),
			intKey("drain_per_s", "Drain rate", 20, 1, 1000, "1/s"),
			described(intKey("health_s", "Health telemetry interval", 10, 0, 86400, "s"), "0 means off."),
			intKey("discover_s", "Discovery interval", 60, 5, 3600, "s"),
			described(intKey("check_s", "Token check interval", 3600, 60, 86400, "s"), "Token re-verify interval."),
			intKey("stall_s", "Stall alarm delay", 300, 60, 86400, "s"),
			described(boolKey("timestamps", "Timestamps", true), "Stamp deltas with measurement time."),
		},
		Steps: map[int]Step{2: skSchemeStep},
	}
}

// skSchemeStep replaces the boolean sk.tls of layout 1 by sk.scheme: true becomes "https",
// any other stored value "auto".
func skSchemeStep(m *Migration) error {
	raw, ok := m.Raw("tls")
	if !ok {
		return nil
	}
	var tls bool
	scheme := "auto"
	if json.Unmarshal(raw, &tls) == nil && tls {
		scheme = "https"
	}
	if err := m.Set("scheme", scheme); err != nil {
		return err
	}
	m.Delete("tls")
	return nil
}
