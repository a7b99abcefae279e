package bundled

import (
	"bytes"
	"context"
	"crypto/rsa"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"testing/fstest"

	"devhost/abi"
	"devhost/host/ota"
	"devhost/host/plugin"
	"devhost/host/store"
)

// The rules run against the real plugin host (its signature check and partition) and the
// real configuration store; nothing here runs a plugin, so the module need not be real.

var (
	keyOnce        sync.Once
	devKey, other  *rsa.PrivateKey
	keyErr         error
	testModuleWasm = []byte("\x00asm\x01\x00\x00\x00")
)

func keys(t *testing.T) (*rsa.PrivateKey, *rsa.PrivateKey) {
	t.Helper()
	keyOnce.Do(func() {
		if devKey, keyErr = abi.GenerateKey(); keyErr == nil {
			other, keyErr = abi.GenerateKey()
		}
	})
	if keyErr != nil {
		t.Fatal(keyErr)
	}
	return devKey, other
}

func bundle(t *testing.T, id, version string, caps []string, k *rsa.PrivateKey) Bundle {
	t.Helper()
	man := fmt.Sprintf(`{"id":%q,"name":"Test %s","version":%q,"abi":1,"capabilities":["%s"]}`, id, id, version, strings.Join(caps, `","`))
	b, err := abi.PackRaw([]byte(man), testModuleWasm, k)
	if err != nil {
		t.Fatal(err)
	}
	bd, err := FromBytes(b)
	if err != nil {
		t.Fatal(err)
	}
	return bd
}

type device struct {
	pm *plugin.Manager
	st *store.Store
}

// boot opens the partition and the store in dir as the device does at every boot.
func boot(t *testing.T, dir string, trusted *rsa.PublicKey) *device {
	t.Helper()
	pm, err := plugin.New(plugin.Options{Dir: filepath.Join(dir, "plugins"), TrustedKeys: []*rsa.PublicKey{trusted}})
	if err != nil {
		t.Fatal(err)
	}
	st, err := store.Open(filepath.Join(dir, "nvs"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	return &device{pm: pm, st: st}
}

func (d *device) sync(t *testing.T, bs ...Bundle) []Result {
	t.Helper()
	res := Sync(context.Background(), bs, ManagerHost(d.pm), d.st, ota.CompareVersions)
	_ = d.st.Close()
	return res
}

func one(t *testing.T, rs []Result, want Action) {
	t.Helper()
	if len(rs) != 1 || rs[0].Action != want {
		t.Fatalf("results %+v, want one %s", rs, want)
	}
}

func version(t *testing.T, d *device, id string) string {
	t.Helper()
	st, ok := d.pm.Status(id)
	if !ok {
		return ""
	}
	return st.Version
}

func TestFirstBootInstallsAndLaterBootsKeep(t *testing.T) {
	k, _ := keys(t)
	dir := t.TempDir()
	d := boot(t, dir, &k.PublicKey)
	one(t, d.sync(t, bundle(t, "tb", "1.0.0", []string{"log", "can"}, k)), ActInstalled)
	if v := version(t, d, "tb"); v != "1.0.0" {
		t.Fatalf("installed version %q", v)
	}
	st, _ := d.pm.Status("tb")
	if st.Wanted != plugin.WantRunning || len(st.Granted) != 2 {
		t.Fatalf("a bundled plugin runs with what it asks: %+v", st)
	}
	d = boot(t, dir, &k.PublicKey)
	one(t, d.sync(t, bundle(t, "tb", "1.0.0", []string{"log", "can"}, k)), ActKept)
}

func TestRemovedStaysRemovedUntilFactoryReset(t *testing.T) {
	k, _ := keys(t)
	dir := t.TempDir()
	d := boot(t, dir, &k.PublicKey)
	b := bundle(t, "tb", "1.0.0", []string{"log"}, k)
	one(t, d.sync(t, b), ActInstalled)
	if err := d.pm.Remove("tb", true); err != nil {
		t.Fatal(err)
	}
	d = boot(t, dir, &k.PublicKey)
	one(t, d.sync(t, b), ActLeftRemoved)
	if version(t, d, "tb") != "" {
		t.Fatal("the removed plugin came back")
	}
	// Even a newer bundle after a firmware update leaves the owner's removal alone.
	d = boot(t, dir, &k.PublicKey)
	one(t, d.sync(t, bundle(t, "tb", "1.1.0", []string{"log"}, k)), ActLeftRemoved)

	// A factory reset erases the store (and keeps the plugin partition): the bundle returns.
	d = boot(t, dir, &k.PublicKey)
	if err := d.st.EraseAll(); err != nil {
		t.Fatal(err)
	}
	one(t, d.sync(t, b), ActInstalled)
	if version(t, d, "tb") != "1.0.0" {
		t.Fatal("not back after the factory reset")
	}
}

// installedOnce is a device in dir whose first boot installed the carried tb 1.0.0, which
// it returns.
func installedOnce(t *testing.T, dir string, k *rsa.PrivateKey) Bundle {
	t.Helper()
	d := boot(t, dir, &k.PublicKey)
	b := bundle(t, "tb", "1.0.0", []string{"log"}, k)
	one(t, d.sync(t, b), ActInstalled)
	return b
}

func TestFactoryResetRecordsAPluginStillInstalled(t *testing.T) {
	k, _ := keys(t)
	dir := t.TempDir()
	b := installedOnce(t, dir, k)
	d := boot(t, dir, &k.PublicKey)
	if err := d.st.EraseAll(); err != nil {
		t.Fatal(err)
	}
	one(t, d.sync(t, b), ActKept)
	// Recorded again: a removal after the reset is remembered.
	d = boot(t, dir, &k.PublicKey)
	if err := d.pm.Remove("tb", false); err != nil {
		t.Fatal(err)
	}
	one(t, d.sync(t, b), ActLeftRemoved)
}

func TestNewerBundleReplacesOlderKeepingTheOwnersChoices(t *testing.T) {
	k, _ := keys(t)
	dir := t.TempDir()
	d := boot(t, dir, &k.PublicKey)
	one(t, d.sync(t, bundle(t, "tb", "1.0.0", []string{"log", "can", "gpio"}, k)), ActInstalled)
	// The owner withdraws gpio (reinstalling with a smaller grant, as POST /plugins does) and
	// stops the plugin.
	d = boot(t, dir, &k.PublicKey)
	if _, err := d.pm.Install(bundle(t, "tb", "1.0.0", []string{"log", "can", "gpio"}, k).Data, []abi.Capability{"log", "can"}); err != nil {
		t.Fatal(err)
	}
	if _, err := d.pm.Stop("tb"); err != nil {
		t.Fatal(err)
	}
	_ = d.st.Close()
	// A firmware update carries 1.2.0, which also asks for ble.
	d = boot(t, dir, &k.PublicKey)
	one(t, d.sync(t, bundle(t, "tb", "1.2.0", []string{"log", "can", "gpio", "ble"}, k)), ActReplaced)
	st, _ := d.pm.Status("tb")
	if st.Version != "1.2.0" || st.Wanted != plugin.WantStopped {
		t.Fatalf("after the update: version %s wanted %s", st.Version, st.Wanted)
	}
	if got := strings.Join(st.Granted, ","); got != "log,can,ble" {
		t.Fatalf("granted %s, want log,can,ble (gpio stays withheld)", got)
	}
}

func TestOlderOrSameBundleKeepsANewerUpload(t *testing.T) {
	k, _ := keys(t)
	for _, carried := range []string{"1.0.0", "1.9.9", "2.0.0-rc1"} {
		t.Run(carried, func(t *testing.T) {
			dir := t.TempDir()
			d := boot(t, dir, &k.PublicKey)
			if _, err := d.pm.Install(bundle(t, "tb", "2.0.0", []string{"log"}, k).Data, nil); err != nil {
				t.Fatal(err)
			}
			one(t, d.sync(t, bundle(t, "tb", carried, []string{"log"}, k)), ActKept)
			if v := version(t, d, "tb"); v != "2.0.0" {
				t.Fatalf("version %s after a %s bundle", v, carried)
			}
		})
	}
}

func TestUntrustedBundleIsRefusedAndOfferedAgain(t *testing.T) {
	k, o := keys(t)
	dir := t.TempDir()
	d := boot(t, dir, &k.PublicKey)
	rs := d.sync(t, bundle(t, "tb", "1.0.0", []string{"log"}, o))
	one(t, rs, ActFailed)
	if !strings.Contains(rs[0].Err.Error(), "not in the trust store") {
		t.Fatalf("reason: %v", rs[0].Err)
	}
	if version(t, d, "tb") != "" {
		t.Fatal("an untrusted bundle was installed")
	}
	// Not recorded as offered: once the key is trusted, the next boot installs it.
	d = boot(t, dir, &o.PublicKey)
	one(t, d.sync(t, bundle(t, "tb", "1.0.0", []string{"log"}, o)), ActInstalled)
}

func TestReadListsBundlesByID(t *testing.T) {
	k, _ := keys(t)
	fsys := fstest.MapFS{
		"b.devplug":    {Data: bundle(t, "bb", "0.2.0", []string{"log"}, k).Data},
		"a.devplug":    {Data: bundle(t, "aa", "0.1.0", []string{"log"}, k).Data},
		"dup.devplug":  {Data: bundle(t, "aa", "0.3.0", []string{"log"}, k).Data},
		"junk.devplug": {Data: []byte("not a bundle")},
		"_README":      {Data: []byte("text")},
	}
	bs, bad := Read(fsys)
	if len(bs) != 2 || bs[0].ID != "aa" || bs[0].Version != "0.1.0" || bs[1].ID != "bb" {
		t.Fatalf("bundles %+v", bs)
	}
	// Listed from their heads: the bytes are read when needed, and are those of the file.
	if bs[0].Loaded() || bs[1].Loaded() {
		t.Fatal("listing read the bundles")
	}
	if data, err := bs[0].bytes(); err != nil || !bytes.Equal(data, fsys["a.devplug"].Data) {
		t.Fatalf("bytes of aa: %v", err)
	}
	if bs[0].Digest != bundleDigest(t, fsys["a.devplug"].Data) || bs[0].Digest == bs[1].Digest {
		t.Fatalf("digests %s %s", bs[0].Digest, bs[1].Digest)
	}
	if len(bad) != 2 {
		t.Fatalf("want the duplicate and the junk reported, got %v", bad)
	}
	if bs, bad := Read(nil); bs != nil || bad != nil {
		t.Fatal("a nil folder carries nothing")
	}
}

func TestPlainBuildCarriesNothing(t *testing.T) {
	bs, bad := Carried()
	if len(bs) != 0 || len(bad) != 0 {
		t.Fatalf("a build without the bundled tag carries %v (%v)", bs, bad)
	}
}

func bundleDigest(t *testing.T, data []byte) string {
	t.Helper()
	b, err := FromBytes(data)
	if err != nil {
		t.Fatal(err)
	}
	return b.Digest
}

// countingLedger counts the writes to the store.
type countingLedger struct {
	Ledger
	sets int
}

func (c *countingLedger) Set(key, value string) error {
	c.sets++
	return c.Ledger.Set(key, value)
}

// carried is a bundle as the firmware carries it: listed from its head, its bytes read on
// demand, counted.
func carriedBundle(t *testing.T, b Bundle, reads *int) Bundle {
	t.Helper()
	fsys := fstest.MapFS{"x.devplug": {Data: b.Data}}
	bs, bad := Read(fsys)
	if len(bs) != 1 || len(bad) != 0 {
		t.Fatalf("read %v %v", bs, bad)
	}
	open := bs[0].open
	bs[0].open = func() ([]byte, error) { *reads++; return open() }
	return bs[0]
}

func TestUnchangedBundleCostsALookUp(t *testing.T) {
	k, o := keys(t)
	dir := t.TempDir()
	// Signing salts the signature: each bundle call is another build.
	v1 := bundle(t, "tb", "1.0.0", []string{"log"}, k)
	for _, tc := range []struct {
		name      string
		bundle    Bundle
		want      Action
		reads     int
		recording bool
	}{
		{"first boot", v1, ActInstalled, 1, true},
		{"same bundle", v1, ActKept, 0, false},
		{"same again", v1, ActKept, 0, false},
		// Re-signed (another build of the same version): the same version is kept, unread,
		// and the record names the bundle now carried.
		{"rebuilt", bundle(t, "tb", "1.0.0", []string{"log"}, k), ActKept, 0, true},
		{"newer", bundle(t, "tb", "1.1.0", []string{"log"}, k), ActReplaced, 1, true},
		// An untrusted key is refused from the head, without reading the bundle.
		{"untrusted newer", bundle(t, "tb", "1.2.0", []string{"log"}, o), ActFailed, 0, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := boot(t, dir, &k.PublicKey)
			reads := 0
			l := &countingLedger{Ledger: d.st}
			rs := Sync(context.Background(), []Bundle{carriedBundle(t, tc.bundle, &reads)}, ManagerHost(d.pm), l, ota.CompareVersions)
			_ = d.st.Close()
			one(t, rs, tc.want)
			if reads != tc.reads || (l.sets > 0) != tc.recording {
				t.Fatalf("read the bundle %d times, wrote the record %d times", reads, l.sets)
			}
		})
	}
}

func TestRecordWithoutDigestIsKeptAndCompleted(t *testing.T) {
	k, _ := keys(t)
	dir := t.TempDir()
	b := installedOnce(t, dir, k)
	// A record written by an earlier firmware: the version alone.
	d := boot(t, dir, &k.PublicKey)
	if err := d.st.Set(LedgerPrefix+"tb", "1.0.0"); err != nil {
		t.Fatal(err)
	}
	one(t, d.sync(t, b), ActKept)
	d = boot(t, dir, &k.PublicKey)
	rec, _, err := d.st.Get(LedgerPrefix + "tb")
	if err != nil || rec != "1.0.0 "+b.Digest {
		t.Fatalf("record %q %v", rec, err)
	}
}

func TestSyncStopsWithItsContext(t *testing.T) {
	k, _ := keys(t)
	d := boot(t, t.TempDir(), &k.PublicKey)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	rs := Sync(ctx, []Bundle{bundle(t, "tb", "1.0.0", []string{"log"}, k)}, ManagerHost(d.pm), d.st, ota.CompareVersions)
	if len(rs) != 0 || version(t, d, "tb") != "" {
		t.Fatalf("offered after the end: %+v", rs)
	}
}
