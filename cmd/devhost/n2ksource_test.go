package main_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"devhost/plugins"
)

// n2kSourced is one value of `devctl n2k decode`'s output with its update's source.
type n2kSourced struct {
	path, src string
	pgn       uint32
	value     json.RawMessage
}

// The real signalk-server keeps each NMEA 2000 sender apart, as it does for its own NMEA 2000
// connections: a real log replayed onto the device's bus reads back from the server's REST
// API with every own-vessel value under `$source` `<device label>.<sender address>` with its
// PGN, a path several senders send as that many entries of its `values`, and every sender
// with the PGNs it sent under /signalk/v1/api/sources. A sender that sends a path in two PGNs
// (position in 129025 and 129029) has one source; its entry holds the last value of one of
// them (the device batches per source and PGN, so which one came last within a batch is not
// kept).

func TestN2KSourcesInSignalKServer(t *testing.T) {
	b := buildBundled(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*hangGuard)
	defer cancel()
	// The log's bus has four senders of navigation.magneticVariation (two compasses, the
	// GPS and the autopilot), one of them with two PGNs for navigation.position.
	log := filepath.Join(plugins.Dir(), "n2k", "testdata", "logs", "candumpSample2.txt")

	// last: "<path>|<src>" → PGN → the last value that sender sent in that PGN, as the
	// server's entry reads ({"value","pgn"}); want: one of them, what n2kReadBack waits for.
	last, want, senders := map[string]map[uint32]json.RawMessage{}, map[string]json.RawMessage{}, map[string]map[string]bool{}
	n2kDecodeSourced(ctx, t, b.wasm, log, func(v n2kSourced) {
		if string(v.value) == "null" {
			return
		}
		k := v.path + "|" + v.src
		if last[k] == nil {
			last[k] = map[uint32]json.RawMessage{}
		}
		last[k][v.pgn] = json.RawMessage(fmt.Sprintf(`{"value":%s,"pgn":%d}`, v.value, v.pgn))
		want[k] = last[k][v.pgn]
		if senders[v.path] == nil {
			senders[v.path] = map[string]bool{}
		}
		senders[v.path][v.src] = true
	})
	if len(senders["navigation.magneticVariation"]) < 2 {
		t.Fatalf("navigation.magneticVariation from %v, want several senders", senders["navigation.magneticVariation"])
	}
	// entry answers want[k] when the server's entry of k is one of its last values.
	entry := func(k string, value json.RawMessage, pgn uint32) json.RawMessage {
		got := json.RawMessage(fmt.Sprintf(`{"value":%s,"pgn":%d}`, value, pgn))
		if w, ok := last[k][pgn]; ok && n2kSameJSON(got, w) {
			return want[k]
		}
		return got
	}

	s, d := n2kDevice(ctx, t, b, log)
	// The device's label: dev.<hostname>, as its own values carry it.
	host, _ := d.call("GET", "/api/v1/net/status", "").json(t)["hostname"].(string)
	if host == "" {
		t.Fatal("no hostname in /api/v1/net/status")
	}
	label := "dev." + host
	keys := n2kReadBack(t, want, func(k string) json.RawMessage {
		path, src, _ := strings.Cut(k, "|")
		code, body, err := s.Do(ctx, "GET", "/signalk/v1/api/vessels/self/"+strings.ReplaceAll(path, ".", "/"), s.AdminToken, nil)
		if err != nil {
			t.Fatal(err)
		}
		var node struct {
			Value  json.RawMessage `json:"value"`
			Source string          `json:"$source"`
			PGN    uint32          `json:"pgn"`
			Values map[string]struct {
				Value json.RawMessage `json:"value"`
				PGN   uint32          `json:"pgn"`
			} `json:"values"`
		}
		if code != 200 || json.Unmarshal(body, &node) != nil {
			return nil
		}
		id := label + "." + src
		switch {
		case node.Values != nil:
			v, ok := node.Values[id]
			if !ok {
				return nil
			}
			return entry(k, v.Value, v.PGN)
		case node.Source == id:
			return entry(k, node.Value, node.PGN)
		}
		return nil
	})
	t.Logf("%d (path, sender) values read back from signalk-server under %s.<address>", len(keys), label)

	// The sources tree: the label, each sender under it with the PGNs it sent.
	code, body, err := s.Do(ctx, "GET", "/signalk/v1/api/sources", s.AdminToken, nil)
	if err != nil || code != 200 {
		t.Fatalf("sources: %d %v", code, err)
	}
	var sources map[string]map[string]json.RawMessage
	if err := json.Unmarshal(body, &sources); err != nil {
		t.Fatalf("sources %s: %v", body, err)
	}
	for _, k := range keys {
		_, src, _ := strings.Cut(k, "|")
		var sender struct {
			N2K struct {
				Src  string                     `json:"src"`
				PGNs map[string]json.RawMessage `json:"pgns"`
			} `json:"n2k"`
		}
		if err := json.Unmarshal(sources[label][src], &sender); err != nil || sender.N2K.Src != src {
			t.Fatalf("sources[%s][%s]: %s (%v)", label, src, sources[label][src], err)
		}
		for pgn := range last[k] {
			if _, ok := sender.N2K.PGNs[fmt.Sprint(pgn)]; !ok {
				t.Errorf("sources[%s][%s].n2k.pgns lacks %d: %s", label, src, pgn, sources[label][src])
			}
		}
		if _, ok := sender.N2K.PGNs["undefined"]; ok {
			t.Errorf("sources[%s][%s].n2k.pgns has undefined", label, src)
		}
	}
}

// n2kDecodeSourced runs devctl n2k decode with module wasm over log and calls fn with every
// own-vessel value of every delta, in order, with its update's source.
func n2kDecodeSourced(ctx context.Context, t *testing.T, wasm, log string, fn func(n2kSourced)) {
	t.Helper()
	n2kDecodeLines(ctx, t, wasm, log, func(line []byte) {
		var d struct {
			Context string
			Updates []struct {
				Source struct {
					Src string
					PGN uint32
				}
				Values []struct {
					Path  string
					Value json.RawMessage
				}
			}
		}
		if err := json.Unmarshal(line, &d); err != nil {
			t.Fatalf("decode line %q: %v", line, err)
		}
		for _, u := range d.Updates {
			for _, v := range u.Values {
				if d.Context == "" && v.Path != "" {
					fn(n2kSourced{v.Path, u.Source.Src, u.Source.PGN, v.Value})
				}
			}
		}
	})
}

// n2kDecodeLines runs devctl n2k decode with module wasm over log and calls fn with every
// line it prints (one delta each).
func n2kDecodeLines(ctx context.Context, t *testing.T, wasm, log string, fn func(line []byte)) {
	t.Helper()
	cmd := exec.CommandContext(ctx, devctl, "n2k", "decode", "--module", wasm, log)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("n2k decode: %v\n%s", err, stderr.Bytes())
	}
	sc := bufio.NewScanner(bytes.NewReader(out))
	sc.Buffer(make([]byte, 1<<16), 1<<20)
	for sc.Scan() {
		fn(sc.Bytes())
	}
}
