package skmap

import (
	"encoding/json"
	"math"
	"testing"
)

// AppendJSON writes what json.Marshal writes, for every kind of value the mapping makes.
func TestAppendJSON(t *testing.T) {
	one, two := 1, "2"
	yaw := 0.5
	d := &Delta{Updates: []Update{{
		Source:    Source{Label: "", Type: "NMEA2000", PGN: 129029, Src: "7", CanName: "c03c8c0011351024", DeviceInstance: &one, Instance: &two},
		Timestamp: "2016-02-28T19:57:02.364Z",
		Values: []Value{
			{"a", 1.5}, {"b", 0.0000001}, {"c", 1e22}, {"d", -0.261}, {"e", "x\"<>&\n\t\x01é\u2028"}, {"f", nil}, {"g", true},
			{"h", Position{Longitude: -60.950393, Latitude: 14.0740582}}, {"i", Attitude{Yaw: &yaw}},
			{"j", Notification{State: "normal", Method: []string{}, Message: "m"}},
			{"k", SatellitesInView{Count: 3, Satellites: []Satellite{{ID: 29.0, SNR: 38.0}, {}, {ID: 3.0, Elevation: 0.5, Azimuth: "x", SNR: 1.0}}}},
			{"k2", SatellitesInView{}},
			{"l", 53852400000.0}, {"m", 4.79}, {"n", math.NaN()},
		},
	}}}
	want, err := json.Marshal(d)
	if err != nil {
		t.Fatal(err)
	}
	if got := d.AppendJSON(nil); string(got) != string(want) {
		t.Errorf("got\n%s\nwant\n%s", got, want)
	}
	// Another label and type, and an update without values.
	d.Updates = append(d.Updates, Update{Source: Source{Label: "x", Type: "t"}, Values: []Value{{"z", 2.0}}})
	want, _ = json.Marshal(d)
	if string(d.AppendJSON(nil)) != string(want) {
		t.Errorf("got\n%s\nwant\n%s", d.AppendJSON(nil), want)
	}
	// AppendJSONSpans writes the same after what b holds, and finds each value of the
	// first update: its text is what AppendValue writes.
	got, spans := d.AppendJSONSpans([]byte("prefix"), []int{-1})
	if string(got) != "prefix"+string(want) {
		t.Errorf("spans: got\n%s", got)
	}
	values := d.Updates[0].Values
	if len(spans) != 1+2*len(values) {
		t.Fatalf("spans %v", spans)
	}
	for i, v := range values {
		if text := got[spans[1+2*i]:spans[2+2*i]]; string(text) != string(AppendValue(nil, v.Value)) {
			t.Errorf("value %s: %s", v.Path, text)
		}
	}
	d.Updates[1].Values = []Value{}
	if want, _ := json.Marshal(d); string(d.AppendJSON(nil)) != string(want) {
		t.Errorf("got\n%s\nwant\n%s", d.AppendJSON(nil), want)
	}
}

func FuzzAppendString(f *testing.F) {
	f.Add("plain")
	f.Add("x\"<>&\n\t\x01é\u2028\xff")
	f.Fuzz(func(t *testing.T, s string) {
		want, _ := json.Marshal(s)
		if got := appendString(nil, s); string(got) != string(want) {
			t.Fatalf("%q: got %s want %s", s, got, want)
		}
	})
}

// A number written from the cache is the text written anew, for numbers that repeat, that
// share a slot, that do not fit one, and for what JSON writes as null.
func TestNumCache(t *testing.T) {
	var c textCache
	values := []float64{0, math.Copysign(0, -1), 1.5, -0.261, 1e-7, 1e22, 53852400000, math.NaN(), math.Inf(-1),
		-1.2345678901234567e-100, 4.79}
	for i := 0; i < 5000; i++ {
		values = append(values, float64(i)*0.01, float64(i%37)*1.1)
	}
	for round := 0; round < 2; round++ {
		for _, f := range values {
			if got, want := c.appendFloat([]byte("x"), f), appendFloat([]byte("x"), f); string(got) != string(want) {
				t.Fatalf("%v: got %s want %s", f, got, want)
			}
		}
	}
}

// A string written through the cache is written as appendString writes it, the first time
// and again, whether it needs escaping or not.
func TestTextCacheStrings(t *testing.T) {
	var c textCache
	built := string([]byte("navigation.speedOverGround"))
	for round := 0; round < 3; round++ {
		for _, s := range []string{"navigation.speedOverGround", built, "2016-02-28T19:57:02.364Z", "7", "",
			`a "quoted" <path>`, "é", "x\u2028"} {
			if got, want := c.appendString(nil, s), appendString(nil, s); string(got) != string(want) {
				t.Fatalf("%q: got %s want %s", s, got, want)
			}
		}
	}
}
