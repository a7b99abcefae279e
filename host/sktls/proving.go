package sktls

import "crypto/tls"

// statusLineLen is what is needed to recognise an HTTP status line: "HTTP/1.1 200" and the
// space or CR after the code.
const statusLineLen = 13

// provingConn watches the first bytes the server sends. A well-formed HTTP/1.x status line,
// received over the verified TLS channel, is the proof the spec asks for before a capture is
// committed; anything else (a hang-up, garbage) commits nothing. Only the reading goroutine
// touches the watch state: net/http and gorilla/websocket read a connection from one
// goroutine.
type provingConn struct {
	*tls.Conn
	m    *Manager
	addr string
	head []byte
	done bool
}

func (c *provingConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	if !c.done && n > 0 {
		take := min(n, statusLineLen-len(c.head))
		c.head = append(c.head, p[:take]...)
		if !isStatusPrefix(c.head) {
			c.done = true
		} else if len(c.head) == statusLineLen {
			c.done = true
			cs := c.Conn.ConnectionState()
			if perr := c.m.Proven(c.addr, &cs); perr != nil {
				c.m.log.Error("commit TLS capture", "server", c.addr, "err", perr)
			}
		}
	}
	return n, err
}

// isStatusPrefix reports whether b can still be (or is) the start of "HTTP/1.x NNN" followed
// by a space or CR.
func isStatusPrefix(b []byte) bool {
	const lit = "HTTP/1."
	for i, ch := range b {
		switch {
		case i < len(lit):
			if ch != lit[i] {
				return false
			}
		case i == 7:
			if ch != '0' && ch != '1' {
				return false
			}
		case i == 8:
			if ch != ' ' {
				return false
			}
		case i == 9:
			if ch < '1' || ch > '5' {
				return false
			}
		case i == 10 || i == 11:
			if ch < '0' || ch > '9' {
				return false
			}
		case i == 12:
			if ch != ' ' && ch != '\r' {
				return false
			}
		}
	}
	return true
}
