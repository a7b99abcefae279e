package clock

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"slices"
	"strconv"
	"time"

	"devhost/host/api"
	"devhost/host/config"
)

const isoLayout = "2006-01-02T15:04:05.000Z"

// MaxTZLen is the longest accepted `tz`, in bytes (the `time.tz` key's maxLength).
const MaxTZLen = 64

// Document is the time document of GET /time.
type Document struct {
	Synced bool       `json:"synced"`
	Source Source     `json:"source"`
	Now    int64      `json:"now"` // unix ms; 0 while nothing set the clock
	ISO    string     `json:"iso"` // ISO 8601 UTC with milliseconds; empty while now is 0
	TZ     string     `json:"tz"`
	SNTP   SNTPConfig `json:"sntp"`
}

// Document is the current time document.
func (c *Clock) Document() Document {
	t, src, synced := c.Now()
	d := Document{Synced: synced, Source: src, TZ: c.tz.TZ()}
	if src != SourceNone {
		d.Now = t.UnixMilli()
		d.ISO = t.UTC().Format(isoLayout)
	}
	if c.sntp != nil {
		d.SNTP = c.sntp()
	}
	if d.SNTP.Servers == nil {
		d.SNTP.Servers = []string{}
	}
	return d
}

// Routes are GET and PUT /time (protected).
func (c *Clock) Routes() []api.Route {
	return []api.Route{
		{Method: http.MethodGet, Path: "/time", Handler: api.Document(c.Document)},
		{Method: http.MethodPut, Path: "/time", Handler: c.handlePut},
	}
}

// putRequest is a validated PUT /time body.
type putRequest struct {
	now *time.Time
	tz  *string
}

func (c *Clock) handlePut(w http.ResponseWriter, r *http.Request) {
	req, err := api.ReadParsed(r, parsePut)
	if err != nil {
		api.WriteErr(w, err)
		return
	}
	if err := c.applyPut(req); err != nil {
		api.WriteErr(w, err)
		return
	}
	api.WriteJSON(w, http.StatusOK, c.Document())
}

var errOutranked = &api.Error{Status: http.StatusConflict, Code: api.CodeOutranked,
	Message: "a higher-ranked source holds the clock"}

// applyPut changes nothing when `now` is outranked: the rank is checked before `tz` is written,
// and should a better source win in between, the old `tz` is put back.
func (c *Clock) applyPut(req putRequest) error {
	if req.now != nil {
		if err := c.checkRank(SourceManual); err != nil {
			return errOutranked
		}
	}
	var oldTZ string
	if req.tz != nil {
		oldTZ = c.tz.TZ()
		if err := c.tz.SetTZ(*req.tz); err != nil {
			return storeErr(err)
		}
	}
	if req.now == nil {
		return nil
	}
	err := c.Set(SourceManual, *req.now)
	if err == nil {
		return nil
	}
	if req.tz != nil {
		if rerr := c.tz.SetTZ(oldTZ); rerr != nil {
			c.log.Warn("timezone not restored after a refused clock set", "err", rerr)
		}
	}
	switch {
	case errors.Is(err, ErrOutranked):
		return errOutranked
	case errors.Is(err, ErrOutOfRange):
		return api.Validation("now", "%v", err)
	default:
		return fmt.Errorf("set clock: %w", err)
	}
}

// storeErr passes the store's own API errors through and reports anything else as a storage
// failure.
func storeErr(err error) error {
	var ae *api.Error
	if errors.As(err, &ae) {
		return err
	}
	return &api.Error{Status: http.StatusInternalServerError, Code: api.CodeWriteFailed,
		Message: fmt.Sprintf("store timezone: %v", err)}
}

// parsePut validates a PUT /time body.
func parsePut(b []byte) (putRequest, error) {
	var req putRequest
	var members map[string]json.RawMessage
	if err := api.Unmarshal(b, &members); err != nil {
		return req, err
	}
	if members == nil {
		return req, api.Validation("", "expected an object")
	}
	// An empty object changes nothing and answers the time document.
	// Sorted, so a body with several faults always names the same one.
	for _, name := range slices.Sorted(maps.Keys(members)) {
		raw := members[name]
		switch name {
		case "now":
			t, err := parseNow(raw)
			if err != nil {
				return req, err
			}
			req.now = &t
		case "tz":
			tz, err := parseTZ(raw)
			if err != nil {
				return req, err
			}
			req.tz = &tz
		default:
			return req, api.Validation(name, "unknown member")
		}
	}
	return req, nil
}

func parseNow(raw json.RawMessage) (time.Time, error) {
	s := string(bytes.TrimSpace(raw))
	if s == "" || (s[0] != '-' && (s[0] < '0' || s[0] > '9')) {
		return time.Time{}, api.Validation("now", "must be a positive integer of unix milliseconds")
	}
	if bytes.ContainsAny([]byte(s), ".eE") {
		return time.Time{}, api.Validation("now", "must be an integer, not a fraction or exponent")
	}
	ms, err := strconv.ParseInt(s, 10, 64)
	if err != nil || ms <= 0 {
		return time.Time{}, api.Validation("now", "must be a positive integer of unix milliseconds")
	}
	if ms < Floor.UnixMilli() || ms >= Ceiling.UnixMilli() {
		return time.Time{}, api.Validation("now", "must be within [%d, %d) (%s to %s)",
			Floor.UnixMilli(), Ceiling.UnixMilli(), Floor.Format(isoLayout), Ceiling.Format(isoLayout))
	}
	return time.UnixMilli(ms).UTC(), nil
}

func parseTZ(raw json.RawMessage) (string, error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || raw[0] != '"' {
		return "", api.Validation("tz", "must be a string")
	}
	var tz string
	if err := json.Unmarshal(raw, &tz); err != nil {
		return "", api.Validation("tz", "must be a string")
	}
	if len(tz) > MaxTZLen {
		return "", api.Validation("tz", "must be 1 to %d bytes", MaxTZLen)
	}
	// The same rule as the time.tz key of PUT /config.
	if msg := config.CheckText(config.TextToken, tz); msg != "" {
		return "", api.Validation("tz", "%s (a POSIX TZ string)", msg)
	}
	return tz, nil
}
