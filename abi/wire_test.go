package abi

import (
	"bytes"
	"encoding/binary"
	"errors"
	"math"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"unsafe"
)

func TestValuesRoundTrip(t *testing.T) {
	in := []PathValue{
		{"electrical.switches.pump.state", Bool(true)},
		{"electrical.switches.deck.state", Bool(false)},
		{"environment.outside.temperature", Number(293.15)},
		{"navigation.position", JSON([]byte(`{"latitude":60.1,"longitude":24.9}`))},
		{"design.name", String("Ilmatar ⛵")},
		{"notifications.x", Null()},
		{"a-b_c.D9", Number(-0.5)},
	}
	b := AppendValues(nil, in)
	out, err := DecodeValues(b, 0)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(in, out) {
		t.Fatalf("round trip:\n%+v\n%+v", in, out)
	}
	var table PathTable
	for round := range 2 { // the paths new to the table, then known
		out, err := table.AppendDecodedValues(nil, b, 0)
		if err != nil || !reflect.DeepEqual(in, out) {
			t.Fatalf("round %d through a PathTable: %v\n%+v\n%+v", round, err, in, out)
		}
	}
	// Layout of one number record: str path, kind 1, 8 bytes of f64 bits.
	one := AppendValue(nil, "a.b", Number(1.5))
	want := binary.LittleEndian.AppendUint32(nil, 3)
	want = append(want, "a.b"...)
	want = append(want, 1)
	want = binary.LittleEndian.AppendUint64(want, math.Float64bits(1.5))
	if !bytes.Equal(one, want) {
		t.Fatalf("number record % x, want % x", one, want)
	}
	if s := JSON([]byte(`{"a":1}`)).String() + Number(2).String() + String(`q"`).String() + Bool(true).String() + Null().String(); s != `{"a":1}2"q\""truenull` {
		t.Fatalf("JSON texts %s", s)
	}
}

func TestDecodeValuesRefuses(t *testing.T) {
	good := AppendValue(nil, "a.b", Number(1))
	cases := map[string][]byte{
		"truncated":     good[:len(good)-1],
		"nan":           AppendValue(nil, "a.b", Number(math.NaN())),
		"inf":           AppendValue(nil, "a.b", Number(math.Inf(-1))),
		"empty path":    AppendValue(nil, "", Number(1)),
		"double dot":    AppendValue(nil, "a..b", Number(1)),
		"leading dot":   AppendValue(nil, ".a", Number(1)),
		"trailing dot":  AppendValue(nil, "a.", Number(1)),
		"space in path": AppendValue(nil, "a b", Number(1)),
		"utf8 in path":  AppendValue(nil, "a.\xff", Number(1)),
		"wildcard":      AppendValue(nil, "a.*", Number(1)),
		"long path":     AppendValue(nil, strings.Repeat("a", MaxPath+1), Number(1)),
		"bad json":      AppendValue(nil, "a.b", JSON([]byte(`{"a":`))),
		"two json":      AppendValue(nil, "a.b", JSON([]byte(`1 2`))),
		"long string":   AppendValue(nil, "a.b", String(strings.Repeat("s", MaxValue+1))),
		"bad utf8":      AppendValue(nil, "a.b", String("\xff")),
		"bool 2":        append(AppendValue(nil, "a.b", Bool(true))[:8], 2),
		"kind 9":        append(appendStr(nil, "a.b"), 9),
		"length lies":   append(binary.LittleEndian.AppendUint32(nil, 0xffffffff), "a.b"...),
	}
	var table PathTable // knows a.b, the path of the cases' bad values
	if _, err := table.AppendDecodedValues(nil, good, 0); err != nil {
		t.Fatal(err)
	}
	for name, b := range cases {
		if _, err := DecodeValues(b, 0); err == nil {
			t.Errorf("%s: decoded", name)
		}
		for round := range 2 { // the table may have learned the path in the first round
			if _, err := table.AppendDecodedValues(nil, b, 0); err == nil {
				t.Errorf("%s: decoded through a PathTable, round %d", name, round)
			}
		}
	}
	// One bad record fails the whole batch.
	batch := append(AppendValue(nil, "a.b", Number(1)), cases["nan"]...)
	if _, err := DecodeValues(batch, 0); err == nil {
		t.Error("batch with a bad record decoded")
	}
	var many []byte
	for i := 0; i < 5; i++ {
		many = AppendValue(many, "a.b", Number(float64(i)))
	}
	if _, err := DecodeValues(many, 4); err == nil {
		t.Error("5 values accepted with a limit of 4")
	}
	if vs, err := DecodeValues(nil, 0); err != nil || len(vs) != 0 {
		t.Errorf("empty: %v %v", vs, err)
	}
}

func TestPatterns(t *testing.T) {
	for _, c := range []struct {
		p     string
		valid bool
		match []string
		miss  []string
	}{
		{"*", true, []string{"a", "a.b.c"}, nil},
		{"electrical.*", true, []string{"electrical.x", "electrical.a.b"}, []string{"electrical", "electricalx.y"}},
		{"electrical*", true, []string{"electrical", "electricalx", "electrical.a"}, []string{"electric"}},
		{"a.b.c", true, []string{"a.b.c"}, []string{"a.b", "a.b.c.d"}},
		{"a.b.*", true, []string{"a.b.c"}, []string{"a.b"}},
		{"", false, nil, nil},
		{"a.**", false, nil, nil},
		{"*.a", false, nil, nil},
		{"a*b", false, nil, nil},
		{".*", false, nil, nil},
	} {
		if ValidPattern(c.p) != c.valid {
			t.Errorf("ValidPattern(%q) = %v", c.p, !c.valid)
		}
		for _, p := range c.match {
			if !MatchPattern(c.p, p) {
				t.Errorf("%q does not match %q", c.p, p)
			}
		}
		for _, p := range c.miss {
			if MatchPattern(c.p, p) {
				t.Errorf("%q matches %q", c.p, p)
			}
		}
	}
	b := AppendStrings(nil, []string{"a.*", "b.c"})
	ps, err := DecodePatterns(b, MaxPatterns)
	if err != nil || !reflect.DeepEqual(ps, []string{"a.*", "b.c"}) {
		t.Fatalf("patterns %v %v", ps, err)
	}
	if _, err := DecodePatterns(nil, MaxPatterns); err == nil {
		t.Error("no patterns accepted")
	}
	if _, err := DecodePatterns(AppendStrings(nil, []string{"a b"}), MaxPatterns); err == nil {
		t.Error("bad pattern accepted")
	}
	if _, err := DecodePatterns(AppendStrings(nil, []string{"a", "b", "c"}), 2); err == nil {
		t.Error("too many patterns accepted")
	}
}

func TestMeta(t *testing.T) {
	in := []Meta{{"electrical.switches.pump.state", []byte(`{"description":"Bilge pump","units":"bool"}`)}}
	out, err := DecodeMeta(AppendMeta(nil, in))
	if err != nil || !reflect.DeepEqual(in, out) {
		t.Fatalf("meta %v %v", out, err)
	}
	for name, m := range map[string][]Meta{
		"array":    {{"a.b", []byte(`[]`)}},
		"null":     {{"a.b", []byte(`null`)}},
		"bad path": {{"a..b", []byte(`{}`)}},
		"big":      {{"a.b", []byte(`{"d":"` + strings.Repeat("x", MaxMetaBytes) + `"}`)}},
	} {
		if _, err := DecodeMeta(AppendMeta(nil, m)); err == nil {
			t.Errorf("%s: decoded", name)
		}
	}
	if _, err := DecodeMeta(nil); err == nil {
		t.Error("empty meta decoded")
	}
}

func TestEventsRoundTrip(t *testing.T) {
	var b []byte
	b = AppendEvent(b, EvTimer, AppendTimer(nil, 7))
	b = AppendEvent(b, EvStop, nil)
	b = AppendEvent(b, EventKind(200), []byte("future"))
	evs, err := DecodeEvents(b)
	if err != nil {
		t.Fatal(err)
	}
	if len(evs) != 3 || evs[0].Kind != EvTimer || evs[1].Kind != EvStop || len(evs[1].Data) != 0 || evs[2].Kind != 200 {
		t.Fatalf("events %+v", evs)
	}
	if id, err := DecodeTimer(evs[0].Data); err != nil || id != 7 {
		t.Fatalf("timer %d %v", id, err)
	}
	if EvPut.String() != "put" || EventKind(99).String() != "event(99)" {
		t.Fatal("kind names")
	}
	for name, bad := range map[string][]byte{
		"header only": {byte(EvTimer), 4, 0},
		"length lies": {byte(EvTimer), 9, 0, 0, 0, 1},
	} {
		if _, err := DecodeEvents(bad); err == nil {
			t.Errorf("%s: decoded", name)
		}
	}
	if _, err := DecodeEvents(make([]byte, MaxEventBatch+1)); err == nil {
		t.Error("oversized batch decoded")
	}
	// AppendEvents into the slice of an earlier batch reuses its array.
	again, err := AppendEvents(evs[:0], AppendEvent(nil, EvTimer, AppendTimer(nil, 8)))
	if err != nil || len(again) != 1 || &again[0] != &evs[0] {
		t.Fatalf("appended %+v %v: not into the slice given", again, err)
	}
	if id, err := DecodeTimer(again[0].Data); err != nil || id != 8 {
		t.Fatalf("timer %d %v", id, err)
	}
}

func TestInit(t *testing.T) {
	in := Init{ABI: 1, ID: "app", Version: "1.0.0", Capabilities: []Capability{CapLog}, DeviceID: "beef"}
	b, err := MarshalInit(in)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(b), `"config":null`) {
		t.Fatalf("init without config: %s", b)
	}
	out, err := UnmarshalInit(b)
	if err != nil || out.ID != "app" || string(out.Config) != "null" || out.Capabilities[0] != CapLog {
		t.Fatalf("init %+v %v", out, err)
	}
	if _, err := UnmarshalInit([]byte(`{"abi":"x"}`)); err == nil {
		t.Fatal("bad init decoded")
	}
	// A later minor's members are ignored.
	if _, err := UnmarshalInit([]byte(`{"abi":1,"new":true}`)); err != nil {
		t.Fatal(err)
	}
}

func TestMessagesRoundTrip(t *testing.T) {
	pr := PutRequest{ID: 9, Path: "electrical.switches.pump.state", Value: Bool(true)}
	if got, err := DecodePutRequest(AppendPutRequest(nil, pr)); err != nil || !reflect.DeepEqual(got, pr) {
		t.Errorf("put request %+v %v", got, err)
	}
	rep := PutReply{ID: 9, Result: PutDeferred, Message: "later"}
	if got, err := DecodePutReply(AppendPutReply(nil, rep)); err != nil || got != rep {
		t.Errorf("put reply %+v %v", got, err)
	}
	ans := PutAnswer{ID: 3, Status: 200, State: "COMPLETED", Message: "ok"}
	if got, err := DecodePutAnswer(AppendPutAnswer(nil, ans)); err != nil || got != ans {
		t.Errorf("put answer %+v %v", got, err)
	}
	if got, err := DecodePutSend(AppendPutSend(nil, "a.b", Number(3))); err != nil || got.Path != "a.b" || got.Value.Num != 3 {
		t.Errorf("put send %+v %v", got, err)
	}
	hr := HTTPRequest{ID: 1, Method: "POST", Route: "/app/:n", Path: "/app/pump", Query: "x=1", Body: []byte(`{"on":true}`)}
	if got, err := DecodeHTTPRequest(AppendHTTPRequest(nil, hr)); err != nil || !reflect.DeepEqual(got, hr) {
		t.Errorf("http request %+v %v", got, err)
	}
	hs := HTTPResponse{ID: 1, Status: 404, ContentType: "", Body: []byte(`{"error":"not_found"}`)}
	if got, err := DecodeHTTPResponse(AppendHTTPResponse(nil, hs)); err != nil || !reflect.DeepEqual(got, hs) {
		t.Errorf("http response %+v %v", got, err)
	}
	h := HealthReport{Name: "pinFault", State: HealthAlarm, Reboot: true, Message: "pin 5 stuck"}
	if got, err := DecodeHealthReport(AppendHealthReport(nil, h)); err != nil || got != h {
		t.Errorf("health %+v %v", got, err)
	}
	e := SSEEvent{Event: "app", Retain: true, Data: []byte(`{"a":1}`)}
	if got, err := DecodeSSEEvent(AppendSSEEvent(nil, e)); err != nil || !reflect.DeepEqual(got, e) {
		t.Errorf("sse %+v %v", got, err)
	}
	c := Clock{UnixMs: 1700000000000, UptimeMs: 5, Synced: true, Source: ClockSNTP}
	cb := AppendClock(nil, c)
	if len(cb) != ClockSize {
		t.Errorf("clock record of %d bytes", len(cb))
	}
	if got, err := DecodeClock(cb); err != nil || got != c {
		t.Errorf("clock %+v %v", got, err)
	}
	g := GPIOEdge{Pin: 5, Level: 1}
	if got, err := DecodeGPIOEdge(AppendGPIOEdge(nil, g)); err != nil || got != g {
		t.Errorf("gpio %+v %v", got, err)
	}
	for _, f := range []CANFrame{
		{ID: 0x7ff, Data: []byte{1, 2, 3}},
		{ID: 0x1fffffff, Extended: true, Data: []byte{1, 2, 3, 4, 5, 6, 7, 8}},
		{ID: 0x10, Remote: true},
	} {
		got, err := DecodeCANFrame(AppendCANFrame(nil, f))
		if err != nil || got.ID != f.ID || got.Extended != f.Extended || got.Remote != f.Remote || !bytes.Equal(got.Data, f.Data) {
			t.Errorf("can %+v: %+v %v", f, got, err)
		}
	}
	fs := []CANFilter{{ID: 0x100, Mask: 0x700}}
	if got, err := DecodeCANFilters(AppendCANFilters(nil, fs)); err != nil || !reflect.DeepEqual(got, fs) {
		t.Errorf("filters %+v %v", got, err)
	}
	a := BLEAdvert{Addr: "aa:bb:cc:dd:ee:ff", RSSI: -71, Data: []byte{2, 1, 6}}
	if got, err := DecodeBLEAdvert(AppendBLEAdvert(nil, a)); err != nil || !reflect.DeepEqual(got, a) {
		t.Errorf("ble %+v %v", got, err)
	}
}

func TestMessagesRefuse(t *testing.T) {
	check := func(name string, err error) {
		t.Helper()
		if err == nil {
			t.Errorf("%s: decoded", name)
		}
	}
	_, err := DecodePutReply(AppendPutReply(nil, PutReply{ID: 1, Result: 4}))
	check("put result 4", err)
	_, err = DecodePutReply(append(AppendPutReply(nil, PutReply{ID: 1}), 0))
	check("put reply trailing", err)
	_, err = DecodeHTTPResponse(AppendHTTPResponse(nil, HTTPResponse{ID: 1, Status: 99}))
	check("status 99", err)
	_, err = DecodeHTTPResponse(AppendHTTPResponse(nil, HTTPResponse{ID: 1, Status: 200, ContentType: "a\r\nb"}))
	check("header injection", err)
	_, err = DecodeHTTPResponse(AppendHTTPResponse(nil, HTTPResponse{ID: 1, Status: 200, Body: make([]byte, MaxHTTPResponse+1)}))
	check("big body", err)
	_, err = DecodeHealthReport(AppendHealthReport(nil, HealthReport{Name: "x", State: 3}))
	check("state 3", err)
	_, err = DecodeHealthReport(AppendHealthReport(nil, HealthReport{Name: "1x"}))
	check("name digit", err)
	_, err = DecodeHealthReport(AppendHealthReport(nil, HealthReport{Name: strings.Repeat("a", MaxHealthName+1)}))
	check("name long", err)
	_, err = DecodeHealthReport(AppendHealthReport(nil, HealthReport{Name: "a", Message: strings.Repeat("m", MaxHealthMessage+1)}))
	check("message long", err)
	hb := AppendHealthReport(nil, HealthReport{Name: "a"})
	hb[5+1] = 2 // flags byte after "a" and the state
	_, err = DecodeHealthReport(hb)
	check("health flags", err)
	_, err = DecodeSSEEvent(AppendSSEEvent(nil, SSEEvent{Event: "a", Data: []byte("{")}))
	check("sse json", err)
	_, err = DecodeClock(make([]byte, ClockSize-1))
	check("clock short", err)
	cb := AppendClock(nil, Clock{})
	cb[17] = 9
	_, err = DecodeClock(cb)
	check("clock source", err)
	_, err = DecodeGPIOEdge(AppendGPIOEdge(nil, GPIOEdge{Level: 2}))
	check("gpio level", err)
	_, err = DecodeCANFrame(AppendCANFrame(nil, CANFrame{ID: 0x800}))
	check("can std id", err)
	_, err = DecodeCANFrame(append(AppendCANFrame(nil, CANFrame{ID: 1}), 0))
	check("can trailing", err)
	cf := AppendCANFrame(nil, CANFrame{ID: 1})
	cf[4] = 9
	_, err = DecodeCANFrame(append(cf, make([]byte, 9)...))
	check("can 9 bytes", err)
	_, err = DecodeCANFilters(make([]byte, 7))
	check("filters short", err)
	_, err = DecodeCANFilters(make([]byte, 8*(MaxCANFilters+1)))
	check("filters many", err)
	_, err = DecodeBLEAdvert(AppendBLEAdvert(nil, BLEAdvert{Addr: strings.Repeat("a", 18)}))
	check("ble addr", err)
	_, err = DecodeTimer([]byte{1, 2, 3})
	check("timer short", err)
}

func TestErrno(t *testing.T) {
	if ErrPermission.Error() != "permission denied" || Errno(-99).Error() != "abi error -99" {
		t.Fatal("texts")
	}
	if v, err := Result(5); v != 5 || err != nil {
		t.Fatal("Result(5)")
	}
	_, err := Result(-1)
	if !errors.Is(err, ErrPermission) {
		t.Fatalf("Result(-1) = %v", err)
	}
}

// reencode decodes b and encodes what it got again; ok is false when b does not decode.
func reencode[T any](b []byte, decode func([]byte) (T, error), encode func([]byte, T) []byte) (again []byte, ok bool) {
	v, err := decode(b)
	if err != nil {
		return nil, false
	}
	return encode(nil, v), true
}

// hostInputs are FuzzHostInputs' cases 1 to 9: the plugin's inputs but values, re-encoded.
var hostInputs = []func(b []byte) ([]byte, bool){
	func(b []byte) ([]byte, bool) { return reencode(b, DecodePutReply, AppendPutReply) },
	func(b []byte) ([]byte, bool) { return reencode(b, DecodeHTTPResponse, AppendHTTPResponse) },
	func(b []byte) ([]byte, bool) { return reencode(b, DecodeHealthReport, AppendHealthReport) },
	func(b []byte) ([]byte, bool) { return reencode(b, DecodeSSEEvent, AppendSSEEvent) },
	func(b []byte) ([]byte, bool) { return reencode(b, DecodeMeta, AppendMeta) },
	func(b []byte) ([]byte, bool) {
		return reencode(b, func(b []byte) ([]string, error) { return DecodePatterns(b, MaxPatterns) }, AppendStrings)
	},
	func(b []byte) ([]byte, bool) { return reencode(b, DecodeCANFrame, AppendCANFrame) },
	func(b []byte) ([]byte, bool) { return reencode(b, DecodeCANFilters, AppendCANFilters) },
	func(b []byte) ([]byte, bool) {
		return reencode(b, DecodePutSend, func(out []byte, pv PathValue) []byte { return AppendPutSend(out, pv.Path, pv.Value) })
	},
}

// FuzzHostInputs feeds arbitrary bytes to every decoder the host runs on plugin input; a
// decoded message must re-encode to the same bytes (the encodings are canonical).
func FuzzHostInputs(f *testing.F) {
	f.Add(uint8(0), AppendValues(nil, []PathValue{{"a.b", Number(1)}, {"c", JSON([]byte(`[1]`))}}))
	f.Add(uint8(1), AppendPutReply(nil, PutReply{ID: 1, Result: PutInvalid, Message: "no"}))
	f.Add(uint8(2), AppendHTTPResponse(nil, HTTPResponse{ID: 1, Status: 200, Body: []byte("{}")}))
	f.Add(uint8(3), AppendHealthReport(nil, HealthReport{Name: "x", State: HealthWarn, Message: "m"}))
	f.Add(uint8(4), AppendSSEEvent(nil, SSEEvent{Event: "app", Data: []byte(`{"a":1}`)}))
	f.Add(uint8(5), AppendMeta(nil, []Meta{{"a.b", []byte(`{"units":"m"}`)}}))
	f.Add(uint8(6), AppendStrings(nil, []string{"a.*", "*"}))
	f.Add(uint8(7), AppendCANFrame(nil, CANFrame{ID: 5, Data: []byte{1}}))
	f.Add(uint8(8), AppendCANFilters(nil, []CANFilter{{1, 2}}))
	f.Add(uint8(9), AppendPutSend(nil, "a.b", Bool(true)))
	f.Fuzz(func(t *testing.T, which uint8, b []byte) {
		var again []byte
		switch which % 10 {
		case 0:
			v, err := DecodeValues(b, 0)
			if err != nil {
				return
			}
			for _, pv := range v {
				if !ValidPath(pv.Path) || pv.Value.Validate() != nil {
					t.Fatalf("decoded an invalid value %+v", pv)
				}
			}
			again = AppendValues(nil, v)
		default:
			var ok bool
			if again, ok = hostInputs[which%10-1](b); !ok {
				return
			}
		}
		if !bytes.Equal(again, b) {
			t.Fatalf("not canonical:\n% x\n% x", b, again)
		}
	})
}

// FuzzGuestInputs feeds arbitrary bytes to every decoder the plugin runs on host input.
func FuzzGuestInputs(f *testing.F) {
	var batch []byte
	batch = AppendEvent(batch, EvDelta, AppendValues(nil, []PathValue{{"a.b", Number(1)}}))
	batch = AppendEvent(batch, EvPut, AppendPutRequest(nil, PutRequest{ID: 1, Path: "a", Value: Bool(true)}))
	batch = AppendEvent(batch, EvTimer, AppendTimer(nil, 3))
	batch = AppendEvent(batch, EvHTTP, AppendHTTPRequest(nil, HTTPRequest{ID: 1, Method: "GET", Path: "/app"}))
	batch = AppendEvent(batch, EvPutAnswer, AppendPutAnswer(nil, PutAnswer{ID: 1, State: "FAILED"}))
	batch = AppendEvent(batch, EvGPIO, AppendGPIOEdge(nil, GPIOEdge{Pin: 1, Level: 1}))
	batch = AppendEvent(batch, EvCAN, AppendCANFrame(nil, CANFrame{ID: 1}))
	batch = AppendEvent(batch, EvBLE, AppendBLEAdvert(nil, BLEAdvert{Addr: "x", RSSI: -1}))
	batch = AppendEvent(batch, EvInit, []byte(`{"abi":1,"id":"x","config":null}`))
	f.Add(batch)
	f.Add(AppendClock(nil, Clock{UnixMs: 1}))
	f.Fuzz(func(t *testing.T, b []byte) {
		_, _ = DecodeClock(b)
		evs, err := DecodeEvents(b)
		if err != nil {
			return
		}
		var again []byte
		for _, e := range evs {
			again = AppendEvent(again, e.Kind, e.Data)
			switch e.Kind {
			case EvInit:
				_, _ = UnmarshalInit(e.Data)
			case EvDelta:
				_, _ = DecodeValues(e.Data, 0)
			case EvPut:
				if p, err := DecodePutRequest(e.Data); err == nil && !bytes.Equal(AppendPutRequest(nil, p), e.Data) {
					t.Fatal("put request not canonical")
				}
			case EvPutAnswer:
				_, _ = DecodePutAnswer(e.Data)
			case EvTimer:
				_, _ = DecodeTimer(e.Data)
			case EvHTTP:
				if h, err := DecodeHTTPRequest(e.Data); err == nil && !bytes.Equal(AppendHTTPRequest(nil, h), e.Data) {
					t.Fatal("http request not canonical")
				}
			case EvGPIO:
				_, _ = DecodeGPIOEdge(e.Data)
			case EvCAN:
				_, _ = DecodeCANFrame(e.Data)
			case EvBLE:
				_, _ = DecodeBLEAdvert(e.Data)
			}
		}
		if !bytes.Equal(again, b) {
			t.Fatal("batch not canonical")
		}
	})
}

// The typed appenders write the same records as the general one, laid out by hand here so a
// slip in either shows.
func TestTypedAppenders(t *testing.T) {
	rec := func(path string, kind byte, tail ...byte) []byte {
		b := binary.LittleEndian.AppendUint32([]byte("prefix"), uint32(len(path)))
		b = append(b, path...)
		b = append(b, kind)
		return append(b, tail...)
	}
	str := binary.LittleEndian.AppendUint32(nil, 5)
	str = append(str, "héllo"[:5]...)
	for _, c := range []struct {
		name       string
		typed, gen []byte
		want       []byte
	}{
		{"number", AppendNumber([]byte("prefix"), "a.b", -2.25), AppendValue([]byte("prefix"), "a.b", Number(-2.25)),
			rec("a.b", 1, binary.LittleEndian.AppendUint64(nil, math.Float64bits(-2.25))...)},
		{"true", AppendBool([]byte("prefix"), "x.y-z", true), AppendValue([]byte("prefix"), "x.y-z", Bool(true)), rec("x.y-z", 3, 1)},
		{"false", AppendBool([]byte("prefix"), "x", false), AppendValue([]byte("prefix"), "x", Bool(false)), rec("x", 3, 0)},
		{"string", AppendString([]byte("prefix"), "s.t", "héllo"[:5]), AppendValue([]byte("prefix"), "s.t", String("héllo"[:5])), rec("s.t", 2, str...)},
		{"json", AppendValue([]byte("prefix"), "j", JSON([]byte("[]"))), AppendValue([]byte("prefix"), "j", JSON([]byte("[]"))), rec("j", 4, 2, 0, 0, 0, '[', ']')},
		{"null", AppendValue([]byte("prefix"), "n", Null()), AppendValue([]byte("prefix"), "n", Null()), rec("n", 0)},
	} {
		if !bytes.Equal(c.typed, c.want) || !bytes.Equal(c.gen, c.want) {
			t.Errorf("%s: typed % x, general % x, want % x", c.name, c.typed, c.gen, c.want)
		}
	}
}

// AppendDecodedValues appends after what dst holds, counts max for the new records only, and
// leaves dst as it was when a message is refused.
func TestAppendDecodedValues(t *testing.T) {
	one := AppendNumber(nil, "a.b", 1)
	two := AppendNumber(AppendBool(nil, "c.d", true), "e.f", 2)
	dst, err := AppendDecodedValues(make([]PathValue, 0, 8), one, 1)
	if err != nil || len(dst) != 1 {
		t.Fatalf("%v %v", dst, err)
	}
	got, err := AppendDecodedValues(dst, two, 2)
	if err != nil || len(got) != 3 || got[0].Path != "a.b" || got[1].Path != "c.d" || got[2].Value.Num != 2 {
		t.Fatalf("%+v %v", got, err)
	}
	bad := append(append([]byte(nil), two...), 0xff)
	if got, err := AppendDecodedValues(dst, bad, 0); err == nil || len(got) != 1 {
		t.Errorf("a bad message gave %+v, %v; want dst unchanged and an error", got, err)
	}
	if got, err := AppendDecodedValues(dst, two, 1); err == nil || len(got) != 1 {
		t.Errorf("over max gave %+v, %v; want dst unchanged and an error", got, err)
	}
}

// A PathTable answers a path it has seen with the string it made the first time, and starts
// over once it holds MaxPathTable paths.
func TestPathTable(t *testing.T) {
	var table PathTable
	first, err := table.AppendDecodedValues(nil, AppendNumber(nil, "a.b", 1), 0)
	if err != nil {
		t.Fatal(err)
	}
	again, err := table.AppendDecodedValues(nil, AppendNumber(nil, "a.b", 2), 0)
	if err != nil {
		t.Fatal(err)
	}
	if unsafe.StringData(first[0].Path) != unsafe.StringData(again[0].Path) {
		t.Error("a known path was made anew")
	}
	if n := testing.AllocsPerRun(100, func() {
		_, _ = table.AppendDecodedValues(again[:0], AppendNumber(make([]byte, 0, 32), "a.b", 3), 0)
	}); n > 1 { // the message's buffer
		t.Errorf("%v allocations decoding a known path, want 1", n)
	}
	var many []byte
	for i := range MaxPathTable + 10 {
		many = AppendNumber(many, "p"+strconv.Itoa(i), 1)
	}
	if _, err := table.AppendDecodedValues(nil, many, MaxPathTable+10); err != nil {
		t.Fatal(err)
	}
	if len(table.m) > MaxPathTable {
		t.Errorf("the table holds %d paths, at most %d", len(table.m), MaxPathTable)
	}
}

func TestValidContext(t *testing.T) {
	for _, c := range []struct {
		ctx  string
		want string // part of the error; "" valid
	}{
		{"vessels.urn:mrn:imo:mmsi:230123456", ""},
		{"atons.urn:mrn:imo:mmsi:992351000", ""},
		{"shore.basestations.urn:mrn:imo:mmsi:002300001", ""},
		{"aircraft.urn:mrn:imo:mmsi:111230001", ""},
		{"sar.urn:mrn:imo:mmsi:970123456", ""},
		{"vessels.urn:mrn:signalk:uuid:c0d79334-4e25-4245-8892-54e8ccc8021d", ""},
		{"vessels." + "urn:mrn:" + strings.Repeat("a", MaxContext-len("vessels.urn:mrn:")), ""},
		{"", "0 bytes"},
		{"vessels.urn:mrn:" + strings.Repeat("a", MaxContext), "bytes"},
		{"vessels.self", "own vessel publishes with sk_publish"},
		{"vessels.unknown", "urn:mrn:"},
		{"vessels.", "want vessels.<id>"},
		{"vessels", "want vessels.<id>"},
		{"shore.urn:mrn:imo:mmsi:002300001", "want vessels.<id>"},
		{"Vessels.urn:mrn:imo:mmsi:230123456", "want"},
		{"ships.urn:mrn:imo:mmsi:230123456", "want"},
		{"vessels.urn:mrn:", "urn:mrn:"},
		{"vessels.urn:mrn:imo::mmsi", "segments"},
		{"vessels.urn:mrn:imo:mmsi:", "segments"},
		{"vessels.urn:mrn:imo:mmsi:230.123", "segments"},
		{"vessels.urn:mrn:imo:mmsi:23 0", "segments"},
		{"vessels.urn:mrn:imo:mmsi:\"x", "segments"},
		{"vessels.urn:mrn:imo:mmsi:*", "segments"},
		{"vessels.urn:mrn:imo:mmsi:ä", "segments"},
	} {
		err := ValidContext(c.ctx)
		switch {
		case c.want == "" && err != nil:
			t.Errorf("%q: %v", c.ctx, err)
		case c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)):
			t.Errorf("%q: error %v, want one with %q", c.ctx, err, c.want)
		}
	}
}

func TestContextValuesRoundTrip(t *testing.T) {
	const ctx = "vessels.urn:mrn:imo:mmsi:230123456"
	in := []PathValue{
		{"navigation.position", JSON([]byte(`{"latitude":60.1,"longitude":24.9}`))},
		{"navigation.speedOverGround", Number(3.2)},
		{"", JSON([]byte(`{"mmsi":"230123456"}`))},
		{"", JSON([]byte(`{"name":"ILMATAR"}`))},
	}
	b := AppendValues(AppendContextValues(nil, ctx), in)
	c, out, err := DecodeContextValues(b, 0)
	if err != nil || c != ctx || !reflect.DeepEqual(in, out) {
		t.Fatalf("round trip: %q %v\n%+v\n%+v", c, err, in, out)
	}
	var table PathTable
	for round := range 2 {
		c, out, err := table.AppendDecodedContextValues(nil, b, 0)
		if err != nil || c != ctx || !reflect.DeepEqual(in, out) {
			t.Fatalf("round %d through a PathTable: %q %v %+v", round, c, err, out)
		}
	}
	// sk_publish keeps refusing the root: it is another context's only.
	if _, err := DecodeValues(AppendValue(nil, "", JSON([]byte(`{"name":"x"}`))), 0); err == nil {
		t.Error("sk_publish decoded the empty path")
	}
}

func TestDecodeContextValuesRefuses(t *testing.T) {
	const ctx = "vessels.urn:mrn:imo:mmsi:230123456"
	head := AppendContextValues(nil, ctx)
	one := AppendValue(nil, "navigation.speedOverGround", Number(1))
	var many []byte
	for range 5 {
		many = AppendValue(many, "a.b", Number(1))
	}
	for name, b := range map[string][]byte{
		"nothing":         nil,
		"no values":       head,
		"self":            append(AppendContextValues(nil, "vessels.self"), one...),
		"bad context":     append(AppendContextValues(nil, "vessels.x y"), one...),
		"long context":    append(AppendContextValues(nil, strings.Repeat("v", MaxContext+1)), one...),
		"context not utf": append(AppendContextValues(nil, "vessels.urn:mrn:\xff"), one...),
		"truncated":       append(head, one[:len(one)-1]...),
		"root number":     append(head, AppendValue(nil, "", Number(1))...),
		"root array":      append(head, AppendValue(nil, "", JSON([]byte(`[1]`)))...),
		"root string":     append(head, AppendValue(nil, "", String(`{}`))...),
		"root null":       append(head, AppendValue(nil, "", JSON([]byte(`null`)))...),
		"bad path":        append(head, AppendValue(nil, "a..b", Number(1))...),
		"too many":        append(head, many...),
	} {
		if _, _, err := DecodeContextValues(b, 4); err == nil {
			t.Errorf("%s: decoded", name)
		}
		var table PathTable
		if _, out, err := table.AppendDecodedContextValues([]PathValue{{Path: "kept"}}, b, 4); err == nil || len(out) != 1 {
			t.Errorf("%s: decoded through a PathTable, or dst changed: %v", name, out)
		}
	}
}

// FuzzContextValues: any bytes decode to an error or to a message that encodes back the same.
func FuzzContextValues(f *testing.F) {
	f.Add(AppendValue(AppendContextValues(nil, "atons.urn:mrn:imo:mmsi:992351000"), "", JSON([]byte(`{"name":"x"}`))))
	f.Add(AppendNumber(AppendContextValues(nil, "vessels.urn:mrn:imo:mmsi:230123456"), "a.b", 1))
	f.Fuzz(func(t *testing.T, b []byte) {
		c, vs, err := DecodeContextValues(b, 0)
		if err != nil {
			return
		}
		if ValidContext(c) != nil || len(vs) == 0 {
			t.Fatalf("decoded %q with %d values", c, len(vs))
		}
		c2, vs2, err := DecodeContextValues(AppendValues(AppendContextValues(nil, c), vs), 0)
		if err != nil || c2 != c || !reflect.DeepEqual(vs, vs2) {
			t.Fatalf("re-encoded: %v", err)
		}
	})
}

func TestSourceValidate(t *testing.T) {
	for _, c := range []struct {
		src  Source
		want string // "" valid, else part of the error
	}{
		{Source{Type: "NMEA2000", Src: "35", PGN: 129025}, ""},
		{Source{Type: "NMEA2000", Src: "0", PGN: 59904}, ""},
		{Source{Type: "NMEA2000", Src: "253", PGN: 130312, Instance: "2"}, ""},
		{Source{Type: "Plugin", Src: "ruuvi-c4_1a"}, ""},
		{Source{Type: "NMEA0183", Src: strings.Repeat("a", MaxSourceSrc), PGN: MaxPGN}, ""},
		{Source{Type: "", Src: "1"}, "type"},
		{Source{Type: "2000", Src: "1"}, "type"},
		{Source{Type: "NMEA-2000", Src: "1"}, "type"},
		{Source{Type: strings.Repeat("T", MaxSourceType+1), Src: "1"}, "type"},
		{Source{Type: "Plugin", Src: ""}, "src"},
		{Source{Type: "Plugin", Src: "a.b"}, "src"},
		{Source{Type: "Plugin", Src: "a:b"}, "src"},
		{Source{Type: "Plugin", Src: strings.Repeat("a", MaxSourceSrc+1)}, "src"},
		{Source{Type: "Plugin", Src: DeviceSrc}, "device"},
		{Source{Type: "Plugin", Src: "a", Instance: "x.y"}, "instance"},
		{Source{Type: "Plugin", Src: "a", PGN: MaxPGN + 1}, "pgn"},
		{Source{Type: "NMEA2000", Src: "254", PGN: 1}, "address"},
		{Source{Type: "NMEA2000", Src: "035", PGN: 1}, "address"},
		{Source{Type: "NMEA2000", Src: "1000", PGN: 1}, "address"},
		{Source{Type: "NMEA2000", Src: "2x", PGN: 1}, "address"},
		{Source{Type: "NMEA2000", Src: "gps", PGN: 1}, "address"},
		{Source{Type: "NMEA2000", Src: "35"}, "without a pgn"},
	} {
		if err := c.src.Validate(); (err == nil) != (c.want == "") || err != nil && !strings.Contains(err.Error(), c.want) {
			t.Errorf("%+v: error %v, want %q", c.src, err, c.want)
		}
	}
}

// appendGroups encodes groups as an sk_publish_src message.
func appendGroups(b []byte, groups ...SourceGroup) []byte {
	for _, g := range groups {
		b = AppendValues(AppendSourceGroup(b, g.Source, g.Context, len(g.Values)), g.Values)
	}
	return b
}

func TestSourceGroupsRoundTrip(t *testing.T) {
	gps := Source{Type: SourceTypeN2K, Src: "35", PGN: 129025, Instance: "1"}
	compass := Source{Type: SourceTypeN2K, Src: "36", PGN: 127250}
	target := "vessels.urn:mrn:imo:mmsi:230123456"
	in := []SourceGroup{
		{gps, "", []PathValue{
			{"navigation.position", JSON([]byte(`{"latitude":60.1,"longitude":24.9}`))},
			{"navigation.speedOverGround", Number(3.2)},
		}},
		{compass, "", []PathValue{{"navigation.headingMagnetic", Number(1.5)}}},
		{gps, target, []PathValue{
			{"navigation.speedOverGround", Number(4)},
			{"", JSON([]byte(`{"mmsi":"230123456"}`))},
		}},
	}
	for n := 1; n <= len(in); n++ {
		b := appendGroups(nil, in[:n]...)
		out, err := DecodeSourceGroups(b, 0)
		if err != nil || !reflect.DeepEqual(in[:n], out) {
			t.Fatalf("%d groups: %v\n%+v", n, err, out)
		}
		var table PathTable
		for round := range 2 {
			vals, groups, err := table.AppendDecodedSourceGroups([]PathValue{{Path: "kept"}}, nil, b, 0)
			if err != nil || !reflect.DeepEqual(in[:n], groups) || vals[0].Path != "kept" {
				t.Fatalf("%d groups, round %d through a PathTable: %v %+v", n, round, err, groups)
			}
		}
	}
}

func TestDecodeSourceGroupsRefuses(t *testing.T) {
	gps := Source{Type: SourceTypeN2K, Src: "35", PGN: 129025}
	one := AppendValue(nil, "navigation.speedOverGround", Number(1))
	head := func(src Source, ctx string, n int) []byte { return AppendSourceGroup(nil, src, ctx, n) }
	with := func(parts ...[]byte) []byte {
		var b []byte
		for _, p := range parts {
			b = append(b, p...)
		}
		return b
	}
	self := head(gps, "", 1)
	for name, b := range map[string][]byte{
		"nothing":           nil,
		"no values":         self,
		"no count":          head(gps, "", 1)[:len(self)-4],
		"zero count":        with(head(gps, "", 0), one),
		"count over":        with(head(gps, "", 2), one),
		"count under":       with(head(gps, "", 1), one, one),
		"half a head":       self[:10],
		"bad source":        with(head(Source{Type: "NMEA2000", Src: "300", PGN: 1}, "", 1), one),
		"device src":        with(head(Source{Type: "Plugin", Src: DeviceSrc}, "", 1), one),
		"long type":         with(head(Source{Type: strings.Repeat("T", 40), Src: "1"}, "", 1), one),
		"self context":      with(head(gps, "vessels.self", 1), one),
		"bad context":       with(head(gps, "vessels.x y", 1), one),
		"root for self":     with(self, AppendValue(nil, "", JSON([]byte(`{"name":"x"}`)))),
		"bad path":          with(self, AppendValue(nil, "a..b", Number(1))),
		"truncated":         with(self, one[:len(one)-1]),
		"too many":          with(head(gps, "", 3), one, one, one),
		"too many in all":   with(head(gps, "", 2), one, one, self, one),
		"bad second group":  with(self, one, head(Source{Type: "NMEA2000", Src: "x", PGN: 1}, "", 1), one),
		"half second group": with(self, one, self[:7]),
	} {
		if _, err := DecodeSourceGroups(b, 2); err == nil {
			t.Errorf("%s: decoded", name)
		}
		var table PathTable
		if out, groups, err := table.AppendDecodedSourceGroups([]PathValue{{Path: "kept"}}, nil, b, 2); err == nil || len(out) != 1 || len(groups) != 0 {
			t.Errorf("%s: decoded through a PathTable, or dst changed: %v %v", name, out, groups)
		}
	}
}

// FuzzSourceGroups: any bytes decode to an error or to a message that encodes back the same.
func FuzzSourceGroups(f *testing.F) {
	f.Add(AppendNumber(AppendSourceGroup(nil, Source{Type: SourceTypeN2K, Src: "35", PGN: 127250}, "", 1), "navigation.headingMagnetic", 1))
	f.Add(AppendValue(AppendSourceGroup(nil, Source{Type: "Plugin", Src: "a", Instance: "b"}, "atons.urn:mrn:imo:mmsi:992351000", 1), "", JSON([]byte(`{"name":"x"}`))))
	f.Fuzz(func(t *testing.T, b []byte) {
		groups, err := DecodeSourceGroups(b, 0)
		if err != nil {
			return
		}
		for _, g := range groups {
			if g.Source.Validate() != nil || len(g.Values) == 0 {
				t.Fatalf("decoded %+v", g)
			}
		}
		again, err := DecodeSourceGroups(appendGroups(nil, groups...), 0)
		if err != nil || !reflect.DeepEqual(groups, again) {
			t.Fatalf("re-encoded: %v", err)
		}
	})
}
