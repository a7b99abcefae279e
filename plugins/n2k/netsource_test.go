package main

import (
	"bufio"
	"devhost/abi"
	"devhost/plugins/n2k/decode"
	"devhost/plugins/n2k/input"
	"devhost/sdk"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"
)

// ydLog is the candump sample as Yacht Devices RAW lines, as a gateway sends them, with the
// number of frames.
func ydLog(t *testing.T) (string, int) {
	t.Helper()
	f, err := os.Open("testdata/logs/candumpSample2.txt")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	parser, _ := input.NewParser(input.Candump)
	var b strings.Builder
	n := 0
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		r, err := parser.Parse(sc.Text())
		if err != nil {
			continue
		}
		fmt.Fprintf(&b, "00:00:%06.3f R ", float64(n)/100)
		b.Write(appendYDRaw(nil, decode.Frame{ID: r.Frame.ID, Data: r.Frame.Data}))
		n++
	}
	return b.String(), n
}

// socket answers the plugin's only open socket.
func socket(t *testing.T, h *sdk.FakeHost) (uint32, *sdk.FakeSocket) {
	t.Helper()
	if len(h.Sockets) != 1 {
		t.Fatalf("%d sockets open, want 1", len(h.Sockets))
	}
	for id, s := range h.Sockets {
		return id, s
	}
	return 0, nil
}

func errorsOf(st map[string]any) map[string]any { return st["errors"].(map[string]any) }

// set applies configuration values, failing the test when the plugin refuses them.
func set(t *testing.T, h *sdk.FakeHost, values map[string]any) {
	t.Helper()
	if err := h.SetConfig(values); err != nil {
		t.Fatal(err)
	}
}

// A Yacht Devices RAW gateway over TCP: connect, lines cut anywhere, garbage counted, the
// address claimed through the gateway, a drop, a reconnection with backoff.
func TestGatewayYDRawTCP(t *testing.T) {
	h := fakeHost(t)
	defer h.Stop()
	set(t, h, map[string]any{"enabled": true, "source": "ydraw_tcp", "gateway_host": "127.0.0.1"})
	if len(h.CANFilters) != 0 {
		t.Errorf("CAN filters with a gateway source: %v", h.CANFilters)
	}
	id, s := socket(t, h)
	if s.Open != (abi.NetOpen{Proto: abi.NetTCP, Host: "127.0.0.1", Port: 1457}) {
		t.Fatalf("opened %+v", s.Open)
	}
	if st := getStatus(t, h); st["state"] != "connecting" || st["source"] != "ydraw_tcp" || st["last_error"] != nil {
		t.Fatalf("status %v", st)
	}
	if err := h.NetOpen(id); err != nil {
		t.Fatal(err)
	}
	if st := getStatus(t, h); st["state"] != "connected" {
		t.Fatalf("status %v", st)
	}
	// The bus node claims its address (100) through the gateway: 60928 to everyone.
	if len(s.Sent) != 1 || !strings.HasPrefix(string(s.Sent[0]), "18EEFF64 ") || !strings.HasSuffix(string(s.Sent[0]), "\r\n") {
		t.Fatalf("sent %q", s.Sent)
	}

	log, frames := ydLog(t)
	stream := "garbage\r\n" + log[:len(log)/2] + "00:00:01.000 T 18EEFF64 01 02 03 04 05 06 07 08\r\n" +
		log[len(log)/2:] + "00:00:02.000 R 09F8027F ZZ\r\n"
	for i := 0; i < len(stream); i += 97 { // chunks that cut lines anywhere
		if err := h.NetData(id, []byte(stream[i:min(i+97, len(stream))])); err != nil {
			t.Fatal(err)
		}
	}
	st := getStatus(t, h)
	if st["state"] != "receiving" || st["frames_in"] != float64(frames) || errorsOf(st)["bad_line"] != 2.0 {
		t.Fatalf("status %v (want %d frames)", st, frames)
	}
	if v := h.Values()["navigation.headingMagnetic"]; v.Kind != abi.KindNumber {
		t.Errorf("headingMagnetic %+v (paths %v)", v, h.Paths())
	}

	// The gateway drops the connection: reconnecting with the reason, retried after 1 s, then
	// 2 s while it keeps failing.
	if err := h.NetDrop(id, "closed by the peer"); err != nil {
		t.Fatal(err)
	}
	st = getStatus(t, h)
	if st["state"] != "reconnecting" || st["last_error"] != "closed by the peer" || errorsOf(st)["gateway_closed"] != 1.0 {
		t.Fatalf("after the drop %v", st)
	}
	if len(h.Sockets) != 0 {
		t.Fatal("a socket opened before the backoff")
	}
	if err := h.Advance(time.Second); err != nil {
		t.Fatal(err)
	}
	id2, _ := socket(t, h)
	if err := h.NetDrop(id2, "connection refused"); err != nil {
		t.Fatal(err)
	}
	if err := h.Advance(time.Second); err != nil {
		t.Fatal(err)
	}
	if len(h.Sockets) != 0 {
		t.Fatal("the second retry came before 2 s")
	}
	if err := h.Advance(time.Second); err != nil {
		t.Fatal(err)
	}
	id3, s3 := socket(t, h)
	if err := h.NetOpen(id3); err != nil {
		t.Fatal(err)
	}
	if err := h.NetData(id3, []byte(log[:200])); err != nil {
		t.Fatal(err)
	}
	st = getStatus(t, h)
	if st["state"] != "receiving" || st["gateway"].(map[string]any)["connects"] != 2.0 || len(s3.Sent) != 1 {
		t.Fatalf("after reconnecting %v, sent %q", st, s3.Sent)
	}
	// Claimed again; a switch bank PUT goes out as a Yacht Devices RAW frame (127502 from 100).
	if err := h.Advance(time.Second); err != nil {
		t.Fatal(err)
	}
	if r, err := h.Put("electrical.switches.bank.1.3.state", true); err != nil || r.Result != abi.PutSuccess {
		t.Fatalf("put %+v %v", r, err)
	}
	if last := string(s3.Sent[len(s3.Sent)-1]); !strings.HasPrefix(last, "0DF20E64 01 ") {
		t.Fatalf("127502 sent as %q", last)
	}

	// Disabled: the socket is closed.
	set(t, h, map[string]any{"enabled": false})
	if len(h.Sockets) != 0 {
		t.Fatalf("sockets after disabling: %v", h.Sockets)
	}
}

// Actisense N2K ASCII over TCP: whole messages in, a switch bank PUT out as an A line; no
// port is a clear error.
func TestGatewayActisenseTCP(t *testing.T) {
	h := fakeHost(t)
	defer h.Stop()
	set(t, h, map[string]any{"enabled": true, "source": "actisense_tcp", "gateway_host": "w2k.local"})
	st := getStatus(t, h)
	if len(h.Sockets) != 0 || st["state"] != "error" || !strings.Contains(fmt.Sprint(st["last_error"]), "gateway_port must be set") {
		t.Fatalf("without a port: %v", st)
	}
	// Nothing retries settings that cannot work.
	if err := h.Advance(time.Minute); err != nil || len(h.Sockets) != 0 {
		t.Fatalf("retried without a port: %v", err)
	}
	set(t, h, map[string]any{"gateway_port": 60002, "gateway_host": "w2k local"})
	if st := getStatus(t, h); st["state"] != "error" || !strings.Contains(fmt.Sprint(st["last_error"]), "is not an address or a name") ||
		errorsOf(st)["gateway_settings"] != 2.0 {
		t.Fatalf("a bad host: %v", st)
	}
	set(t, h, map[string]any{"gateway_host": "w2k.local"})
	id, s := socket(t, h)
	if s.Open.Host != "w2k.local" || s.Open.Port != 60002 {
		t.Fatalf("opened %+v", s.Open)
	}
	if err := h.NetOpen(id); err != nil {
		t.Fatal(err)
	}
	// A heading (127250) from address 7 and a line that is not N2K ASCII.
	if err := h.NetData(id, []byte("A000001.000 07FF2 1F112 FF103BFF7FCEF5FC\r\nA0000\r\n")); err != nil {
		t.Fatal(err)
	}
	if v := h.Values()["navigation.headingTrue"]; v.Num != 1.512 {
		t.Errorf("headingTrue %+v", v)
	}
	st = getStatus(t, h)
	if st["messages"] != 1.0 || st["state"] != "receiving" || errorsOf(st)["bad_line"] != 1.0 {
		t.Fatalf("status %v", st)
	}
	// The claim stands after its wait; a PUT then sends 127502 through the gateway.
	if err := h.Advance(time.Second); err != nil {
		t.Fatal(err)
	}
	if r, err := h.Put("electrical.switches.bank.1.3.state", true); err != nil || r.Result != abi.PutSuccess {
		t.Fatalf("put %+v %v", r, err)
	}
	last := string(s.Sent[len(s.Sent)-1])
	if !strings.HasPrefix(last, "A000000.000 64FF3 1F20E 01") || !strings.HasSuffix(last, "\r\n") {
		t.Fatalf("127502 sent as %q", last)
	}
	// Dropped: a PUT fails, counted.
	if err := h.NetDrop(id, "connection reset by the peer"); err != nil {
		t.Fatal(err)
	}
	if r, _ := h.Put("electrical.switches.bank.1.3.state", false); r.Result != abi.PutFailure {
		t.Fatalf("put while reconnecting %+v", r)
	}
	if st := getStatus(t, h); errorsOf(st)["gateway_send"] != 1.0 {
		t.Fatalf("errors %v", st["errors"])
	}
}

// Yacht Devices RAW datagrams: each ends its last line; receive only without a host, silent
// after 10 s with the health condition warning.
func TestGatewayYDRawUDP(t *testing.T) {
	h := fakeHost(t)
	defer h.Stop()
	set(t, h, map[string]any{"enabled": true, "source": "ydraw_udp"})
	id, s := socket(t, h)
	if s.Open != (abi.NetOpen{Proto: abi.NetUDP, LocalPort: 1456}) {
		t.Fatalf("opened %+v", s.Open)
	}
	if err := h.NetOpen(id); err != nil {
		t.Fatal(err)
	}
	if len(s.Sent) != 0 {
		t.Fatalf("a receive-only socket sent %q", s.Sent)
	}
	if err := h.Advance(time.Second); err != nil {
		t.Fatal(err)
	}
	if st := getStatus(t, h); st["address"] != nil || errorsOf(st)["gateway_send"] != nil {
		t.Fatalf("receive only: %v", st)
	}
	if r, _ := h.Put("electrical.switches.bank.1.3.state", true); r.Result != abi.PutFailure {
		t.Fatalf("put without a way to send %+v", r)
	}
	for _, d := range []string{"00:00:01.000 R 09F1127F FF 10 3B FF 7F CE F5 FC", "00:00:01.010 R 09F1127F FF 10 3B FF 7F CE F5 FC\r\n"} {
		if err := h.NetData(id, []byte(d)); err != nil {
			t.Fatal(err)
		}
	}
	if st := getStatus(t, h); st["frames_in"] != 2.0 || st["messages"] != 2.0 || errorsOf(st)["bad_line"] != nil {
		t.Fatalf("status %v", st)
	}
	if err := h.Advance(11 * time.Second); err != nil {
		t.Fatal(err)
	}
	if c := h.Health["n2k.bus"]; c.State != sdk.Warn || !strings.Contains(c.Message, "ydraw_udp") {
		t.Errorf("n2k.bus %+v", c)
	}
	// With a host, frames go there as datagrams.
	set(t, h, map[string]any{"gateway_host": "10.0.0.9"})
	id, s = socket(t, h)
	if s.Open != (abi.NetOpen{Proto: abi.NetUDP, Host: "10.0.0.9", Port: 1456, LocalPort: 1456}) {
		t.Fatalf("opened %+v", s.Open)
	}
	if err := h.NetOpen(id); err != nil {
		t.Fatal(err)
	}
	if len(s.Sent) != 1 || !strings.HasPrefix(string(s.Sent[0]), "18EEFF64 ") {
		t.Fatalf("claim sent %q", s.Sent)
	}
}

func TestGatewayLineFormats(t *testing.T) {
	f := decode.Frame{ID: 0x09F8017F, Data: []byte{0x50, 0xc3, 0x0a}}
	if got := string(appendYDRaw(nil, f)); got != "09F8017F 50 C3 0A\r\n" {
		t.Errorf("yd raw %q", got)
	}
	m := decode.Message{Header: decode.Header{Prio: 3, PGN: 127502, Src: 100, Dst: 255}, Data: []byte{1, 0xfc}}
	if got := string(appendActisense(nil, m)); got != "A000000.000 64FF3 1F20E 01FC\r\n" {
		t.Errorf("actisense %q", got)
	}
	// What is written parses back as the same frame or message.
	yd, _ := input.NewParser(input.YDRaw)
	if r, err := yd.Parse("00:00:00.000 R " + string(appendYDRaw(nil, f))); err != nil || r.Frame.ID != f.ID || string(r.Frame.Data) != string(f.Data) {
		t.Errorf("yd raw round trip %+v %v", r, err)
	}
	act, _ := input.NewParser(input.Actisense)
	if r, err := act.Parse(string(appendActisense(nil, m))); err != nil || r.Msg.Header != m.Header || string(r.Msg.Data) != string(m.Data) {
		t.Errorf("actisense round trip %+v %v", r, err)
	}
}
