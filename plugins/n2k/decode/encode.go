package decode

import (
	"errors"
	"fmt"
	"math"

	"devhost/plugins/n2k/pgn"
)

// ErrEncode is a value the definition cannot carry.
var ErrEncode = errors.New("cannot encode")

// bitWriter appends little-endian bit fields.
type bitWriter struct {
	data []byte
	pos  int
}

func (w *bitWriter) bits(v uint64, n int) {
	for i := 0; i < n; i++ {
		if w.pos>>3 >= len(w.data) {
			w.data = append(w.data, 0)
		}
		if v>>i&1 == 1 {
			w.data[w.pos>>3] |= 1 << (w.pos & 7)
		}
		w.pos++
	}
}

// Encode builds the data of a message from the first definition of p. Values are float64
// (physical values: the resolution and offset are applied; for lookups the raw number) or
// string (fixed-length strings); "list" holds the repeating set as []map[string]any. A
// field without a value is sent as "data not available" (all ones), reserved bits as ones.
func Encode(p uint32, values map[string]any) ([]byte, error) {
	defs := Definitions(p)
	if len(defs) == 0 {
		return nil, fmt.Errorf("pgn %d: %w", p, ErrUnknownPGN)
	}
	def := &defs[0]
	w := &bitWriter{}
	fixed := def.Fields[:len(def.Fields)-repeating(def)]
	for i := range fixed {
		if err := encodeField(w, &fixed[i], values[fixed[i].ID]); err != nil {
			return nil, fmt.Errorf("pgn %d: %w", p, err)
		}
	}
	if def.Rep1Size > 0 {
		list, _ := values["list"].([]map[string]any)
		set := def.Fields[def.Rep1Start-1 : def.Rep1Start-1+def.Rep1Size]
		for _, group := range list {
			for i := range set {
				if err := encodeField(w, &set[i], group[set[i].ID]); err != nil {
					return nil, fmt.Errorf("pgn %d: %w", p, err)
				}
			}
		}
	}
	for len(w.data) < def.Length {
		w.data = append(w.data, 0xff)
	}
	return w.data, nil
}

// Definitions is pgn.Definitions, here for the encoder's callers.
func Definitions(p uint32) []pgn.PGN { return pgn.Definitions(p) }

func encodeField(w *bitWriter, f *pgn.Field, v any) error {
	n := f.BitLength
	if n <= 0 {
		return fmt.Errorf("field %s of variable length: %w", f.ID, ErrEncode)
	}
	switch x := v.(type) {
	case nil:
		if f.Type == pgn.StringFix {
			for i := 0; i < n/8; i++ {
				w.bits(0xff, 8)
			}
			return nil
		}
		for done := 0; done < n; done += 64 {
			w.bits(math.MaxUint64, min(64, n-done))
		}
		return nil
	case string:
		if f.Type != pgn.StringFix || len(x) > n/8 {
			return fmt.Errorf("field %s: string %q: %w", f.ID, x, ErrEncode)
		}
		for i := 0; i < n/8; i++ {
			c := byte(0xff)
			if i < len(x) {
				c = x[i]
			}
			w.bits(uint64(c), 8)
		}
		return nil
	case float64:
		if n > 64 {
			return fmt.Errorf("field %s: number in %d bits: %w", f.ID, n, ErrEncode)
		}
		raw := x
		if f.Type != pgn.Lookup && f.Resolution != 0 {
			raw = x / f.Resolution
		}
		raw = math.Round(raw - f.Offset)
		lo, hi := 0.0, math.Exp2(float64(n))-1
		if f.Signed {
			lo, hi = -math.Exp2(float64(n-1)), math.Exp2(float64(n-1))-1
		}
		if math.IsNaN(raw) || raw < lo || raw > hi {
			return fmt.Errorf("field %s: %v out of range: %w", f.ID, x, ErrEncode)
		}
		w.bits(uint64(int64(raw)), n)
		return nil
	}
	return fmt.Errorf("field %s: %T: %w", f.ID, v, ErrEncode)
}
