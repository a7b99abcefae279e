package main

import (
	"context"
	"encoding/hex"
	"fmt"
	"net"
	"strings"

	"devhost/host/board"
)

// boardBLE is `devctl board --data DIR ble advert --addr AA:BB:CC:DD:EE:FF --data HEX [--rssi DBM]`
// (one advertisement heard by the device's scanner, --data being the whole advertising data
// as AD structures) and `devctl board --data DIR ble adverts` (what the device advertises).
// The late --data/--socket flags are registered on fs by the caller, so `--data` after
// `advert` is the payload, as the contract writes it.
func (a *app) boardBLE(ctx context.Context, tgt boardTarget, args []string) error {
	if len(args) == 0 {
		return usagef("board ble: no subcommand (advert, adverts)")
	}
	sub, rest := args[0], args[1:]
	fs := newFlags("board ble " + sub)
	sock, err := tgt.path()
	if err != nil {
		return err
	}
	c := board.Dial(sock)
	switch sub {
	case "advert":
		addr := fs.String("addr", "", "advertiser address AA:BB:CC:DD:EE:FF")
		data := fs.String("data", "", "advertising data (AD structures), hex")
		rssi := fs.Int("rssi", -60, "signal strength, dBm")
		if err := parseNoArgs(fs, rest); err != nil {
			return err
		}
		if hw, err := net.ParseMAC(*addr); err != nil || len(hw) != 6 {
			return usagef("board ble advert: --addr must be AA:BB:CC:DD:EE:FF")
		}
		payload, err := hex.DecodeString(strings.ReplaceAll(*data, " ", ""))
		if err != nil || len(payload) == 0 {
			return usagef("board ble advert: --data must be the advertising data in hex")
		}
		if *rssi > 20 || *rssi < -127 {
			return usagef("board ble advert: --rssi must be -127..20 dBm")
		}
		if _, err := c.Advert(ctx, board.BLEAdvert{Address: strings.ToUpper(*addr), RSSI: *rssi, Data: payload}); err != nil {
			return err
		}
		fmt.Fprintf(a.stdout, "advert from %s (%d bytes, %d dBm) sent\n", strings.ToUpper(*addr), len(payload), *rssi)
		return nil
	case "adverts":
		if err := parseNoArgs(fs, rest); err != nil {
			return err
		}
		st, err := c.State(ctx)
		if err != nil {
			return err
		}
		name := localName(st.Radios.Advertising)
		if name == "" {
			name = localName(st.Radios.ScanResponse)
		}
		doc := map[string]any{"advertising": st.Radios.Advertising != nil, "data": hex.EncodeToString(st.Radios.Advertising),
			"scan_response": hex.EncodeToString(st.Radios.ScanResponse), "name": name}
		return printJSON(a.stdout, doc)
	}
	return usagef("board ble: unknown subcommand %q (advert, adverts)", sub)
}

// localName is the complete (0x09) or shortened (0x08) local name in advertising data.
func localName(ad []byte) string {
	for len(ad) >= 2 {
		n := int(ad[0])
		if n == 0 || n+1 > len(ad) {
			return ""
		}
		if t := ad[1]; t == 0x09 || t == 0x08 {
			return string(ad[2 : n+1])
		}
		ad = ad[n+1:]
	}
	return ""
}
