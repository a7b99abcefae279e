package mdns

import (
	"log/slog"
	"net"

	pion "github.com/pion/mdns/v2"
)

// netLink is the responder's view of the network: the interfaces, a way to send from the
// mDNS port, the packets arriving there, and the plumbing answering for the host name.
type netLink interface {
	Ifaces() []iface
	Send(b []byte, ifIndex int, dst *net.UDPAddr)
	// Run delivers arriving packets until Close.
	Run(handle func(b []byte, src *net.UDPAddr, ifIndex int))
	Close()
	// StartHost makes the plumbing answer A/AAAA questions for `<host>.local`.
	StartHost(host string) error
	StopHost()
}

// realLink is the network: this package's socket plus the pion responder for the host name.
type realLink struct {
	t    *transport
	log  *slog.Logger
	host *pion.Conn
}

func openRealLink(names []string, log *slog.Logger) (netLink, error) {
	t, err := openTransport(names, log)
	if err != nil {
		return nil, err
	}
	return &realLink{t: t, log: log}, nil
}

func (l *realLink) Ifaces() []iface { return l.t.sortedIfaces() }

func (l *realLink) Send(b []byte, ifIndex int, dst *net.UDPAddr) { l.t.send(b, ifIndex, dst) }

func (l *realLink) Run(handle func(b []byte, src *net.UDPAddr, ifIndex int)) { l.t.read(handle) }

func (l *realLink) Close() {
	l.StopHost()
	l.t.close()
}

func (l *realLink) StartHost(host string) error {
	l.StopHost()
	pc, err := startHostAnswerer(host, l.Ifaces(), l.log)
	if err != nil {
		return err
	}
	l.host = pc
	return nil
}

func (l *realLink) StopHost() {
	if l.host == nil {
		return
	}
	if err := l.host.Close(); err != nil {
		l.log.Debug("mdns: closing the host answerer", "err", err)
	}
	l.host = nil
}
