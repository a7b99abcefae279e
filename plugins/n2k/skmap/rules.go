package skmap

import (
	"math"
	"strconv"
	"strings"
	"sync"

	"devhost/plugins/n2k/decode"
	"devhost/plugins/n2k/pgn"
)

// ctx is one message being mapped.
type ctx struct {
	d     *decode.Decoded
	st    *srcState
	stamp *string     // the update's timestamp: the message's, or set by the plugin after mapping
	eng   *engineMemo // the message's engine, once an engine rule asked (ctx.engine)
}

// rule is one entry of the table. A value comes from field (taken as JavaScript's Number()
// would take it) or from value; it is emitted when present and not null, or null too when
// allowNull. A path is fixed, a template whose {name} parts are replaced by field values,
// or computed by pathFn ("" leaves the value out). multi produces several values at once.
type rule struct {
	path      string
	pathFn    func(*ctx) string
	field     string
	value     func(*ctx) (any, bool)
	when      func(*ctx) bool
	allowNull bool
	instance  bool // the $source carries the message's instance
	multi     func(*ctx, *[]Value)
	// root emits the value under the empty path: an object of members of the context's
	// root (an AIS target's mmsi, name, callsign), as Signal K writes them.
	root bool
	// instanceFn gives the $source's instance where it is not the instance field.
	instanceFn func(*ctx) string
	template   bool    // path has {field} parts (set by prepareRules)
	idx        []int16 // field's index per definition of the PGN (set by prepareRules)
	// A template with one {field}: its number among them (from 1; 0 for none), the field and
	// its index per definition (set by prepareRules), for Mapper.templated.
	tplN   int
	tplID  string
	tplIdx []int16
}

var (
	prepared  sync.Once
	ready     map[uint32][]rule // rules made ready to run, by PGN (prepareRules)
	templates int               // the templates with one field (rule.tplN)
	// The same by definition (pgn.PGN.Seq), with the PGN's context function, and a bit
	// per PGN with a mapping (Maps): what Map and Maps ask for every message, found
	// without hashing the PGN (a map lookup hashes it by the portable fallback inside the
	// sandbox).
	bySeq      []seqRules
	mappedPGNs *[1 << 18 / 64]uint64
)

// prepareRules makes the rules ready to run once, after every init function of the package
// filled the table: a copy of each PGN's rules (two PGNs may share rule values), with the
// templates among the paths marked (looking for "{" in every path of every message cost as
// much as a map lookup) and, for a rule taking a field, the field's index in each of the
// PGN's definitions, so that a message's field is read by its index instead of searched by
// name.
func prepareRules() {
	prepared.Do(func() {
		ready = make(map[uint32][]rule, len(rules))
		for p, rs := range rules {
			rs = append([]rule(nil), rs...)
			defs := pgn.Definitions(p)
			for i := range rs {
				r := &rs[i]
				r.template = strings.Contains(r.path, "{")
				if id, ok := oneField(r.path); ok {
					templates++
					r.tplN, r.tplID = templates, id
					r.tplIdx = make([]int16, len(defs))
					for k := range defs {
						r.tplIdx[k] = fieldIndex(&defs[k], id)
					}
				}
				if r.field == "" {
					continue
				}
				r.idx = make([]int16, len(defs))
				for k := range defs {
					r.idx[k] = fieldIndex(&defs[k], r.field)
				}
			}
			ready[p] = rs
		}
		bySeq = make([]seqRules, len(pgn.All()))
		mappedPGNs = new([1 << 18 / 64]uint64)
		for p, rs := range ready {
			defs := pgn.Definitions(p)
			for k := range defs {
				bySeq[defs[k].Seq] = seqRules{rules: rs, context: contexts[p], ok: true}
			}
			if p < 1<<18 {
				mappedPGNs[p/64] |= 1 << (p % 64)
			}
		}
	})
}

// seqRules is what Map runs for a definition: its PGN's rules and context function.
type seqRules struct {
	rules   []rule
	context func(*ctx) string
	ok      bool // the PGN has rules
}

// rulesFor answers the rules and context function of d's PGN, and whether it has rules.
func rulesFor(d *decode.Decoded) ([]rule, func(*ctx) string, bool) {
	if d.Def != nil && d.Def.Seq < len(bySeq) {
		r := &bySeq[d.Def.Seq]
		return r.rules, r.context, r.ok
	}
	rs, ok := ready[d.PGN] // a message decoded by hand
	return rs, contexts[d.PGN], ok
}

// oneField answers the field of a path template with exactly one {field}.
func oneField(t string) (string, bool) {
	i := strings.IndexByte(t, '{')
	if i < 0 {
		return "", false
	}
	j := strings.IndexByte(t[i:], '}')
	if j < 0 || strings.IndexByte(t[i+j:], '{') >= 0 {
		return "", false
	}
	return t[i+1 : i+j], true
}

// templated answers the rule's path for a message whose template field is an instance (a
// whole number 0..255, as nearly every template's field is), made once per rule and
// instance and kept by the mapper: looking the path up by template and value text cost two
// string hashes per rule and message. Other values take expand's way.
func (c *ctx) templated(r *rule) string {
	d := c.d
	var v any
	if d.Def != nil && d.DefN < len(r.tplIdx) {
		v = d.At(int(r.tplIdx[d.DefN]))
	} else {
		v = d.Field(r.tplID)
	}
	x, ok := v.(float64)
	if !ok || x < 0 || x >= float64(len(srcNames)) || x != math.Trunc(x) {
		return c.expand(r.path)
	}
	m := c.st.m
	if m.tpl == nil {
		m.tpl = make([]*[256]string, templates+1)
	}
	row := m.tpl[r.tplN]
	if row == nil {
		row = new([256]string)
		m.tpl[r.tplN] = row
	}
	n := int(x)
	if row[n] == "" {
		t := r.path
		i := strings.IndexByte(t, '{')
		j := strings.IndexByte(t[i:], '}')
		row[n] = t[:i] + srcNames[n] + t[i+j+1:]
	}
	return row[n]
}

// fieldIndex answers the index of field id among def's fields before its repeating sets (the
// fields a decoded message holds by index), -1 when it has none.
func fieldIndex(def *pgn.PGN, id string) int16 {
	n := len(def.Fields) - def.Rep1Size - def.Rep2Size
	for i := 0; i < n; i++ {
		if def.Fields[i].ID == id {
			return int16(i)
		}
	}
	return -1
}

// fieldOf answers the message's value of the rule's field: by the index prepareRules found
// for the message's definition, by name for a message made by hand.
func (r *rule) fieldOf(d *decode.Decoded) any {
	if d.Def != nil && d.DefN < len(r.idx) {
		return d.At(int(r.idx[d.DefN]))
	}
	return d.Field(r.field)
}

func (r *rule) apply(c *ctx, out *[]Value) {
	if r.when != nil && !r.when(c) {
		return
	}
	if r.multi != nil {
		r.multi(c, out)
		return
	}
	var v any
	var ok bool
	if r.field != "" {
		v, ok = number(r.fieldOf(c.d))
	} else if r.value != nil {
		v, ok = r.value(c)
	}
	if !ok || v == nil && !r.allowNull {
		return
	}
	path := r.path
	if r.pathFn != nil {
		path = r.pathFn(c)
	} else if r.tplN > 0 {
		path = c.templated(r)
	} else if r.template {
		path = c.expand(path)
	}
	if path == "" && !r.root {
		return
	}
	*out = append(*out, Value{Path: path, Value: v})
}

// number takes a field value as n2k-signalk does: absent is no value, a numeric string
// becomes a number, other strings stay.
func number(v any) (any, bool) {
	switch x := v.(type) {
	case nil:
		return nil, false
	case float64:
		return v, true // as it is: boxing x again would allocate
	case string:
		if f, err := strconv.ParseFloat(strings.TrimSpace(x), 64); err == nil {
			return f, true
		}
		if strings.TrimSpace(x) == "" {
			return 0.0, true
		}
		return x, true
	}
	return v, true
}

// num answers a field as a number; NaN when absent or not numeric (JavaScript's Number()).
func num(c *ctx, id string) float64 {
	switch x := c.d.Field(id).(type) {
	case float64:
		return x
	case string:
		if f, err := strconv.ParseFloat(strings.TrimSpace(x), 64); err == nil {
			return f
		}
	}
	return math.NaN()
}

func has(id string) func(*ctx) bool {
	return func(c *ctx) bool { _, ok := c.d.Lookup(id); return ok }
}

func eq(id, want string) func(*ctx) bool {
	return func(c *ctx) bool { s, _ := c.d.Field(id).(string); return s == want }
}

// truthy is JavaScript truthiness of a field: present, not 0, not "".
func truthy(id string) func(*ctx) bool {
	return func(c *ctx) bool {
		switch x := c.d.Field(id).(type) {
		case float64:
			return x != 0 && !math.IsNaN(x)
		case string:
			return x != ""
		case nil:
			return false
		}
		return true
	}
}

func all(fs ...func(*ctx) bool) func(*ctx) bool {
	return func(c *ctx) bool {
		for _, f := range fs {
			if !f(c) {
				return false
			}
		}
		return true
	}
}

// expand is expand of the message, remembering the paths of one-field templates per source
// (the field is an instance: a handful of paths that come again and again).
func (c *ctx) expand(t string) string {
	i := strings.IndexByte(t, '{')
	j := strings.IndexByte(t[i:], '}')
	if j < 0 || strings.IndexByte(t[i+j:], '{') >= 0 {
		return expand(t, c.d)
	}
	s := "undefined"
	if v, ok := c.d.Lookup(t[i+1 : i+j]); ok {
		s = jsString(v)
	}
	k := pathKey{t, s}
	if p, ok := c.st.paths[k]; ok {
		return p
	}
	p := t[:i] + s + t[i+j+1:]
	if c.st.paths == nil {
		c.st.paths = map[pathKey]string{}
	}
	if len(c.st.paths) < maxPaths {
		c.st.paths[k] = p
	}
	return p
}

// remember answers what mk makes for key k, made once per source: paths and values a rule
// builds again and again from the same few inputs (an engine's notifications, a switch
// bank's paths). Values are shared between deltas, so they must never be changed.
func (c *ctx) remember(k memoKey, mk func() any) any {
	if v, ok := c.st.memo[k]; ok {
		return v
	}
	v := mk()
	if c.st.memo == nil {
		c.st.memo = map[memoKey]any{}
	}
	if len(c.st.memo) < maxPaths {
		c.st.memo[k] = v
	}
	return v
}

// memoKey names one remembered thing: its kind, and what it was made from.
type memoKey struct {
	kind byte
	a    string
	n    int
}

// pathKey is a template and its field's text; maxPaths bounds the paths (and the values
// remembered) kept per source.
type pathKey struct{ template, value string }

const maxPaths = 256

// expand replaces {field} by the field's value as JavaScript would concatenate it.
func expand(t string, d *decode.Decoded) string {
	var b strings.Builder
	for {
		i := strings.IndexByte(t, '{')
		if i < 0 {
			b.WriteString(t)
			return b.String()
		}
		j := strings.IndexByte(t[i:], '}')
		if j < 0 {
			b.WriteString(t)
			return b.String()
		}
		b.WriteString(t[:i])
		if v, ok := d.Lookup(t[i+1 : i+j]); ok {
			b.WriteString(jsString(v))
		} else {
			b.WriteString("undefined")
		}
		t = t[i+j+1:]
	}
}

// scaled takes a numeric field times k (NaN when absent, as the reference computes it).
func scaled(id string, k float64) func(*ctx) (any, bool) {
	return func(c *ctx) (any, bool) { return num(c, id) * k, true }
}

// nanNull is scaled but null instead of NaN.
func nanNull(id string, k float64) func(*ctx) (any, bool) {
	return func(c *ctx) (any, bool) {
		v := num(c, id)
		if math.IsNaN(v) {
			return nil, true
		}
		return v * k, true
	}
}

func dateTime(c *ctx) (any, bool) {
	date, _ := c.d.Field("date").(string)
	tm, _ := c.d.Field("time").(string)
	return strings.ReplaceAll(date, ".", "-") + "T" + tm + "Z", true
}

// attitude is navigation.attitude: yaw, pitch and roll, null where absent. The value and
// its numbers are two allocations (five before).
func attitude(c *ctx) (any, bool) {
	m := new(struct {
		a   Attitude
		ypr [3]float64
	})
	for i, id := range [3]string{"yaw", "pitch", "roll"} {
		m.ypr[i] = num(c, id)
	}
	if !math.IsNaN(m.ypr[0]) {
		m.a.Yaw = &m.ypr[0]
	}
	if !math.IsNaN(m.ypr[1]) {
		m.a.Pitch = &m.ypr[1]
	}
	if !math.IsNaN(m.ypr[2]) {
		m.a.Roll = &m.ypr[2]
	}
	return m.a, true
}

func position(c *ctx) (any, bool) {
	return Position{Longitude: num(c, "longitude"), Latitude: num(c, "latitude")}, true
}

// timeToSeconds reads H:MM:SS as seconds; null otherwise.
func timeToSeconds(v any) (any, bool) {
	s, ok := v.(string)
	if !ok {
		return nil, true
	}
	parts := strings.Split(s, ":")
	if len(parts) != 3 {
		return nil, true
	}
	total := 0.0
	for i, k := range []float64{3600, 60, 1} {
		f, err := strconv.ParseFloat(parts[i], 64)
		if err != nil {
			f = math.NaN()
		}
		total += f * k
	}
	return total, true
}

// mapped returns the table's name for a lookup value, or the value itself.
func mapped(id string, table map[string]string) func(*ctx) (any, bool) {
	return func(c *ctx) (any, bool) {
		v, ok := c.d.Lookup(id)
		if !ok {
			return nil, false
		}
		if s, isStr := v.(string); isStr {
			if m, ok := table[s]; ok {
				return m, true
			}
		}
		return v, true
	}
}
