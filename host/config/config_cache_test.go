package config

import (
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
)

// The rendered document is cached; every way the stored values or the set of namespaces can
// change must show in the next read.
func TestDocumentCacheFollowsEveryChange(t *testing.T) {
	ns := Namespace{Name: "cache", Version: 1, Title: "Cache", Keys: []Key{{Name: "n", Type: "int", Default: 1}}}
	c := newFixture(t, ns).c
	read := func() string {
		b, err := c.Document("")
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	if got := read(); !strings.Contains(got, `"n":1`) {
		t.Fatalf("initial %s", got)
	}
	steps := []struct {
		name string
		do   func() error
		want string
	}{
		{"Apply", func() error { _, err := c.Apply([]byte(`{"cache":{"n":2}}`)); return err }, `"n":2`},
		{"Set", func() error { return c.Set("cache", "n", 3) }, `"n":3`},
		{"null reset", func() error { _, err := c.Apply([]byte(`{"cache":{"n":null}}`)); return err }, `"n":1`},
		{"Register", func() error {
			return c.Register(Namespace{Name: "f_rt", Version: 1, Title: "RT", Keys: []Key{{Name: "b", Type: "bool", Default: true}}})
		}, `"f_rt":{"b":true}`},
		{"write to the run-time namespace", func() error { _, err := c.Apply([]byte(`{"f_rt":{"b":false}}`)); return err }, `"f_rt":{"b":false}`},
	}
	for _, s := range steps {
		read() // warm the cache
		if err := s.do(); err != nil {
			t.Fatalf("%s: %v", s.name, err)
		}
		if got := read(); !strings.Contains(got, s.want) {
			t.Fatalf("after %s: %s lacks %s", s.name, got, s.want)
		}
	}
	read()
	if err := c.Unregister("f_rt"); err != nil {
		t.Fatal(err)
	}
	if got := read(); strings.Contains(got, "f_rt") {
		t.Fatalf("after Unregister: %s", got)
	}
}

// Key reads are served from a per-key cache; a write that has returned must show in every
// later read, whichever way it was made.
func TestKeyReadsFollowEveryWrite(t *testing.T) {
	ns := Namespace{Name: "kc", Version: 1, Title: "Key cache", Keys: []Key{
		{Name: "n", Type: "int", Default: 1},
		{Name: "s", Type: "string", Default: "a"},
	}}
	c := newFixture(t, ns).c
	steps := []struct {
		name  string
		do    func() error
		wantN int
		wantS string
	}{
		{"Set", func() error { return c.Set("kc", "n", 7) }, 7, "a"},
		{"Apply", func() error { _, err := c.Apply([]byte(`{"kc":{"n":8,"s":"b"}}`)); return err }, 8, "b"},
		{"refused Apply", func() error {
			if _, err := c.Apply([]byte(`{"kc":{"n":9,"s":5}}`)); err == nil {
				return errors.New("a bad document was accepted")
			}
			return nil
		}, 8, "b"},
		{"null reset", func() error { _, err := c.Apply([]byte(`{"kc":{"n":null}}`)); return err }, 1, "b"},
		{"Set nil", func() error { return c.Set("kc", "s", nil) }, 1, "a"},
	}
	for _, s := range steps {
		_, _ = c.Int("kc", "n"), c.String("kc", "s") // warm the cache
		if err := s.do(); err != nil {
			t.Fatalf("%s: %v", s.name, err)
		}
		if got := c.Int("kc", "n"); got != s.wantN {
			t.Errorf("after %s: n = %d, want %d", s.name, got, s.wantN)
		}
		if got := c.String("kc", "s"); got != s.wantS {
			t.Errorf("after %s: s = %q, want %q", s.name, got, s.wantS)
		}
	}
}

// Readers running beside a writer never see a value older than the last write that returned.
func TestKeyReadsNeverGoBackBehindAReturnedWrite(t *testing.T) {
	ns := Namespace{Name: "kr", Version: 1, Title: "Key race", Keys: []Key{
		{Name: "n", Type: "int", Default: 0},
	}}
	c := newFixture(t, ns).c
	var returned atomic.Int64 // the value of the last write that returned
	stop := make(chan struct{})
	errc := make(chan error, 4)
	var wg sync.WaitGroup
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				floor := returned.Load()
				if got := int64(c.Int("kr", "n")); got < floor {
					errc <- fmt.Errorf("read %d after the write of %d returned", got, floor)
					return
				}
			}
		}()
	}
	for v := 1; v <= 200; v++ {
		if err := c.Set("kr", "n", v); err != nil {
			t.Fatal(err)
		}
		returned.Store(int64(v))
	}
	close(stop)
	wg.Wait()
	close(errc)
	for err := range errc {
		t.Error(err)
	}
}
