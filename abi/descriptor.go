package abi

// KeyDescriptor is one key of a configuration namespace descriptor in its JSON form (the
// spec's descriptor table), declared once for both sides of the register call. D is what
// holds the default: a plugin writes any Go value (the SDK's Key is KeyDescriptor[any]); the
// host keeps the raw JSON (KeyDescriptor[json.RawMessage]) to check it against the key's type.
type KeyDescriptor[D any] struct {
	Name            string   `json:"name"`
	Type            string   `json:"type"`
	Default         D        `json:"default,omitempty"`
	Min             *float64 `json:"min,omitempty"`
	Max             *float64 `json:"max,omitempty"`
	MaxLength       int      `json:"maxLength,omitempty"`
	Enum            []string `json:"enum,omitempty"`
	Pattern         string   `json:"pattern,omitempty"`
	Secret          bool     `json:"secret,omitempty"`
	RestartRequired bool     `json:"restart_required,omitempty"`
	ReadOnly        bool     `json:"readOnly,omitempty"`
	Unit            string   `json:"unit,omitempty"`
	Group           string   `json:"group,omitempty"`
	Title           string   `json:"title,omitempty"`
	Description     string   `json:"description,omitempty"`
	X               *Display `json:"x,omitempty"`
}

// Display holds a key's presentation hints (the descriptor's `x`); Format "table" with
// Columns makes a table key.
type Display struct {
	DisplayMultiplier *float64 `json:"displayMultiplier,omitempty"`
	DisplayOffset     *float64 `json:"displayOffset,omitempty"`
	Format            string   `json:"format,omitempty"`
	Columns           []string `json:"columns,omitempty"`
}
