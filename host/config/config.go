package config

import (
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"

	"devhost/host/api"
	"devhost/host/store"
)

// msgUnknownNamespace is the message of PUT /config's refusal of an unknown namespace.
const msgUnknownNamespace = "unknown namespace"

// storePrefix starts every configuration key in the store: cfg/<ns>/<key>.
const storePrefix = "cfg/"

func storeKey(ns, key string) string { return storePrefix + ns + "/" + key }

// Errors of the Go API (HTTP answers use *api.Error).
var (
	ErrUnknownNamespace = errors.New("config: unknown namespace")
	ErrUnknownKey       = errors.New("config: unknown key")
	ErrExists           = errors.New("config: namespace already registered")
	ErrNotRuntime       = errors.New("config: not a run-time namespace")
	ErrRegistered       = errors.New("config: namespace is registered")
)

// Result is the outcome of a PUT /config.
type Result struct {
	Changed         []string `json:"changed"` // "ns.key" whose effective value changed
	RestartRequired bool     `json:"restart_required"`
}

// Config is the device's configuration: descriptors, stored values and the schema.
type Config struct {
	st  *docStore
	log *slog.Logger

	// docs caches rendered GET /config documents by namespace ("" for all). Every write
	// through st and every register or unregister empties it, so a cached document is
	// always what the store holds.
	docs   sync.Map
	docMu  sync.Mutex
	docGen atomic.Uint64

	wmu sync.Mutex // serializes writes, so "changed" is computed against what is stored

	// awaiting says why an unknown namespace is expected soon (AwaitNamespaces).
	awaiting atomic.Pointer[func(ns string) (string, bool)]

	// supersedes maps a key to the deprecated keys that move to it (Key.MovesTo); fixed by New.
	supersedes map[*keyDef][]*keyDef

	mu        sync.RWMutex // guards the fields below
	nss       map[string]*nsDef
	order     []string
	gen       int
	schema    []byte
	etag      string
	listeners []func(ns, key string)
}

// New validates the descriptors, brings every namespace's stored layout to its current
// version and moves deprecated keys (Key.MovesTo); the schema is built on first use (Schema).
func New(st *store.Store, log *slog.Logger, namespaces ...Namespace) (*Config, error) {
	log = cmp.Or(log, slog.New(slog.DiscardHandler))
	c := &Config{log: log, nss: map[string]*nsDef{}, supersedes: map[*keyDef][]*keyDef{}}
	c.st = &docStore{Store: st, flush: c.dropDocs}
	for _, ns := range namespaces {
		d, err := compile(ns)
		if err != nil {
			return nil, fmt.Errorf("config: %w", err)
		}
		if c.nss[d.Name] != nil {
			return nil, fmt.Errorf("config: namespace %s: %w", d.Name, ErrExists)
		}
		c.nss[d.Name] = d
		c.order = append(c.order, d.Name)
	}
	for _, name := range c.order {
		for _, k := range c.nss[name].order {
			if k.MovesTo == "" {
				continue
			}
			t := c.lookupKey(k.MovesTo)
			if t == nil || t.Type != TypeString || t == k {
				return nil, fmt.Errorf("config: key %s moves to %q, which is not another string key", k.path(), k.MovesTo)
			}
			c.supersedes[t] = append(c.supersedes[t], k)
		}
	}
	for _, name := range c.order {
		c.versioning(c.nss[name])
	}
	c.moveDeprecated()
	c.rebuildSchema()
	return c, nil
}

// lookupKey resolves "ns.key" among the namespaces known so far.
func (c *Config) lookupKey(path string) *keyDef {
	ns, key, ok := strings.Cut(path, ".")
	if !ok || c.nss[ns] == nil {
		return nil
	}
	return c.nss[ns].keys[key]
}

// OnChange registers fn, called after every committed write for each key whose effective
// value changed (a reset to the default included), outside the configuration's locks.
func (c *Config) OnChange(fn func(ns, key string)) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.listeners = append(c.listeners, fn)
}

// Namespaces lists the registered namespaces, built-in first, in registration order.
func (c *Config) Namespaces() []string {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return append([]string(nil), c.order...)
}

// key finds a key's descriptor.
func (c *Config) key(ns, key string) (*keyDef, error) {
	c.mu.RLock()
	defer c.mu.RUnlock()
	d := c.nss[ns]
	if d == nil {
		return nil, fmt.Errorf("%w: %q", ErrUnknownNamespace, ns)
	}
	k := d.keys[key]
	if k == nil {
		return nil, fmt.Errorf("%w: %s.%s", ErrUnknownKey, ns, key)
	}
	return k, nil
}

// effective is the stored value when it passes every check, else the default. The store is
// flash: a read error is logged and the default used, as the device would.
//
// Every request reads keys (the API key on each authenticated request, the host names on
// each request by name), so the parsed value is kept on the key and served from there until
// the next write. The key is tagged with the write generation (docGen) loaded before the store
// was read; every write through c.st moves the generation before and after it lands, so a
// value read before a write finished is never served after that write returned.
func (c *Config) effective(k *keyDef) any {
	gen := c.docGen.Load()
	if cv := k.cached.Load(); cv != nil && cv.gen == gen {
		return cv.v
	}
	raw, ok, err := c.st.Get(storeKey(k.ns, k.Name))
	if err != nil {
		c.log.Error("config: read failed, using the default", "key", k.path(), "err", err)
		return k.def // not cached: the next read tries the store again
	}
	v := k.def
	if ok {
		if pv, msg := k.fromJSON([]byte(raw)); msg == "" {
			v = pv
		}
	}
	k.cached.Store(&cachedValue{gen: gen, v: v})
	return v
}

// Get returns the effective value of ns.key: bool, int, float64, string or []byte (blob).
// Secrets are returned in clear: this is the device-internal read.
func (c *Config) Get(ns, key string) (any, error) {
	k, err := c.key(ns, key)
	if err != nil {
		return nil, err
	}
	return public(c.effective(k)), nil
}

// typed reads ns.key as a T, the zero T for an unknown key or another type.
func typed[T any](c *Config, ns, key string) T {
	v, _ := c.Get(ns, key)
	t, _ := v.(T)
	return t
}

// Int returns an int key's effective value, 0 for an unknown key.
func (c *Config) Int(ns, key string) int { return typed[int](c, ns, key) }

// Float returns a float key's effective value, 0 for an unknown key.
func (c *Config) Float(ns, key string) float64 { return typed[float64](c, ns, key) }

// Bool returns a bool key's effective value, false for an unknown key.
func (c *Config) Bool(ns, key string) bool { return typed[bool](c, ns, key) }

// String returns a string key's effective value, "" for an unknown key.
func (c *Config) String(ns, key string) string { return typed[string](c, ns, key) }

// Blob returns a blob key's effective value, nil for an unknown key.
func (c *Config) Blob(ns, key string) []byte { return typed[[]byte](c, ns, key) }

// op is one validated write: a new value, or reset (nil value) to the default.
type op struct {
	k   *keyDef
	val any
}

// Set writes one key from inside the device with the checks of PUT /config. A nil value
// resets the key to its default; the secret sentinel leaves a secret untouched. readOnly keys
// can be written here (that is how they get their value). Refusals are *api.Error values
// with the key's path.
func (c *Config) Set(ns, key string, v any) error {
	k, err := c.key(ns, key)
	if err != nil {
		return api.Validation(ns+"."+key, "%v", err)
	}
	if v == nil {
		_, err := c.commit([]op{{k: k}})
		return err
	}
	if s, ok := v.(string); ok && k.Secret && s == Sentinel {
		return nil
	}
	raw, err := goToJSON(v)
	if err != nil {
		return api.Validation(k.path(), "%v", err)
	}
	val, msg := k.fromJSON(raw)
	if msg == "" {
		msg = k.checkWrite(val)
	}
	if msg != "" {
		return api.Validation(k.path(), "%s", msg)
	}
	_, err = c.commit([]op{{k: k, val: val}})
	return err
}

// Apply is PUT /config: body is a (partial) configuration document. The whole document is
// checked before anything is written, then the writes are committed as one batch.
func (c *Config) Apply(body []byte) (Result, error) {
	ops, err := c.parseDocument(body)
	if err != nil {
		return Result{Changed: []string{}}, c.explainUnknown(err)
	}
	return c.commit(ops)
}

// AwaitRetryAfter is the Retry-After (seconds) of a PUT naming an awaited namespace.
const AwaitRetryAfter = 5

// AwaitNamespaces tells the endpoints about run-time namespaces on their way: for a
// namespace that is not registered, why(ns) reports whether it is expected shortly and a
// message saying whose it is and what to do. The answers stay the spec's (PUT /config: 400
// validation with the namespace as path; GET /config?ns=: 404 unknown_namespace), with that
// message and Retry-After, so a first-time user enabling a bundled plugin's namespace during
// its installation is told to wait rather than that it does not exist. why is called
// without the configuration's locks held.
func (c *Config) AwaitNamespaces(why func(ns string) (string, bool)) { c.awaiting.Store(&why) }

// awaited answers why the unknown namespace ns is expected shortly (AwaitNamespaces).
func (c *Config) awaited(ns string) (string, bool) {
	why := c.awaiting.Load()
	if why == nil || ns == "" {
		return "", false
	}
	return (*why)(ns)
}

// explainUnknown turns parseDocument's unknown-namespace refusal into the awaited answer
// when the namespace is expected (AwaitNamespaces); any other error is returned as it is.
func (c *Config) explainUnknown(err error) error {
	var e *api.Error
	if !errors.As(err, &e) || e.Message != msgUnknownNamespace || e.Path == nil {
		return err
	}
	msg, ok := c.awaited(*e.Path)
	if !ok {
		return err
	}
	awaited := api.Validation(*e.Path, "%s", msg)
	awaited.RetryAfter = AwaitRetryAfter
	return awaited
}

// parseDocument validates a configuration document into writes.
func (c *Config) parseDocument(body []byte) ([]op, error) {
	var whole json.RawMessage
	if err := api.Unmarshal(body, &whole); err != nil {
		return nil, err
	}
	nss, ok := objectMembers(whole)
	if !ok {
		return nil, api.Validation("", "expected an object of namespaces")
	}
	c.mu.RLock()
	defer c.mu.RUnlock()
	var ops []op
	seenNS := map[string]bool{}
	for _, nm := range nss {
		if seenNS[nm.name] {
			return nil, api.Validation(nm.name, "namespace given twice")
		}
		seenNS[nm.name] = true
		d := c.nss[nm.name]
		if d == nil {
			return nil, api.Validation(nm.name, msgUnknownNamespace)
		}
		keys, ok := objectMembers(nm.raw)
		if !ok {
			return nil, api.Validation(nm.name, "expected an object of keys")
		}
		seen := map[string]bool{}
		for _, km := range keys {
			path := nm.name + "." + km.name
			if seen[km.name] {
				return nil, api.Validation(path, "key given twice")
			}
			seen[km.name] = true
			k := d.keys[km.name]
			if k == nil {
				return nil, api.Validation(path, "unknown key")
			}
			if k.ReadOnly {
				continue // an import ignores readOnly members, whatever they hold
			}
			if string(km.raw) == "null" {
				ops = append(ops, op{k: k})
				continue
			}
			if k.Secret && string(km.raw) == `"`+Sentinel+`"` {
				continue
			}
			val, msg := k.fromJSON(km.raw)
			if msg == "" {
				msg = k.checkWrite(val)
			}
			if msg != "" {
				return nil, api.Validation(path, "%s", msg)
			}
			ops = append(ops, op{k: k, val: val})
		}
	}
	return ops, nil
}

// commit writes validated ops as one batch and notifies listeners of effective changes.
func (c *Config) commit(ops []op) (Result, error) {
	res := Result{Changed: []string{}}
	c.wmu.Lock()
	sets := map[string]string{}
	var deletes []string
	var changed []*keyDef
	for _, o := range ops {
		before := canonical(c.effective(o.k))
		sk := storeKey(o.k.ns, o.k.Name)
		after := o.k.defJSON
		if o.val == nil {
			if _, stored, _ := c.st.Get(sk); stored {
				deletes = append(deletes, sk)
			}
		} else {
			after = canonical(o.val)
			if after == before {
				continue // writing the current value is not a change, and not written
			}
			sets[sk] = after
		}
		if after != before {
			changed = append(changed, o.k)
		}
		// A write of a key drops the pending value of a deprecated key that would move
		// over it at the next boot: the later value wins, whichever of the two it is in.
		for _, d := range c.supersedes[o.k] {
			dk := storeKey(d.ns, d.Name)
			inDoc := slices.ContainsFunc(ops, func(o op) bool { return o.k == d })
			if _, stored, _ := c.st.Get(dk); stored && !inDoc {
				deletes = append(deletes, dk)
				if canonical(c.effective(d)) != d.defJSON {
					changed = append(changed, d)
				}
			}
		}
	}
	if err := c.st.Apply(sets, deletes); err != nil {
		c.wmu.Unlock()
		c.log.Error("config: write failed", "err", err)
		return res, &api.Error{Status: http.StatusInternalServerError, Code: api.CodeWriteFailed, Message: "storage failure while applying the configuration"}
	}
	c.wmu.Unlock()
	for _, k := range changed {
		res.Changed = append(res.Changed, k.path())
		res.RestartRequired = res.RestartRequired || k.RestartRequired
	}
	c.notify(changed)
	return res, nil
}

func (c *Config) notify(changed []*keyDef) {
	if len(changed) == 0 {
		return
	}
	c.mu.RLock()
	ls := append([]func(string, string){}, c.listeners...)
	c.mu.RUnlock()
	for _, k := range changed {
		for _, fn := range ls {
			fn(k.ns, k.Name)
		}
	}
}

// Document returns the configuration document of effective values (secrets redacted) for
// one namespace, or all when ns is "".
func (c *Config) Document(ns string) ([]byte, error) {
	if b, ok := c.docs.Load(ns); ok {
		return b.([]byte), nil
	}
	gen := c.docGen.Load()
	c.mu.RLock()
	names := c.order
	if ns != "" {
		if c.nss[ns] == nil {
			c.mu.RUnlock()
			return nil, fmt.Errorf("%w: %q", ErrUnknownNamespace, ns)
		}
		names = []string{ns}
	}
	defs := make([]*nsDef, len(names))
	for i, n := range names {
		defs[i] = c.nss[n]
	}
	c.mu.RUnlock()
	doc := &obj{}
	for _, d := range defs {
		o := &obj{}
		for _, k := range d.order {
			v := c.effective(k)
			if k.Secret {
				v = redact(v)
			}
			o.set(k.Name, json.RawMessage(canonical(v)))
		}
		doc.set(d.Name, o)
	}
	b := marshal(doc)
	// A write that landed while this document was built has emptied the cache after gen
	// was read; caching the older rendering then would outlive it.
	c.docMu.Lock()
	if c.docGen.Load() == gen {
		c.docs.Store(ns, b)
	}
	c.docMu.Unlock()
	return b, nil
}

// dropDocs empties the document cache and, by moving the generation, every key's cached
// value; it runs before and after every store write.
func (c *Config) dropDocs() {
	c.docMu.Lock()
	c.docGen.Add(1)
	c.docs.Clear()
	c.docMu.Unlock()
}

// docStore is the store as config writes it: every write empties the document cache.
type docStore struct {
	*store.Store
	flush func()
}

func (s *docStore) Apply(sets map[string]string, deletes []string) error {
	s.flush()
	defer s.flush()
	return s.Store.Apply(sets, deletes)
}

func (s *docStore) Set(key, value string) error {
	s.flush()
	defer s.flush()
	return s.Store.Set(key, value)
}

func (s *docStore) Delete(key string) error {
	s.flush()
	defer s.flush()
	return s.Store.Delete(key)
}

// redact is how a secret reads back: the sentinel when set, "" when unset.
func redact(v any) any {
	switch x := v.(type) {
	case string:
		if x == "" {
			return ""
		}
	case []byte:
		if len(x) == 0 {
			return ""
		}
	}
	return Sentinel
}

// Register adds a run-time namespace (`x-dev-runtime` in the schema), runs its versioning
// and changes the schema ETag.
func (c *Config) Register(ns Namespace) error {
	d, err := compile(ns)
	if err != nil {
		return fmt.Errorf("config: %w", err)
	}
	for _, k := range d.order {
		if k.MovesTo != "" {
			return fmt.Errorf("config: key %s: movesTo is for built-in namespaces", k.path())
		}
	}
	d.runtime = true
	c.wmu.Lock()
	defer c.wmu.Unlock()
	c.mu.RLock()
	exists := c.nss[d.Name] != nil
	c.mu.RUnlock()
	if exists {
		return fmt.Errorf("config: namespace %s: %w", d.Name, ErrExists)
	}
	c.versioning(d)
	c.mu.Lock()
	c.nss[d.Name] = d
	c.order = append(c.order, d.Name)
	c.mu.Unlock()
	c.rebuildSchema()
	c.log.Info("config: run-time namespace registered", "ns", d.Name, "version", d.Version)
	return nil
}

// Unregister removes a run-time namespace from the document and the schema (changing the
// ETag). Its stored values stay until Purge.
func (c *Config) Unregister(name string) error {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	c.mu.Lock()
	d := c.nss[name]
	switch {
	case d == nil:
		c.mu.Unlock()
		return fmt.Errorf("%w: %q", ErrUnknownNamespace, name)
	case !d.runtime:
		c.mu.Unlock()
		return fmt.Errorf("config: namespace %s: %w", name, ErrNotRuntime)
	}
	delete(c.nss, name)
	for i, n := range c.order {
		if n == name {
			c.order = append(c.order[:i:i], c.order[i+1:]...)
			break
		}
	}
	c.mu.Unlock()
	c.rebuildSchema()
	c.log.Info("config: run-time namespace unregistered", "ns", name)
	return nil
}

// Purge erases every stored value of a namespace that is not registered (a removed
// plugin's settings), its stored version included.
func (c *Config) Purge(name string) error {
	if !ValidNamespaceName(name) {
		return fmt.Errorf("%w: %q", ErrUnknownNamespace, name)
	}
	c.wmu.Lock()
	defer c.wmu.Unlock()
	c.mu.RLock()
	registered := c.nss[name] != nil
	c.mu.RUnlock()
	if registered {
		return fmt.Errorf("config: purge %s: %w", name, ErrRegistered)
	}
	var keys []string
	if err := c.st.Scan(storePrefix+name+"/", func(k, _ string) bool {
		keys = append(keys, k)
		return true
	}); err != nil {
		return fmt.Errorf("config: purge %s: %w", name, err)
	}
	if err := c.st.Apply(nil, keys); err != nil {
		return fmt.Errorf("config: purge %s: %w", name, err)
	}
	return nil
}

// moveDeprecated moves the stored value of every Key.MovesTo key to its target.
func (c *Config) moveDeprecated() {
	for _, name := range c.order {
		for _, k := range c.nss[name].order {
			if k.MovesTo != "" {
				c.moveKey(k, c.lookupKey(k.MovesTo))
			}
		}
	}
}

func (c *Config) moveKey(from, to *keyDef) {
	sk := storeKey(from.ns, from.Name)
	raw, ok, err := c.st.Get(sk)
	if err != nil || !ok {
		return
	}
	v, msg := from.fromJSON([]byte(raw))
	s, _ := v.(string)
	if msg != "" || s == "" {
		if err := c.st.Delete(sk); err != nil {
			c.log.Error("config: clear deprecated key", "key", from.path(), "err", err)
		}
		return
	}
	sets := map[string]string{}
	// A stored value was written since the last boot (every boot clears it) and after any
	// write of its successor (which drops it), so it is the later value and takes over.
	tv, tmsg := to.fromJSON([]byte(raw))
	if tmsg == "" {
		tmsg = to.checkWrite(tv)
	}
	switch {
	case tmsg != "":
		c.log.Warn("config: deprecated key dropped, its value does not fit the successor",
			"key", from.path(), "value", s, "successor", to.path(), "reason", tmsg)
	default:
		sets[storeKey(to.ns, to.Name)] = canonical(tv)
		current, _ := c.effective(to).(string)
		c.log.Info("config: deprecated key moved", "key", from.path(), "to", to.path(), "value", s, "replaced", current)
	}
	if err := c.st.Apply(sets, []string{sk}); err != nil {
		c.log.Error("config: move deprecated key", "key", from.path(), "err", err)
	}
}

// versioning applies the spec's start-up table to one namespace.
func (c *Config) versioning(d *nsDef) {
	vk := storeKey(d.Name, VersionKey)
	stamp := func(v int) error { return c.st.Set(vk, strconv.Itoa(v)) }
	raw, ok, err := c.st.Get(vk)
	if err != nil {
		c.log.Error("config: read stored version", "ns", d.Name, "err", err)
		return
	}
	if !ok {
		if err := stamp(d.Version); err != nil {
			c.log.Error("config: stamp version", "ns", d.Name, "err", err)
		}
		return
	}
	stored, perr := strconv.Atoi(raw)
	if perr != nil || stored < 1 {
		c.log.Warn("config: stored version unreadable, re-stamped", "ns", d.Name, "stored", raw, "version", d.Version)
		if err := stamp(d.Version); err != nil {
			c.log.Error("config: stamp version", "ns", d.Name, "err", err)
		}
		return
	}
	switch {
	case stored == d.Version:
		return
	case stored > d.Version:
		c.log.Warn("config: stored layout is newer than this firmware, left alone",
			"ns", d.Name, "stored", stored, "version", d.Version)
		return
	}
	for v := stored + 1; v <= d.Version; v++ {
		m := &Migration{ns: d.Name, st: c.st, sets: map[string]string{}, deletes: map[string]bool{}}
		if step := d.Steps[v]; step != nil {
			if err := runStep(step, m); err != nil {
				c.log.Warn("config: migration step failed, retried at next boot",
					"ns", d.Name, "from", v-1, "to", v, "err", err)
				return
			}
		}
		m.sets[vk] = strconv.Itoa(v)
		var dels []string
		for k := range m.deletes {
			dels = append(dels, k)
		}
		if err := c.st.Apply(m.sets, dels); err != nil {
			c.log.Error("config: migration write failed, retried at next boot",
				"ns", d.Name, "to", v, "err", err)
			return
		}
		c.log.Info("config: namespace migrated", "ns", d.Name, "from", v-1, "to", v)
	}
}

func runStep(step Step, m *Migration) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("step panicked: %v", r)
		}
	}()
	return step(m)
}

// Migration is a step's view of its namespace's stored values. Writes are committed with the
// version stamp as one batch, only if the step returns nil.
type Migration struct {
	ns      string
	st      *docStore
	sets    map[string]string
	deletes map[string]bool
}

// Raw returns the stored JSON text of key as this step has left it so far.
func (m *Migration) Raw(key string) (json.RawMessage, bool) {
	sk := storeKey(m.ns, key)
	if v, ok := m.sets[sk]; ok {
		return json.RawMessage(v), true
	}
	if m.deletes[sk] {
		return nil, false
	}
	v, ok, err := m.st.Get(sk)
	if err != nil || !ok {
		return nil, false
	}
	return json.RawMessage(v), true
}

// Set stores v (bool, number, string or []byte) under key.
func (m *Migration) Set(key string, v any) error {
	if key == VersionKey || !keyNameRE.MatchString(key) {
		return fmt.Errorf("config: migration cannot write key %q", key)
	}
	raw, err := goToJSON(v)
	if err != nil {
		return fmt.Errorf("config: migration value for %s: %w", key, err)
	}
	sk := storeKey(m.ns, key)
	delete(m.deletes, sk)
	m.sets[sk] = string(raw)
	return nil
}

// Delete removes key.
func (m *Migration) Delete(key string) {
	if key == VersionKey {
		return
	}
	sk := storeKey(m.ns, key)
	delete(m.sets, sk)
	m.deletes[sk] = true
}
