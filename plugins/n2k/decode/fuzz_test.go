package decode

import "testing"

// FuzzDecode feeds any bytes to every PGN's field decoder: it must answer or refuse, never
// panic. The seed corpus is in testdata/fuzz/FuzzDecode.
func FuzzDecode(f *testing.F) {
	f.Add(uint32(127250), []byte{0xff, 0x10, 0x3b, 0xff, 0x7f, 0xce, 0xf5, 0xfc})
	f.Add(uint32(129540), []byte{0xbd, 0xfd, 0x0c, 0x1d, 0xf4, 0x0c, 0x74, 0x23})
	f.Add(uint32(126996), []byte{0x34, 0x08, 0x41, 0x42})
	f.Fuzz(func(t *testing.T, p uint32, data []byte) {
		d, err := Decode(Message{Header: Header{PGN: p & (1<<18 - 1)}, Data: data})
		if err == nil && d == nil {
			t.Fatal("no message and no error")
		}
	})
}

// FuzzAssembler feeds a stream of frames (4-byte id, length byte, data) to the fast-packet
// and transport reassembly: it must never panic and must never hold an unbounded number of
// partial messages.
func FuzzAssembler(f *testing.F) {
	var seed []byte
	for _, fr := range Frames(msg(129029, 7, 43), 1, nil) {
		seed = append(seed, byte(fr.ID>>24), byte(fr.ID>>16), byte(fr.ID>>8), byte(fr.ID), byte(len(fr.Data)))
		seed = append(seed, fr.Data...)
	}
	f.Add(seed)
	f.Fuzz(func(t *testing.T, stream []byte) {
		a := NewAssembler()
		for len(stream) >= 5 {
			id := uint32(stream[0])<<24 | uint32(stream[1])<<16 | uint32(stream[2])<<8 | uint32(stream[3])
			n := int(stream[4]) % 10
			stream = stream[5:]
			n = min(n, len(stream))
			m, _ := a.Add(Frame{ID: id & (1<<30 - 1), Data: stream[:n]})
			if m != nil && len(m.Data) > 1785 {
				t.Fatalf("message of %d bytes", len(m.Data))
			}
			stream = stream[n:]
		}
		if a.Pending() > maxFastPending+256 {
			t.Fatalf("%d partial messages", a.Pending())
		}
	})
}
