package skstream

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"strconv"
	"time"
	"unicode/utf8"

	"devhost/host/sk"
)

// FrameKind classifies an inbound frame.
type FrameKind int

// Kinds of inbound frames.
const (
	FrameUnknown    FrameKind = iota // valid JSON object this client has no use for
	FrameHello                       // the server's greeting
	FrameDelta                       // updates for subscribers
	FramePutRequest                  // a PUT routed to this device
	FramePutAnswer                   // an answer to this device's PUT
)

func (k FrameKind) String() string {
	switch k {
	case FrameHello:
		return "hello"
	case FrameDelta:
		return "delta"
	case FramePutRequest:
		return "put_request"
	case FramePutAnswer:
		return "put_answer"
	}
	return "unknown"
}

// PathValue is one path and its raw JSON value.
type PathValue struct {
	Path  string
	Value json.RawMessage
}

// Update is one element of a delta's `updates`.
type Update struct {
	Timestamp string
	Source    string
	Values    []PathValue
	Meta      []PathValue
}

// Frame is a parsed inbound frame. Which fields are set depends on Kind.
type Frame struct {
	Kind FrameKind

	Hello Hello // FrameHello

	Context string   // FrameDelta, FramePutRequest
	Updates []Update // FrameDelta

	RequestID  string      // FramePutRequest, FramePutAnswer
	Puts       []PathValue // FramePutRequest
	State      string      // FramePutAnswer
	StatusCode int         // FramePutAnswer
	Message    string      // FramePutAnswer
}

type wireFrame struct {
	Context    string          `json:"context"`
	Updates    json.RawMessage `json:"updates"`
	RequestID  string          `json:"requestId"`
	State      string          `json:"state"`
	StatusCode *float64        `json:"statusCode"`
	Message    string          `json:"message"`
	Put        json.RawMessage `json:"put"`

	Name      string   `json:"name"`
	Version   string   `json:"version"`
	Self      string   `json:"self"`
	Roles     []string `json:"roles"`
	Timestamp string   `json:"timestamp"`
}

type wireUpdate struct {
	Timestamp string `json:"timestamp"`
	DSource   string `json:"$source"`
	Source    *struct {
		Label string `json:"label"`
	} `json:"source"`
	Values []wirePathValue `json:"values"`
	Meta   []wirePathValue `json:"meta"`
}

type wirePathValue struct {
	Path  *string         `json:"path"`
	Value json.RawMessage `json:"value"`
}

// ParseFrame parses one inbound text frame. It never panics; anything that is not a JSON
// object of the expected shapes is an error wrapping ErrInvalidArgument.
func ParseFrame(b []byte) (Frame, error) {
	var f Frame
	b = bytes.TrimSpace(b)
	if len(b) == 0 || b[0] != '{' {
		return f, fmt.Errorf("%w: frame is not a JSON object", ErrInvalidArgument)
	}
	var w wireFrame
	if err := json.Unmarshal(b, &w); err != nil {
		return f, fmt.Errorf("%w: frame: %v", ErrInvalidArgument, err)
	}
	f.Context = w.Context
	switch {
	case present(w.Updates):
		var ups []wireUpdate
		if err := json.Unmarshal(w.Updates, &ups); err != nil {
			return Frame{}, fmt.Errorf("%w: updates: %v", ErrInvalidArgument, err)
		}
		f.Kind = FrameDelta
		f.Updates = make([]Update, 0, len(ups))
		for _, u := range ups {
			up := Update{Timestamp: u.Timestamp, Source: u.DSource}
			if up.Source == "" && u.Source != nil {
				up.Source = u.Source.Label
			}
			up.Values = keepPaths(u.Values)
			up.Meta = keepPaths(u.Meta)
			f.Updates = append(f.Updates, up)
		}
		return f, nil
	case w.RequestID != "" && w.State != "":
		f.Kind = FramePutAnswer
		f.RequestID, f.State, f.Message = w.RequestID, w.State, w.Message
		if w.StatusCode != nil {
			c := *w.StatusCode
			if c != math.Trunc(c) || c < 0 || c > 999 {
				return Frame{}, fmt.Errorf("%w: statusCode %v", ErrInvalidArgument, c)
			}
			f.StatusCode = int(c)
		}
		return f, nil
	case w.RequestID != "" && present(w.Put):
		puts, err := parsePuts(w.Put)
		if err != nil {
			return Frame{}, err
		}
		f.Kind = FramePutRequest
		f.RequestID, f.Puts = w.RequestID, puts
		return f, nil
	case w.Version != "" || w.Self != "":
		f.Kind = FrameHello
		f.Hello = Hello{Name: w.Name, Version: w.Version, Self: w.Self, Roles: w.Roles, Timestamp: w.Timestamp}
		return f, nil
	}
	f.Kind = FrameUnknown
	return f, nil
}

func present(raw json.RawMessage) bool {
	return len(raw) > 0 && !bytes.Equal(raw, []byte("null"))
}

// keepPaths drops entries without a usable path; a value missing altogether reads as null.
func keepPaths(in []wirePathValue) []PathValue {
	out := make([]PathValue, 0, len(in))
	for _, pv := range in {
		if pv.Path == nil {
			continue
		}
		v := pv.Value
		if len(v) == 0 {
			v = json.RawMessage("null")
		}
		out = append(out, PathValue{Path: *pv.Path, Value: v})
	}
	return out
}

// parsePuts accepts the array form and the single-object form of an inbound PUT.
func parsePuts(raw json.RawMessage) ([]PathValue, error) {
	var items []wirePathValue
	if raw[0] == '[' {
		if err := json.Unmarshal(raw, &items); err != nil {
			return nil, fmt.Errorf("%w: put: %v", ErrInvalidArgument, err)
		}
	} else {
		var one wirePathValue
		if err := json.Unmarshal(raw, &one); err != nil {
			return nil, fmt.Errorf("%w: put: %v", ErrInvalidArgument, err)
		}
		items = []wirePathValue{one}
	}
	out := make([]PathValue, 0, len(items))
	for _, it := range items {
		pv := PathValue{Value: it.Value}
		if it.Path != nil {
			pv.Path = *it.Path
		}
		if len(pv.Value) == 0 {
			pv.Value = json.RawMessage("null")
		}
		out = append(out, pv)
	}
	return out, nil
}

// Outbound encoding.

type valueKind uint8

const (
	kindNumber valueKind = iota
	kindString
	kindBool
	kindJSON
)

// entry is one value waiting in the open batch.
type entry struct {
	path string
	kind valueKind
	num  float64
	b    bool
	str  string
	raw  []byte
}

// size estimates the entry's encoded size; it never underestimates by more than string escapes.
func (e *entry) size() int {
	n := len(e.path) + len(`{"path":"","value":},`)
	switch e.kind {
	case kindNumber:
		n += 24
	case kindString:
		n += len(e.str) + 2
	case kindBool:
		n += 5
	case kindJSON:
		n += len(e.raw)
	}
	return n
}

const deltaOverhead = len(`{"context":"vessels.self","updates":[{"timestamp":"2006-01-02T15:04:05.000Z","source":{"label":"","src":"` + SourceSrc + `"},"values":[]}]}`)

// SourceSrc is the src of every update the device sends, beside its label: signalk-server
// names a source `<label>.<src>` ($source), and without a src it fills in "XX".
const SourceSrc = "devhost"

// appendDelta encodes one delta message with one update from the device's own source;
// context "" is vessels.self.
func appendDelta(b []byte, context, label string, ts time.Time, entries []entry) []byte {
	return appendDeltaFrom(b, context, label, &sk.Source{}, ts, entries)
}

// appendDeltaFrom is appendDelta with the update's source: the zero Source is the device's
// own.
func appendDeltaFrom(b []byte, context, label string, src *sk.Source, ts time.Time, entries []entry) []byte {
	if context == "" {
		b = append(b, `{"context":"vessels.self","updates":[{`...)
	} else {
		// A context passed checkPath, as the paths below: copied as is.
		b = append(b, `{"context":"`...)
		b = append(b, context...)
		b = append(b, `","updates":[{`...)
	}
	if !ts.IsZero() {
		b = append(b, `"timestamp":"`...)
		b = ts.UTC().AppendFormat(b, "2006-01-02T15:04:05.000Z")
		b = append(b, `",`...)
	}
	b = append(b, `"source":{"label":`...)
	b = appendJSONString(b, label)
	b = appendSourceTail(b, src)
	b = append(b, `},"values":[`...)
	for i := range entries {
		e := &entries[i]
		if i > 0 {
			b = append(b, ',')
		}
		// Every path here passed checkPath (letters, digits and `._-:`), so none needs
		// escaping: it is copied as is, which is most of the per-value encoding saved.
		b = append(b, `{"path":"`...)
		b = append(b, e.path...)
		b = append(b, `","value":`...)
		b = e.appendValue(b)
		b = append(b, '}')
	}
	return append(b, `]}]}`...)
}

func (e *entry) appendValue(b []byte) []byte {
	switch e.kind {
	case kindNumber:
		if math.IsNaN(e.num) || math.IsInf(e.num, 0) {
			return append(b, "null"...)
		}
		return appendNumber(b, e.num)
	case kindString:
		return appendJSONString(b, e.str)
	case kindBool:
		return strconv.AppendBool(b, e.b)
	}
	return append(b, e.raw...)
}

// appendNumber writes a finite v the way JavaScript's JSON.stringify does: plain digits from
// 1e-6 up to 1e21 (1000000123, not 1.000000123e+09), the shortest exponent form outside. The
// server parses fewer bytes and a person reading a frame sees the number they published.
func appendNumber(b []byte, v float64) []byte {
	// Whole numbers below 2^53 print as their integer digits in both languages; formatting
	// them as integers skips the shortest-float search. -0 stays on the float path ("-0").
	if v == math.Trunc(v) && math.Abs(v) < 1<<53 && (v != 0 || !math.Signbit(v)) {
		return strconv.AppendInt(b, int64(v), 10)
	}
	if a := math.Abs(v); a != 0 && (a < 1e-6 || a >= 1e21) {
		n := len(b)
		b = strconv.AppendFloat(b, v, 'e', -1, 64)
		// Go writes a two-digit exponent (1e-07); JavaScript writes 1e-7.
		if m := len(b); m-n >= 4 && b[m-4] == 'e' && b[m-2] == '0' {
			b[m-2] = b[m-1]
			b = b[:m-1]
		}
		return b
	}
	return strconv.AppendFloat(b, v, 'f', -1, 64)
}

const hexDigits = "0123456789abcdef"

// appendJSONString writes s as a JSON string; invalid UTF-8 becomes U+FFFD.
func appendJSONString(b []byte, s string) []byte {
	b = append(b, '"')
	start := 0
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			if c >= 0x20 && c != '"' && c != '\\' {
				i++
				continue
			}
			b = append(b, s[start:i]...)
			switch c {
			case '"', '\\':
				b = append(b, '\\', c)
			case '\n':
				b = append(b, '\\', 'n')
			case '\r':
				b = append(b, '\\', 'r')
			case '\t':
				b = append(b, '\\', 't')
			default:
				b = append(b, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xf])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			b = append(b, s[start:i]...)
			b = append(b, `\ufffd`...)
			i++
			start = i
			continue
		}
		i += size
	}
	b = append(b, s[start:]...)
	return append(b, '"')
}

type subscribeRow struct {
	Path      string `json:"path"`
	Period    int    `json:"period"`
	Format    string `json:"format"`
	Policy    string `json:"policy"`
	MinPeriod int    `json:"minPeriod"`
}

func subscribeFrame(patterns []string) []byte {
	rows := make([]subscribeRow, len(patterns))
	for i, p := range patterns {
		rows[i] = subscribeRow{Path: p, Period: SubscribePeriodMS, Format: "delta", Policy: "instant", MinPeriod: SubscribeMinPeriodMS}
	}
	b, _ := json.Marshal(struct {
		Context   string         `json:"context"`
		Subscribe []subscribeRow `json:"subscribe"`
	}{"vessels.self", rows})
	return b
}

// unsubscribeAllFrame is the only unsubscribe form signalk-server accepts; what should stay
// subscribed is sent again right after it.
var unsubscribeAllFrame = []byte(`{"context":"*","unsubscribe":[{"path":"*"}]}`)

// putRequest is the frame that asks the server to set a path.
type putRequest struct {
	Context   string  `json:"context"`
	RequestID string  `json:"requestId"`
	Put       putBody `json:"put"`
}

type putBody struct {
	Path  string          `json:"path"`
	Value json.RawMessage `json:"value"`
}

func putRequestFrame(requestID, path string, value json.RawMessage) []byte {
	b, _ := json.Marshal(putRequest{Context: "vessels.self", RequestID: requestID, Put: putBody{path, value}})
	return b
}

func putAnswerFrame(requestID, state string, code int, message string) []byte {
	b, _ := json.Marshal(struct {
		RequestID  string `json:"requestId"`
		State      string `json:"state"`
		StatusCode int    `json:"statusCode"`
		Message    string `json:"message,omitempty"`
	}{requestID, state, code, message})
	return b
}
