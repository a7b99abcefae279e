package decode

import (
	"errors"
	"reflect"
	"testing"
)

// Encoding then decoding gives the values back.
func TestEncodeRoundTrip(t *testing.T) {
	tests := []struct {
		pgn  uint32
		in   map[string]any
		want map[string]any
	}{
		{127502, map[string]any{"instance": 2.0, "switch3": 1.0},
			map[string]any{"instance": 2.0, "switch3": "On", "switch1": "Take no action (no change)", "switch28": "Take no action (no change)"}},
		{126993, map[string]any{"dataTransmitOffset": 60.0, "sequenceCounter": 5.0, "controller1State": 0.0, "controller2State": 0.0, "equipmentStatus": 0.0},
			map[string]any{"dataTransmitOffset": "00:01:00", "sequenceCounter": 5.0, "controller1State": "Error Active", "controller2State": "Error Active", "equipmentStatus": "Operational"}},
		{59904, map[string]any{"pgn": 60928.0}, map[string]any{"pgn": 60928.0}},
		{126996, map[string]any{"nmea2000Version": 2.1, "productCode": 1.0, "modelId": "devhost n2k"},
			map[string]any{"nmea2000Version": 2.1, "productCode": 1.0, "modelId": "devhost n2k"}},
	}
	for _, tc := range tests {
		data, err := Encode(tc.pgn, tc.in)
		if err != nil {
			t.Fatalf("%d: %v", tc.pgn, err)
		}
		d, err := Decode(Message{Header: Header{PGN: tc.pgn}, Data: data})
		if err != nil {
			t.Fatalf("%d: %v", tc.pgn, err)
		}
		got := map[string]any{}
		for k := range tc.want {
			if v, ok := d.Lookup(k); ok {
				got[k] = v
			}
		}
		if !reflect.DeepEqual(got, tc.want) {
			t.Errorf("%d: got %v want %v", tc.pgn, d.Map(), tc.want)
		}
	}
	// 126464, a repeating list of PGNs.
	data, err := Encode(126464, map[string]any{"functionCode": 0.0, "list": []map[string]any{{"pgn": 59904.0}, {"pgn": 60928.0}}})
	if err != nil {
		t.Fatal(err)
	}
	d, err := Decode(Message{Header: Header{PGN: 126464}, Data: data})
	if err != nil || len(d.List) != 2 || d.List[1].Field("pgn") != 60928.0 {
		t.Fatalf("126464: %v %+v", err, d)
	}
	for _, bad := range []map[string]any{{"instance": 300.0}, {"instance": "x"}, {"instance": true}} {
		if _, err := Encode(127502, bad); !errors.Is(err, ErrEncode) {
			t.Errorf("%v: %v", bad, err)
		}
	}
}
