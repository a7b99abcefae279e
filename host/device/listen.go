package device

import (
	"fmt"
	"net"
)

// listenPort is the HTTP port of this run: --port when given, else the stored httpd.port.
// A --port that differs from the stored port is said on stdout: the stored port (set by the
// factory document on the first boot, or by PUT /config) is what a boot without it uses.
func (d *Device) listenPort() int {
	stored := d.cfg.Int("httpd", "port")
	if d.opts.Port == 0 || d.opts.Port == stored {
		return stored
	}
	fmt.Fprintf(d.opts.Stdout, "devhost: port %d from --port for this run; the stored httpd.port (%d) is unchanged\n", d.opts.Port, stored)
	d.log.Info("port from --port", "port", d.opts.Port, "stored", stored)
	return d.opts.Port
}

// sayWidened says on stdout when the API is served on every address, not only the printed
// loopback URL: the unauthenticated configuration API is then open to the network.
func (d *Device) sayWidened(a net.Addr) {
	ta, ok := a.(*net.TCPAddr)
	if !ok || !ta.IP.IsUnspecified() {
		return
	}
	fmt.Fprintf(d.opts.Stdout, "devhost: serving every address of this machine (%s): the API is reachable from the network\n", a)
}
