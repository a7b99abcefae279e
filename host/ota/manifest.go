package ota

import (
	"bytes"
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"strconv"
	"strings"
)

// MaxManifest is the spec's manifest size cap.
const MaxManifest = 16 << 10

// Manifest is an OTA manifest, schema 1.
type Manifest struct {
	Schema int     `json:"schema"`
	App    string  `json:"app,omitempty"`
	Builds []Build `json:"builds"`
}

// Build is one build a manifest offers. URL is absolute once ParseManifest resolved it.
type Build struct {
	Version string `json:"version"`
	Target  string `json:"target"`
	URL     string `json:"url"`
	Channel string `json:"channel,omitempty"`
	App     string `json:"app,omitempty"`
	Size    int64  `json:"size,omitempty"`
	SHA256  string `json:"sha256,omitempty"`
	Notes   string `json:"notes,omitempty"`
	Date    string `json:"date,omitempty"`
}

// ParseManifest reads a schema-1 manifest fetched from base: builds without a version, target
// or URL are errors, relative URLs are resolved against base, a missing channel is `stable`.
func ParseManifest(b []byte, base *url.URL) (Manifest, error) {
	var m Manifest
	if len(b) > MaxManifest {
		return m, fmt.Errorf("manifest of %d bytes, at most %d", len(b), MaxManifest)
	}
	if err := json.NewDecoder(bytes.NewReader(b)).Decode(&m); err != nil {
		return m, fmt.Errorf("manifest: %w", err)
	}
	if m.Schema != 1 {
		return m, fmt.Errorf("manifest schema %d, want 1", m.Schema)
	}
	for i := range m.Builds {
		bd := &m.Builds[i]
		if bd.Version == "" || bd.Target == "" || bd.URL == "" {
			return m, fmt.Errorf("manifest build %d: version, target and url are required", i)
		}
		u, err := url.Parse(bd.URL)
		if err != nil {
			return m, fmt.Errorf("manifest build %d: url: %w", i, err)
		}
		if base != nil {
			u = base.ResolveReference(u)
		}
		if u.Scheme != "http" && u.Scheme != "https" {
			return m, fmt.Errorf("manifest build %d: url %q is not http or https", i, u.String())
		}
		bd.URL = u.String()
		bd.Channel = cmp.Or(bd.Channel, "stable")
	}
	return m, nil
}

// Want is what the running device is looking for in a manifest.
type Want struct {
	App, Target, Channel, Running string
}

// Pick returns the newest build of the manifest for w that is strictly newer than the
// running version, or nil. A build's `app`, and the manifest's, must equal the device's
// project name when present.
func Pick(m Manifest, w Want) *Build {
	if m.App != "" && m.App != w.App {
		return nil
	}
	var best *Build
	for i := range m.Builds {
		b := &m.Builds[i]
		if b.Target != w.Target || b.Channel != w.Channel || (b.App != "" && b.App != w.App) {
			continue
		}
		if CompareVersions(b.Version, w.Running) <= 0 {
			continue
		}
		if best == nil || CompareVersions(b.Version, best.Version) > 0 {
			best = b
		}
	}
	return best
}

// version is a parsed `1.2.3-pre.1`.
type version struct {
	nums []uint64
	pre  string
}

var errUnparsable = errors.New("unparsable version")

func parseVersion(s string) (version, error) {
	main, pre, hasPre := strings.Cut(s, "-")
	if main == "" || (hasPre && pre == "") {
		return version{}, errUnparsable
	}
	var v version
	for _, p := range strings.Split(main, ".") {
		n, err := strconv.ParseUint(p, 10, 64)
		if err != nil {
			return version{}, errUnparsable
		}
		v.nums = append(v.nums, n)
	}
	v.pre = pre
	return v, nil
}

// CompareVersions orders versions as the spec's versioning rule 4 says: dotted numbers
// compared number by number (a missing number is 0), a `-prerelease` suffix below the same
// release, prereleases compared as strings; when either side is unparsable, both compare as
// plain strings. It returns -1, 0 or 1.
func CompareVersions(a, b string) int {
	va, ea := parseVersion(a)
	vb, eb := parseVersion(b)
	if ea != nil || eb != nil {
		return strings.Compare(a, b)
	}
	for i := 0; i < max(len(va.nums), len(vb.nums)); i++ {
		var x, y uint64
		if i < len(va.nums) {
			x = va.nums[i]
		}
		if i < len(vb.nums) {
			y = vb.nums[i]
		}
		switch {
		case x < y:
			return -1
		case x > y:
			return 1
		}
	}
	switch {
	case va.pre == vb.pre:
		return 0
	case va.pre == "":
		return 1
	case vb.pre == "":
		return -1
	}
	return strings.Compare(va.pre, vb.pre)
}
