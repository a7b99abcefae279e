package logs

import (
	"encoding/json"
	"errors"
	"net/http"
	"net/url"
	"strconv"

	"devhost/host/api"
)

// Page limits of the spec's Limits table.
const (
	DefaultLimit = 200
	MaxLimit     = 1000
)

// chunkBytes is how much of a page is written before each flush.
const chunkBytes = 2048

// Routes answers the log endpoints: GET /logs (a stream route: the page goes out in chunks)
// and PUT /logs/level.
func (r *Ring) Routes() []api.Route {
	return []api.Route{
		{Method: http.MethodGet, Path: "/logs", Handler: r.serveLogs, Stream: true},
		{Method: http.MethodPut, Path: "/logs/level", Handler: r.serveLevel},
	}
}

// ParseQuery reads `after` and `limit` of GET /logs; after is -1 when absent.
func ParseQuery(rawQuery string) (after int64, limit int, err error) {
	q, perr := url.ParseQuery(rawQuery)
	if perr != nil {
		return 0, 0, api.Validation("", "malformed query string")
	}
	after, limit = -1, DefaultLimit
	if vs, ok := q["after"]; ok {
		if len(vs) != 1 {
			return 0, 0, api.Validation("after", "after given more than once")
		}
		n, perr := strconv.ParseInt(vs[0], 10, 64)
		if perr != nil || n < 0 {
			return 0, 0, api.Validation("after", "after must be a sequence number (an integer from 0)")
		}
		after = n
	}
	if vs, ok := q["limit"]; ok {
		if len(vs) != 1 {
			return 0, 0, api.Validation("limit", "limit given more than once")
		}
		n, perr := strconv.Atoi(vs[0])
		if perr != nil || n < 1 || n > MaxLimit {
			return 0, 0, api.Validation("limit", "limit must be an integer from 1 to %d", MaxLimit)
		}
		limit = n
	}
	return after, limit, nil
}

func (r *Ring) serveLogs(w http.ResponseWriter, req *http.Request) {
	after, limit, err := ParseQuery(req.URL.RawQuery)
	if err != nil {
		api.WriteErr(w, err)
		return
	}
	// The snapshot is taken under the ring's lock; the network writes below happen after
	// it is released, so a slow client never holds up logging.
	p := r.Read(after, limit)
	writePage(w, p)
}

// writePage writes p as JSON in chunks, flushing after the header fields and after every
// chunkBytes of lines, so the response is chunked and never built whole in memory.
func writePage(w http.ResponseWriter, p Page) {
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("Cache-Control", "no-store")
	w.WriteHeader(http.StatusOK)
	rc := http.NewResponseController(w)

	b := make([]byte, 0, chunkBytes+2*DefaultLineMax)
	b = append(b, `{"first":`...)
	b = strconv.AppendInt(b, p.First, 10)
	b = append(b, `,"next":`...)
	b = strconv.AppendInt(b, p.Next, 10)
	b = append(b, `,"dropped":`...)
	b = strconv.AppendInt(b, p.Dropped, 10)
	b = append(b, `,"size":`...)
	b = strconv.AppendInt(b, int64(p.Size), 10)
	b = append(b, `,"used":`...)
	b = strconv.AppendInt(b, int64(p.Used), 10)
	b = append(b, `,"gap":`...)
	b = strconv.AppendBool(b, p.Gap)
	b = append(b, `,"from":`...)
	b = strconv.AppendInt(b, p.From, 10)
	b = append(b, `,"lines":[`...)
	if !send(w, rc, b) {
		return
	}
	b = b[:0]
	for i, line := range p.Lines {
		if i > 0 {
			b = append(b, ',')
		}
		// Stored lines are valid UTF-8, so marshalling a string cannot fail.
		q, _ := json.Marshal(line)
		b = append(b, q...)
		if len(b) >= chunkBytes {
			if !send(w, rc, b) {
				return
			}
			b = b[:0]
		}
	}
	b = append(b, "]}\n"...)
	send(w, rc, b)
}

func send(w http.ResponseWriter, rc *http.ResponseController, b []byte) bool {
	if _, err := w.Write(b); err != nil {
		return false
	}
	return rc.Flush() == nil
}

// LevelBody is the answer of PUT /logs/level.
type LevelBody struct {
	Tag   string `json:"tag"`
	Level string `json:"level"`
}

// ParseLevelBody validates a PUT /logs/level body: an object with a string `level` and an
// optional string `tag` (default `*`), nothing else.
func ParseLevelBody(body []byte) (LevelBody, error) {
	var m map[string]json.RawMessage
	if err := api.Unmarshal(body, &m); err != nil {
		return LevelBody{}, err
	}
	if m == nil {
		return LevelBody{}, api.Validation("", "body must be an object {level, tag?}")
	}
	out := LevelBody{Tag: "*"}
	haveLevel := false
	for k, raw := range m {
		var dst *string
		switch k {
		case "level":
			dst, haveLevel = &out.Level, true
		case "tag":
			dst = &out.Tag
		default:
			return LevelBody{}, api.Validation(k, "unknown member %q", k)
		}
		if len(raw) == 0 || raw[0] != '"' {
			return LevelBody{}, api.Validation(k, "%s must be a string", k)
		}
		if err := json.Unmarshal(raw, dst); err != nil {
			return LevelBody{}, api.Validation(k, "%s must be a string", k)
		}
	}
	if !haveLevel {
		return LevelBody{}, api.Validation("level", "level is required")
	}
	if _, ok := parseLevel(out.Level); !ok {
		return LevelBody{}, api.Validation("level", "%v", ErrLevel)
	}
	if !validTag(out.Tag) {
		return LevelBody{}, api.Validation("tag", "%v", ErrTag)
	}
	return out, nil
}

func (r *Ring) serveLevel(w http.ResponseWriter, req *http.Request) {
	lb, err := api.ReadParsed(req, ParseLevelBody)
	if err != nil {
		api.WriteErr(w, err)
		return
	}
	if err := r.SetLevel(lb.Tag, lb.Level); err != nil {
		if errors.Is(err, ErrTooManyTags) {
			api.WriteErr(w, api.Validation("tag", "at most %d tags can have their own level", maxTagOverrides))
			return
		}
		api.WriteErr(w, api.Validation("", "%v", err))
		return
	}
	api.WriteJSON(w, http.StatusOK, lb)
}
