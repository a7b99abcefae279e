package protocomm_test

import (
	"bytes"
	"testing"

	"devhost/plugins/ble/protocomm"
)

// FuzzSession drives one security-1 session through a handshake and then hands the fuzzer's
// bytes to every endpoint: nothing may panic, a refusal must end the session, and nothing
// may reach the device unless the session was established.
func FuzzSession(f *testing.F) {
	for _, seed := range [][]byte{nil, {0x10, 0x01, 0x5a, 0x00}, {0x08, 0x02, 0xb2, 0x01, 0x00}, bytes.Repeat([]byte{0x55}, 40)} {
		f.Add(uint8(0), seed)
		f.Add(uint8(1), seed)
	}
	f.Fuzz(func(t *testing.T, ep uint8, body []byte) {
		for _, handshake := range []bool{false, true} {
			dev := &fakeDevice{}
			h, s, _ := connect(t, dev, protocomm.Sec1, "pop", handshake)
			all := append([]string{"bogus"}, protocomm.Endpoints...)
			name := all[int(ep)%len(all)]
			_, err := h.Handle(s, name, body)
			if err != nil && s.Established() && name != protocomm.EPVersion && name != "bogus" {
				t.Fatalf("%s refused (%v) but the session lives on", name, err)
			}
			if !handshake && name != protocomm.EPSession && name != protocomm.EPVersion && err == nil {
				t.Fatalf("%s answered without a session", name)
			}
			if ssid, _ := dev.stored(); ssid != "" && !handshake {
				t.Fatal("credentials stored without a session")
			}
		}
	})
}
