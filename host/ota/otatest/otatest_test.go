package otatest

import "testing"

// The two publisher keys load, and they differ.
func TestKeys(t *testing.T) {
	if Key(t, "publisher").Equal(Key(t, "other")) {
		t.Fatal("publisher and other are the same key")
	}
}
