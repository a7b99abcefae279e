package sktest

import (
	"bytes"
	"sync"
)

// Config is a settable device configuration for the tests of the Signal K client and its TLS
// component. It reads like host/config (Int, String, Bool, Blob by namespace and key; a key
// never set, or set to a value of another type, reads as the zero value) and calls its
// OnChange listeners after every Set, as the device does when an operator changes a key.
type Config struct {
	mu        sync.Mutex
	v         map[string]any
	listeners []func(ns, key string)
}

// NewConfig starts from values, keyed "ns.key" (nil starts empty).
func NewConfig(values map[string]any) *Config {
	c := &Config{v: map[string]any{}}
	for k, v := range values {
		c.v[k] = v
	}
	return c
}

// read answers the key's value as a T, the zero value when it is missing or of another type.
func read[T any](c *Config, ns, key string) T {
	c.mu.Lock()
	defer c.mu.Unlock()
	v, _ := c.v[ns+"."+key].(T)
	return v
}

// Int reads an integer key.
func (c *Config) Int(ns, key string) int { return read[int](c, ns, key) }

// String reads a string key.
func (c *Config) String(ns, key string) string { return read[string](c, ns, key) }

// Bool reads a boolean key.
func (c *Config) Bool(ns, key string) bool { return read[bool](c, ns, key) }

// Blob reads a copy of a binary key.
func (c *Config) Blob(ns, key string) []byte { return bytes.Clone(read[[]byte](c, ns, key)) }

// OnChange adds a listener for every later Set.
func (c *Config) OnChange(fn func(ns, key string)) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.listeners = append(c.listeners, fn)
}

// Set changes a key and then calls the listeners, outside the lock (they read the
// configuration back).
func (c *Config) Set(ns, key string, v any) {
	c.mu.Lock()
	c.v[ns+"."+key] = v
	ls := append([]func(ns, key string){}, c.listeners...)
	c.mu.Unlock()
	for _, fn := range ls {
		fn(ns, key)
	}
}
