package sensors

import "testing"

// BenchmarkDecode measures Decode per advert kind; adverts/s is 1e9 / ns/op.
func BenchmarkDecode(b *testing.B) {
	benches := []struct {
		name string
		kind Kind
		adv  string
		key  string
	}{
		{"bthome", KindBTHome, "020106" + bthomeAD("40016102ca0903bf13"), ""},
		{"bthome-encrypted", KindBTHome, "020106" + bthomeAD("41a47266c95f730011223378237214"), "231d39c1d7cc1ab1aee224cd096db932"},
		{"ruuvi", KindRuuvi, "020106" + mfrAD("9904", "0512FC5394C37C0004FFFC040CAC364200CDCBB8334C884F"), ""},
		{"victron-battery", KindVictron, "020106" + mfrAD("e102", "100289a302b040af925d09a4d89aa0128bdef48c6298a9"), "aff4d0995b7d1e176c0c33ecb9e70dcd"},
		{"xiaomi-pvvx", KindXiaomiATC, "020106" + serviceAD("1a18", "a4c1380a0b0c9c09c4134d0c640204"), ""},
		{"mopeka", KindMopeka, "0303e5fe" + mfrAD("5900", "03605a2c21aabbcc0102"), ""},
	}
	for _, bb := range benches {
		adv := mustHex(b, bb.adv)
		b.Run(bb.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := Decode(bb.kind, testAddr, adv, bb.key); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "adverts/s")
		})
	}
}
