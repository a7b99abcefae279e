package config

import (
	"bytes"
	"devhost/abi"
	"encoding/json"
	"errors"
	"fmt"
)

// Wire form of a descriptor: the spec's descriptor field names.
type nsJSON struct {
	Namespace   string                               `json:"namespace"`
	Version     int                                  `json:"version"`
	Title       string                               `json:"title"`
	Description string                               `json:"description"`
	Keys        []abi.KeyDescriptor[json.RawMessage] `json:"keys"`
}

// ParseNamespace decodes a JSON descriptor and validates it (ValidateNamespace).
func ParseNamespace(b []byte) (Namespace, error) {
	ns, err := DecodeNamespace(b)
	if err != nil {
		return Namespace{}, err
	}
	if err := ValidateNamespace(ns); err != nil {
		return Namespace{}, err
	}
	return ns, nil
}

// DecodeNamespace decodes a JSON descriptor without validating its rules, for callers that
// fill in the name first (run-time namespaces). Unknown members and trailing data are refused.
// The shape mirrors the spec's descriptor table:
//
//	{"namespace": "f_log", "version": 1, "title": "Logger", "description": "...",
//	 "keys": [{"name": "rate", "type": "float", "default": 1, "min": 0, "max": 10,
//	           "unit": "Hz", "group": "Sampling", "restart_required": false, "readOnly": false,
//	           "title": "...", "description": "...",
//	           "x": {"displayMultiplier": 60, "displayOffset": 0, "format": "", "columns": []}},
//	          {"name": "token", "type": "string", "default": "", "maxLength": 64,
//	           "secret": true, "pattern": "^[a-z]*$", "enum": null}]}
//
// A descriptor carries no migration steps: its version changes are additive.
func DecodeNamespace(b []byte) (Namespace, error) {
	if len(b) > maxDescriptorBytes {
		return Namespace{}, fmt.Errorf("config: descriptor of %d bytes, at most %d", len(b), maxDescriptorBytes)
	}
	var w nsJSON
	if err := abi.DecodeStrict(b, &w); err != nil {
		return Namespace{}, fmt.Errorf("config: descriptor: %w", err)
	}
	ns := Namespace{Name: w.Namespace, Version: w.Version, Title: w.Title, Description: w.Description}
	for _, kj := range w.Keys {
		k := Key{
			Name: kj.Name, Type: kj.Type, Min: kj.Min, Max: kj.Max, MaxLength: kj.MaxLength,
			Enum: kj.Enum, Pattern: kj.Pattern, Secret: kj.Secret, RestartRequired: kj.RestartRequired,
			ReadOnly: kj.ReadOnly, Unit: kj.Unit, Group: kj.Group, Title: kj.Title, Description: kj.Description,
		}
		if kj.X != nil {
			x := X(*kj.X)
			k.X = &x
		}
		if d := bytes.TrimSpace(kj.Default); len(d) > 0 && string(d) != "null" {
			v, err := jsonDefault(kj.Type, d)
			if err != nil {
				return Namespace{}, fmt.Errorf("config: descriptor: key %q default: %w", kj.Name, err)
			}
			k.Default = v
		}
		ns.Keys = append(ns.Keys, k)
	}
	return ns, nil
}

// jsonDefault turns a JSON default into the Go value a Key carries; compile then checks it
// against the key's constraints exactly as a Go literal.
func jsonDefault(typ string, raw json.RawMessage) (any, error) {
	switch typ {
	case TypeInt, TypeFloat:
		var n json.Number
		if raw[0] == '"' || json.Unmarshal(raw, &n) != nil {
			return nil, errors.New("expected a number")
		}
		return n, nil
	case TypeBool:
		var b bool
		if err := json.Unmarshal(raw, &b); err != nil {
			return nil, errors.New("expected a boolean")
		}
		return b, nil
	case TypeString, TypeBlob:
		var s string
		if err := json.Unmarshal(raw, &s); err != nil {
			return nil, errors.New("expected a string")
		}
		return s, nil
	}
	return nil, fmt.Errorf("unknown type %q", typ)
}
