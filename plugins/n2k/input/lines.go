package input

// MaxLine bounds one line of a gateway's stream: an Actisense N2K ASCII line of the longest
// message (1785 data bytes) is about 3,600 characters.
const MaxLine = 4096

// Lines cuts a byte stream into lines (LF or CR LF; a lone CR ends a line too), whatever the
// chunks it arrives in: a line cut by a packet boundary waits for the rest. A line longer
// than MaxLine is dropped whole and counted in Overlong, so garbage without line ends cannot
// grow the buffer.
type Lines struct {
	buf      []byte
	skipping bool // inside an overlong line: drop until its end
	Overlong uint64
}

// Write feeds a chunk and calls line for every line it completes (without its ending; empty
// lines included). The slice is valid during the call only.
func (l *Lines) Write(chunk []byte, line func([]byte)) {
	for len(chunk) > 0 {
		i := indexEOL(chunk)
		if i < 0 {
			l.keep(chunk)
			return
		}
		part := chunk[:i]
		chunk = chunk[i+1:]
		switch {
		case l.skipping:
			l.skipping = false
		case len(l.buf) == 0:
			if len(part) <= MaxLine {
				line(part)
			} else {
				l.Overlong++
			}
		default:
			l.keep(part)
			if !l.skipping {
				line(l.buf)
			}
			l.skipping = false
		}
		l.buf = l.buf[:0]
	}
}

// Flush ends the line in progress, as the end of a datagram does.
func (l *Lines) Flush(line func([]byte)) {
	if len(l.buf) > 0 && !l.skipping {
		line(l.buf)
	}
	l.buf, l.skipping = l.buf[:0], false
}

// Reset forgets a partial line (a new connection starts afresh).
func (l *Lines) Reset() { l.buf, l.skipping = l.buf[:0], false }

func (l *Lines) keep(b []byte) {
	if l.skipping {
		return
	}
	if len(l.buf)+len(b) > MaxLine {
		l.Overlong++
		l.buf, l.skipping = l.buf[:0], true
		return
	}
	l.buf = append(l.buf, b...)
}

// indexEOL answers the index of the first CR or LF.
func indexEOL(b []byte) int {
	for i, c := range b {
		if c == '\n' || c == '\r' {
			return i
		}
	}
	return -1
}
