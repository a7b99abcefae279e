package abi

import (
	"bytes"
	"encoding/json"
	"errors"
)

// ErrTrailingData is a JSON document followed by more than white space.
var ErrTrailingData = errors.New("trailing data after the document")

// DecodeStrict decodes one JSON document into v as the device reads its documents
// (manifests, namespace descriptors, plugin request bodies): a member v does not have is an
// error, and so is anything after the document but white space (ErrTrailingData).
func DecodeStrict(b []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return err
	}
	if len(bytes.TrimSpace(b[dec.InputOffset():])) > 0 {
		return ErrTrailingData
	}
	return nil
}
