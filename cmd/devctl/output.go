package main

import (
	"encoding/json"
	"fmt"
	"io"
)

// printJSON writes v as indented JSON and a newline: the documents devctl prints for a
// person and for a script alike (board state, BLE adverts, an OTA manifest).
func printJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	if err := enc.Encode(v); err != nil {
		return fmt.Errorf("output: %w", err)
	}
	return nil
}
