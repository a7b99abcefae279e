package gateway

import (
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"
)

// fakeDecoders stand in for plugins/ble/sensors: kind "temp" decodes a one-byte advert as
// a temperature in kelvin; anything else is a bad length.
func fakeDecoders(t *testing.T) {
	decode, detect := Decode, Detect
	Decode = func(kind, addr string, adv []byte, key string) ([]Value, error) {
		if kind != "temp" || len(adv) != 1 {
			return nil, errors.New("bad length")
		}
		return []Value{{Path: "temperature", Value: 273.15 + float64(adv[0]), Units: "K"}}, nil
	}
	Detect = func(adv []byte) string {
		if len(adv) == 1 {
			return "temp"
		}
		return ""
	}
	t.Cleanup(func() { Decode, Detect = decode, detect })
}

type sink struct {
	mu    sync.Mutex
	vals  map[string]any
	metas map[string]string
	nMeta int
}

func (s *sink) publish(p string, v any) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.vals[p] = v
	return nil
}
func (s *sink) meta(p, u string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.metas[p] = u
	s.nMeta++
	return nil
}

func TestAdverts(t *testing.T) {
	fakeDecoders(t)
	now := time.Unix(1000, 0)
	sensors, err := ParseSensors(`[{"address":"aa:bb:cc:dd:ee:01","kind":"temp","key":"","prefix":"environment.inside"},["AA:BB:CC:DD:EE:02","temp","","environment.outside"]]`)
	if err != nil || len(sensors) != 2 || sensors[0].Address != "AA:BB:CC:DD:EE:01" || sensors[1].Prefix != "environment.outside" {
		t.Fatalf("sensors %+v %v", sensors, err)
	}
	s := &sink{vals: map[string]any{}, metas: map[string]string{}}
	g := New(Options{Now: func() time.Time { return now }, Sensors: func() []Sensor { return sensors }, Publish: s.publish, Meta: s.meta})

	g.Advert("aa:bb:cc:dd:ee:01", -60, []byte{20})
	now = now.Add(3 * time.Second)
	g.Advert("11:22:33:44:55:66", -80, []byte{1, 2, 3}) // unknown: listed, not decoded
	g.Advert("AA:BB:CC:DD:EE:02", -70, []byte{1, 2})    // configured, bad length: refused
	g.Advert("aa:bb:cc:dd:ee:01", -61, []byte{21})

	if v := s.vals["environment.inside.temperature"]; v != 273.15+21 {
		t.Fatalf("published %v", s.vals)
	}
	if s.metas["environment.inside.temperature"] != "K" || s.nMeta != 1 {
		t.Fatalf("meta %v (%d declarations)", s.metas, s.nMeta)
	}
	devs := g.Devices()
	if len(devs) != 3 || devs[0].Address != "AA:BB:CC:DD:EE:01" || !devs[0].Decoded || devs[0].RSSI != -61 {
		t.Fatalf("devices %+v", devs)
	}
	if devs[1].Decoded || devs[1].Kind != "temp" || devs[2].Address != "11:22:33:44:55:66" || devs[2].Decoded || devs[2].LastSeenS != 0 {
		t.Fatalf("devices %+v", devs)
	}
	now = now.Add(5 * time.Second)
	if d := g.Devices(); d[2].LastSeenS != 5 || d[0].LastSeenS != 5 {
		t.Fatalf("ages %+v", d)
	}
	if st := g.Stats(); st != (Stats{Heard: 4, Decoded: 2, Refused: 1}) {
		t.Fatalf("stats %+v", st)
	}
}

func TestBounded(t *testing.T) {
	g := New(Options{})
	for i := 0; i < MaxDevices+20; i++ {
		g.Advert(fmt.Sprintf("00:00:00:00:%02X:%02X", i/256, i%256), -50, []byte{0x02, 0x01, 0x06})
	}
	devs := g.Devices()
	if len(devs) != MaxDevices || devs[0].Address != fmt.Sprintf("00:00:00:00:00:%02X", MaxDevices+19) {
		t.Fatalf("%d devices, newest %s", len(devs), devs[0].Address)
	}
}

func TestNoDecoderCountsRefused(t *testing.T) {
	g := New(Options{Sensors: func() []Sensor { return []Sensor{{Address: "AA:AA:AA:AA:AA:AA", Kind: "temp", Prefix: "x"}} }})
	g.Advert("aa:aa:aa:aa:aa:aa", -40, []byte{1})
	if st := g.Stats(); st.Refused != 1 || g.Devices()[0].Decoded {
		t.Fatalf("stats %+v", st)
	}
}

func TestParseSensorsRefusals(t *testing.T) {
	for _, raw := range []string{`{}`, `[1]`, `[["a","b"]]`, `[{"address":"","prefix":"x"}]`, `[{"address":"a"}]`} {
		if _, err := ParseSensors(raw); err == nil {
			t.Errorf("%s accepted", raw)
		}
	}
	if s, err := ParseSensors(""); err != nil || s != nil {
		t.Fatalf("empty: %v %v", s, err)
	}
}
