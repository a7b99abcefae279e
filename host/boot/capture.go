package boot

import (
	"bytes"
	"io"
	"sync"
)

// CaptureSize is how much of the app's crash output the supervisor keeps: the last 64 KiB of
// its stderr, and up to 64 KiB from the start of the crash report.
const CaptureSize = 64 << 10

// Lines that open a Go crash report. With GOTRACEBACK=system the report lists every goroutine,
// so it can be longer than the tail the supervisor keeps; capturing from its first line keeps
// the crashing goroutine, which the runtime prints first.
var crashMarkers = [][]byte{
	[]byte("panic: "),
	[]byte("fatal error: "),
	[]byte("SIGSEGV: "), []byte("SIGBUS: "), []byte("SIGFPE: "), []byte("SIGILL: "),
	[]byte("SIGABRT: "), []byte("SIGTRAP: "), []byte("SIGQUIT: "), []byte("SIGSYS: "),
}

var maxMarker = func() int {
	n := 0
	for _, m := range crashMarkers {
		n = max(n, len(m))
	}
	return n
}()

// capture is the app's stderr as the supervisor keeps it: a ring of the last CaptureSize
// bytes, and the head of the most recent crash report (from a line starting with a crash
// marker, at most CaptureSize bytes). It is an io.Writer fed in chunks of any size.
type capture struct {
	mu   sync.Mutex
	ring []byte // len CaptureSize once full
	pos  int    // next write position in ring once full
	full bool

	head      []byte
	capturing bool
	truncated bool // the crash report was longer than CaptureSize

	// Start-of-line state: while atLineStart, pending holds the line's first bytes until it
	// is clear whether they open a crash report.
	atLineStart bool
	pending     []byte
}

func newCapture() *capture {
	return &capture{ring: make([]byte, 0, CaptureSize), atLineStart: true}
}

func (c *capture) Write(p []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.writeRing(p)
	n := len(p)
	for len(p) > 0 {
		seg := p
		nl := false
		if i := bytes.IndexByte(p, '\n'); i >= 0 {
			seg, nl = p[:i+1], true
		}
		p = p[len(seg):]
		c.consume(seg, nl)
	}
	return n, nil
}

func (c *capture) writeRing(p []byte) {
	if len(p) >= CaptureSize {
		c.ring = append(c.ring[:0], p[len(p)-CaptureSize:]...)
		c.pos, c.full = 0, true
		return
	}
	if !c.full {
		room := CaptureSize - len(c.ring)
		if len(p) <= room {
			c.ring = append(c.ring, p...)
			if len(c.ring) == CaptureSize {
				c.full = true
			}
			return
		}
		c.ring = append(c.ring, p[:room]...)
		p = p[room:]
		c.full = true
	}
	for len(p) > 0 {
		k := copy(c.ring[c.pos:], p)
		p = p[k:]
		c.pos = (c.pos + k) % CaptureSize
	}
}

// consume handles one segment of a line; nl says the segment ends the line.
func (c *capture) consume(seg []byte, nl bool) {
	if c.atLineStart {
		need := maxMarker - len(c.pending)
		k := min(need, len(seg))
		c.pending = append(c.pending, seg[:k]...)
		seg = seg[k:]
		marker, undecided := classify(c.pending, nl || len(c.pending) >= maxMarker)
		if undecided {
			return
		}
		if marker {
			c.head, c.capturing, c.truncated = c.head[:0], true, false
		}
		c.appendHead(c.pending)
		c.pending = c.pending[:0]
		c.atLineStart = false
	}
	c.appendHead(seg)
	if nl {
		c.atLineStart = true
	}
}

// classify says whether a line's first bytes open a crash report, or that more bytes are
// needed to tell (only while final is false).
func classify(prefix []byte, final bool) (marker, undecided bool) {
	couldBe := false
	for _, m := range crashMarkers {
		if bytes.HasPrefix(prefix, m) {
			return true, false
		}
		if bytes.HasPrefix(m, prefix) {
			couldBe = true
		}
	}
	return false, couldBe && !final
}

func (c *capture) appendHead(b []byte) {
	if !c.capturing || len(b) == 0 {
		return
	}
	room := CaptureSize - len(c.head)
	if len(b) > room {
		b = b[:room]
		c.truncated = true
	}
	c.head = append(c.head, b...)
}

// tail is the last CaptureSize bytes written.
func (c *capture) tail() []byte {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.full {
		return bytes.Clone(c.ring)
	}
	out := make([]byte, 0, CaptureSize)
	out = append(out, c.ring[c.pos:]...)
	return append(out, c.ring[:c.pos]...)
}

// crash is the most recent crash report (nil when none was seen) and whether it was cut.
func (c *capture) crash() ([]byte, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.capturing {
		return nil, false
	}
	// A report that ends mid-marker (the app died while printing its first bytes) is still
	// in pending.
	h := bytes.Clone(c.head)
	if c.atLineStart && len(c.pending) > 0 {
		h = append(h, c.pending...)
	}
	return h, c.truncated
}

// teeWriter forwards the app's stderr to the supervisor's and into the capture. A failing
// forward (a closed terminal) must not stop the capture, which io.MultiWriter would.
type teeWriter struct {
	out io.Writer
	cap *capture
}

func (t teeWriter) Write(p []byte) (int, error) {
	_, _ = t.out.Write(p)
	return t.cap.Write(p)
}
