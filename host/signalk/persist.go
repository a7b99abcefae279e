package signalk

import (
	"encoding/json"
	"fmt"
	"net"
	"strconv"
	"strings"

	"github.com/google/uuid"
)

// Store is the device-state part of the flash (host/store.Store fits).
type Store interface {
	Get(key string) (string, bool, error)
	Set(key, value string) error
	Delete(key string) error
	Apply(sets map[string]string, deletes []string) error
	Scan(prefix string, fn func(k, v string) bool) error
}

// Store keys. Device state, never part of the configuration export.
const (
	keyClientID     = "state/sk/client_id"
	keyServerPrefix = "state/sk/server/" // + record key: one record per server
	keyAliasPrefix  = "state/sk/addr/"   // + host:port → self URN learned there
	keyCurrent      = "state/sk/current" // the last chosen server (sk.server_pin keeps it)
)

// record is what the device keeps per server: the token, the pending request, a refusal.
type record struct {
	Token string `json:"token,omitempty"`
	Href  string `json:"href,omitempty"`
	// Denied is set after a DENIED answer (or 403 on the request) so a reboot does not ask
	// again on its own; POST /sk/request clears it.
	Denied string `json:"denied,omitempty"`
	Host   string `json:"host,omitempty"`
	Port   int    `json:"port,omitempty"`
}

func (r record) empty() bool { return r.Token == "" && r.Href == "" && r.Denied == "" }

type persist struct{ st Store }

func addrKey(host string, port int) string {
	return net.JoinHostPort(strings.ToLower(host), strconv.Itoa(port))
}

// recordKey names a server's record: its self URN, else the self URN learned earlier at its
// address, else its address.
func (p persist) recordKey(s Server) string {
	if s.Self != "" {
		return s.Self
	}
	if v, ok, _ := p.st.Get(keyAliasPrefix + addrKey(s.Host, s.Port)); ok && v != "" {
		return v
	}
	return "addr:" + addrKey(s.Host, s.Port)
}

func (p persist) load(key string) (record, error) {
	var r record
	v, ok, err := p.st.Get(keyServerPrefix + key)
	if err != nil || !ok {
		return r, err
	}
	if err := json.Unmarshal([]byte(v), &r); err != nil {
		// A damaged record is as good as none: the device asks for access again.
		return record{}, fmt.Errorf("signalk: stored record %q: %w", key, err)
	}
	return r, nil
}

func (p persist) save(key string, r record) error {
	if r.empty() {
		return p.st.Delete(keyServerPrefix + key)
	}
	b, _ := json.Marshal(r)
	return p.st.Set(keyServerPrefix+key, string(b))
}

// learn moves a record kept under an address to the server's self URN and remembers the URN
// for that address, in one batch.
func (p persist) learn(oldKey, self string, host string, port int, r record) error {
	b, _ := json.Marshal(r)
	sets := map[string]string{
		keyServerPrefix + self:               string(b),
		keyAliasPrefix + addrKey(host, port): self,
	}
	var dels []string
	if oldKey != self {
		dels = append(dels, keyServerPrefix+oldKey)
	}
	if r.empty() {
		delete(sets, keyServerPrefix+self)
		dels = append(dels, keyServerPrefix+self)
	}
	return p.st.Apply(sets, dels)
}

// records answers every stored record by key.
func (p persist) records() map[string]record {
	out := map[string]record{}
	_ = p.st.Scan(keyServerPrefix, func(k, v string) bool {
		var r record
		if json.Unmarshal([]byte(v), &r) == nil {
			out[strings.TrimPrefix(k, keyServerPrefix)] = r
		}
		return true
	})
	return out
}

// clientID answers the device's access-request client id, a v4 UUID made once.
func (p persist) clientID() (string, error) {
	v, ok, err := p.st.Get(keyClientID)
	if err != nil {
		return "", fmt.Errorf("signalk: read client id: %w", err)
	}
	if ok {
		if u, err := uuid.Parse(v); err == nil && u.Version() == 4 {
			return v, nil
		}
	}
	id := uuid.New().String()
	if err := p.st.Set(keyClientID, id); err != nil {
		return "", fmt.Errorf("signalk: store client id: %w", err)
	}
	return id, nil
}

func (p persist) current() (Server, bool) {
	v, ok, err := p.st.Get(keyCurrent)
	if err != nil || !ok {
		return Server{}, false
	}
	var s Server
	if json.Unmarshal([]byte(v), &s) != nil || s.Host == "" {
		return Server{}, false
	}
	return s, true
}

func (p persist) setCurrent(s *Server) error {
	if s == nil {
		return p.st.Delete(keyCurrent)
	}
	b, _ := json.Marshal(s)
	return p.st.Set(keyCurrent, string(b))
}
