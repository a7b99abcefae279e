package ota

// Status is the GET /ota/status document and the data of the `ota` event.
type Status struct {
	// State is one of the State constants.
	State string `json:"state"`
	// Progress is the download (0..100) while downloading or verifying, else null.
	Progress *int `json:"progress"`
	// Error is why the last check or install failed, null otherwise.
	Error   *string `json:"error"`
	Running Running `json:"running"`
	// OtherVersion is the version in the other slot, null when it holds none.
	OtherVersion *string `json:"other_version"`
	// OtherState is the other slot's state in otadata (empty, new, valid, invalid, aborted...).
	OtherState string `json:"other_state"`
	// Available is the newer build the last successful check found, null when none: a check
	// that fails keeps it (Error says why that check failed), one that finds none clears it.
	Available *Available `json:"available"`
	// Bytes and Total count the download (Total 0 when unknown).
	Bytes int64 `json:"bytes"`
	Total int64 `json:"total"`
	// Source is the URL of the image being (or last) installed, "" when none.
	Source string `json:"source"`
	// LastCheck is when the last manifest check ended (unix ms), null before the first.
	LastCheck *int64 `json:"last_check"`
}

// Running describes the image this boot runs.
type Running struct {
	Version   string `json:"version"`
	Slot      int    `json:"slot"`
	Confirmed bool   `json:"confirmed"`
	// RolledBack: the other slot holds an image that failed (rolled back).
	RolledBack bool `json:"rolled_back"`
}

// Available is a build a manifest offers.
type Available struct {
	Version string `json:"version"`
	URL     string `json:"url"`
	Channel string `json:"channel"`
	Size    int64  `json:"size,omitempty"`
	Notes   string `json:"notes,omitempty"`
	Date    string `json:"date,omitempty"`
}

func (s Status) clone() Status {
	c := s
	c.Progress, c.Error, c.OtherVersion = copyOf(s.Progress), copyOf(s.Error), copyOf(s.OtherVersion)
	c.Available, c.LastCheck = copyOf(s.Available), copyOf(s.LastCheck)
	return c
}

// copyOf answers a pointer to a copy of *p, or nil for nil.
func copyOf[T any](p *T) *T {
	if p == nil {
		return nil
	}
	v := *p
	return &v
}
