package config

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"math"
)

// SchemaDraft is the JSON Schema dialect of the schema document.
const SchemaDraft = "https://json-schema.org/draft/2020-12/schema"

// base64Pattern matches RFC 4648 base64 with padding, including the rule that unused bits of
// the last character are zero (what the device's strict decoder demands).
const base64Pattern = `(?:[A-Za-z0-9+/]{4})*(?:[A-Za-z0-9+/][AQgw]==|[A-Za-z0-9+/]{2}[AEIMQUYcgkosw048]=)?`

const bytesComment = "String lengths (maxLength, and the minimum length of keys that are empty or at least N long) " +
	"are enforced by the device in UTF-8 bytes; a JSON Schema validator counts characters, so text with " +
	"non-ASCII characters can be judged differently here than by the device. " +
	"pattern is checked by the UI only. null (reset to the default) is accepted by PUT /config but is not " +
	"part of this document."

// Schema returns the schema document and its strong ETag (quoted), built on the first call
// after the set of namespaces changed: no request at boot needs it, so a boot does not build it.
func (c *Config) Schema() (body []byte, etag string) {
	c.mu.RLock()
	body, etag = c.schema, c.etag
	c.mu.RUnlock()
	if body != nil {
		return body, etag
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.schema == nil {
		c.buildSchema()
	}
	return c.schema, c.etag
}

// SchemaETag returns the current schema ETag (for /system/info).
func (c *Config) SchemaETag() string {
	_, etag := c.Schema()
	return etag
}

// rebuildSchema marks the schema stale after the set of namespaces changed; the next Schema
// builds it. The ETag is the content hash plus a generation counter, so every register and
// unregister yields a new ETag even when the content returns to an earlier state.
func (c *Config) rebuildSchema() {
	// The set of namespaces changed: cached documents no longer list the right ones.
	c.dropDocs()
	c.mu.Lock()
	defer c.mu.Unlock()
	c.gen++
	c.schema, c.etag = nil, ""
}

// buildSchema renders the schema of the current namespaces; c.mu is held for writing.
func (c *Config) buildSchema() {
	props := &obj{}
	for _, name := range c.order {
		props.set(name, nsSchema(c.nss[name]))
	}
	root := &obj{}
	root.set("$schema", SchemaDraft)
	root.set("title", "Device configuration")
	root.set("$comment", bytesComment)
	root.set("type", "object")
	root.set("additionalProperties", false)
	root.set("properties", props)
	body := marshal(root)
	sum := sha256.Sum256(body)
	c.schema = body
	c.etag = fmt.Sprintf(`"%s-%d"`, hex.EncodeToString(sum[:12]), c.gen)
}

func nsSchema(d *nsDef) *obj {
	o := &obj{}
	o.set("type", "object")
	o.set("title", d.Title)
	if d.Description != "" {
		o.set("description", d.Description)
	}
	o.set("x-dev-version", d.Version)
	if d.runtime {
		o.set("x-dev-runtime", true)
	}
	o.set("additionalProperties", false)
	props := &obj{}
	for _, k := range d.order {
		props.set(k.Name, keySchema(k))
	}
	o.set("properties", props)
	return o
}

func keySchema(k *keyDef) *obj {
	o := &obj{}
	switch k.Type {
	case TypeBool:
		o.set("type", "boolean")
	case TypeInt:
		o.set("type", "integer")
	case TypeFloat:
		o.set("type", "number")
	default:
		o.set("type", "string")
	}
	if k.Title != "" {
		o.set("title", k.Title)
	}
	if k.Description != "" {
		o.set("description", k.Description)
	}
	if !k.Secret {
		o.set("default", public(k.def))
	}
	if k.hasMin {
		o.set("minimum", number(k.min))
	}
	if k.hasMax {
		o.set("maximum", number(k.max))
	}
	switch k.Type {
	case TypeString:
		o.set("maxLength", k.maxLen)
		if k.Enum != nil {
			o.set("enum", k.Enum)
		}
		if k.Pattern != "" {
			o.set("pattern", k.Pattern)
		}
		if k.MinLength > 1 {
			// Empty, or at least MinLength: no length in 1..MinLength-1.
			short := &obj{}
			short.set("minLength", 1)
			short.set("maxLength", k.MinLength-1)
			o.set("not", short)
		}
		if k.table {
			o.set("contentMediaType", "application/json")
			o.set("contentSchema", tableSchema(k))
		}
	case TypeBlob:
		o.set("maxLength", base64Len(k.maxLen))
		if k.Secret {
			o.set("pattern", `^(?:\*{8}|`+base64Pattern+`)$`)
		} else {
			o.set("pattern", `^`+base64Pattern+`$`)
			o.set("contentEncoding", "base64")
		}
		if r := k.maxLen % 3; r != 0 {
			// maxLength alone would let the longest base64 string decode to up to 2 bytes
			// more than allowed: at that length the padding must cover the excess.
			full := &obj{}
			full.set("maxLength", k.maxLen/3*4)
			tail := &obj{}
			tail.set("pattern", map[int]string{1: "==$", 2: "=$"}[r])
			alts := []any{full, tail}
			if k.Secret {
				alts = append(alts, map[string]any{"const": Sentinel})
			}
			o.set("anyOf", alts)
		}
	}
	if k.Secret {
		o.set("format", "password")
		o.set("writeOnly", true)
		o.set("x-dev-secret", true)
	}
	if k.ReadOnly {
		o.set("readOnly", true)
	}
	if k.MovesTo != "" {
		o.set("deprecated", true)
		o.set("x-dev-movesTo", k.MovesTo)
	}
	if k.RestartRequired {
		o.set("x-dev-restartRequired", true)
	}
	if k.Unit != "" {
		o.set("x-dev-unit", k.Unit)
	}
	if k.Type == TypeBlob {
		o.set("x-dev-type", "blob")
		o.set("x-dev-maxBytes", k.maxLen)
	}
	if k.Group != "" {
		o.set("x-dev-group", k.Group)
	}
	if x := k.X; x != nil {
		d := &obj{}
		if x.DisplayMultiplier != nil {
			d.set("displayMultiplier", *x.DisplayMultiplier)
		}
		if x.DisplayOffset != nil {
			d.set("displayOffset", *x.DisplayOffset)
		}
		if x.Format != "" {
			d.set("format", x.Format)
		}
		if x.Columns != nil {
			d.set("columns", x.Columns)
		}
		o.set("x-dev-display", d)
	}
	return o
}

// tableSchema describes the JSON inside a table key's string.
func tableSchema(k *keyDef) *obj {
	cols := &obj{}
	for _, c := range k.X.Columns {
		cols.set(c, map[string]any{"type": []string{"string", "number", "boolean", "null"}})
	}
	row := &obj{}
	row.set("type", "object")
	row.set("properties", cols)
	row.set("additionalProperties", false)
	t := &obj{}
	t.set("type", "array")
	t.set("items", row)
	return t
}

// number writes integral bounds without a fraction (65535, not 65535.0).
func number(f float64) any {
	if f == math.Trunc(f) && math.Abs(f) < 1<<53 {
		return int64(f)
	}
	return f
}
