package health

import (
	"bytes"
	"encoding/json"
	"errors"
	"math"
	"net/http"
	"strconv"
	"strings"
	"time"

	"devhost/host/api"
)

// Drill limits (POST /health/test fields and the Limits row "Health drill").
const (
	// DrillKeyLimit: a drill key is under 24 bytes.
	DrillKeyLimit = 24
	// DrillMessageLimit: a drill message is under 96 bytes.
	DrillMessageLimit = 96
	// DrillTTLMin and DrillTTLMax bound ttl_s, in seconds.
	DrillTTLMin = 1
	DrillTTLMax = 300
	// DrillTTLDefault is ttl_s when absent.
	DrillTTLDefault = 45 * time.Second
	// DrillDefaultMessage is the message of a raising drill posted without one (a clearing one
	// gets an empty message).
	DrillDefaultMessage = "health drill"
)

// Drill is a validated POST /health/test body.
type Drill struct {
	Key     string
	State   State
	Message string
	TTL     time.Duration
}

// ParseDrill validates a POST /health/test body. Every failure is 400 `validation` naming the
// member; nothing is truncated or clamped.
func ParseDrill(b []byte) (Drill, error) {
	var raw json.RawMessage
	if err := api.Unmarshal(b, &raw); err != nil {
		return Drill{}, err
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		return Drill{}, api.Validation("", "expected an object {key, state, message?, ttl_s?}")
	}
	members := make(map[string]json.RawMessage, 4)
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return Drill{}, api.Validation("", "malformed JSON: %v", err)
		}
		name, _ := tok.(string)
		switch name {
		case "key", "state", "message", "ttl_s":
		default:
			return Drill{}, api.Validation(name, "unknown member %q", name)
		}
		if _, dup := members[name]; dup {
			return Drill{}, api.Validation(name, "duplicate member %q", name)
		}
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			return Drill{}, api.Validation(name, "malformed JSON: %v", err)
		}
		members[name] = v
	}

	d := Drill{Message: DrillDefaultMessage, TTL: DrillTTLDefault}

	key, err := requiredString(members, "key")
	if err != nil {
		return Drill{}, err
	}
	if !strings.HasPrefix(key, DrillPrefix) || len(key) == len(DrillPrefix) {
		return Drill{}, api.Validation("key", "key must start with %q and have a name after it", DrillPrefix)
	}
	if len(key) >= DrillKeyLimit {
		return Drill{}, api.Validation("key", "key is %d bytes; it must be under %d", len(key), DrillKeyLimit)
	}
	if err := CheckKey(key); err != nil {
		return Drill{}, api.Validation("key", "%v", err)
	}
	d.Key = key

	state, err := requiredString(members, "state")
	if err != nil {
		return Drill{}, err
	}
	if !State(state).valid() {
		return Drill{}, api.Validation("state", "state must be normal, warn or alarm")
	}
	d.State = State(state)

	msg, ok, err := stringMember(members, "message", false)
	if err != nil {
		return Drill{}, err
	}
	if ok {
		if len(msg) >= DrillMessageLimit {
			return Drill{}, api.Validation("message", "message is %d bytes; it must be under %d", len(msg), DrillMessageLimit)
		}
		d.Message = msg
	} else if d.State == Normal {
		d.Message = ""
	}

	if v, present := members["ttl_s"]; present && !isNull(v) {
		if len(v) == 0 || (v[0] != '-' && (v[0] < '0' || v[0] > '9')) {
			return Drill{}, api.Validation("ttl_s", "ttl_s must be a number")
		}
		f, err := strconv.ParseFloat(string(v), 64)
		if err != nil || math.IsNaN(f) || f < DrillTTLMin || f > DrillTTLMax {
			return Drill{}, api.Validation("ttl_s", "ttl_s must be from %d to %d seconds", DrillTTLMin, DrillTTLMax)
		}
		d.TTL = time.Duration(f * float64(time.Second))
	}
	return d, nil
}

func isNull(v json.RawMessage) bool { return string(v) == "null" }

// stringMember reads a string member. Null counts as absent for optional members and as a wrong
// type for required ones.
func stringMember(m map[string]json.RawMessage, name string, required bool) (string, bool, error) {
	v, ok := m[name]
	if !ok || (!required && isNull(v)) {
		return "", false, nil
	}
	if len(v) == 0 || v[0] != '"' {
		return "", false, api.Validation(name, "%s must be a string", name)
	}
	var s string
	if err := json.Unmarshal(v, &s); err != nil {
		return "", false, api.Validation(name, "%s must be a string", name)
	}
	return s, true, nil
}

// requiredString reads a string member that must be present.
func requiredString(m map[string]json.RawMessage, name string) (string, error) {
	s, ok, err := stringMember(m, name, true)
	if err == nil && !ok {
		err = api.Validation(name, "%s is required", name)
	}
	return s, err
}

// ApplyDrill raises, replaces or clears a drill. It returns ErrFull (and changes nothing) when
// a new drill key finds no free slot.
func (r *Registry) ApplyDrill(d Drill) error {
	now := r.clock.Now()
	r.mu.Lock()
	err := r.applyDrillLocked(now, d)
	r.mu.Unlock()
	r.drain()
	return err
}

func (r *Registry) applyDrillLocked(now time.Time, d Drill) error {
	r.expireDrillLocked(now)
	_, exists := r.index[d.Key]
	if d.State == Normal {
		r.clearDrillLocked()
		if exists {
			r.setDrillLocked(d.Key, Normal, d.Message)
		}
		return nil
	}
	if !exists && len(r.conds) >= r.max {
		return ErrFull
	}
	if r.drill != nil && r.drill.key != d.Key {
		r.clearDrillLocked()
	}
	r.setDrillLocked(d.Key, d.State, d.Message)
	r.drill = &activeDrill{key: d.Key, deadline: now.Add(d.TTL)}
	return nil
}

func (r *Registry) setDrillLocked(key string, state State, msg string) {
	// Drills always take the plain path.
	if err := r.setLocked(key, state, msg, false); err != nil {
		r.log.Warn("health drill not recorded", "key", key, "err", err)
	}
}

func (r *Registry) clearDrillLocked() {
	if r.drill == nil {
		return
	}
	r.setDrillLocked(r.drill.key, Normal, "")
	r.drill = nil
}

func (r *Registry) expireDrillLocked(now time.Time) {
	if r.drill != nil && !now.Before(r.drill.deadline) {
		r.log.Info("health drill expired", "key", r.drill.key)
		r.clearDrillLocked()
	}
}

// ExpireDrills clears the active drill if it is due (GET /health does this).
func (r *Registry) ExpireDrills() {
	now := r.clock.Now()
	r.mu.Lock()
	r.expireDrillLocked(now)
	r.mu.Unlock()
	r.drain()
}

// Routes are the health endpoints: GET /health and POST /health/test, both protected.
func (r *Registry) Routes() []api.Route {
	return []api.Route{
		{Method: http.MethodGet, Path: "/health", Handler: r.handleGet},
		{Method: http.MethodPost, Path: "/health/test", Handler: r.handleDrill},
	}
}

func (r *Registry) handleGet(w http.ResponseWriter, req *http.Request) {
	now := r.clock.Now()
	r.mu.Lock()
	r.expireDrillLocked(now)
	doc := r.documentLocked()
	r.mu.Unlock()
	r.drain()
	api.WriteJSON(w, http.StatusOK, doc)
}

func (r *Registry) handleDrill(w http.ResponseWriter, req *http.Request) {
	d, err := api.ReadParsed(req, ParseDrill)
	if err != nil {
		api.WriteErr(w, err)
		return
	}
	now := r.clock.Now()
	r.mu.Lock()
	err = r.applyDrillLocked(now, d)
	doc := r.documentLocked()
	r.mu.Unlock()
	r.drain()
	if errors.Is(err, ErrFull) {
		api.WriteErr(w, &api.Error{Status: http.StatusInsufficientStorage, Code: api.CodeStorageFull,
			Message: "health condition table full"})
		return
	}
	if err != nil {
		api.WriteErr(w, err)
		return
	}
	r.log.Info("health drill", "key", d.Key, "state", string(d.State), "ttl", d.TTL)
	api.WriteJSON(w, http.StatusOK, doc)
}
