//go:build !wasip1

package sdk

import (
	"testing"

	"devhost/abi"
)

// FuzzDispatch feeds arbitrary batches to a plugin with every handler set: the SDK must
// decode what the host sends without panicking, whatever it is.
func FuzzDispatch(f *testing.F) {
	var batch []byte
	batch = abi.AppendEvent(batch, abi.EvConfig, []byte(`{"a":1}`))
	batch = abi.AppendEvent(batch, abi.EvDelta, abi.AppendValues(nil, []PathValue{{Path: "a.b", Value: abi.Number(1)}}))
	batch = abi.AppendEvent(batch, abi.EvPut, abi.AppendPutRequest(nil, abi.PutRequest{ID: 1, Path: "a.b", Value: abi.Bool(true)}))
	batch = abi.AppendEvent(batch, abi.EvPutAnswer, abi.AppendPutAnswer(nil, abi.PutAnswer{ID: 1, State: "COMPLETED"}))
	batch = abi.AppendEvent(batch, abi.EvTimer, abi.AppendTimer(nil, 1))
	batch = abi.AppendEvent(batch, abi.EvHTTP, abi.AppendHTTPRequest(nil, abi.HTTPRequest{ID: 2, Method: "GET", Route: "/t", Path: "/t"}))
	batch = abi.AppendEvent(batch, abi.EvGPIO, abi.AppendGPIOEdge(nil, abi.GPIOEdge{Pin: 1, Level: 1}))
	batch = abi.AppendEvent(batch, abi.EvCAN, abi.AppendCANFrame(nil, abi.CANFrame{ID: 1, Data: []byte{1}}))
	batch = abi.AppendEvent(batch, abi.EvBLE, abi.AppendBLEAdvert(nil, abi.BLEAdvert{Addr: "a", RSSI: -1}))
	f.Add(batch)
	f.Add(abi.AppendEvent(nil, abi.EvStop, nil))
	f.Add([]byte{byte(abi.EvConfig), 4, 0, 0, 0, 'n', 'u', 'l', 'l'})
	f.Fuzz(func(t *testing.T, b []byte) {
		p := &Plugin{
			OnConfig:    func(c Config) { _ = c.String("a") },
			OnDelta:     func(vs []PathValue) {},
			OnPut:       func(r PutRequest) PutResult { return Success() },
			OnPutAnswer: func(PutAnswer) {},
			OnTimer:     func(uint32) { _ = Publish("a.b", 1) },
			OnHTTP:      func(r *Request) Response { return JSONResponse(200, r.Query()) },
			OnGPIO:      func(int, bool) {},
			OnCAN:       func(CANFrame) {},
			OnBLE:       func(BLEAdvert) {},
		}
		h := &FakeHost{Manifest: abi.Manifest{ID: "f", Name: "F", Version: "1", ABI: 1, Capabilities: abi.Capabilities}}
		if err := h.Start(p); err != nil {
			t.Fatal(err)
		}
		defer func() { current = nil }()
		h.openPuts[1], h.httpReply[2] = true, nil
		h.started = true
		_ = h.call(false, b)
	})
}
