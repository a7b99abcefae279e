package gattprov

import (
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"

	"devhost/host/board"
	"devhost/plugins/ble/protocomm"
	"devhost/plugins/ble/prov"
	"devhost/plugins/ble/provclient"
	pb "devhost/plugins/ble/provpb"
)

// simCentral is one connection of the simulated board's central.
type simCentral struct {
	sim  *board.Sim
	conn int
}

func (c simCentral) Write(h uint16, off int, v []byte, prepare bool) error {
	return c.sim.CentralWrite(c.conn, h, off, v, prepare)
}
func (c simCentral) Execute() error { return c.sim.CentralExecute(c.conn, true) }
func (c simCentral) Read(h uint16, off int) ([]byte, error) {
	return c.sim.CentralRead(c.conn, h, off)
}

// serve publishes the transport's service on the board, as the device does.
func serve(sim *board.Sim, t *Transport) {
	svc := &board.GATTService{UUID: ServiceUUID, Disconnected: t.Disconnected}
	for _, ep := range protocomm.Endpoints {
		svc.Chars = append(svc.Chars, board.GATTChar{UUID: CharUUID(ep), Description: ep,
			Read:  func(conn int) ([]byte, error) { return t.Read(conn, ep) },
			Write: func(conn int, v []byte) error { return t.Write(conn, ep, v) }})
	}
	sim.GATTServe(svc)
}

type rig struct {
	sim   *board.Sim
	flow  *prov.Flow
	tr    *Transport
	slot0 atomic.Pointer[[2]string]
	gone  atomic.Int32
}

func newRig(t testing.TB) *rig {
	sim, err := board.NewSim(board.DefaultFile())
	if err != nil {
		t.Fatal(err)
	}
	r := &rig{sim: sim}
	r.flow = prov.New(prov.Options{Scheme: prov.SchemeBLE, ServiceName: "PROV_ABCDEF", PoP: "abcd1234", Security: protocomm.Sec1,
		Store:   func(ssid, psk string) error { r.slot0.Store(&[2]string{ssid, psk}); return nil },
		Station: func() prov.Station { return prov.Station{State: prov.StaConnected, IP: "192.0.2.5"} }})
	r.tr = &Transport{Handler: func() *protocomm.Handler {
		if !r.flow.Active() {
			return nil
		}
		return r.flow.Handler()
	}, Gone: func() { r.gone.Add(1) }}
	serve(sim, r.tr)
	r.flow.Start()
	return r
}

// connect plays the app's connection: connect, MTU, discovery by user description.
func (r *rig) connect(t testing.TB, mtu int) (*provclient.Client, int) {
	id, err := r.sim.CentralConnect()
	if err != nil {
		t.Fatal(err)
	}
	got, err := r.sim.CentralMTU(id, mtu)
	if err != nil {
		t.Fatal(err)
	}
	svcs, err := r.sim.CentralDiscover(id)
	if err != nil {
		t.Fatal(err)
	}
	handles := map[string]uint16{}
	for _, s := range svcs {
		if s.UUID != ServiceUUID {
			continue
		}
		for _, ch := range s.Chars {
			d, err := r.sim.CentralRead(id, ch.DescHandle, 0)
			if err != nil {
				t.Fatal(err)
			}
			handles[string(d)] = ch.Handle
			if ch.UUID != CharUUID(string(d)) {
				t.Fatalf("%s has UUID %s", d, ch.UUID)
			}
		}
	}
	if len(handles) != 5 {
		t.Fatalf("endpoints found %v", handles)
	}
	return &provclient.Client{X: Exchange(simCentral{r.sim, id}, handles, got), Sec: protocomm.Sec1, PoP: []byte("abcd1234")}, id
}

func TestProvisionOverGATT(t *testing.T) {
	for _, mtu := range []int{board.DefaultMTU, 185} { // 23: every message is a long write and read
		r := newRig(t)
		c, _ := r.connect(t, mtu)
		if v, err := c.Version(); err != nil || v.Prov.Ver != protocomm.Version {
			t.Fatalf("mtu %d version %+v %v", mtu, v, err)
		}
		if err := c.Handshake(); err != nil {
			t.Fatalf("mtu %d: %v", mtu, err)
		}
		if err := c.SetConfig("boat", strings.Repeat("p", 63)); err != nil {
			t.Fatal(err)
		}
		if err := c.ApplyConfig(); err != nil {
			t.Fatal(err)
		}
		r.flow.StationChanged(prov.Station{State: prov.StaConnecting})
		st, err := c.Status()
		if err != nil || st.GetStaState() != pb.WifiStationState_Connected {
			t.Fatalf("status %v %v", st, err)
		}
		if got := r.slot0.Load(); got == nil || got[0] != "boat" || len(got[1]) != 63 {
			t.Fatalf("slot 0 %v", got)
		}
	}
}

func TestCentralDisconnectsMidSession(t *testing.T) {
	r := newRig(t)
	c, id := r.connect(t, 100)
	if err := c.Handshake(); err != nil {
		t.Fatal(err)
	}
	if r.tr.Sessions() != 1 {
		t.Fatalf("sessions %d", r.tr.Sessions())
	}
	if err := r.sim.CentralDisconnect(id); err != nil {
		t.Fatal(err)
	}
	if r.tr.Sessions() != 0 || r.gone.Load() != 1 {
		t.Fatalf("after disconnect: sessions %d, gone %d", r.tr.Sessions(), r.gone.Load())
	}
	// The old connection is gone; a new one has no session until it shakes hands.
	if err := c.SetConfig("boat", "password1"); !errors.Is(err, board.ErrNoConnection) {
		t.Fatalf("write on a closed connection: %v", err)
	}
	c2, _ := r.connect(t, 100)
	if err := c2.SetConfig("boat", "password1"); err == nil {
		t.Fatal("set config on a fresh connection without a session accepted")
	}
	if r.slot0.Load() != nil {
		t.Fatal("credentials stored")
	}
}

func TestRefusalsAreATTErrors(t *testing.T) {
	r := newRig(t)
	_, id := r.connect(t, 100)
	svcs, _ := r.sim.CentralDiscover(id)
	var sess uint16
	for _, ch := range svcs[0].Chars {
		if ch.Description == protocomm.EPSession {
			sess = ch.Handle
		}
	}
	// Garbage on every endpoint but proto-ver (which answers anything): an ATT error.
	var ae *board.ATTError
	for _, ch := range svcs[0].Chars {
		if ch.Description == protocomm.EPVersion {
			continue
		}
		if err := r.sim.CentralWrite(id, ch.Handle, 0, []byte{0xff, 0xff, 0xff}, false); !errors.As(err, &ae) {
			t.Fatalf("garbage write on %s: %v", ch.Description, err)
		}
	}
	if err := r.sim.CentralWrite(id, sess, 0, []byte{0xff, 0xff, 0xff}, false); !errors.As(err, &ae) {
		t.Fatalf("garbage write: %v", err)
	}
	// Nothing to read after a refused write.
	if _, err := r.sim.CentralRead(id, sess, 0); !errors.As(err, &ae) {
		t.Fatalf("read after a refused write: %v", err)
	}
	// Wrong PoP.
	c3, _ := r.connect(t, 100)
	c3.PoP = []byte("wrong")
	if err := c3.Handshake(); err == nil {
		t.Fatal("wrong PoP accepted")
	}
	// Not provisioning: every write refused.
	r.flow.Stop()
	if err := r.sim.CentralWrite(id, sess, 0, []byte{0x10, 0x01}, false); !errors.As(err, &ae) {
		t.Fatalf("write while inactive: %v", err)
	}
}

func TestIdentifiers(t *testing.T) {
	if got := CharUUID(protocomm.EPSession); got != "021aff51-0382-4aea-bff4-6b3f1c5adfb4" {
		t.Fatalf("prov-session UUID %s", got)
	}
	ad := AdvertData("PROV_A1B2C3")
	if len(ad) > 31 || string(ad[5:]) != "PROV_A1B2C3" || ad[4] != 0x09 || int(ad[3]) != len("PROV_A1B2C3")+1 {
		t.Fatalf("advert %x", ad)
	}
}

func TestAdvertLayout(t *testing.T) {
	adv := AdvertServiceData()
	// flags, then 0x11 0x07 and the UUID 021a9004-0382-4aea-bff4-6b3f1c5adfb4 reversed.
	want := "0201061107b4df5a1c3f6bf4bfea4a820304901a02"
	if got := fmt.Sprintf("%x", adv); got != want {
		t.Errorf("advert %s", got)
	}
	if sr := ScanResponseData("PROV_0A0B0C"); string(sr) != "\x0c\x09PROV_0A0B0C" {
		t.Errorf("scan response %q", sr)
	}
}
