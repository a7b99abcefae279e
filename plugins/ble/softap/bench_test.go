package softap

import (
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"testing"

	"devhost/plugins/ble/protocomm"
	"devhost/plugins/ble/prov"
	"devhost/plugins/ble/provclient"
	"devhost/plugins/ble/softap/table"
)

// BenchmarkHandshakeSec1 is the provisioning handshake as an app sees it over the SoftAP
// transport on loopback: proto-ver, then security 1's two exchanges on one keep-alive
// connection (X25519 on both sides, AES-256-CTR set up).
func BenchmarkHandshakeSec1(b *testing.B) {
	flow := prov.New(prov.Options{Scheme: prov.SchemeSoftAP, ServiceName: "PROV_000000", PoP: "abcd1234", Security: protocomm.Sec1,
		Store: func(string, string) error { return nil }, Station: func() prov.Station { return prov.Station{} }})
	flow.Start()
	defer flow.Stop()
	srv := httptest.NewServer(&Server{Table: table.Table{Handler: flow.Handler}})
	defer srv.Close()
	jar, err := cookiejar.New(nil)
	if err != nil {
		b.Fatal(err)
	}
	hc := &http.Client{Jar: jar}
	for b.Loop() {
		c := &provclient.Client{X: Exchange(hc, srv.URL), Sec: protocomm.Sec1, PoP: []byte("abcd1234")}
		if _, err := c.Version(); err != nil {
			b.Fatal(err)
		}
		if err := c.Handshake(); err != nil {
			b.Fatal(err)
		}
	}
}
